"""Part IV's expected answers: `python -m booktools.maintain.sql_answers expect [NUMBER ...]` writes
each of the book's cases' expected.json from the book's solutions, once pandas and DuckDB agree
on it, and checks that the solutions give the statement's answer on its example."""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

from booktools import sql
from booktools.checkers.sql_problems import (
    EXAMPLE,
    PROBLEMS,
    Problem,
    first_difference,
    get,
    json_cell,
    run_pandas,
    run_sql,
)
from booktools.paths import DATA_DIR


def _answer(frame: pd.DataFrame, params: dict) -> dict:
    rows = [[json_cell(sql.normalise_value(v)) for v in row] for row in frame.itertuples(index=False, name=None)]
    return {"params": params, "columns": [str(c) for c in frame.columns], "rows": rows}


def answers_json(answers: list[dict]) -> str:
    """expected.json's layout: one answer per block, one row per line (readable in a diff)."""
    dump = lambda value: json.dumps(value, ensure_ascii=False)  # noqa: E731
    blocks = []
    for a in answers:
        rows = ",\n".join(f"   {dump(r)}" for r in a["rows"])
        blocks.append(f' {{"params": {dump(a["params"])}, "columns": {dump(a["columns"])}, "rows": [\n{rows}\n ]}}')
    return "[\n" + ",\n".join(blocks) + "\n]\n"


def write_expected(problem: Problem) -> list[str]:
    """Write expected.json for the book's cases from the book's solutions; verify the example.

    Fails unless the pandas and the MySQL solution (on DuckDB) agree on every case, and unless
    both give the statement's answer on its example. Returns what was written.
    """
    function, text = problem.reference()
    written = []
    for case in problem.cases:
        answers = []
        for params in problem.params:
            got = run_pandas(problem, function, problem.tables(case), params)
            via_sql = run_sql(problem, text, problem.tables(case), params)
            sql.assert_same_result(got, via_sql, ordered=problem.ordered, names=("pandas", "DuckDB"))
            answers.append(_answer(got if problem.ordered else sql.sorted_for_display(got), params))
        path = problem.case_dir(case) / "expected.json"
        if case == EXAMPLE:
            for answer in problem.expected(case):
                mine = next(a for a in answers if a["params"] == answer["params"])
                difference = first_difference(answer, sql.result_frame(mine["columns"], [tuple(r) for r in mine["rows"]]),
                                              problem.ordered)
                if difference:
                    raise AssertionError(f"{problem.number}: the book's solution misses the statement's example: {difference}")
            continue
        text_out = answers_json(answers)
        if not path.is_file() or path.read_text(encoding="utf-8") != text_out:
            path.write_text(text_out, encoding="utf-8")
            written.append(str(path.relative_to(DATA_DIR.parent)))
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.maintain.sql_answers", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    expect = sub.add_parser("expect", help="write the book's cases' expected.json from the book's solutions")
    expect.add_argument("numbers", nargs="*", type=int, help="problem numbers (default: all)")
    args = parser.parse_args(argv)
    for problem in [get(n) for n in args.numbers] or PROBLEMS:
        for path in write_expected(problem):
            print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
