"""Part IV on a real MySQL-compatible server: every problem's MySQL runs natively on MariaDB.

A throwaway MariaDB (Debian package mariadb-server) is started for the session on 127.0.0.1 and
a free port, and stopped afterwards. Without the package these tests are skipped, unless
BOOK_REQUIRE_MARIADB=1 (CI sets it), which turns the skip into a failure.
"""

import os

import pytest

from booktools.checkers import sql_problems as lc
from booktools import sql

REQUIRE_ENV = "BOOK_REQUIRE_MARIADB"


def skip_or_fail_without_mariadb(binaries, environ) -> None:
    """No MariaDB: skip, unless the environment requires it (CI), then fail."""
    if binaries is None:
        reason = "MariaDB is not installed (apt-get install mariadb-server)"
        if environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"{reason}, and {REQUIRE_ENV}=1 requires it")
        pytest.skip(reason)


@pytest.fixture(scope="session")
def mariadb_url(tmp_path_factory):
    skip_or_fail_without_mariadb(sql.mariadb_binaries(), os.environ)
    with sql.throwaway_mariadb(tmp_path_factory.mktemp("mariadb")) as url:
        yield url


@pytest.mark.parametrize("problem", lc.PROBLEMS, ids=lambda p: f"{p.number}-{p.name}")
def test_book_sql_passes_its_checker_on_mariadb(mariadb_url, problem, capsys):
    """The chapter's MySQL text, run natively (untranslated) on MariaDB, gives every case's answer."""
    _, text = problem.reference()
    lc.check_sql(problem, text, url=mariadb_url)
    assert "(MySQL on MariaDB): passed" in capsys.readouterr().out
    with sql.MySQLServerEngine(mariadb_url) as server:
        server.load(problem.tables(lc.BOOK), problem.schemas)
        server.execute(problem.sql_text(text, problem.params[0]))
        assert server.last_statements == [problem.sql_text(text, problem.params[0])]  # not a translation


def test_leetcode_stored_function_for_177(mariadb_url):
    """LeetCode's own form of 177, a stored function, gives every case's answers on MariaDB."""
    from booktools.generated.sql_3_manipulation import NTH_HIGHEST_SALARY_FUNCTION

    problem = lc.get("nth_highest_salary")
    for case in problem.cases:
        with sql.MySQLServerEngine(mariadb_url) as server:
            server.load(problem.tables(case), problem.schemas)
            assert server.execute(NTH_HIGHEST_SALARY_FUNCTION) is None
            for answer in problem.expected(case):
                n = answer["params"]["N"]
                got = server.execute(f"SELECT getNthHighestSalary({n})")
                assert lc.first_difference(answer, got, ordered=True) is None, (case, n)


def test_recorded_answers_still_hold(mariadb_url):
    """Every MariaDB answer the notebooks show (recorded) is what MariaDB answers now."""
    recorded = sql.load_recorded()["entries"]
    assert recorded, "no recorded MariaDB answers"
    for key, entry in recorded.items():
        outcome = sql.outcome_on_server(mariadb_url, entry["sql"], entry["tables"])
        outcome.pop("server")
        if "error" in entry:
            assert outcome.get("code") == entry["code"], (entry["sql"], outcome)
            assert outcome["error"].split(":")[0] == entry["error"].split(":")[0]
        else:
            assert outcome == {k: entry[k] for k in ("columns", "rows")}, entry["sql"]


def test_server_errors_are_clear(mariadb_url):
    world = lc.tables("big_countries", lc.BOOK)["World"]
    with sql.MySQLServerEngine(mariadb_url) as server:
        server.load({"World": world}, lc.get("big_countries").schemas)
        with pytest.raises(sql.UnknownTableError, match=r"table 'Wrld' does not exist; loaded tables: World"):
            server.execute("SELECT * FROM Wrld")
        with pytest.raises(sql.SQLSyntaxError, match=r"MariaDB syntax error near '= 1' at line 1 \[error 1064\]"):
            server.execute("SELECT 1 == 1")
        with pytest.raises(sql.SQLError, match=r"^MariaDB: Unknown column 'nme' .*\[error 1054\]$"):
            server.execute("SELECT nme FROM World")
    assert sql.run("SELECT COUNT(*) AS n FROM World", {"World": world}, url=mariadb_url)["n"].tolist() == [len(world)]


def test_each_engine_uses_its_own_scratch_database(mariadb_url):
    with sql.MySQLServerEngine(mariadb_url) as a, sql.MySQLServerEngine(mariadb_url) as b:
        assert a.database != b.database
        a.load({"T": lc.tables("big_countries", lc.BOOK)["World"]})
        with pytest.raises(sql.UnknownTableError):
            b.execute("SELECT * FROM T")
        scratch = a.database
    with sql.MySQLServerEngine(mariadb_url) as c:
        names = c.execute("SELECT schema_name AS name FROM information_schema.schemata")["name"].tolist()
    assert scratch not in names  # dropped on close


def test_missing_mariadb_skips_unless_required():
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        skip_or_fail_without_mariadb(None, {})
    with pytest.raises(pytest.fail.Exception, match="BOOK_REQUIRE_MARIADB=1 requires it"):
        skip_or_fail_without_mariadb(None, {REQUIRE_ENV: "1"})
    skip_or_fail_without_mariadb(("mariadbd", "mariadb-install-db"), {REQUIRE_ENV: "1"})  # present: no-op
