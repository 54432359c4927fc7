"""The Colab bootstrap cell: silent elsewhere; on Colab, what it installs and what it sets.

The bootstrap itself, run by every chapter on Colab's package versions, is exercised end to end
by `make test-colab` (booktools/maintain/colab_runtime.py).
"""

import os
import re
import subprocess
import sys
import textwrap
from importlib.metadata import packages_distributions

import nbformat
import pytest
from packaging.version import Version

from booktools import colab
from booktools.colab import (
    AT_LEAST,
    BOOK_TOOLING,
    CHAPTER_PACKAGES,
    NEVER_INSTALL,
    bootstrap_cell_source,
    pinned_requirements,
    requirements_to_install,
)
from booktools.maintain.notebooks import code_cells
from booktools.paths import CHAPTERS_DIR, REQUIREMENTS_FILE, repository_url

COLAB_PREINSTALLED = ["torch", "torchvision", "numpy", "pandas", "matplotlib", "ipython"]
CHAPTER = CHAPTERS_DIR / "tensors.ipynb"


def test_bootstrap_cell_is_derived_from_the_config():
    source = bootstrap_cell_source(repository_url())
    assert repository_url() in source
    assert "/content/book\"" in source  # folder name derived from the URL's last component
    with pytest.raises(ValueError, match="folder name"):
        bootstrap_cell_source("https://example.org/my book")


def test_requirements_parsing_rejects_unpinned_lines(tmp_path):
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.14.1  # comment\n\nnumpy>=2\n")
    with pytest.raises(ValueError, match="numpy>=2"):
        pinned_requirements(req)


def test_requirements_are_all_pinned():
    pins = pinned_requirements(REQUIREMENTS_FILE)
    assert {"torch", "torchvision", "jupyter-book", "nbval"} <= set(pins)


def test_nothing_to_install_in_the_book_environment():
    assert requirements_to_install(REQUIREMENTS_FILE) == []


def test_every_pin_has_one_role():
    pins = set(pinned_requirements(REQUIREMENTS_FILE))
    roles = [CHAPTER_PACKAGES, NEVER_INSTALL, BOOK_TOOLING]
    assert set().union(*roles) == pins
    assert sum(map(len, roles)) == len(pins), "a package is in two roles"
    assert AT_LEAST <= CHAPTER_PACKAGES


def test_what_chapters_import_the_bootstrap_provides():
    """Every third-party module a chapter imports comes with Colab's torch or is a chapter package
    (IPython and nbformat: every Jupyter kernel has them). A cell that handles the module's
    absence (ImportError, find_spec) may import anything."""
    stdlib = set(sys.stdlib_module_names)
    owners = packages_distributions()
    allowed = {n.lower() for n in CHAPTER_PACKAGES | NEVER_INSTALL | {"ipython", "nbformat"}}
    unprovided = set()
    for path in sorted(CHAPTERS_DIR.glob("*.ipynb")):
        for cell in code_cells(nbformat.read(path, as_version=4)):
            if re.search(r"ImportError|ModuleNotFoundError|find_spec", cell.source):
                continue
            for module in re.findall(r"^\s*(?:from|import)\s+(\w+)", cell.source, re.M):
                if module in stdlib or module in ("booktools", "mylinearops", "google"):
                    continue
                dists = {d.lower() for d in owners.get(module, [module])}
                if not dists & allowed:
                    unprovided.add(f"{path.stem}: {module} ({', '.join(sorted(dists))})")
    assert not unprovided, sorted(unprovided)


@pytest.mark.parametrize(
    ("installed", "expected"),
    [
        ({}, {"numpy==2.4.6", "duckdb==2.0.0", "myst-nb==1.4.0"}),  # none there: all pinned
        ({"numpy": "2.1.3", "duckdb": "1.3.2", "myst-nb": "1.4.0"}, {"duckdb==2.0.0"}),  # only the floor
        ({"numpy": "2.1.3", "duckdb": "2.1.0", "myst-nb": "1.4.0"}, set()),  # newer than the pin: kept
    ],
)
def test_bootstrap_fills_gaps_and_raises_floors_only(tmp_path, monkeypatch, installed, expected):
    req = tmp_path / "requirements.txt"
    req.write_text("torch==2.14.1\nnumpy==2.4.6\nduckdb==2.0.0\nmyst-nb==1.4.0\nnbval==0.11.0\n")
    versions = {**installed, "torch": "2.11.0"}
    monkeypatch.setattr(colab, "_installed_version", lambda name: Version(versions[name]) if name in versions else None)
    assert set(requirements_to_install(req)) == expected


def test_finish_setup_lets_child_processes_import_the_book(tmp_path, monkeypatch):
    book = tmp_path / "book"
    (book / "ext" / "some_ext").mkdir(parents=True)
    (book / "ext" / "some_ext" / "__init__.py").write_text("NAME = 'from the clone'\n")
    (book / "requirements.txt").write_text("")
    monkeypatch.setattr(sys, "path", list(sys.path))
    environ = {k: v for k, v in os.environ.items() if k != "MYLINEAROPS_JIT"} | {"PYTHONPATH": "/elsewhere"}
    monkeypatch.setattr(os, "environ", environ)  # what finish_setup sets stays in this test
    assert colab.finish_setup(book) == []
    child = subprocess.run([sys.executable, "-c", "import some_ext; print(some_ext.NAME)"],
                           capture_output=True, text=True, check=True, env=environ)
    assert child.stdout == "from the clone\n"
    assert os.environ["PYTHONPATH"].endswith(":/elsewhere") and os.environ["MYLINEAROPS_JIT"] == "1"


def test_outside_colab_the_cell_prints_nothing_and_changes_nothing(tmp_path):
    cell = code_cells(nbformat.read(CHAPTER, as_version=4))[0].source
    probe = textwrap.dedent(
        """
        import os, sys, json
        before = (list(sys.path), os.getcwd(), sorted(sys.modules))
        exec(compile(CELL, "bootstrap", "exec"), {})
        after = (list(sys.path), os.getcwd(), sorted(sys.modules))
        print(json.dumps(before == after))
        """
    ).replace("CELL", repr(cell))
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "true\n" and result.stderr == ""


def test_the_tested_colab_runtime_names_its_source():
    freeze = colab.freeze_file()
    commit = freeze.name.split(".")[2]
    assert re.search(rf"backend-info, commit {commit}[0-9a-f]{{28}}[\s#]*\(\d{{4}}-\d\d-\d\d", freeze.read_text())
    pins = colab.colab_pins()
    assert {"torch", "torchvision", "numpy", "pandas", "ipykernel", "pip"} <= set(pins)
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.]*", v) for v in pins.values()), pins


def test_the_colab_pass_reports_changes_to_colabs_own_packages():
    """A bootstrap may add packages and raise a chapter package's floor; a change to anything
    else Colab ships (torch above all, or a dependency pulled up by an install) fails the pass."""
    from booktools.maintain.colab_runtime import changed_preinstalled

    before = "torch==2.11.0\ntraitlets==5.7.1\nduckdb==1.3.2\nPyYAML==6.0.2\n"
    added_and_raised = before.replace("duckdb==1.3.2", "duckdb==2.0.0") + "myst-nb==1.4.0\n"
    assert changed_preinstalled(before, added_and_raised) == []
    pulled_up = added_and_raised.replace("traitlets==5.7.1", "traitlets==5.16.1")
    assert changed_preinstalled(before, pulled_up) == ["traitlets 5.7.1 -> 5.16.1"]
    replaced = before.replace("torch==2.11.0\n", "")
    assert changed_preinstalled(before, replaced) == ["torch 2.11.0 -> removed"]
