"""LeetCode's study plan "30 Days of Pandas" (Part IV): the problems, their cases, the checkers.

This module holds no solutions. The reader writes them in the chapters, one pandas function
with LeetCode's name and signature and one MySQL text per problem, and checks them with

    check(595, big_countries)                  # the pandas function, on every case
    check_sql(595, "SELECT name, ... ")        # the MySQL text, on DuckDB (or $BOOK_MYSQL_URL)

The book's own solutions are the chapters' cells marked `#| export` (function `big_countries`,
text `BIG_COUNTRIES_SQL`); `make sync` writes them to booktools/generated/sql_*.py, where the
tests find them (`Problem.reference`).

Each problem has a folder in data/leetcode-pandas/ with `schema.sql` (MySQL DDL, tables in the
order of the function's arguments) and cases, one folder each: `example/` (the statement's
example) and the book's adversarial cases (the folder itself is case "book"; sub-folders are
more). A case holds one CSV per table and `expected.json`, the answer every solution must give:
typed from the statement for `example/`, written by `python -m booktools.maintain.sql_answers`
from the book's solutions (after pandas and DuckDB agree) for the others.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable

import pandas as pd

from booktools import sql
from booktools.checkers import CheckFailed, fail  # noqa: F401  (lc.CheckFailed for the chapters)
from booktools.paths import DATA_DIR

DATA = DATA_DIR / "leetcode-pandas"
PLAN_URL = "https://leetcode.com/studyplan/30-days-of-pandas/"

# The plan's six sections, in its order, and the chapter that teaches each.
SECTIONS = {
    1: ("Data filtering", "sql_1_filtering"),
    2: ("String methods", "sql_2_strings"),
    3: ("Data manipulation", "sql_3_manipulation"),
    4: ("Statistics", "sql_4_statistics"),
    5: ("Data aggregation", "sql_5_aggregation"),
    6: ("Data integration", "sql_6_integration"),
}
EXAMPLE = "example"  # the statement's example
BOOK = "book"  # the book's own tables, in the problem's folder itself


def snake_case(table_name: str) -> str:
    """LeetCode's argument name for a table: World -> world, EmployeeUNI -> employee_uni."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", table_name).lower()


@dataclass(frozen=True)
class Problem:
    number: int
    title: str
    section: int
    name: str  # LeetCode's pandas function name; the MySQL text is NAME_SQL
    ordered: bool = False  # the statement prescribes the row order
    modifies: str | None = None  # the answer is this table after the solution changed it in place
    params: tuple[dict, ...] = ({},)  # extra arguments of the function; the first is the default
    in_plan: bool = True  # False: a problem the book adds "beyond the plan"

    @property
    def sql_name(self) -> str:
        return f"{self.name.upper()}_SQL"

    @property
    def chapter(self) -> str:
        return SECTIONS[self.section][1]

    @cached_property
    def folder(self) -> Path:
        found = list(DATA.glob(f"{self.number:04d}-*/"))
        if len(found) != 1:
            raise FileNotFoundError(f"problem {self.number}: expected one folder {DATA}/{self.number:04d}-*/")
        return found[0]

    @property
    def url(self) -> str:
        return f"https://leetcode.com/problems/{self.folder.name[5:]}/"

    @cached_property
    def schemas(self) -> dict[str, sql.TableSchema]:
        return sql.parse_schema((self.folder / "schema.sql").read_text(encoding="utf-8"))

    @property
    def arguments(self) -> list[str]:
        """The function's parameters, as LeetCode names them: one per table, then the extras."""
        return [snake_case(t) for t in self.schemas] + list(self.params[0])

    @property
    def cases(self) -> list[str]:
        """The statement's example first, then the book's cases."""
        extra = sorted(p.name for p in self.folder.iterdir() if p.is_dir() and p.name != EXAMPLE)
        return [EXAMPLE, BOOK, *extra]

    def case_dir(self, case: str) -> Path:
        if case not in self.cases:
            raise KeyError(f"problem {self.number} has no case {case!r}; cases: {', '.join(self.cases)}")
        return self.folder if case == BOOK else self.folder / case

    def tables(self, case: str = EXAMPLE, string_dtype: str | None = None,
               numbers: str = "nullable") -> dict[str, pd.DataFrame]:
        """The input tables of a case, in the order of the function's arguments (dtypes as in
        sql.read_csv_table: by default pandas' own text dtype and Int64/Float64 numbers)."""
        where = self.case_dir(case)
        return {name: sql.read_csv_table(where / f"{name}.csv", schema, string_dtype, numbers)
                for name, schema in self.schemas.items()}

    def expected(self, case: str = EXAMPLE) -> list[dict]:
        """The answers of a case: [{"params": {...}, "columns": [...], "rows": [[...], ...]}, ...]."""
        path = self.case_dir(case) / "expected.json"
        if not path.is_file():
            how = ("type the statement's example output into it" if case == EXAMPLE
                   else f"run: python -m booktools.maintain.sql_answers expect {self.number}")
            raise FileNotFoundError(f"{path} is missing ({how})")
        return json.loads(path.read_text(encoding="utf-8"))

    def sql_text(self, text: str, params: dict) -> str:
        """The MySQL text with the extra arguments filled in (177's `{N}`)."""
        return text.strip().format(**params) if params else text.strip()

    def reference(self) -> tuple[Callable, str]:
        """The book's own solutions, as exported from the chapter by `make sync`."""
        module = importlib.import_module(f"booktools.generated.{self.chapter}")
        return getattr(module, self.name), getattr(module, self.sql_name)


PROBLEMS = [
    # 1. Data filtering
    Problem(595, "Big Countries", 1, "big_countries"),
    Problem(1757, "Recyclable and Low Fat Products", 1, "find_products"),
    Problem(183, "Customers Who Never Order", 1, "find_customers"),
    Problem(1148, "Article Views I", 1, "article_views", ordered=True),
    # 2. String methods
    Problem(1683, "Invalid Tweets", 2, "invalid_tweets"),
    Problem(1873, "Calculate Special Bonus", 2, "calculate_special_bonus", ordered=True),
    Problem(1667, "Fix Names in a Table", 2, "fix_names", ordered=True),
    Problem(1517, "Find Users With Valid E-Mails", 2, "valid_emails"),
    Problem(1527, "Patients With a Condition", 2, "find_patients"),
    # 3. Data manipulation
    Problem(177, "Nth Highest Salary", 3, "nth_highest_salary",
            params=({"N": 2}, {"N": 1}, {"N": 3}, {"N": 4}, {"N": 0})),
    Problem(176, "Second Highest Salary", 3, "second_highest_salary"),
    Problem(184, "Department Highest Salary", 3, "department_highest_salary"),
    Problem(178, "Rank Scores", 3, "order_scores", ordered=True),
    Problem(196, "Delete Duplicate Emails", 3, "delete_duplicate_emails", modifies="Person"),
    Problem(1795, "Rearrange Products Table", 3, "rearrange_products_table"),
    # 4. Statistics
    Problem(2082, "The Number of Rich Customers", 4, "count_rich_customers"),
    Problem(1173, "Immediate Food Delivery I", 4, "food_delivery"),
    Problem(1907, "Count Salary Categories", 4, "count_salary_categories"),
    # 5. Data aggregation
    Problem(1741, "Find Total Time Spent by Each Employee", 5, "total_time"),
    Problem(511, "Game Play Analysis I", 5, "game_analysis"),
    Problem(2356, "Number of Unique Subjects Taught by Each Teacher", 5, "count_unique_subjects"),
    Problem(596, "Classes With at Least 5 Students", 5, "find_classes"),
    Problem(586, "Customer Placing the Largest Number of Orders", 5, "largest_orders"),
    Problem(1484, "Group Sold Products By The Date", 5, "categorize_products", ordered=True),
    Problem(1693, "Daily Leads and Partners", 5, "daily_leads_and_partners"),
    # 6. Data integration
    Problem(1050, "Actors and Directors Who Cooperated At Least Three Times", 6, "actors_and_directors"),
    Problem(1378, "Replace Employee ID With The Unique Identifier", 6, "replace_employee_id"),
    Problem(1280, "Students and Examinations", 6, "students_and_examinations", ordered=True),
    Problem(570, "Managers with at Least 5 Direct Reports", 6, "find_managers"),
    Problem(607, "Sales Person", 6, "sales_person"),
    # Beyond the plan: problems the book adds, in the chapters' "Beyond the plan" sections.
    Problem(1633, "Percentage of Users Attended a Contest", 4, "users_percentage", ordered=True, in_plan=False),
    Problem(1211, "Queries Quality and Percentage", 5, "queries_stats", in_plan=False),
    Problem(1084, "Sales Analysis III", 5, "sales_analysis", in_plan=False),
]
PLAN = [p for p in PROBLEMS if p.in_plan]
_BY_KEY = {p.name: p for p in PROBLEMS} | {p.number: p for p in PROBLEMS}


def get(key: str | int | Callable | Problem) -> Problem:
    """A problem by its LeetCode number, its function name, or the function itself."""
    if isinstance(key, Problem):
        return key
    if callable(key):
        key = key.__name__
    try:
        return _BY_KEY[key]
    except KeyError:
        numbers = ", ".join(str(p.number) for p in PROBLEMS)
        raise KeyError(f"no problem {key!r} in Part IV; its problems are {numbers}") from None


def tables(key, case: str = EXAMPLE) -> dict[str, pd.DataFrame]:
    return get(key).tables(case)


# ------------------------------------------------------------------------------ running one
def run_pandas(problem: Problem, function: Callable, tables: dict[str, pd.DataFrame],
               params: dict) -> pd.DataFrame:
    """Call the function as LeetCode does (on copies), and return its answer as a DataFrame."""
    args = {name: frame.copy() for name, frame in tables.items()}
    result = function(*args.values(), **params)
    if problem.modifies is not None:
        if result is not None:
            raise TypeError(f"{problem.name} must change {snake_case(problem.modifies)} in place and "
                            f"return None (it returned a {type(result).__name__})")
        return args[problem.modifies]
    if isinstance(result, pd.Series):
        raise TypeError(f"{problem.name} returned a Series; LeetCode wants a DataFrame "
                        "(.to_frame(), or select columns with a list: df[['a']])")
    if not isinstance(result, pd.DataFrame):
        raise TypeError(f"{problem.name} returned a {type(result).__name__}, not a DataFrame")
    return result


def run_sql(problem: Problem, text: str, tables: dict[str, pd.DataFrame], params: dict,
            url: str | None = None) -> pd.DataFrame:
    """Run the MySQL text on a fresh engine loaded with the tables; the answer as a DataFrame."""
    with sql.open_engine(url) as engine:
        engine.load(tables, problem.schemas)
        result = engine.execute(problem.sql_text(text, params))
        if problem.modifies is not None:
            return engine.table(problem.modifies)
        if result is None:
            raise sql.SQLError("the text ran, but no statement in it returned rows (no SELECT?)")
        return result


# ------------------------------------------------------------------------------ comparing
def json_cell(value):
    """A value as expected.json writes it: 12000 rather than 12000.0."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _row(row: tuple) -> tuple:
    """A normalised row as the reader wrote it: 12000 rather than 12000.0."""
    return tuple(json_cell(v) for v in row)


def first_difference(expected: dict, got: pd.DataFrame, ordered: bool) -> str | None:
    """None if `got` is the expected answer; else what differs first, in one sentence."""
    want_columns = expected["columns"]
    got_columns = [str(c) for c in got.columns]
    if got_columns != want_columns:
        if sorted(got_columns) == sorted(want_columns):
            return f"the columns are in the order {got_columns}; expected {want_columns}"
        return f"the columns are {got_columns}; expected {want_columns}"
    want = [tuple(sql.normalise_value(v) for v in row) for row in expected["rows"]]
    have = sql.normalised_rows(got, ordered=True)
    if ordered:
        for i, (w, h) in enumerate(zip(want, have)):
            if w != h:
                return f"row {i} is {_row(h)}; expected {_row(w)} (the statement prescribes the row order)"
        if len(have) != len(want):
            extra = (f"first extra row: {_row(have[len(want)])}" if len(have) > len(want)
                     else f"first missing row: {_row(want[len(have)])}")
            return f"{len(have)} rows; expected {len(want)} ({extra})"
        return None
    missing = sorted((Counter(want) - Counter(have)).elements(), key=sql.row_sort_key)
    extra = sorted((Counter(have) - Counter(want)).elements(), key=sql.row_sort_key)
    if not missing and not extra:
        return None
    shown = [f"the expected row {_row(missing[0])} is missing"] if missing else []
    shown += [f"the row {_row(extra[0])} should not be there"] if extra else []
    more = len(missing) + len(extra) - len(shown)
    tail = f" ({more} more difference{'s' if more != 1 else ''})" if more else ""
    return "; ".join(shown) + tail


def _case_label(problem: Problem, case: str, params: dict) -> str:
    label = {EXAMPLE: "the statement's example", BOOK: "the book's tables"}.get(case, f"the book's case {case!r}")
    if params and len(problem.params) > 1:
        label += ", " + ", ".join(f"{k}={v}" for k, v in params.items())
    return label


def _runs(problem: Problem):
    for case in problem.cases:
        for answer in problem.expected(case):
            yield case, answer


def table_kinds() -> list[tuple[str, str, str]]:
    """How `check` builds a case's tables, one run each: (text dtype, numbers, what a failure
    message adds). LeetCode's text columns are object, NULL as None; its numbers are Int64 in
    its statements and int64/float64 with NaN in the DataFrames it builds: both are run. On
    pandas 3, whose default for text is `str`, that default is run first (pandas 2's is object)."""
    default = sql.default_string_dtype()
    kinds = []
    for text, numbers in ((default, "nullable"), ("object", "nullable"), ("object", "numpy")):
        if any((text, numbers) == kind[:2] for kind in kinds):
            continue
        words = [] if text == default else ["object text columns"]
        words += [] if numbers == "nullable" else ["int64/float64 numbers, NULL as NaN"]
        kinds.append((text, numbers, f" with {' and '.join(words)} (as on LeetCode)" if words else ""))
    return kinds


def check(key, function: Callable) -> None:
    """Run a pandas solution on every case of its problem and compare with the expected answers.

    Prints one line if it gives every answer, or raises CheckFailed naming the first case and
    the first row that differ. Each case runs once per kind of table in `table_kinds()`: with
    LeetCode's object text columns, with Int64 and with int64/float64 numbers, and on pandas 3
    also with its default `str` columns.
    """
    problem = get(key)
    if not callable(function):
        raise TypeError(f"check({problem.number}, ...) needs your function, got a {type(function).__name__}")
    try:  # LeetCode passes the tables by position and the extras by name
        inspect.signature(function).bind(*problem.schemas, **problem.params[0])
    except TypeError:
        raise TypeError(f"LeetCode calls {problem.name}({', '.join(problem.arguments)}); your "
                        f"{function.__name__}{inspect.signature(function)} cannot take that") from None
    who = f"{problem.number} {problem.title}, {function.__name__} (pandas)"
    for case, answer in _runs(problem):
        for string_dtype, numbers, kind in table_kinds():
            where = f"on {_case_label(problem, case, answer['params'])}{kind}"
            try:
                got = run_pandas(problem, function, problem.tables(case, string_dtype, numbers), answer["params"])
            except Exception as err:  # the reader's code: any error is a finding, reported as one line
                dtype = "" if kind else f" with {string_dtype} text columns"  # errors often depend on it
                fail(who, f"{where}{dtype} it raised {type(err).__name__}: {err}")
            difference = first_difference(answer, got, problem.ordered)
            if difference:
                fail(who, f"{where}: {difference}")
    print(f"{who}: passed ({_summary(problem)})")


def check_sql(key, text: str, url: str | None = None) -> None:
    """Run a MySQL solution on every case of its problem and compare with the expected answers.

    It runs on DuckDB (after translation by sqlglot), or on the MySQL/MariaDB server in `url`
    or $BOOK_MYSQL_URL. Prints one line, or raises CheckFailed naming the first difference.
    """
    problem = get(key)
    if not isinstance(text, str) or not text.strip():
        raise TypeError(f"check_sql({problem.number}, ...) needs your MySQL text, got {text!r}")
    with sql.open_engine(url) as engine:
        who = f"{problem.number} {problem.title} (MySQL on {engine.label})"
    for case, answer in _runs(problem):
        try:
            got = run_sql(problem, text, problem.tables(case), answer["params"], url)
        except sql.SQLError as err:
            fail(who, f"on {_case_label(problem, case, answer['params'])}: {type(err).__name__}: {err}")
        difference = first_difference(answer, got, problem.ordered)
        if difference:
            fail(who, f"on {_case_label(problem, case, answer['params'])}: {difference}")
    print(f"{who}: passed ({_summary(problem)})")


def _summary(problem: Problem) -> str:
    cases = ", ".join(problem.cases)
    runs = sum(len(problem.expected(c)) for c in problem.cases)
    extra = f", {runs} answers with the extra arguments" if runs != len(problem.cases) else ""
    order = "in the prescribed order" if problem.ordered else "in any order"
    return f"{len(problem.cases)} cases: {cases}{extra}; rows compared {order}"


# ------------------------------------------------------------------------------ showing one
def show_tables(key, case: str = EXAMPLE) -> sql.SideBySide:
    """The input tables of a case, next to each other, and the answer it expects."""
    problem = get(key)
    panels = [sql.Panel(f"{name} ({len(frame)} rows)", frame=frame, sql=False)
              for name, frame in problem.tables(case).items()]
    answer = problem.expected(case)[0]
    expected = sql.result_frame(answer["columns"], [tuple(r) for r in answer["rows"]])
    params = ", ".join(f"{k}={v}" for k, v in answer["params"].items())
    panels.append(sql.Panel(f"expected{' (' + params + ')' if params else ''}", frame=expected))
    return sql.SideBySide(panels, notes=[f"{problem.number} {problem.title}: {_case_label(problem, case, {})}."])


def side_by_side(key, function: Callable, text: str, case: str = EXAMPLE,
                 params: dict | None = None) -> sql.SideBySide:
    """Both solutions' answers to one case, next to each other, with the SQL DuckDB really ran."""
    problem = get(key)
    params = problem.params[0] if params is None else params
    inputs = problem.tables(case)
    pandas_answer = run_pandas(problem, function, inputs, params)
    with sql.open_engine() as engine:
        engine.load(inputs, problem.schemas)
        sql_answer = engine.execute(problem.sql_text(text, params))
        ran = engine.last_statements  # before engine.table() replaces them
        if problem.modifies:
            sql_answer = engine.table(problem.modifies)
        label = engine.label
    shown = (lambda f: f.reset_index(drop=True)) if problem.ordered else sql.sorted_for_display
    call = f"{function.__name__}({', '.join(f'{k}={v}' for k, v in params.items()) or '...'})"
    suffix = f" -> {problem.modifies}" if problem.modifies else ""
    panels = [sql.Panel(f"pandas: {call}{suffix}", frame=shown(pandas_answer), sql=False),
              sql.Panel(f"MySQL on {label}{suffix}", frame=shown(sql_answer))]
    code = []
    if isinstance(engine, sql.DuckDBEngine) and sql.translation_differs(problem.sql_text(text, params), ran):
        code.append(("DuckDB ran (the MySQL text as transpiled by sqlglot):", ";\n".join(ran)))
    order = "in the prescribed order" if problem.ordered else "sorted (SQL sets no order)"
    return sql.SideBySide(panels, code=code, notes=[f"{_case_label(problem, case, params).capitalize()}; rows shown {order}."])
