"""Table schemas from MySQL DDL, and CSV tables read by them."""

from __future__ import annotations


import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import sqlglot
from sqlglot import exp




# ----------------------------------------------------------------------------------- schemas
INTEGER_TYPES = {"TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"}
FLOAT_TYPES = {"DECIMAL", "FLOAT", "DOUBLE"}
STRING_TYPES = {"CHAR", "VARCHAR", "TEXT"}
NUMBERS = ("nullable", "numpy")  # Int64/Float64 with pd.NA, or int64/float64 with NaN


def default_string_dtype() -> str:
    """The dtype the installed pandas gives text: "str" from pandas 3 on, "object" before."""
    return "object" if pd.Series(["a"]).dtype == object else "str"


def text_column(values: pd.Series, string_dtype: str | None = None) -> pd.Series:
    """Text values as a column of `string_dtype` (None: pandas' default), missing values kept
    missing: None in an object column (as LeetCode builds it), never the text 'nan' or 'None'
    that astype(str) makes of them on pandas 2."""
    dtype = string_dtype or default_string_dtype()
    if dtype in ("object", object):
        values = values.astype(object)
        return values.where(values.notna(), None)
    return values.astype(dtype)


@dataclass(frozen=True)
class Column:
    name: str
    mysql_type: str  # as MySQL spells it: INT, VARCHAR(255), DECIMAL(3, 2), ENUM('Y', 'N'), DATE
    nullable: bool = True

    @property
    def base_type(self) -> str:
        return re.match(r"[A-Z]+", self.mysql_type.upper())[0]

    def pandas_dtype(self, string_dtype: str | None = None):
        """The pandas dtype for this column: nullable (Int64, Float64) where NULL is allowed;
        text as `string_dtype` (None: the installed pandas' default, see default_string_dtype)."""
        base = self.base_type
        if base in INTEGER_TYPES:
            return "Int64" if self.nullable else "int64"
        if base in FLOAT_TYPES:
            return "Float64" if self.nullable else "float64"
        if base in STRING_TYPES:
            return string_dtype or default_string_dtype()
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

    def dtypes(self, string_dtype: str | None = None) -> dict:
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


def read_csv_table(path: str | Path, schema: TableSchema, string_dtype: str | None = None,
                   numbers: str = "nullable") -> pd.DataFrame:
    """Read one table written as CSV: a header row with the schema's column names, and the
    literal text NULL for a missing value (an empty field is an empty string).

    Text columns get `string_dtype` (None: pandas' default; "object": None for NULL). Number
    columns are Int64/Float64 (numbers="nullable"), or NumPy's int64/float64 with NaN for NULL
    (numbers="numpy"; an integer column with a NULL is then float64)."""
    if numbers not in NUMBERS:
        raise ValueError(f"numbers must be one of {NUMBERS}, got {numbers!r}")
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
            if numbers == "numpy":
                dtype = "int64" if base in INTEGER_TYPES and values.notna().all() else "float64"
            frame[column.name] = pd.to_numeric(values).astype(dtype)
        elif base == "DATE":
            frame[column.name] = pd.to_datetime(values, format="%Y-%m-%d").astype(dtype)
        elif base in STRING_TYPES:
            frame[column.name] = text_column(values, dtype)
        else:
            frame[column.name] = values.astype(dtype)
    return frame
