"""Running the notebooks on Google Colab.

Every notebook starts with the same *bootstrap cell* (made by `bootstrap_cell_source`).
On Colab it clones the book's repository and calls `finish_setup`; everywhere else it
prints nothing and changes nothing. The repository URL in the cell is derived from the
one setting, `repository.url` in `_config.yml`; `make sync` rewrites the cell in every
notebook after that setting changes, and a test fails if any notebook is out of date.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from packaging.version import Version

BOOTSTRAP_TAG = "colab-bootstrap"

# Colab ships these, built for its GPU runtime; reinstalling them would waste minutes and
# could replace the CUDA build with one that does not match the driver.
NEVER_INSTALL = {"torch", "torchvision"}
# What the chapters import besides torch: installed at the pinned release where Colab has none.
# Where Colab has one, it is kept (the book's code runs on Colab's numpy, pandas, matplotlib...),
# except for AT_LEAST below.
CHAPTER_PACKAGES = {
    "numpy", "pandas", "matplotlib", "torchinfo", "duckdb", "sqlglot", "PyMySQL", "filelock",
    "packaging", "PyYAML", "myst-nb",
    "ninja", "setuptools",  # the extension's JIT build
}
# Upgraded to the pinned release when Colab's is older: the book needs the newer one (DuckDB's
# MySQL-like settings, sqlglot's MySQL dialect, myst-nb's glue) and nothing of Colab's needs the old.
AT_LEAST = {"duckdb", "sqlglot", "myst-nb"}
# Needed to build the website and run the tests, not to run a chapter: never installed.
BOOK_TOOLING = {
    "pip", "jupyter-book", "sphinx-exercise", "sphinx-book-theme", "pydata-sphinx-theme", "playwright",
    "ipykernel", "nbclient", "nbformat", "nbval", "pytest", "pytest-xdist", "ruff", "ipython", "Pygments",
}

_TEMPLATE = '''\
# Colab only: fetch the book's code and install what Colab lacks. Elsewhere: does nothing.
# (Written by `make sync` from _config.yml; edit booktools/colab.py, not this cell.)
import os, sys

if "google.colab" in sys.modules:
    REPO_URL = "{url}"
    BOOK_REPO = os.environ.get("BOOK_REPO", REPO_URL)
    BOOK_DIR = os.environ.get("BOOK_DIR", "/content/{name}")
    if not os.path.isdir(BOOK_DIR):
        import subprocess

        clone = ["git", "clone", "--quiet", "--depth=1", BOOK_REPO, BOOK_DIR]
        subprocess.run(clone, check=True)
    sys.path.insert(0, BOOK_DIR)
    import booktools.colab

    booktools.colab.finish_setup(BOOK_DIR)'''


def bootstrap_cell_source(repo_url: str) -> str:
    """The source of the first code cell of every notebook, for the given repository."""
    name = repo_url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise ValueError(f"cannot derive a folder name from repository URL {repo_url!r}")
    return _TEMPLATE.format(url=repo_url, name=name)


def pinned_requirements(requirements_file: Path) -> dict[str, str]:
    """Map each requirement of requirements.txt to the one version it pins (`name==version`)."""
    from packaging.requirements import InvalidRequirement, Requirement

    pins = {}
    for line in Path(requirements_file).read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement as e:
            raise ValueError(f"{requirements_file}: {line!r} is not a requirement: {e}") from None
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            raise ValueError(f"{requirements_file}: expected 'name==version', got {line!r}")
        pins[req.name] = specs[0].version
    return pins


COLAB_FREEZE_DIR = Path(__file__).resolve().parents[1] / "data" / "colab"


def freeze_file() -> Path:
    """The committed copy of Colab's published package list that the book is tested on
    (data/colab/pip-freeze.gpu.<commit>.txt, named with its googlecolab/backend-info commit)."""
    files = sorted(COLAB_FREEZE_DIR.glob("pip-freeze.gpu.*.txt"))
    if len(files) != 1:
        raise FileNotFoundError(f"expected one Colab package list in {COLAB_FREEZE_DIR}, found {len(files)}")
    return files[0]


def colab_pins() -> dict[str, str]:
    """name -> version on that Colab runtime (local versions like +cu128 dropped: PyPI has none)."""
    return {name: version.split("+", 1)[0] for name, version in pinned_requirements(freeze_file()).items()}


def _installed_version(name: str) -> Version | None:
    try:
        return Version(importlib.metadata.version(name))
    except importlib.metadata.PackageNotFoundError:
        return None


def requirements_to_install(requirements_file: Path) -> list[str]:
    """The pinned releases the bootstrap installs here: chapter packages that are missing, and
    those of AT_LEAST that are older than the pin. Everything else is left as it is."""
    wanted = []
    for name, pin in pinned_requirements(requirements_file).items():
        if name not in CHAPTER_PACKAGES:
            continue
        installed = _installed_version(name)
        if installed is None or (name in AT_LEAST and installed < Version(pin)):
            wanted.append(f"{name}=={pin}")
    return wanted


def finish_setup(book_dir: str | Path) -> list[str]:
    """Install what this runtime lacks or has too old; called by the bootstrap cell on Colab.
    Returns what it installed.

    The mylinearops extension (Part III) is not pip-installed here: that would cost every
    chapter a build. Instead `import mylinearops` finds the package in the clone and compiles it
    with its JIT build on first use (about a minute, then cached in ext/.jit-build/).
    """
    book_dir = Path(book_dir)
    start = time.perf_counter()
    wanted = requirements_to_install(book_dir / "requirements.txt")
    if wanted:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *wanted], check=True)
        importlib.invalidate_caches()
    ext_dir = str(book_dir / "ext")
    if ext_dir not in sys.path:
        sys.path.insert(1, ext_dir)
    # Child processes a chapter starts (python -c ..., a benchmark) import the same code.
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(book_dir), ext_dir, *inherited]))
    os.environ.setdefault("MYLINEAROPS_JIT", "1")
    took = time.perf_counter() - start
    print(f"Book code in {book_dir}; installed: {', '.join(wanted) or 'nothing'} ({took:.0f} s)")
    return wanted
