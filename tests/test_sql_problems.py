"""The 30 problems of Part IV: data, signatures, and pandas == MySQL on the embedded engine."""

import inspect
import re

import pandas as pd
import pytest

from booktools import leetcode30 as lc
from booktools import sql

STUDY_PLAN = {  # LeetCode number -> pandas function name, section by section
    1: {595: "big_countries", 1757: "find_products", 183: "find_customers", 1148: "article_views"},
    2: {1683: "invalid_tweets", 1873: "calculate_special_bonus", 1667: "fix_names", 1517: "valid_emails",
        1527: "find_patients"},
    3: {177: "nth_highest_salary", 176: "second_highest_salary", 184: "department_highest_salary",
        178: "order_scores", 196: "delete_duplicate_emails", 1795: "rearrange_products_table"},
    4: {2082: "count_rich_customers", 1173: "food_delivery", 1633: "users_percentage"},
    5: {1211: "queries_stats", 1084: "sales_analysis", 2356: "count_unique_subjects", 596: "find_classes",
        586: "largest_orders", 1484: "categorize_products", 1693: "daily_leads_and_partners",
        1050: "actors_and_directors"},
    6: {1378: "replace_employee_id", 1280: "students_and_examinations", 570: "find_managers",
        1907: "count_salary_categories"},
}

RUNS = [
    pytest.param(p, case, params, id=f"{p.number}-{p.name}{'-' + case if case else ''}"
                 + (f"-N{params['N']}" if "N" in params else ""))
    for p in lc.PROBLEMS for case in p.cases for params in p.params
]


def test_the_thirty_problems_of_the_study_plan():
    assert len(lc.PROBLEMS) == 30
    assert {p.section: {} for p in lc.PROBLEMS}.keys() == STUDY_PLAN.keys()
    for section, problems in STUDY_PLAN.items():
        assert {p.number: p.name for p in lc.PROBLEMS if p.section == section} == problems


@pytest.mark.parametrize("problem", lc.PROBLEMS, ids=lambda p: p.name)
def test_signature_is_leetcodes(problem):
    signature = inspect.signature(problem.solution)
    tables = [lc.snake_case(t) for t in problem.schemas]
    extra = list(problem.params[0])
    assert list(signature.parameters) == tables + extra
    for name, parameter in signature.parameters.items():
        assert parameter.annotation == ("pd.DataFrame" if name in tables else "int")
    assert signature.return_annotation == ("None" if problem.modifies else "pd.DataFrame")


@pytest.mark.parametrize("problem", lc.PROBLEMS, ids=lambda p: p.name)
def test_data_matches_the_schema(problem):
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", problem.slug)
    for case in problem.cases:
        for name, frame in problem.tables(case).items():
            schema = problem.schemas[name]
            assert list(frame.columns) == [c.name for c in schema.columns]
            assert {c: str(t) for c, t in frame.dtypes.items()} == {c: str(t) for c, t in schema.dtypes().items()}
            assert len(frame) <= 30, "example tables stay small enough to read"


@pytest.mark.parametrize("problem, case, params", RUNS)
def test_pandas_equals_mysql_on_duckdb(problem, case, params):
    tables = problem.tables(case)
    expected = problem.run_pandas(tables, params)
    got, _ = problem.run_sql(tables, params, sql.DuckDBEngine())
    sql.assert_same_result(expected, got, ordered=problem.ordered, names=("pandas", "DuckDB"))


@pytest.mark.parametrize("problem, case, params", RUNS)
def test_pandas_solution_also_works_on_leetcodes_object_columns(problem, case, params):
    """LeetCode passes text as object columns; the book reads it as pandas 3's str dtype."""
    as_str = problem.run_pandas(problem.tables(case), params)
    as_object = problem.run_pandas(problem.tables(case, string_dtype="object"), params)
    sql.assert_same_result(as_str, as_object, ordered=problem.ordered, names=("str", "object"))


def test_solutions_do_not_modify_their_inputs_unless_asked():
    for problem in lc.PROBLEMS:
        tables = problem.tables()
        before = {name: frame.copy() for name, frame in tables.items()}
        problem.solution(*tables.values(), **problem.params[0])
        for name, frame in tables.items():
            if name == problem.modifies:
                assert len(frame) < len(before[name])
            else:
                pd.testing.assert_frame_equal(frame, before[name])


def test_solve_shows_both_results_and_the_translation():
    shown = lc.solve("delete_duplicate_emails")
    text = repr(shown)
    assert "DELETE FROM Person AS p USING Person AS keeper" in text
    assert "pandas: delete_duplicate_emails(person) -> Person" in text and "MySQL on DuckDB -> Person" in text
    assert repr(lc.solve("big_countries")).count("DuckDB ran") == 0  # nothing to translate


def test_solve_fails_loudly_when_the_solutions_disagree():
    tables = lc.tables("big_countries")
    wrong = lc.get("big_countries")
    with pytest.raises(sql.ResultMismatch, match="rows differ"):
        sql.assert_same_result(wrong.run_pandas(tables),
                               sql.run("SELECT name, population, area FROM World WHERE area > 3000000", tables,
                                       wrong.schemas))


def test_data_readme_lists_every_problem_folder():
    readme = (lc.DATA / "README.md").read_text(encoding="utf-8")
    for problem in lc.PROBLEMS:
        assert problem.folder.name in readme


def test_get_by_name_number_or_function():
    assert lc.get(595) is lc.get("big_countries") is lc.get(lc.big_countries)
    with pytest.raises(KeyError, match="no problem 'nope' among the 30"):
        lc.get("nope")
    assert lc.snake_case("EmployeeUNI") == "employee_uni" and lc.snake_case("DailySales") == "daily_sales"


def test_every_comparison_shown_in_the_chapters_was_recorded():
    """A chapter shows MariaDB's answer only from the recording; none may be missing."""
    from booktools.paths import CHAPTERS_DIR

    for path in sorted(CHAPTERS_DIR.glob("sql_*.ipynb")):
        assert sql.NOT_RECORDED not in path.read_text(encoding="utf-8"), path.name
