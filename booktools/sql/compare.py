"""Comparing two results the way a judge should, and showing them."""

from __future__ import annotations


import datetime
import decimal
import math
from collections import Counter

import numpy as np
import pandas as pd
from booktools.sql.errors import ResultMismatch




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


def row_sort_key(row):
    return tuple((0, "") if v is None else (1, v) if isinstance(v, float) else (2, str(v)) for v in row)


def normalised_rows(frame: pd.DataFrame, ordered: bool = False) -> list[tuple]:
    rows = [tuple(normalise_value(v) for v in row) for row in frame.itertuples(index=False, name=None)]
    return rows if ordered else sorted(rows, key=row_sort_key)


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
    keys = [row_sort_key(r) for r in normalised_rows(frame, ordered=True)]
    order = sorted(range(len(frame)), key=lambda i: keys[i])
    return frame.iloc[order].reset_index(drop=True)


