"""Shared infrastructure for the book's notebooks, tests, tools and website.

Notebooks import from here instead of pasting set-up code into every chapter:

    from booktools import setup_notebook, expect_error
    setup_notebook()

Infrastructure only: notebook set-up (notebook, colab, paths), evidence helpers (source,
profiling, autograd_graph, benchmark, extension), data (data), the SQL engines and Part
IV's checkers (sql, leetcode30, display), the notebook tools (nbtools) and the website
(site). Lesson code is written in the chapters; what other chapters and tests reuse is exported to `booktools.generated`
(`make sync`). `booktools.checkers` holds the exercises' checkers.
"""

from booktools.notebook import expect_error, setup_notebook
from booktools.paths import DATA_DIR, REPO_ROOT

__all__ = ["DATA_DIR", "REPO_ROOT", "expect_error", "setup_notebook"]
