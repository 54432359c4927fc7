"""The notebook harness must bite: a stored output that differs from a fresh run fails the tests."""

import subprocess
import sys

import nbformat
import pytest

from booktools.maintain.notebooks import code_cells
from booktools.paths import CHAPTERS_DIR, REPO_ROOT

pytestmark = pytest.mark.slow  # runs notebooks: not in make test-fast

SOURCE_NOTEBOOK = CHAPTERS_DIR / "tensors.ipynb"


def run_nbval(notebook):
    """Run the book's own nbval configuration (pytest.ini) on one notebook."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO_ROOT / "pytest.ini"), "-q", str(notebook)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )


def first_printed_number(nb):
    """(cell, output) of the first stdout output that shows a digit: the output we tamper with."""
    for cell in code_cells(nb):
        for out in cell.outputs:
            if out.output_type == "stream" and any(ch.isdigit() for ch in out.text):
                return cell, out
    raise AssertionError("no printed number to tamper with")


@pytest.fixture
def short_copy(tmp_path):
    """The Tensors chapter, cut after the first cell that prints a number, in a scratch folder."""
    nb = nbformat.read(SOURCE_NOTEBOOK, as_version=4)
    cell, _ = first_printed_number(nb)
    nb.cells = nb.cells[: nb.cells.index(cell) + 1]
    path = tmp_path / "copy.ipynb"
    nbformat.write(nb, path)
    return path


def test_unchanged_copy_passes(short_copy):
    result = run_nbval(short_copy)
    assert result.returncode == 0, result.stdout + result.stderr


def test_changed_output_fails(short_copy):
    nb = nbformat.read(short_copy, as_version=4)
    _, out = first_printed_number(nb)
    digit = next(ch for ch in out.text if ch.isdigit())
    out.text = out.text.replace(digit, str((int(digit) + 1) % 10), 1)  # one wrong digit
    nbformat.write(nb, short_copy)
    result = run_nbval(short_copy)
    assert result.returncode != 0
    assert "Cell outputs differ" in result.stdout


def test_harness_is_strict_not_lax():
    ini = (REPO_ROOT / "pytest.ini").read_text(encoding="utf-8")
    assert "--nbval " in ini and "--nbval-lax" not in ini and "--nbval-current-env" in ini
