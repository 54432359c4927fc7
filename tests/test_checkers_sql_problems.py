"""Part IV: the study plan's 30 problems, their cases, the book's solutions and the checkers.

The book's solutions are the chapters' `#| export` cells (booktools/generated/sql_*.py, kept in
sync by a test in test_notebooks.py); here they run through the same checkers a reader calls.
"""

import inspect
import json
import re
import subprocess
import sys
import warnings

import pandas as pd
import pytest

from booktools.checkers import sql_problems as lc
from booktools.maintain.sql_answers import answers_json
from booktools import sql
from booktools.checkers import CheckFailed
from booktools.paths import CHAPTERS_DIR, REPO_ROOT

# LeetCode's "30 Days of Pandas", section by section, in the plan's order
# (https://leetcode.com/studyplan/30-days-of-pandas/; 1693 ends "Data aggregation" there).
STUDY_PLAN = {
    "Data filtering": [595, 1757, 183, 1148],
    "String methods": [1683, 1873, 1667, 1517, 1527],
    "Data manipulation": [177, 176, 184, 178, 196, 1795],
    "Statistics": [2082, 1173, 1907],
    "Data aggregation": [1741, 511, 2356, 596, 586, 1484, 1693],
    "Data integration": [1050, 1378, 1280, 570, 607],
}
BEYOND_THE_PLAN = [1633, 1211, 1084]

RUNS = [pytest.param(p, id=f"{p.number}-{p.name}") for p in lc.PROBLEMS]
PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3


def test_the_plans_thirty_problems_in_its_sections_and_order():
    assert sum(map(len, STUDY_PLAN.values())) == 30
    assert [title for title, _ in lc.SECTIONS.values()] == list(STUDY_PLAN)
    for section, (title, _) in lc.SECTIONS.items():
        assert [p.number for p in lc.PLAN if p.section == section] == STUDY_PLAN[title]
    assert [p.number for p in lc.PROBLEMS if not p.in_plan] == BEYOND_THE_PLAN
    assert [p.number for p in lc.PROBLEMS] == [n for ns in STUDY_PLAN.values() for n in ns] + BEYOND_THE_PLAN


def test_every_chapter_of_part_iv_is_in_the_toc_in_the_plans_order():
    toc = (REPO_ROOT / "_toc.yml").read_text(encoding="utf-8")
    chapters = [chapter for _, chapter in lc.SECTIONS.values()]
    positions = [toc.index(f"chapters/{c}\n") for c in chapters]
    assert positions == sorted(positions)


@pytest.mark.parametrize("problem", RUNS)
def test_chapter_solution_has_leetcodes_signature(problem):
    function, text = problem.reference()
    signature = inspect.signature(function)
    assert function.__name__ == problem.name
    assert list(signature.parameters) == problem.arguments
    tables = [lc.snake_case(t) for t in problem.schemas]
    for name, parameter in signature.parameters.items():
        assert parameter.annotation in (("pd.DataFrame", pd.DataFrame) if name in tables else ("int", int))
    assert isinstance(text, str) and text.strip()


@pytest.mark.parametrize("problem", RUNS)
def test_cases_match_the_schema_and_have_answers(problem):
    assert problem.cases[:2] == [lc.EXAMPLE, lc.BOOK]
    for case in problem.cases:
        for name, frame in problem.tables(case).items():
            schema = problem.schemas[name]
            assert list(frame.columns) == [c.name for c in schema.columns]
            assert {c: str(t) for c, t in frame.dtypes.items()} == {c: str(t) for c, t in schema.dtypes().items()}
            assert len(frame) <= 30, "case tables stay small enough to read"
        for text, numbers, _ in lc.table_kinds():  # NULL stays missing in every kind of table
            for name, frame in problem.tables(case, text, numbers).items():
                default = problem.tables(case)[name]
                pd.testing.assert_frame_equal(frame.isna(), default.isna())
                assert not frame.isin(["nan", "None", "<NA>"]).any().any(), (case, name, text, numbers)
                if numbers == "numpy":
                    assert set(frame.select_dtypes("number").dtypes.astype(str)) <= {"int64", "float64"}
        answers = problem.expected(case)
        assert [a["params"] for a in answers] == list(problem.params), case
        for answer in answers:
            assert all(len(row) == len(answer["columns"]) for row in answer["rows"])


@pytest.mark.parametrize("problem", RUNS)
def test_book_solutions_do_not_modify_their_inputs_unless_asked(problem):
    function, _ = problem.reference()
    tables = problem.tables(lc.BOOK)
    before = {name: frame.copy() for name, frame in tables.items()}
    function(*tables.values(), **problem.params[0])
    for name, frame in tables.items():
        if name != problem.modifies:
            pd.testing.assert_frame_equal(frame, before[name])


@pytest.mark.parametrize("problem", RUNS)
def test_a_wrong_answer_fails_with_the_first_differing_row(problem):
    """Drop one row of the right answer (or add one where it is empty): both checkers must say which."""
    function, text = problem.reference()

    def wrong(*args, **kwargs):
        result = function(*args, **kwargs)
        if problem.modifies:  # the answer is the changed table: change it once more, in place
            table = args[list(problem.schemas).index(problem.modifies)]
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "The inplace keyword", DeprecationWarning)
                table.drop(index=table.index[-1], inplace=True)
            return result
        if len(result):
            return result.iloc[:-1]
        return pd.DataFrame([[None] * result.shape[1]], columns=result.columns)

    wrong.__signature__ = inspect.signature(function)
    wrong.__name__ = function.__name__
    with pytest.raises(CheckFailed, match=r"is missing|should not be there|rows; expected|row \d+ is"):
        lc.check(problem, wrong)


def test_checker_names_the_case_the_row_and_the_trap():
    def big_countries(world: pd.DataFrame) -> pd.DataFrame:  # > instead of >=
        big = (world["area"] > 3_000_000) | (world["population"] > 25_000_000)
        return world.loc[big, ["name", "population", "area"]]

    with pytest.raises(CheckFailed, match=r"^595 Big Countries, big_countries \(pandas\): on the book's tables: "
                                          r"the expected row \('Threshold Isle', 12000, 3000000\) is missing$"):
        lc.check(595, big_countries)
    with pytest.raises(CheckFailed, match=r"columns are in the order \['name', 'area', 'population'\]"):
        lc.check_sql(595, "SELECT name, area, population FROM World WHERE area >= 3000000 OR population >= 25000000",
                     url="")
    with pytest.raises(CheckFailed, match=r"statement's example: SQLError: DuckDB: Binder Error"):
        lc.check_sql(595, "SELECT nme FROM World", url="")
    with pytest.raises(CheckFailed, match=r"statement's example: UnknownTableError: table 'world' does not exist"):
        lc.check_sql(595, "SELECT name, population, area FROM world", url="")
    with pytest.raises(CheckFailed, match=r"raised KeyError"):
        lc.check(595, lambda world: world[["nme"]])


def test_a_wrong_value_shows_the_missing_row_and_the_unexpected_one():
    """Rows compared in any order: a changed value is one missing row and one extra row."""
    expected = {"columns": ["a", "b"], "rows": [[1, "x"], [2, "y"]]}
    got = pd.DataFrame({"a": [2, 1], "b": ["y", "z"]})
    assert lc.first_difference(expected, got, ordered=False) == (
        "the expected row (1, 'x') is missing; the row (1, 'z') should not be there")

    def big_countries(world: pd.DataFrame) -> pd.DataFrame:  # every population off by one
        big = (world["area"] >= 3_000_000) | (world["population"] >= 25_000_000)
        return world.loc[big, ["name", "population", "area"]].assign(population=lambda t: t["population"] + 1)

    with pytest.raises(CheckFailed, match=r"the expected row \('Afghanistan', 25500100, 652230\) is missing; "
                                          r"the row \('Afghanistan', 25500101, 652230\) should not be there "
                                          r"\(2 more differences\)$"):
        lc.check(595, big_countries)


def test_an_error_names_the_kind_of_table_it_ran_on():
    """The first run uses pandas' default text dtype; an error there names it too."""
    default = sql.default_string_dtype()
    with pytest.raises(CheckFailed, match=rf"on the statement's example with {default} text columns "
                                          r"it raised KeyError"):
        lc.check(595, lambda world: world[["nme"]])


def test_checker_rejects_what_leetcode_would_not_call_or_accept():
    with pytest.raises(TypeError, match=r"LeetCode calls find_customers\(customers, orders\)"):
        lc.check(183, lambda customers: customers)
    with pytest.raises(CheckFailed, match="returned a Series; LeetCode wants a DataFrame"):
        lc.check(595, lambda world: world["name"])
    with pytest.raises(CheckFailed, match="must change person in place and return None"):
        lc.check(196, lambda person: person.drop_duplicates("email"))
    with pytest.raises(TypeError, match="needs your MySQL text"):
        lc.check_sql(595, "")
    with pytest.raises(KeyError, match="no problem 9999 in Part IV"):
        lc.check(9999, print)


def test_checker_runs_leetcodes_object_columns_too():
    """LeetCode builds text columns as object; `== None` is a trap there that str columns hide."""
    def find_customers(customers: pd.DataFrame, orders: pd.DataFrame) -> pd.DataFrame:
        merged = customers.merge(orders, how="left", left_on="id", right_on="customerId")
        never = merged[merged["customerId"].isna()]
        return never[["name"]].rename(columns={"name": "Customers"})

    lc.check(183, find_customers)  # right on both kinds of column


def test_table_kinds_follow_the_installed_pandas():
    kinds = [kind[:2] for kind in lc.table_kinds()]
    if PANDAS_3:
        assert kinds == [("str", "nullable"), ("object", "nullable"), ("object", "numpy")]
    else:  # pandas 2: object is already the default for text
        assert kinds == [("object", "nullable"), ("object", "numpy")]


def test_missing_text_is_null_in_object_columns_not_the_text_nan():
    """1527 without na=False: fine on str columns, an error where NULL is None (LeetCode)."""
    def find_patients(patients: pd.DataFrame) -> pd.DataFrame:
        return patients.loc[patients["conditions"].str.contains(r"(?:^| )DIAB1")]

    kind = " with object text columns" + (" \\(as on LeetCode\\)" if PANDAS_3 else "")
    with pytest.raises(CheckFailed, match=rf"on the book's tables{kind} it raised ValueError: Cannot mask"):
        lc.check(1527, find_patients)


def test_checker_runs_leetcodes_numpy_numbers_too():
    """`is pd.NA` finds NULL only in Int64 columns; LeetCode's int64/float64 ones hold NaN."""
    def rearrange_products_table(products: pd.DataFrame) -> pd.DataFrame:
        long = products.melt(id_vars="product_id", var_name="store", value_name="price")
        return long[[price is not pd.NA for price in long["price"]]]

    with pytest.raises(CheckFailed, match=r"on the statement's example with .*int64/float64 numbers, NULL as NaN "
                                          r"\(as on LeetCode\): the row \(1, 'store2', None\) should not be there"):
        lc.check(1795, rearrange_products_table)


def test_ordered_problems_report_the_first_row_out_of_order():
    problem = lc.get(1148)
    function, _ = problem.reference()
    with pytest.raises(CheckFailed, match=r"row 0 is .*; expected .*prescribes the row order"):
        lc.check(1148, lambda views: function(views).iloc[::-1])
    assert problem.ordered


def test_get_by_number_name_or_function():
    function, _ = lc.get(595).reference()
    assert lc.get(595) is lc.get("big_countries") is lc.get(function)
    assert lc.snake_case("EmployeeUNI") == "employee_uni" and lc.snake_case("DailySales") == "daily_sales"


def test_expected_files_are_written_one_row_per_line():
    answers = [{"params": {}, "columns": ["a", "b"], "rows": [[1, "x"], [None, 2.5]]}]
    text = answers_json(answers)
    assert json.loads(text) == answers and text.count("\n") == 6


def test_data_readme_lists_every_problem_folder():
    readme = (lc.DATA / "README.md").read_text(encoding="utf-8")
    for problem in lc.PROBLEMS:
        assert problem.folder.name in readme


def test_every_comparison_shown_in_the_chapters_was_recorded():
    """A chapter shows MariaDB's answer only from the recording; none may be missing."""
    for chapter in (c for _, c in lc.SECTIONS.values()):
        assert sql.NOT_RECORDED not in (CHAPTERS_DIR / f"{chapter}.ipynb").read_text(encoding="utf-8"), chapter


def test_part_iv_needs_no_torch():
    """Part IV's set-up, engines, checkers and exported solutions import without torch."""
    modules = ", ".join(f"booktools.generated.{c}" for _, c in lc.SECTIONS.values())
    code = ("import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] == 'torch':\n"
            "            raise ImportError('torch is blocked')\n"
            "sys.meta_path.insert(0, Block())\n"
            f"import booktools.checkers.sql_problems, booktools.sql, {modules}\n"
            "from booktools import setup_notebook\n"
            "setup_notebook()\n"
            "print('torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert out.stdout.strip() == "False"
    for _, chapter in lc.SECTIONS.values():
        source = (CHAPTERS_DIR / f"{chapter}.ipynb").read_text(encoding="utf-8")
        assert not re.search(r"\bimport torch\b|from torch\b", source), chapter


@pytest.mark.parametrize("section", list(lc.SECTIONS), ids=lambda s: lc.SECTIONS[s][1])
def test_each_chapter_writes_and_checks_its_problems_in_the_plans_order(section):
    """The reader's code is in the chapter: per problem an exported pandas function and MySQL
    text, checked with lc.check and lc.check_sql; the plan's problems come first, in its order,
    and any others only after a "Beyond the plan" heading."""
    import nbformat

    from booktools.maintain import notebooks as nbtools

    chapter = lc.SECTIONS[section][1]
    nb = nbformat.read(CHAPTERS_DIR / f"{chapter}.ipynb", as_version=4)
    exported = "\n".join(c.source for c in nb.cells if nbtools.is_exported(c))
    code = "\n".join(c.source for c in nbtools.code_cells(nb))
    text = "\n".join(c.source for c in nb.cells)
    problems = [p for p in lc.PROBLEMS if p.section == section]
    for p in problems:
        assert re.search(rf"^def {p.name}\(", exported, re.M), f"{p.number}: no exported def {p.name}"
        assert re.search(rf"^{p.sql_name} = ", exported, re.M), f"{p.number}: no exported {p.sql_name}"
        assert re.search(rf"lc\.check\({p.number}, {p.name}\)", code), f"{p.number}: lc.check not called"
        assert re.search(rf"lc\.check_sql\({p.number}, {p.sql_name}\)", code), f"{p.number}: lc.check_sql not called"
    firsts = [text.index(f"def {p.name}(") for p in problems]
    assert firsts == sorted(firsts), "problems appear in the plan's order"
    beyond = [p for p in problems if not p.in_plan]
    if beyond:
        heading = re.search(r"^#+ Beyond the plan", text, re.M)
        assert heading and all(text.index(f"def {p.name}(") > heading.start() for p in beyond)
        assert all(text.index(f"def {p.name}(") < heading.start() for p in problems if p.in_plan)


def test_what_the_introduction_counts_is_true():
    """intro.md says how many problems each Part IV chapter holds, in and beyond the plan."""
    intro = (REPO_ROOT / "intro.md").read_text(encoding="utf-8")
    words = {"one": 1, "two": 2, "three": 3}
    assert "The 30 problems of LeetCode's study plan" in intro and "plus three problems beyond the plan" in intro
    assert len(lc.PLAN) == 30 and len(lc.PROBLEMS) - len(lc.PLAN) == 3
    for section, (_, chapter) in lc.SECTIONS.items():
        found = re.search(rf"\{{doc\}}`chapters/{chapter}` \((\d+)(?: problems)?(?:, and (\w+)\s+beyond\s+the plan)?\)", intro)
        assert found, chapter
        in_plan = sum(p.in_plan for p in lc.PROBLEMS if p.section == section)
        beyond = sum(not p.in_plan for p in lc.PROBLEMS if p.section == section)
        assert (int(found[1]), words.get(found[2], 0)) == (in_plan, beyond), chapter
