"""MySQL text to DuckDB's dialect: sqlglot, plus the book's small fixes."""

from __future__ import annotations


import re

import sqlglot
from packaging.version import Version
from sqlglot import exp
from booktools.sql.errors import PackageTooOldError, SQLSyntaxError

# The sqlglot release the book's translations are tested with (requirements.txt pins it). Older
# ones translate differently or fail: 25.20.2 (Colab's) has no exp.Block.
SQLGLOT_FLOOR = "30.30.0"


def require_sqlglot() -> None:
    """Raise PackageTooOldError, naming the release needed, if the installed sqlglot is older."""
    if Version(sqlglot.__version__) < Version(SQLGLOT_FLOOR):
        raise PackageTooOldError(f"Part IV's MySQL needs sqlglot {SQLGLOT_FLOOR} or newer; this is sqlglot "
                                 f"{sqlglot.__version__}: pip install 'sqlglot>={SQLGLOT_FLOOR}', then "
                                 "restart the kernel")




# --------------------------------------------------------------------------- transpilation
def _parse_mysql(mysql: str) -> list[exp.Expression]:
    require_sqlglot()
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
    are DuckDB settings (DUCKDB_AS_MYSQL, as far as the installed DuckDB knows them:
    engines.duckdb_settings).
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


