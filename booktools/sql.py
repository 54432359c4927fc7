"""Run MySQL text on a real engine, and compare its result with pandas (Part IV).

Two engines run the same MySQL text:

- embedded (the default, nothing to install or start): DuckDB, after sqlglot has transpiled
  the MySQL text to DuckDB's dialect (plus four small fixes and two settings, see `transpile`);
- a MySQL-compatible server (MySQL or MariaDB), natively, when the environment variable
  BOOK_MYSQL_URL holds a URL such as mysql://root@127.0.0.1:3306/ . Each engine object works
  in a scratch database of its own, which it creates and drops.

    from booktools import sql
    world = pd.DataFrame({"name": ["Chad"], "area": [1284000]})
    sql.run("SELECT name FROM World WHERE area > 1000000", {"World": world})

`assert_same_result` compares two results the way a judge should: by column names and
values, with SQL NULL, NaN, pd.NA and NaT all meaning "missing", numbers compared as numbers
(1, 1.0 and Decimal('1.00') are equal) and row order ignored unless asked for.

Errors come out as one short, clear `SQLError`: `UnknownTableError`, `SQLSyntaxError`,
`ServerUnavailableError` (with what to do about it), not as a driver's traceback.

`python -m booktools.sql serve` starts a throwaway MariaDB server (if mariadb-server is
installed) and prints the BOOK_MYSQL_URL to use; the tests start one the same way.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import fcntl
import hashlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import sqlglot
from sqlglot import exp

from booktools.display import Panel, SideBySide
from booktools.paths import DATA_DIR

URL_ENV = "BOOK_MYSQL_URL"
RECORD_ENV = "BOOK_RECORD_MARIADB"
RECORDED_FILE = DATA_DIR / "leetcode-pandas" / "mariadb-recorded.json"
NOT_RECORDED = "no recorded answer for this query"


# ------------------------------------------------------------------------------------ errors
class SQLError(Exception):
    """A query failed; the message says why, in one or two lines."""


class UnknownTableError(SQLError):
    """The query names a table that was not loaded."""


class SQLSyntaxError(SQLError):
    """The text is not valid SQL for the engine that parsed it."""


class ServerUnavailableError(SQLError):
    """BOOK_MYSQL_URL is set but no server answers there."""


class ResultMismatch(AssertionError):
    """Two results that should be equal are not."""


# ----------------------------------------------------------------------------------- schemas
INTEGER_TYPES = {"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"}
FLOAT_TYPES = {"DECIMAL", "FLOAT", "DOUBLE"}
STRING_TYPES = {"CHAR", "VARCHAR", "TEXT"}


@dataclass(frozen=True)
class Column:
    name: str
    mysql_type: str  # as MySQL spells it: INT, VARCHAR(255), DECIMAL(3, 2), ENUM('Y', 'N'), DATE
    nullable: bool = True

    @property
    def base_type(self) -> str:
        return re.match(r"[A-Z]+", self.mysql_type.upper())[0]

    def pandas_dtype(self, string_dtype: str = "str"):
        """The pandas dtype for this column: nullable (Int64, Float64) where NULL is allowed."""
        base = self.base_type
        if base in INTEGER_TYPES:
            return "Int64" if self.nullable else "int64"
        if base in FLOAT_TYPES:
            return "Float64" if self.nullable else "float64"
        if base in STRING_TYPES:
            return string_dtype
        if base == "ENUM":
            return pd.CategoricalDtype(re.findall(r"'((?:[^']|'')*)'", self.mysql_type))
        if base == "DATE":
            return "datetime64[ns]"
        raise ValueError(f"column {self.name}: no pandas dtype for MySQL type {self.mysql_type}")


@dataclass(frozen=True)
class TableSchema:
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()

    def mysql_ddl(self) -> str:
        cols = [f"`{c.name}` {c.mysql_type}{'' if c.nullable else ' NOT NULL'}" for c in self.columns]
        if self.primary_key:
            cols.append("PRIMARY KEY (" + ", ".join(f"`{k}`" for k in self.primary_key) + ")")
        return f"CREATE TABLE `{self.name}` (" + ", ".join(cols) + ")"

    def dtypes(self, string_dtype: str = "str") -> dict:
        return {c.name: c.pandas_dtype(string_dtype) for c in self.columns}


def parse_schema(ddl: str) -> dict[str, TableSchema]:
    """Parse MySQL CREATE TABLE statements into TableSchema objects (columns of a PRIMARY KEY
    are NOT NULL, as in MySQL)."""
    schemas = {}
    for stmt in sqlglot.parse(ddl, read="mysql"):
        if stmt is None:
            continue
        if not (isinstance(stmt, exp.Create) and isinstance(stmt.this, exp.Schema)):
            raise ValueError(f"expected only CREATE TABLE statements, got: {stmt.sql('mysql')[:60]}")
        name = stmt.this.this.name
        defs, primary = [], []
        for item in stmt.this.expressions:
            if isinstance(item, exp.ColumnDef):
                constraints = [c.args.get("kind") for c in item.args.get("constraints") or []]
                if any(isinstance(k, exp.PrimaryKeyColumnConstraint) for k in constraints):
                    primary.append(item.name)
                not_null = any(isinstance(k, exp.NotNullColumnConstraint) and not k.args.get("allow_null")
                               for k in constraints)
                defs.append((item.name, item.args["kind"].sql("mysql"), not_null))
            elif isinstance(item, exp.PrimaryKey):
                primary += [e.name for e in item.expressions]
            else:
                raise ValueError(f"{name}: unsupported table element {item.sql('mysql')}")
        columns = tuple(Column(n, t, nullable=not (nn or n in primary)) for n, t, nn in defs)
        schemas[name] = TableSchema(name, columns, tuple(primary))
    return schemas


def schema_from_frame(name: str, frame: pd.DataFrame) -> TableSchema:
    """A MySQL schema for an ad-hoc DataFrame, from its dtypes."""
    columns = []
    for col, dtype in frame.dtypes.items():
        values = frame[col]
        masked = pd.api.types.is_extension_array_dtype(dtype) and dtype.kind in "iufb"  # Int64, Float64, boolean
        nullable = bool(values.isna().any()) or masked
        if pd.api.types.is_bool_dtype(dtype):
            mysql_type = "BOOLEAN"
        elif pd.api.types.is_integer_dtype(dtype):
            mysql_type = "BIGINT"
        elif pd.api.types.is_float_dtype(dtype):
            mysql_type = "DOUBLE"
        elif pd.api.types.is_datetime64_any_dtype(dtype):
            mysql_type = "DATE" if (values.dropna() == values.dropna().dt.normalize()).all() else "DATETIME"
        elif isinstance(dtype, pd.CategoricalDtype):
            mysql_type = "ENUM(" + ", ".join("'" + str(v).replace("'", "''") + "'" for v in dtype.categories) + ")"
        elif pd.api.types.is_string_dtype(dtype) or dtype == object:
            mysql_type = "VARCHAR(255)"
        else:
            raise ValueError(f"table {name}, column {col}: no MySQL type for dtype {dtype}")
        columns.append(Column(str(col), mysql_type, nullable=nullable))
    return TableSchema(name, tuple(columns))


def read_csv_table(path: str | Path, schema: TableSchema, string_dtype: str = "str") -> pd.DataFrame:
    """Read one table written as CSV: a header row with the schema's column names, and the
    literal text NULL for a missing value (an empty field is an empty string)."""
    path = Path(path)
    raw = pd.read_csv(path, dtype=object, keep_default_na=False, na_values=["NULL"])
    expected = [c.name for c in schema.columns]
    if list(raw.columns) != expected:
        raise ValueError(f"{path.name}: columns {list(raw.columns)} do not match the schema {expected}")
    frame = pd.DataFrame(index=raw.index)
    for column in schema.columns:
        values = raw[column.name]
        if not column.nullable and values.isna().any():
            raise ValueError(f"{path.name}: column {column.name} is NOT NULL but has NULL values")
        dtype = column.pandas_dtype(string_dtype)
        base = column.base_type
        if base in INTEGER_TYPES or base in FLOAT_TYPES:
            frame[column.name] = pd.to_numeric(values).astype(dtype)
        elif base == "DATE":
            frame[column.name] = pd.to_datetime(values, format="%Y-%m-%d").astype(dtype)
        else:
            frame[column.name] = values.astype(dtype)
    return frame


# --------------------------------------------------------------------------- transpilation
def _parse_mysql(mysql: str) -> list[exp.Expression]:
    try:
        statements = [s for s in sqlglot.parse(mysql, read="mysql") if s is not None]
    except sqlglot.errors.ParseError as err:
        first = err.errors[0] if err.errors else {}
        where = f" at line {first.get('line')}, column {first.get('col')}" if first else ""
        near = f" near {first.get('highlight')!r}" if first.get("highlight") else ""
        what = first.get("description", str(err).splitlines()[0])
        raise SQLSyntaxError(f"sqlglot cannot parse this as MySQL{where}{near}: {what}") from None
    if not statements:
        raise SQLSyntaxError("the SQL text contains no statement")
    return statements


def _like_with_mysql_escape(node: exp.Expression) -> exp.Expression:
    """MySQL's LIKE treats backslash as its escape character; DuckDB's LIKE has none."""
    if isinstance(node, (exp.Like, exp.ILike)) and not isinstance(node.parent, exp.Escape):
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and "\\" not in pattern.this):
            return exp.Escape(this=node.copy(), expression=exp.Literal.string("\\"))
    return node


def _length_in_bytes(node: exp.Expression) -> exp.Expression:
    """MySQL's LENGTH() counts bytes; sqlglot maps it to DuckDB's LENGTH, which counts characters."""
    if isinstance(node, exp.Length) and node.args.get("binary"):
        text = exp.cast(node.this.copy(), "VARCHAR")
        return exp.Anonymous(this="STRLEN", expressions=[text])
    return node


def _delete_using(stmt: exp.Expression) -> exp.Expression:
    """MySQL's multi-table DELETE (DELETE t1 FROM T t1, T t2 / JOIN ... ON) -> DuckDB's DELETE ... USING."""
    if not isinstance(stmt, exp.Delete) or not stmt.args.get("tables"):
        return stmt
    target = stmt.this
    targets = [t.name for t in stmt.args["tables"]]
    if len(targets) != 1 or targets[0] not in {target.alias_or_name, target.name}:
        raise SQLSyntaxError("only a multi-table DELETE that deletes from the first table of its "
                             "FROM clause can be translated to DuckDB")
    conditions, using = [], []
    for join in target.args.get("joins") or []:
        if join.side or (join.kind and join.kind.upper() not in {"INNER", "CROSS"}):
            raise SQLSyntaxError(f"cannot translate a DELETE with a {join.side or join.kind} JOIN to DuckDB")
        using.append(join.this.copy())
        if join.args.get("on"):
            conditions.append(join.args["on"].copy())
    if stmt.args.get("where"):
        conditions.append(stmt.args["where"].this.copy())
    table = target.copy()
    table.set("joins", None)
    where = exp.Where(this=exp.and_(*conditions)) if conditions else None
    return exp.Delete(this=table, using=using or None, where=where)


def _is_boolean(node: exp.Expression) -> bool:
    if isinstance(node, exp.Paren):
        return _is_boolean(node.this)
    return isinstance(node, (exp.Predicate, exp.Not, exp.And, exp.Or, exp.Xor))


def _booleans_as_integers(node: exp.Expression) -> exp.Expression:
    """MySQL's booleans are the integers 1 and 0, so AVG(a < b) is a fraction; DuckDB has no
    AVG(BOOLEAN) or SUM(BOOLEAN), so the comparison is cast to an integer first."""
    if isinstance(node, (exp.Avg, exp.Sum)) and _is_boolean(node.this):
        fixed = node.copy()
        fixed.set("this", exp.cast(node.this.copy(), "INTEGER"))
        return fixed
    return node


FIXES = (_like_with_mysql_escape, _length_in_bytes, _booleans_as_integers)


def duckdb_statements(mysql: str, fixes: bool = True, pretty: bool = False) -> list[tuple[exp.Expression, str]]:
    """(parsed MySQL statement, DuckDB text) for each statement of the MySQL text."""
    out = []
    for stmt in _parse_mysql(mysql):
        if fixes:
            stmt = _delete_using(stmt)
            for fix in FIXES:
                stmt = stmt.transform(fix)
        out.append((stmt, format_sql(stmt, "duckdb") if pretty else stmt.sql("duckdb")))
    return out


def format_sql(stmt: exp.Expression, dialect: str, width: int = 100) -> str:
    """One line when it fits, else sqlglot's pretty layout (without its runs of blanks)."""
    flat = stmt.sql(dialect)
    if len(flat) <= width:
        return flat
    lines = stmt.sql(dialect, pretty=True).splitlines()
    return "\n".join(line if "'" in line else re.sub(r"(?<=\S) {2,}(?=\S)", " ", line) for line in lines)


def transpile(mysql: str, fixes: bool = True, pretty: bool = False) -> list[str]:
    """The DuckDB statements that run the given MySQL text.

    sqlglot does the translation. With fixes=True (what the engine runs) four mismatches that
    sqlglot 30 leaves and no DuckDB setting covers are corrected: LIKE gets MySQL's default
    escape character (backslash) when the pattern may contain one; LENGTH counts bytes, as in
    MySQL (DuckDB's STRLEN); AVG/SUM of a comparison count it as 1 or 0; and MySQL's
    multi-table DELETE becomes DuckDB's DELETE ... USING. Division by zero and NULL ordering
    are DuckDB settings (DUCKDB_AS_MYSQL).
    """
    return [text for _, text in duckdb_statements(mysql, fixes, pretty)]


def referenced_tables(mysql: str) -> list[str]:
    """Names of the base tables a MySQL text reads or writes (CTE names excluded)."""
    names = []
    for stmt in _parse_mysql(mysql):
        if isinstance(stmt, exp.Create) and str(stmt.args.get("kind", "")).upper() in {"FUNCTION", "PROCEDURE"}:
            continue
        if isinstance(stmt, (exp.Block, exp.Command)):  # a stored program's body, or text sqlglot did not parse
            continue
        ctes = {cte.alias_or_name for cte in stmt.find_all(exp.CTE)}
        for table in stmt.find_all(exp.Table):
            if isinstance(table.parent, exp.Delete) and table.arg_key == "tables":
                continue  # DELETE t1 FROM ...: t1 is an alias, not a table
            if table.args.get("db"):
                continue  # information_schema.tables and the like
            if table.name and table.name not in ctes and table.name not in names:
                names.append(table.name)
    return names


# -------------------------------------------------------------------------------- engines
def _python_value(value, mysql_type: str):
    """A DataFrame cell as a plain Python value a database driver accepts."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, pd.Timestamp):
        return value.date() if mysql_type.upper() == "DATE" else value.to_pydatetime()
    return value


def _rows(frame: pd.DataFrame, schema: TableSchema) -> list[tuple]:
    types = [c.mysql_type for c in schema.columns]
    return [tuple(_python_value(v, t) for v, t in zip(row, types)) for row in frame.itertuples(index=False)]


def result_frame(columns: list[str], rows: list[tuple]) -> pd.DataFrame:
    """A query result as a DataFrame that shows what the engine returned: integers stay
    integers (Int64 when there are NULLs), floats are float64, text is str, and Decimal and
    date values are kept as the Python objects the driver returned."""
    frame = pd.DataFrame([tuple(r) for r in rows], columns=range(len(columns)), dtype=object)
    for i in range(len(columns)):
        values = [v for v in frame[i] if v is not None]
        if not values:
            continue
        if all(isinstance(v, bool) for v in values):
            frame[i] = frame[i].astype("boolean")
        elif all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            frame[i] = frame[i].astype("Int64")
        elif all(isinstance(v, float) for v in values):
            frame[i] = frame[i].astype("float64")
        elif all(isinstance(v, str) for v in values):
            frame[i] = frame[i].astype("str")
    frame.columns = list(columns)
    return frame


class Engine:
    """A database holding the tables given to `load`; `execute` runs MySQL text on it."""

    label = "engine"

    def __init__(self):
        self.schemas: dict[str, TableSchema] = {}
        self.last_statements: list[str] = []

    def load(self, tables: dict[str, pd.DataFrame], schemas: dict[str, TableSchema] | None = None):
        """Create one table per DataFrame (schema from `schemas`, else from the dtypes) and fill it."""
        for name, frame in tables.items():
            schema = (schemas or {}).get(name) or schema_from_frame(name, frame)
            if [c.name for c in schema.columns] != [str(c) for c in frame.columns]:
                raise ValueError(f"table {name}: DataFrame columns {list(frame.columns)} do not match "
                                 f"the schema {[c.name for c in schema.columns]}")
            self._create(schema, _rows(frame, schema))
            self.schemas[name] = schema
        return self

    def check_tables(self, mysql: str) -> None:
        """MySQL on Linux compares table names case-sensitively; so do we, on every engine."""
        for name in referenced_tables(mysql):
            if name not in self.schemas:
                have = ", ".join(sorted(self.schemas)) or "no tables"
                hint = [t for t in self.schemas if t.lower() == name.lower()]
                extra = (f" (table names are case-sensitive in MySQL on Linux: did you mean {hint[0]!r}?)"
                         if hint else "")
                raise UnknownTableError(f"table {name!r} does not exist{extra}; loaded tables: {have}")

    def execute(self, mysql: str) -> pd.DataFrame | None:
        """Run the MySQL text; return the result of its last query (None if it has none)."""
        raise NotImplementedError

    def table(self, name: str) -> pd.DataFrame:
        return self.execute(f"SELECT * FROM `{name}`")

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# DuckDB settings that give MySQL's behaviour without rewriting the SQL: `x DIV 0` and `x / 0`
# are NULL, and NULLs sort first in ascending order, last in descending order.
DUCKDB_AS_MYSQL = {"error_on_division_by_zero": False, "default_null_order": "nulls_first_on_asc_last_on_desc"}


class DuckDBEngine(Engine):
    """The embedded engine: MySQL text transpiled by sqlglot (see `transpile`), run by DuckDB."""

    label = "DuckDB"

    def __init__(self):
        import duckdb

        super().__init__()
        self._duckdb = duckdb
        # One thread: rows of an unordered result then come back in the same order every run.
        self.con = duckdb.connect(":memory:", config={"threads": 1, **DUCKDB_AS_MYSQL})

    def _create(self, schema, rows):
        (ddl,) = transpile(schema.mysql_ddl())
        self.con.execute(ddl)
        if rows:
            marks = ", ".join("?" for _ in schema.columns)
            self.con.executemany(f'INSERT INTO "{schema.name}" VALUES ({marks})', rows)

    def execute(self, mysql):
        self.check_tables(mysql)
        statements = duckdb_statements(mysql, pretty=True)
        self.last_statements = [text for _, text in statements]
        result = None
        for parsed, text in statements:
            try:
                self.con.execute(text)
            except self._duckdb.ParserException as err:
                raise SQLSyntaxError(f"DuckDB cannot parse the transpiled SQL: {_first_line(err)}") from None
            except self._duckdb.Error as err:
                raise SQLError(f"DuckDB: {_first_line(err)}") from None
            if isinstance(parsed, exp.Query):  # SELECT, UNION, ...: keep the rows
                result = result_frame([d[0] for d in self.con.description], self.con.fetchall())
        return result

    def close(self):
        self.con.close()


def _first_line(err: Exception) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def _server_help(url: str) -> str:
    return (f"Start a server there (to start a throwaway MariaDB: python -m booktools.sql serve), "
            f"or unset {URL_ENV} to use the embedded DuckDB engine.")


class MySQLServerEngine(Engine):
    """A MySQL or MariaDB server reached through PyMySQL; the MySQL text runs natively.

    The engine creates a scratch database (CREATE privilege needed) and drops it on close();
    any database named in the URL is not touched.
    """

    label = "MySQL server"

    def __init__(self, url: str):
        import pymysql

        super().__init__()
        self._pymysql = pymysql
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in {"mysql", "mariadb"} or not parts.hostname:
            raise ValueError(f"{URL_ENV} must look like mysql://USER[:PASSWORD]@HOST[:PORT]/, got {url!r}")
        self.where = f"{parts.hostname}:{parts.port or 3306}"
        try:
            self.con = pymysql.connect(
                host=parts.hostname, port=parts.port or 3306, user=urllib.parse.unquote(parts.username or "root"),
                password=urllib.parse.unquote(parts.password or ""), charset="utf8mb4", connect_timeout=5,
                client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS, autocommit=True,
            )
        except pymysql.err.OperationalError as err:
            code, message = (err.args + ("",))[:2]
            raise ServerUnavailableError(
                f"cannot reach a MySQL server at {self.where} ({URL_ENV}): {message} [error {code}].\n"
                + _server_help(url)
            ) from None
        with self.con.cursor() as cur:
            cur.execute("SELECT VERSION()")
            self.version = cur.fetchone()[0]
            self.label = "MariaDB" if "mariadb" in self.version.lower() else "MySQL"
            self.database = f"book_scratch_{secrets.token_hex(4)}"
            try:
                cur.execute(f"CREATE DATABASE `{self.database}` CHARACTER SET utf8mb4")
            except pymysql.err.MySQLError as err:
                self.con.close()
                raise SQLError(f"cannot create a scratch database on {self.where}: {err.args[-1]}") from None
            cur.execute(f"USE `{self.database}`")

    def _create(self, schema, rows):
        with self.con.cursor() as cur:
            cur.execute(schema.mysql_ddl())
            if rows:
                marks = ", ".join("%s" for _ in schema.columns)
                cur.executemany(f"INSERT INTO `{schema.name}` VALUES ({marks})", rows)

    def execute(self, mysql):
        try:
            self.check_tables(mysql)
        except SQLSyntaxError:
            pass  # sqlglot cannot parse everything MySQL can (CREATE FUNCTION ...): the server decides
        self.last_statements = [mysql]
        result = None
        try:
            with self.con.cursor() as cur:
                cur.execute(mysql)
                while True:
                    if cur.description:
                        result = result_frame([d[0] for d in cur.description], list(cur.fetchall()))
                    if not cur.nextset():
                        break
        except self._pymysql.err.OperationalError as err:
            code, message = (err.args + ("",))[:2]
            if code in (2006, 2013, 2003):
                raise ServerUnavailableError(f"lost the MySQL server at {self.where}: {message}.\n"
                                             + _server_help("")) from None
            raise self._translate(code, message) from None
        except self._pymysql.err.MySQLError as err:
            code, message = (err.args + ("",))[:2]
            raise self._translate(code, message) from None
        return result

    def _translate(self, code, message) -> SQLError:
        if code == 1146:  # ER_NO_SUCH_TABLE: Table 'db.name' doesn't exist
            name = re.search(r"'(?:[^'.]*\.)?([^']*)'", message)
            have = ", ".join(sorted(self.schemas)) or "no tables"
            return UnknownTableError(f"table {name[1] if name else '?'!r} does not exist; loaded tables: {have}")
        if code == 1064:  # ER_PARSE_ERROR
            near = re.search(r"(near .*)$", message, re.S)
            return SQLSyntaxError(f"{self.label} syntax error {near[1] if near else message} [error 1064]")
        return SQLError(f"{self.label}: {message} [error {code}]")

    def close(self):
        try:
            with self.con.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{self.database}`")
        finally:
            self.con.close()


def open_engine(url: str | None = None) -> Engine:
    """The engine to use: the server at `url` (None: $BOOK_MYSQL_URL), else embedded DuckDB
    (also for url="", which ignores $BOOK_MYSQL_URL)."""
    url = os.environ.get(URL_ENV, "").strip() if url is None else url
    return MySQLServerEngine(url) if url else DuckDBEngine()


def run(mysql: str, tables: dict[str, pd.DataFrame] | None = None, schemas=None, url: str | None = None):
    """Load `tables` into a fresh engine (see `open_engine`), run the MySQL text, return the result."""
    with open_engine(url) as engine:
        engine.load(tables or {}, schemas)
        return engine.execute(mysql)


# ------------------------------------------------------------------------------ comparison
def normalise_value(value):
    """One cell, reduced to what a result comparison should look at."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, (float, np.floating)) and math.isnan(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return float(bool(value))
    if isinstance(value, (int, float, decimal.Decimal, np.integer, np.floating)):
        return float(f"{float(value):.10g}")  # 10 significant digits: 0.1 + 0.2 == 0.3
    if isinstance(value, (pd.Timestamp, datetime.datetime)):
        stamp = pd.Timestamp(value)
        return stamp.date().isoformat() if stamp == stamp.normalize() else stamp.isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str):
        return value
    return repr(value)


def _sort_key(row):
    return tuple((0, "") if v is None else (1, v) if isinstance(v, float) else (2, str(v)) for v in row)


def normalised_rows(frame: pd.DataFrame, ordered: bool = False) -> list[tuple]:
    rows = [tuple(normalise_value(v) for v in row) for row in frame.itertuples(index=False, name=None)]
    return rows if ordered else sorted(rows, key=_sort_key)


def assert_same_result(left: pd.DataFrame, right: pd.DataFrame, ordered: bool = False,
                       names: tuple[str, str] = ("left", "right")) -> None:
    """Raise ResultMismatch unless both results have the same column names and the same rows
    (as a multiset, or as a sequence if ordered=True)."""
    if not isinstance(left, pd.DataFrame) or not isinstance(right, pd.DataFrame):
        raise ResultMismatch(f"expected two DataFrames, got {type(left).__name__} and {type(right).__name__}")
    a, b = names
    if [str(c) for c in left.columns] != [str(c) for c in right.columns]:
        raise ResultMismatch(f"column names differ: {a} has {list(left.columns)}, {b} has {list(right.columns)}")
    rows_a, rows_b = normalised_rows(left, ordered), normalised_rows(right, ordered)
    if rows_a == rows_b:
        return
    only_a = list((Counter(rows_a) - Counter(rows_b)).elements())
    only_b = list((Counter(rows_b) - Counter(rows_a)).elements())
    if not only_a and not only_b:
        raise ResultMismatch(f"same rows, different order: {a} {rows_a} vs {b} {rows_b}")
    raise ResultMismatch(f"rows differ: only in {a}: {only_a}; only in {b}: {only_b}")


# --------------------------------------------------------------------------------- display
def sorted_for_display(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows in a canonical order (for results whose order SQL does not define)."""
    keys = [_sort_key(r) for r in normalised_rows(frame, ordered=True)]
    order = sorted(range(len(frame)), key=lambda i: keys[i])
    return frame.iloc[order].reset_index(drop=True)


# ------------------------------------------------- MariaDB evidence recorded for the notebooks
def _table_payload(tables, schemas):
    payload = {}
    for name, frame in (tables or {}).items():
        schema = (schemas or {}).get(name) or schema_from_frame(name, frame)
        payload[name] = {"ddl": schema.mysql_ddl(), "rows": [[_json_value(v) for v in r] for r in _rows(frame, schema)]}
    return payload


def _json_value(value):
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, datetime.datetime):
        return {"datetime": value.isoformat()}
    if isinstance(value, datetime.date):
        return {"date": value.isoformat()}
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    return value


def _from_json(value):
    if isinstance(value, dict):
        (kind, text), = value.items()
        return {"decimal": decimal.Decimal, "date": datetime.date.fromisoformat,
                "datetime": datetime.datetime.fromisoformat, "bytes": bytes.fromhex}[kind](text)
    return value


def evidence_key(mysql: str, payload: dict) -> str:
    blob = json.dumps({"sql": mysql, "tables": payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_recorded() -> dict:
    if RECORDED_FILE.is_file():
        return json.loads(RECORDED_FILE.read_text(encoding="utf-8"))
    return {"server": None, "entries": {}}


def outcome_on_server(url: str, mysql: str, payload: dict) -> dict:
    """Run the MySQL text on the server at `url` with the tables of a payload; a JSON-able outcome."""
    with MySQLServerEngine(url) as engine:
        for name, table in payload.items():
            schema = parse_schema(table["ddl"])[name]
            engine._create(schema, [tuple(_from_json(v) for v in row) for row in table["rows"]])
            engine.schemas[name] = schema
        try:
            frame = engine.execute(mysql)
        except SQLError as err:
            code = re.search(r"\[error (\d+)\]", str(err))
            return {"server": engine.version, "error": f"{type(err).__name__}: {err}",
                    "code": int(code[1]) if code else None}
        if frame is None:
            return {"server": engine.version, "columns": [], "rows": []}
        rows = [[_json_value(v) for v in row] for row in frame.astype(object).itertuples(index=False, name=None)]
        rows = [[None if (isinstance(v, float) and math.isnan(v)) or v is pd.NA else v for v in r] for r in rows]
        return {"server": engine.version, "columns": list(frame.columns), "rows": rows}


def _outcome_panel(outcome: dict, caption: str) -> Panel:
    if "error" in outcome:
        return Panel(caption, text=outcome["error"])
    rows = [tuple(_from_json(v) for v in row) for row in outcome["rows"]]
    return Panel(caption, frame=result_frame(outcome["columns"], rows))


def compare_engines(mysql: str, tables: dict[str, pd.DataFrame] | None = None, *, schemas=None,
                    pandas: dict | None = None, show_sql: bool = True) -> SideBySide:
    """Run MySQL text on DuckDB (live) and show it next to MariaDB's answer, plus any pandas results.

    The MariaDB answer is the one recorded in data/leetcode-pandas/mariadb-recorded.json by a
    run with BOOK_MYSQL_URL and BOOK_RECORD_MARIADB=1 set; tests/test_sql_mariadb.py re-runs
    every recorded query on a live MariaDB and fails if the answer changed. A query that was
    never recorded runs live on the server in BOOK_MYSQL_URL if that is set (so readers can
    try their own), else its panel says that there is no answer. Errors are results too: each
    engine's panel shows the error it raised.
    """
    payload = _table_payload(tables, schemas)
    key = evidence_key(mysql, payload)
    panels = []
    try:
        duck_sql = transpile(mysql, pretty=True)
    except SQLError as err:
        duck_sql = None
        panels.append(Panel("DuckDB", text=f"{type(err).__name__}: {err}"))
    if duck_sql is not None:
        with DuckDBEngine() as duck:
            duck.load(tables or {}, schemas)
            try:
                frame = duck.execute(mysql)
                panels.append(Panel("DuckDB", frame=frame) if frame is not None else Panel("DuckDB", text="(ok)"))
            except SQLError as err:
                panels.append(Panel("DuckDB", text=f"{type(err).__name__}: {err}"))

    url = os.environ.get(URL_ENV, "").strip()
    if os.environ.get(RECORD_ENV) == "1":
        if not url:
            raise RuntimeError(f"{RECORD_ENV}=1 needs {URL_ENV} (a MariaDB server to record from)")
        outcome = outcome_on_server(url, mysql, payload)
        with open(RECORDED_FILE.with_suffix(".lock"), "w") as lock:  # notebooks may record at once
            fcntl.flock(lock, fcntl.LOCK_EX)
            recorded = load_recorded()
            recorded["server"] = outcome.pop("server")
            recorded["entries"][key] = {"sql": mysql, "tables": payload, **outcome}
            RECORDED_FILE.write_text(json.dumps(recorded, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                                     encoding="utf-8")
    recorded = load_recorded()
    entry = recorded["entries"].get(key)
    if entry is not None:
        panels.append(_outcome_panel(entry, "MariaDB (recorded)"))
    elif url:
        outcome = outcome_on_server(url, mysql, payload)
        kind = "MariaDB" if "mariadb" in outcome.pop("server").lower() else "MySQL"
        panels.append(_outcome_panel(outcome, f"{kind} (live, {URL_ENV})"))
    else:
        panels.append(Panel("MySQL server", text=f"{NOT_RECORDED} (key {key}); set {URL_ENV} to ask a server"))
    for label, value in (pandas or {}).items():
        if isinstance(value, pd.Series):
            value = value.to_frame()
        if isinstance(value, pd.DataFrame):
            panels.append(Panel(label, frame=value, sql=False))
        else:
            panels.append(Panel(label, text=repr(value), sql=False))
    code = [("MySQL", mysql.strip())]
    if show_sql and duck_sql is not None and translation_differs(mysql, duck_sql):
        code.append(("DuckDB ran (the MySQL text as transpiled by sqlglot):", ";\n".join(duck_sql)))
    return SideBySide(panels, code=code if show_sql else [])


def translation_differs(mysql: str, statements: list[str]) -> bool:
    """Whether DuckDB ran something other than the MySQL text (beyond layout and sqlglot's reprint)."""
    ran = " ".join(";\n".join(statements).split())
    return ran not in {" ".join(mysql.split()), " ".join(mysql_normalised(mysql).split())}


def mysql_normalised(mysql: str) -> str:
    """The MySQL text as sqlglot prints it back (pretty): to tell a real translation from reformatting."""
    return "\n".join(format_sql(s, "mysql") for s in _parse_mysql(mysql))


# ------------------------------------------------------------------ a throwaway MariaDB server
SERVER_NAMES = ("mariadbd", "mysqld")
INSTALL_NAMES = ("mariadb-install-db", "mysql_install_db")
SEARCH_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/libexec")


def mariadb_binaries() -> tuple[str, str] | None:
    """(server, install_db) executables of an installed MariaDB, or None."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *SEARCH_DIRS])

    def find(names):
        return next((found for n in names if (found := shutil.which(n, path=path))), None)

    server, install = find(SERVER_NAMES), find(INSTALL_NAMES)
    return (server, install) if server and install else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def throwaway_mariadb(workdir: str | Path | None = None, timeout: float = 120.0):
    """Start a private MariaDB server on 127.0.0.1 (a fresh data directory, a free port, root
    without password), yield its URL, and stop it again. Needs the mariadb-server package."""
    import pymysql

    binaries = mariadb_binaries()
    if binaries is None:
        raise FileNotFoundError("MariaDB is not installed: apt-get install mariadb-server")
    server, install = binaries
    owned_tmp = workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="book-mariadb-") if owned_tmp else workdir)
    data, log = workdir / "data", workdir / "server.log"
    as_root = ["--user=root"] if os.geteuid() == 0 else []
    setup = subprocess.run(
        [install, "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
         "--skip-test-db", *as_root],
        capture_output=True, text=True,
    )
    if setup.returncode != 0:
        raise RuntimeError(f"{install} failed:\n{(setup.stdout + setup.stderr)[-2000:]}")
    port = _free_port()
    proc = subprocess.Popen(
        [server, "--no-defaults", f"--datadir={data}", f"--socket={workdir / 'mysqld.sock'}",
         f"--port={port}", "--bind-address=127.0.0.1", f"--pid-file={workdir / 'mysqld.pid'}",
         f"--log-error={log}", "--character-set-server=utf8mb4", "--collation-server=utf8mb4_general_ci",
         "--innodb-buffer-pool-size=64M", *as_root],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
                raise RuntimeError(f"{server} exited with status {proc.returncode}:\n{tail}")
            try:
                pymysql.connect(host="127.0.0.1", port=port, user="root", connect_timeout=2).close()
                break
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"MariaDB did not accept connections within {timeout:.0f} s") from None
                time.sleep(0.2)
        yield f"mysql://root@127.0.0.1:{port}/"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if owned_tmp:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["serve"]:
        print("usage: python -m booktools.sql serve   (start a throwaway MariaDB until Ctrl-C)")
        return 2
    def stop(signum, frame):
        raise KeyboardInterrupt  # SIGTERM stops the server as cleanly as Ctrl-C

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)  # also when started in the background, where SIGINT is ignored
    with throwaway_mariadb() as url:
        print(f"MariaDB is running. In another shell:\n    export {URL_ENV}={url}\nCtrl-C stops it.", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
