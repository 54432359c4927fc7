"""The Colab bootstrap cell: silent elsewhere, and on (simulated) Colab it sets up a working runtime.

The end-to-end test builds a stand-in for Colab's runtime: a throwaway virtual environment that
sees only the packages Colab ships (torch, torchvision, numpy, pandas, matplotlib, IPython:
linked from this environment, so torch is reused, not reinstalled) plus a stand-in
`google.colab` module. It then runs the bootstrap cell of the Tensors chapter with the
repository URL pointed at a local clone, and runs the rest of the chapter's code.
"""

import json
import os
import re
import subprocess
import sys
import textwrap
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import nbformat
import pytest
from packaging.requirements import Requirement

from booktools.colab import (
    BOOK_TOOLING,
    NEVER_INSTALL,
    bootstrap_cell_source,
    missing_requirements,
    pinned_requirements,
)
from booktools.maintain.notebooks import code_cells
from booktools.paths import CHAPTERS_DIR, REPO_ROOT, REQUIREMENTS_FILE, repository_url

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


def test_nothing_is_missing_in_the_book_environment():
    assert missing_requirements(REQUIREMENTS_FILE) == []


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


def _distribution_closure(names):
    """The installed distributions `names` need at run time, with their dependencies."""
    found, stack = {}, list(names)
    while stack:
        try:
            dist = distribution(stack.pop())
        except PackageNotFoundError:  # an optional dependency that is not installed
            continue
        key = dist.metadata["Name"].lower().replace("_", "-")
        if key in found:
            continue
        found[key] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    return found


def _link_simulated_colab_packages(target: Path):
    """Symlink the files of Colab's preinstalled packages (from this environment) into target."""
    target.mkdir()
    for dist in _distribution_closure(COLAB_PREINSTALLED).values():
        site = Path(dist.locate_file(""))
        for top in {Path(f).parts[0] for f in dist.files or [] if not str(f).startswith("..")}:
            if not (target / top).exists() and (site / top).exists():
                (target / top).symlink_to(site / top)


DRIVER = """
import json, os, sys
from IPython.core.interactiveshell import InteractiveShell

cells = json.load(open(sys.argv[1]))
shell = InteractiveShell.instance()
for i, source in enumerate(cells):
    result = shell.run_cell(source)
    if not result.success:
        raise SystemExit(f"cell {i} failed: {result.error_in_exec or result.error_before_exec!r}")
import torch
# Part III's chapters import the extension: on Colab it is compiled from the clone on first use.
result = shell.run_cell("import mylinearops; print(mylinearops.matmul(torch.ones(2, 3), torch.ones(3, 4)))")
if not result.success:
    raise SystemExit(f"mylinearops failed: {result.error_in_exec!r}")
mylinearops = shell.user_ns["mylinearops"]
print("RESULT " + json.dumps({"torch_file": torch.__file__, "sys_path_0": sys.path[0],
                              "mylinearops_file": mylinearops.__file__,
                              "mylinearops_from": mylinearops._LOADED_FROM}))
"""


@pytest.mark.slow
def test_bootstrap_on_simulated_colab(tmp_path):
    clone = tmp_path / "origin"
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True)

    preinstalled = tmp_path / "colab-image"
    _link_simulated_colab_packages(preinstalled)
    colab_stub = tmp_path / "colab-stub"
    (colab_stub / "google" / "colab").mkdir(parents=True)
    (colab_stub / "google" / "colab" / "__init__.py").write_text("# stand-in for Colab's module\n")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    # After the venv's own site-packages, so what the bootstrap installs is found first.
    Path(site, "simulated_colab.pth").write_text(f"{preinstalled}\n{colab_stub}\n")

    cells = [c.source for c in code_cells(nbformat.read(CHAPTER, as_version=4))]
    (tmp_path / "cells.json").write_text(json.dumps(cells))
    (tmp_path / "driver.py").write_text(DRIVER)
    content = tmp_path / "content"
    content.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(
        BOOK_REPO=clone.as_uri(),
        BOOK_DIR=str(content / "book"),
        MPLBACKEND="Agg",
        MYLINEAROPS_CUDA="0",  # the CPU kernels suffice to show the extension loads; CUDA would add minutes
        PATH=f"{venv / 'bin'}:{env['PATH']}",
    )
    result = subprocess.run(
        [python, "-c", "import google.colab, runpy, sys; sys.argv = sys.argv[1:]; "
                       "runpy.run_path(sys.argv[0], run_name='__main__')",
         str(tmp_path / "driver.py"), str(tmp_path / "cells.json")],
        cwd=content, env=env, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]

    # The bootstrap cloned the book and installed exactly what the simulated Colab lacked...
    assert (content / "book" / "booktools" / "colab.py").is_file()
    installed = re.search(r"installed: (.*)", result.stdout)[1]
    image = set(_distribution_closure(COLAB_PREINSTALLED))  # what the simulated Colab has
    not_expected = NEVER_INSTALL | BOOK_TOOLING | image
    expected = {
        f"{n}=={v}" for n, v in pinned_requirements(REQUIREMENTS_FILE).items()
        if n.lower().replace("_", "-") not in not_expected
    }
    assert expected and set(installed.split(", ")) == expected
    # ...without touching torch, which still comes from the preinstalled image...
    report = json.loads(result.stdout.split("RESULT ", 1)[1])
    assert report["torch_file"].startswith(str(preinstalled))
    # ...and the chapter ran against the clone, as does the extension (built by its JIT).
    assert report["sys_path_0"] == str(content / "book")
    assert report["mylinearops_file"].startswith(str(content / "book" / "ext"))
    assert report["mylinearops_from"] == "jit"
    assert "tensor([[3., 3., 3., 3.]," in result.stdout
