"""The engines that run MySQL text: DuckDB (embedded) or a MySQL/MariaDB server."""

from __future__ import annotations


import functools
import math
import os
import re
import secrets
import urllib.parse

import numpy as np
import pandas as pd
from sqlglot import exp
from booktools.sql.errors import SQLError, SQLSyntaxError, ServerUnavailableError, UnknownTableError
from booktools.sql.schemas import TableSchema, schema_from_frame, text_column
from booktools.sql.transpile import duckdb_statements, referenced_tables, transpile




URL_ENV = "BOOK_MYSQL_URL"  # a server URL here: run on MySQL/MariaDB instead of DuckDB


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
    integers (Int64 when there are NULLs), floats are float64, text is pandas' default string
    dtype (str on pandas 3, object on pandas 2; NULL stays missing), and Decimal and date
    values are kept as the Python objects the driver returned."""
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
            frame[i] = text_column(frame[i])
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
# For each setting, a query whose one value is NULL where DuckDB behaves like MySQL.
_MYSQL_BEHAVIOUR = {
    "error_on_division_by_zero": "SELECT 7 // 0",
    "default_null_order": "SELECT a FROM (VALUES (1), (NULL)) AS t(a) ORDER BY a LIMIT 1",
}


@functools.cache
def duckdb_settings() -> dict:
    """The settings of DUCKDB_AS_MYSQL that the installed DuckDB knows, which the engine uses.

    A setting DuckDB does not know is left out if DuckDB already behaves like MySQL without it:
    DuckDB 1.3.2 (Colab's runtime) has no error_on_division_by_zero and gives NULL for `7 // 0`;
    DuckDB 2.0 raises an error there unless the setting is false. Otherwise: SQLError.
    """
    import duckdb

    with duckdb.connect(":memory:") as con:
        known = {name for (name,) in con.execute("SELECT name FROM duckdb_settings()").fetchall()}
        for name in DUCKDB_AS_MYSQL.keys() - known:
            try:
                like_mysql = con.execute(_MYSQL_BEHAVIOUR[name]).fetchall() == [(None,)]
            except duckdb.Error:
                like_mysql = False
            if not like_mysql:
                raise SQLError(f"DuckDB {duckdb.__version__} has no setting {name} and does not behave "
                               f"like MySQL without it ({_MYSQL_BEHAVIOUR[name]} is not NULL); "
                               "install the DuckDB release that requirements.txt pins")
    return {name: value for name, value in DUCKDB_AS_MYSQL.items() if name in known}


class DuckDBEngine(Engine):
    """The embedded engine: MySQL text transpiled by sqlglot (see `transpile`), run by DuckDB."""

    label = "DuckDB"

    def __init__(self):
        import duckdb

        super().__init__()
        self._duckdb = duckdb
        # One thread: rows of an unordered result then come back in the same order every run.
        self.con = duckdb.connect(":memory:", config={"threads": 1, **duckdb_settings()})

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


