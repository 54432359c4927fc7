"""Unit tests of booktools.sql: transpilation fixes, engines, errors, result comparison (no server)."""

import datetime
import decimal
import socket

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot

from booktools import sql
from booktools.paths import REPO_ROOT
from booktools.sql import engines

PANDAS_MAJOR = int(pd.__version__.split(".")[0])
TEXT = "str" if PANDAS_MAJOR >= 3 else "object"  # the dtype pandas gives text

WORLD = pd.DataFrame({
    "name": pd.array(["Chad", "Fiji", "Peru"], dtype="str"),
    "area": pd.array([1284000, 18274, None], dtype="Int64"),
})


def no_driver_traceback(err: BaseException) -> bool:
    """Raised by us, not chained to a driver's exception (so no stack of driver internals)."""
    return err.__cause__ is None and (err.__context__ is None or err.__suppress_context__)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once the socket is closed


# ------------------------------------------------------------------------- transpilation
def test_like_gets_mysql_escape_only_when_a_backslash_can_matter():
    assert sql.transpile("SELECT 'a_b' LIKE 'a\\_%'") == ["SELECT 'a_b' LIKE 'a\\_%' ESCAPE '\\'"]
    assert sql.transpile("SELECT name LIKE 'M%' FROM t") == ["SELECT name LIKE 'M%' FROM t"]
    assert "ESCAPE" in sql.transpile("SELECT a LIKE b FROM t")[0]  # pattern from a column


def test_like_escape_runs_like_mysql():
    got = sql.run("SELECT 'a_b' LIKE 'a\\_%' AS literal_underscore, 'axb' LIKE 'a\\_%' AS other")
    assert got.iloc[0].tolist() == [True, False]


def test_length_counts_bytes_as_in_mysql():
    assert sql.transpile("SELECT LENGTH(x) FROM t") == ["SELECT STRLEN(CAST(x AS TEXT)) FROM t"]
    got = sql.run("SELECT LENGTH('café') AS bytes, CHAR_LENGTH('café') AS chars")
    assert got.iloc[0].tolist() == [5, 4]
    assert sql.transpile("SELECT LENGTH(x) FROM t", fixes=False) != sql.transpile("SELECT LENGTH(x) FROM t")


def test_average_of_a_comparison_counts_ones():
    assert sql.transpile("SELECT AVG(a < 3) FROM t") == ["SELECT AVG(CAST(a < 3 AS INT)) FROM t"]
    frame = pd.DataFrame({"a": [1, 5, 2, 9]})
    assert sql.run("SELECT AVG(a < 3) AS f, SUM(a > 1) AS s FROM t", {"t": frame}).iloc[0].tolist() == [0.5, 3]


def test_integer_division_by_zero_is_null_as_in_mysql():
    assert sql.transpile("SELECT 7 DIV 0") == ["SELECT 7 // 0"]  # no rewrite: a DuckDB setting
    assert sql.run("SELECT 7 DIV 0 AS q, 7 / 0 AS r, -7 DIV 2 AS t").iloc[0].tolist() == [None, None, -3]


@pytest.fixture
def fresh_duckdb_settings():
    sql.duckdb_settings.cache_clear()
    yield
    sql.duckdb_settings.cache_clear()


def test_duckdb_gets_the_settings_it_knows(fresh_duckdb_settings):
    known = {name for (name,) in duckdb.sql("SELECT name FROM duckdb_settings()").fetchall()}
    assert sql.duckdb_settings() == {k: v for k, v in sql.DUCKDB_AS_MYSQL.items() if k in known}
    if int(duckdb.__version__.split(".")[0]) >= 2:  # 2.0 raises on `7 // 0` unless told not to
        assert sql.duckdb_settings() == sql.DUCKDB_AS_MYSQL
    else:  # 1.x has no such setting; its `7 // 0` is NULL anyway (1.3.2)
        assert "error_on_division_by_zero" not in sql.duckdb_settings()


def test_unknown_duckdb_setting_is_left_out_only_where_duckdb_acts_like_mysql(monkeypatch, fresh_duckdb_settings):
    monkeypatch.setitem(engines.DUCKDB_AS_MYSQL, "no_such_setting", True)
    monkeypatch.setitem(engines._MYSQL_BEHAVIOUR, "no_such_setting", "SELECT NULL")
    assert "no_such_setting" not in sql.duckdb_settings()
    assert sql.run("SELECT 1 AS one")["one"].tolist() == [1]
    sql.duckdb_settings.cache_clear()
    monkeypatch.setitem(engines._MYSQL_BEHAVIOUR, "no_such_setting", "SELECT 1")
    with pytest.raises(sql.SQLError, match=r"has no setting no_such_setting and does not behave like MySQL"):
        sql.run("SELECT 1 AS one")


def test_old_sqlglot_is_named_instead_of_an_attribute_error(monkeypatch):
    monkeypatch.setattr(sqlglot, "__version__", "25.20.2")  # Colab's, which lacks exp.Block
    with pytest.raises(sql.PackageTooOldError, match=r"needs sqlglot 30\.30\.0 or newer; this is sqlglot 25\.20\.2"):
        sql.run("SELECT 1")


def test_sqlglot_floor_is_the_release_requirements_pin():
    lines = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8").split()
    pins = dict(line.split("==") for line in lines if "==" in line)
    assert pins["sqlglot"] == sql.SQLGLOT_FLOOR


def test_multi_table_delete_becomes_delete_using():
    mysql = "DELETE p FROM Person AS p JOIN Person AS q ON q.email = p.email AND q.id < p.id"
    assert sql.transpile(mysql) == [
        "DELETE FROM Person AS p USING Person AS q WHERE q.email = p.email AND q.id < p.id"]
    comma = "DELETE p FROM Person p, Person q WHERE p.email = q.email AND p.id > q.id"
    assert sql.transpile(comma) == ["DELETE FROM Person AS p USING Person AS q WHERE p.email = q.email AND p.id > q.id"]
    with pytest.raises(sql.SQLSyntaxError, match="LEFT JOIN"):
        sql.transpile("DELETE p FROM Person p LEFT JOIN X q ON q.id = p.id")
    with pytest.raises(sql.SQLSyntaxError, match="first table"):
        sql.transpile("DELETE q FROM Person p JOIN X q ON q.id = p.id")


def test_null_ordering_follows_mysql():
    assert sql.transpile("SELECT a FROM t ORDER BY a") == ["SELECT a FROM t ORDER BY a NULLS FIRST"]
    frame = pd.DataFrame({"a": pd.array([2, None, 1], dtype="Int64")})
    assert sql.run("SELECT a FROM t ORDER BY a", {"t": frame})["a"].tolist() == [pd.NA, 1, 2]
    assert sql.run("SELECT a FROM t ORDER BY a DESC", {"t": frame})["a"].tolist() == [2, 1, pd.NA]


def test_referenced_tables_skips_ctes_aliases_and_qualified_names():
    text = "WITH c AS (SELECT * FROM A) SELECT * FROM c JOIN B AS b ON TRUE JOIN information_schema.tables x"
    assert sorted(sql.referenced_tables(text)) == ["A", "B"]
    assert sql.referenced_tables("DELETE p FROM Person p JOIN Person q ON TRUE") == ["Person"]


# ------------------------------------------------------------------------------- errors
def test_unknown_table_is_named_with_what_exists():
    with pytest.raises(sql.UnknownTableError) as err:
        sql.run("SELECT * FROM Wrld", {"World": WORLD})
    assert str(err.value) == "table 'Wrld' does not exist; loaded tables: World"
    assert no_driver_traceback(err.value)


def test_table_names_are_case_sensitive_as_in_mysql_on_linux():
    with pytest.raises(sql.UnknownTableError, match=r"case-sensitive .* did you mean 'World'\?"):
        sql.run("SELECT * FROM world", {"World": WORLD})


def test_syntax_error_is_one_clear_line():
    with pytest.raises(sql.SQLSyntaxError) as err:
        sql.run("SELECT name FROM World WHER area > 1", {"World": WORLD})
    message = str(err.value)
    assert message == ("sqlglot cannot parse this as MySQL at line 1, column 32 near 'area': "
                       "Invalid expression / Unexpected token")
    assert "\x1b" not in message and "\n" not in message and no_driver_traceback(err.value)


def test_engine_error_is_one_line_without_driver_traceback():
    with pytest.raises(sql.SQLError) as err:
        sql.run("SELECT nme FROM World", {"World": WORLD})
    assert str(err.value).startswith('DuckDB: Binder Error: Referenced column "nme" not found')
    assert "\n" not in str(err.value) and no_driver_traceback(err.value)


def test_unreachable_server_says_what_to_do(monkeypatch):
    port = closed_port()
    monkeypatch.setenv(sql.URL_ENV, f"mysql://root@127.0.0.1:{port}/db")
    with pytest.raises(sql.ServerUnavailableError) as err:
        sql.run("SELECT 1")
    message = str(err.value)
    assert f"cannot reach a MySQL server at 127.0.0.1:{port} (BOOK_MYSQL_URL)" in message
    assert "python -m booktools.sql serve" in message and "unset BOOK_MYSQL_URL" in message
    assert no_driver_traceback(err.value)


def test_bad_url_is_rejected():
    with pytest.raises(ValueError, match="must look like mysql://"):
        sql.open_engine("postgres://localhost/db")


def test_unset_url_means_duckdb(monkeypatch):
    monkeypatch.delenv(sql.URL_ENV, raising=False)
    with sql.open_engine() as engine:
        assert isinstance(engine, sql.DuckDBEngine)
    monkeypatch.setenv(sql.URL_ENV, "mysql://root@127.0.0.1:1/")
    with sql.open_engine("") as engine:  # an empty url asks for DuckDB even when a server is set
        assert isinstance(engine, sql.DuckDBEngine)


def test_unrecorded_query_says_how_to_get_an_answer(monkeypatch):
    monkeypatch.delenv(sql.URL_ENV, raising=False)
    shown = repr(sql.compare_engines("SELECT 'this query is not recorded' AS x"))
    assert "DuckDB\n" in shown and sql.NOT_RECORDED in shown and "set BOOK_MYSQL_URL" in shown


# ------------------------------------------------------------------------------ schemas
def test_schema_parsing_and_dtypes():
    schemas = sql.parse_schema(
        "CREATE TABLE T (id INT PRIMARY KEY, n INT, s VARCHAR(9), e ENUM('Y', 'N'), d DATE, x DECIMAL(3, 2));"
        "CREATE TABLE U (a INT, b INT NOT NULL, PRIMARY KEY (a))"
    )
    t, u = schemas["T"], schemas["U"]
    assert sql.default_string_dtype() == TEXT
    assert t.dtypes() == {"id": "int64", "n": "Int64", "s": TEXT, "e": pd.CategoricalDtype(["Y", "N"]),
                          "d": "datetime64[ns]", "x": "Float64"}
    assert t.dtypes(string_dtype="object")["s"] == "object"
    assert [c.nullable for c in u.columns] == [False, False]
    assert u.mysql_ddl() == "CREATE TABLE `U` (`a` INT NOT NULL, `b` INT NOT NULL, PRIMARY KEY (`a`))"


def test_csv_reading_null_token_and_empty_string(tmp_path):
    (schema,) = sql.parse_schema("CREATE TABLE T (id INT PRIMARY KEY, n INT, s VARCHAR(9))").values()
    path = tmp_path / "T.csv"
    path.write_text("id,n,s\n1,NULL,\n2,5,NA\n3,6,NULL\n")
    frame = sql.read_csv_table(path, schema)
    assert frame.dtypes.astype(str).tolist() == ["int64", "Int64", TEXT]
    assert frame["n"].isna().tolist() == [True, False, False]
    assert frame["s"].tolist()[:2] == ["", "NA"] and pd.isna(frame["s"].iloc[2])  # NULL, not 'nan'
    as_leetcode = sql.read_csv_table(path, schema, "object", numbers="numpy")
    assert as_leetcode.dtypes.astype(str).tolist() == ["int64", "float64", "object"]
    assert as_leetcode["s"].tolist() == ["", "NA", None] and np.isnan(as_leetcode["n"].iloc[0])
    with pytest.raises(ValueError, match="numbers must be one of"):
        sql.read_csv_table(path, schema, numbers="Int64")
    path.write_text("id,s,n\n1,a,2\n")
    with pytest.raises(ValueError, match="do not match the schema"):
        sql.read_csv_table(path, schema)
    path.write_text("id,n,s\nNULL,1,a\n")
    with pytest.raises(ValueError, match="NOT NULL"):
        sql.read_csv_table(path, schema)


def test_schema_from_frame():
    frame = pd.DataFrame({"i": [1, 2], "f": [0.5, None], "s": ["a", "b"], "d": pd.to_datetime(["2024-01-01"] * 2)})
    types = [(c.mysql_type, c.nullable) for c in sql.schema_from_frame("F", frame).columns]
    assert types == [("BIGINT", False), ("DOUBLE", True), ("VARCHAR(255)", False), ("DATE", False)]


def test_result_frame_keeps_what_the_engine_returned():
    frame = sql.result_frame(["i", "f", "d", "s", "b", "dt"], [
        (1, 0.5, decimal.Decimal("1.50"), "x", True, datetime.date(2024, 1, 2)),
        (None, None, None, None, None, None),
    ])
    assert frame.dtypes.astype(str).tolist() == ["Int64", "float64", "object", TEXT, "boolean", "object"]
    assert frame["d"].iloc[0] == decimal.Decimal("1.50")
    assert frame["s"].isna().tolist() == [False, True]  # NULL, not the text 'None'



# --------------------------------------------------------------------------- comparison
def test_values_compare_as_values():
    left = pd.DataFrame({"x": [1, 2], "y": ["a", None], "z": [True, False]})
    right = pd.DataFrame({"x": [decimal.Decimal("2.00"), 1.0], "y": [np.nan, "a"], "z": [0, 1]})
    sql.assert_same_result(left, right)  # order ignored, NULLs equal, 1 == 1.0 == Decimal('1.00'), True == 1
    with pytest.raises(sql.ResultMismatch, match="same rows, different order"):
        sql.assert_same_result(left, right, ordered=True)


def test_missing_values_of_every_kind_are_equal():
    left = pd.DataFrame({"v": pd.array([None], dtype="Int64")})
    for other in ([None], [np.nan], [pd.NaT], pd.array([None], dtype="Float64")):
        sql.assert_same_result(left, pd.DataFrame({"v": other}))


def test_dates_and_floats_compare_sensibly():
    sql.assert_same_result(pd.DataFrame({"d": pd.to_datetime(["2024-03-01"])}),
                           pd.DataFrame({"d": [datetime.date(2024, 3, 1)]}))
    sql.assert_same_result(pd.DataFrame({"f": [0.1 + 0.2]}), pd.DataFrame({"f": [0.3]}))
    with pytest.raises(sql.ResultMismatch):
        sql.assert_same_result(pd.DataFrame({"f": [33.33]}), pd.DataFrame({"f": [33.34]}))


def test_mismatch_messages_say_what_differs():
    with pytest.raises(sql.ResultMismatch, match=r"column names differ: left has \['a'\], right has \['b'\]"):
        sql.assert_same_result(pd.DataFrame({"a": [1]}), pd.DataFrame({"b": [1]}))
    with pytest.raises(sql.ResultMismatch, match=r"only in pandas: \[\(2.0,\)\]; only in SQL: \[\(3.0,\)\]"):
        sql.assert_same_result(pd.DataFrame({"a": [1, 2]}), pd.DataFrame({"a": [1, 3]}), names=("pandas", "SQL"))
    with pytest.raises(sql.ResultMismatch, match="only in left: \\[\\(1.0,\\)\\]; only in right: \\[\\]"):
        sql.assert_same_result(pd.DataFrame({"a": [1, 1]}), pd.DataFrame({"a": [1]}))  # multisets


def test_display_sorts_unordered_results_canonically():
    frame = pd.DataFrame({"a": pd.array([3, None, 1], dtype="Int64"), "b": ["x", "y", "z"]})
    assert sql.sorted_for_display(frame)["a"].tolist() == [pd.NA, 1, 3]
    shown = sql.SideBySide([sql.Panel("SQL", frame=frame)], notes=["note"])
    assert "NULL" in repr(shown) and "NULL" in shown._repr_html_() and repr(shown).endswith("note")
