"""booktools.notebook, the helpers every chapter imports."""

from __future__ import annotations

import subprocess
import sys

import pytest

from booktools.notebook import expect_error

# A fresh interpreter where `import myst_nb` fails, as in a Jupyter without the book's tools.
WITHOUT_MYST_NB = """
import sys
sys.modules["myst_nb"] = None  # makes `import myst_nb` raise ImportError
from booktools.notebook import glue
glue("peak", 12.5, display=False)
glue("ratio", "1.2x")
"""


def test_glue_without_myst_nb_shows_the_values():
    out = subprocess.run([sys.executable, "-c", WITHOUT_MYST_NB], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["peak: 12.5", "1.2x"]  # display() outside IPython prints str()


def test_glue_is_myst_nbs_where_it_is_installed():
    import myst_nb

    from booktools.notebook import glue

    assert glue is myst_nb.glue


def test_expect_error_prints_the_message_and_fails_when_nothing_raises(capsys):
    with expect_error(ValueError):
        raise ValueError("bad shape\nsecond line")
    assert capsys.readouterr().out == "ValueError: bad shape\n    second line\n"
    with pytest.raises(AssertionError, match="expected ValueError, but the block ran without error"):
        with expect_error(ValueError):
            pass
