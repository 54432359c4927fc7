"""Shared infrastructure for the book's notebooks, tests, tools and website.

Notebooks import from here instead of pasting set-up code into every chapter:

    from booktools import setup_notebook, expect_error, glue
    setup_notebook()

(`glue` is myst-nb's, or where myst-nb is missing a stand-in that shows the value.)

In layers, each module with one job:

- for readers' notebooks: set-up (notebook, colab, paths), evidence (source, profiling,
  autograd_graph, benchmark, extension, shipping), data (data), Part IV's engines (sql, a
  package) and tables (display);
- `booktools.checkers`: the exercises' checkers, one module per chapter, and Part IV's
  (sql_problems);
- `booktools.generated`: the lesson code the chapters export (`make sync`), never edited by hand;
- `booktools.maintain`: the maintainers' tools (notebook refresh, sync and rules, the website,
  Part IV's expected answers), which readers never call.
"""

from booktools.notebook import expect_error, glue, setup_notebook
from booktools.paths import DATA_DIR, REPO_ROOT

__all__ = ["DATA_DIR", "REPO_ROOT", "expect_error", "glue", "setup_notebook"]
