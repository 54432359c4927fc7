"""Shared helpers for the book's notebooks, tests and tools.

Notebooks import from here instead of pasting set-up code into every chapter:

    from booktools import setup_notebook, expect_error
    setup_notebook()
"""

from booktools.notebook import expect_error, setup_notebook
from booktools.paths import DATA_DIR, REPO_ROOT

__all__ = ["DATA_DIR", "REPO_ROOT", "expect_error", "setup_notebook"]
