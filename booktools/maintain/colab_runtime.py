"""The book on Google Colab's runtime: `python -m booktools.maintain.colab_runtime {venv,run}`.

- venv: a Python 3.13 virtual environment with the exact package versions of Colab's
        published runtime (the committed data/colab/pip-freeze.gpu.<commit>.txt), a stand-in
        `google.colab` module and a kernel spec for it.
- run:  every chapter in a fresh kernel of that venv, top to bottom, as a reader on Colab runs
        it: the chapter's own bootstrap cell clones the book and installs what Colab lacks.
        It reports, per chapter, the cells that raised (a failure, unless the cell's lesson is
        an error) and how the outputs differ from the stored ones, sorted by kind. Outputs are
        not compared strictly: the versions differ from the pinned ones.

One runtime serves all chapters (as when a reader opens chapter after chapter in one Colab
session): the clone, the packages the bootstrap installed and the extension's JIT build are
made by the first chapter and reused by the rest. After the first, chapters run two at a time
(LANES), the longest of the last run first: no output is compared strictly here, so sharing
the CPU changes no verdict, and a build step or kernel start of one overlaps the other's work.
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from packaging.utils import canonicalize_name

from booktools.colab import BOOTSTRAP_TAG, CHAPTER_PACKAGES, colab_pins, freeze_file
from booktools.maintain.notebooks import (
    RAISES_TAG,
    all_notebooks,
    code_cells,
    execute_notebook,
    is_ignored,
)
from booktools.paths import REPO_ROOT

BUILD_DIR = REPO_ROOT / "_build" / "colab"
VENV_DIR = BUILD_DIR / "venv"
KERNEL_NAME = "colab-runtime"
LANES = 2  # chapters run at once after the first
PYTHON_VERSION = "3.13"
SANITIZE_CFG = REPO_ROOT / "tests" / "nbval_sanitize.cfg"
# What the venv needs beyond the freeze's pins to be a runtime at all; the rest of the freeze
# constrains their dependencies. (jedi: IPython 7.34 needs it; Colab's freeze does not list it.)
TOP_LEVEL = ("torch", "torchvision", "numpy", "pandas", "matplotlib", "duckdb", "sqlglot", "filelock",
             "packaging", "setuptools", "PyYAML", "pillow", "ipykernel", "ipython", "jupyter_client", "jedi")


def _python_313() -> str:
    """A Python 3.13 interpreter: $COLAB_PYTHON, pyenv's, or python3.13 on the PATH."""
    candidates = [os.environ.get("COLAB_PYTHON")]
    if shutil.which("pyenv"):
        bare = subprocess.run(["pyenv", "versions", "--bare"], capture_output=True, text=True).stdout.split()
        prefixes = [subprocess.run(["pyenv", "prefix", v], capture_output=True, text=True).stdout.strip()
                    for v in bare if v.startswith(f"{PYTHON_VERSION}.")]
        candidates += [str(Path(p) / "bin" / "python3") for p in prefixes if p]
    candidates.append(shutil.which(f"python{PYTHON_VERSION}"))
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2])"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == str(tuple(map(int, PYTHON_VERSION.split(".")))):
            return candidate
    raise FileNotFoundError(f"no Python {PYTHON_VERSION} found (tried {candidates}): set COLAB_PYTHON to one")


def venv_python() -> Path:
    return VENV_DIR / "bin" / "python"


def _pip(*args: str) -> list[str]:
    return [str(venv_python()), "-m", "pip", "--disable-pip-version-check", *args]


def _pip_install(*args: str) -> list[str]:
    # Byte-compiled at install (pip's default), as make setup does for .venv: where
    # PYTHONDONTWRITEBYTECODE is set, each chapter's kernel would compile torch's modules again.
    return _pip("install", "--quiet", *args)


def _installed() -> str:
    return subprocess.run(_pip("freeze", "--all"), capture_output=True, text=True, check=True).stdout


def make_venv() -> None:
    """Create the venv, or bring it back to what it was made with: a run's bootstrap installs
    into it, and the next run must start from Colab's packages again."""
    freeze = freeze_file()
    stamp, made_with = VENV_DIR / ".colab-freeze", VENV_DIR / ".installed"
    constraints = BUILD_DIR / "constraints.txt"
    start = time.perf_counter()
    if stamp.is_file() and stamp.read_text() == freeze.read_text() and made_with.is_file():
        now, then = _installed(), made_with.read_text()
        if now == then:
            print(f"{VENV_DIR.relative_to(REPO_ROOT)}: as made from {freeze.name}")
            return
        added = {line.split("==")[0] for line in now.splitlines()} - {line.split("==")[0] for line in then.splitlines()}
        if added:
            subprocess.run(_pip("uninstall", "--quiet", "--yes", *sorted(added)), check=True)
        subprocess.run(_pip_install("-c", str(constraints), *TOP_LEVEL), check=True)
        if _installed() != then:
            raise RuntimeError(f"could not restore {VENV_DIR}: remove it and run again")
        print(f"{VENV_DIR.relative_to(REPO_ROOT)}: restored ({', '.join(sorted(added)) or 'versions'}) "
              f"in {time.perf_counter() - start:.0f} s")
        return
    shutil.rmtree(VENV_DIR, ignore_errors=True)
    subprocess.run([_python_313(), "-m", "venv", str(VENV_DIR)], check=True)
    pins = colab_pins()
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in pins.items()))
    subprocess.run(_pip_install(f"pip=={pins['pip']}"), check=True)
    subprocess.run(_pip_install("-c", str(constraints), *TOP_LEVEL), check=True)
    _install_colab_stand_in()
    stamp.write_text(freeze.read_text())
    made_with.write_text(_installed())
    print(f"made {VENV_DIR.relative_to(REPO_ROOT)} from {freeze.name} in {time.perf_counter() - start:.0f} s")


def _install_colab_stand_in() -> None:
    """A `google.colab` module, imported by the kernel at start as on Colab (the bootstrap cell
    looks for it in sys.modules), and the kernel spec that starts such kernels."""
    site = subprocess.run([str(venv_python()), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    stub = BUILD_DIR / "google-colab-stand-in"
    (stub / "google" / "colab").mkdir(parents=True, exist_ok=True)
    (stub / "google" / "colab" / "__init__.py").write_text("# stand-in for Colab's module\n")
    Path(site, "google_colab_stand_in.pth").write_text(f"{stub}\n")
    spec = VENV_DIR / "share" / "jupyter" / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [str(venv_python()), "-c", "import google.colab, sys; from ipykernel.kernelapp import "
                 "launch_new_instance; sys.exit(launch_new_instance())", "-f", "{connection_file}"],
        "display_name": "Python 3 (Colab's packages)", "language": "python",
    }))


# ------------------------------------------------------------------------------ comparing
def _sanitizers() -> list[tuple[re.Pattern, str]]:
    cfg = configparser.ConfigParser()
    cfg.read(SANITIZE_CFG)
    return [(re.compile(cfg[s]["regex"]), cfg[s]["replace"]) for s in cfg.sections()]


def output_text(cell, sanitizers) -> str:
    """A cell's outputs as nbval compares them: text only (images are not compared), sanitized."""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.data.get("text/plain", ""))
        elif out.output_type == "error":
            parts.append(f"{out.ename}: {out.evalue}")
    text = "\n".join(parts)
    for pattern, replacement in sanitizers:
        text = pattern.sub(replacement, text)
    return text


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def difference_kind(stored: str, fresh: str) -> str:
    """same; formatting (only white space differs); numbers (only numbers differ); text."""
    if stored == fresh:
        return "same"
    if " ".join(stored.split()) == " ".join(fresh.split()):
        return "formatting"
    if _NUMBER.sub("#", " ".join(stored.split())) == _NUMBER.sub("#", " ".join(fresh.split())):
        return "numbers"
    return "text"


def _first_difference(stored: str, fresh: str) -> str:
    """The first line that differs, from a little before its first differing character."""
    for a, b in zip(stored.splitlines() + [""] * 99, fresh.splitlines() + [""] * 99):
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            start = max(0, at - 30)
            return f"stored {a[start:start + 80]!r} / Colab {b[start:start + 80]!r}"
    return ""


def compare(stored_nb, fresh_nb) -> dict:
    """The cells that raised, and the other cells sorted by how their outputs differ."""
    sanitizers = _sanitizers()
    report = {"cells": 0, "raised": [], "did_not_raise": [], "not compared": 0,
              "same": 0, "formatting": 0, "numbers": 0, "text": []}
    for i, (old, new) in enumerate(zip(code_cells(stored_nb), code_cells(fresh_nb))):
        report["cells"] += 1
        if BOOTSTRAP_TAG in old.metadata.get("tags", []):  # prints only on Colab
            report["bootstrap"] = output_text(new, [])
            report["not compared"] += 1
            continue
        error = next((o for o in new.get("outputs", []) if o.output_type == "error"), None)
        expects_error = RAISES_TAG in old.metadata.get("tags", [])
        if error is not None and not expects_error:
            report["raised"].append({"cell": i, "error": f"{error.ename}: {error.evalue}"[:300]})
            continue
        if error is None and expects_error:
            report["did_not_raise"].append(i)
            continue
        if is_ignored(old):
            report["not compared"] += 1
            continue
        stored, fresh = output_text(old, sanitizers), output_text(new, sanitizers)
        kind = difference_kind(stored, fresh)
        if kind == "text":
            report["text"].append({"cell": i, "first difference": _first_difference(stored, fresh)})
        else:
            report[kind] += 1
    return report


# ---------------------------------------------------------------------------------- running
def _book_source(workdir: Path) -> str:
    """What the bootstrap clones: this repository; with uncommitted changes, a commit of them."""
    if not subprocess.run(["git", "status", "--porcelain"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=True).stdout.strip():
        return REPO_ROOT.as_uri()
    # A throwaway clone with the working tree committed on top, so the run tests what is here.
    snapshot = workdir / "working-tree"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(REPO_ROOT), str(snapshot)], check=True)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO_ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, (f.decode() for f in files)):
        src, dst = REPO_ROOT / name, snapshot / name
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        elif dst.exists():
            dst.unlink()
    git = ["git", "-c", "user.name=colab-run", "-c", "user.email=colab-run@localhost"]
    subprocess.run([*git, "add", "-A"], cwd=snapshot, check=True)
    subprocess.run([*git, "commit", "--quiet", "--allow-empty", "-m", "working tree"], cwd=snapshot, check=True)
    print("uncommitted changes: the bootstrap clones a snapshot of the working tree")
    return snapshot.as_uri()


# The packages a bootstrap installs on purpose (booktools.colab), by canonical name.
_CHAPTER_PACKAGES = {canonicalize_name(name) for name in CHAPTER_PACKAGES}


def _versions(freeze: str) -> dict[str, str]:
    """{canonical name: version} from the output of `pip freeze`."""
    pairs = (line.partition("==") for line in freeze.splitlines())
    return {canonicalize_name(name): version.strip() for name, sep, version in pairs if sep}


def changed_preinstalled(before: str, after: str) -> list[str]:
    """The packages of the runtime as made (`before`, a freeze) whose version a run changed or
    removed, other than the chapter packages the bootstrap installs on purpose (CHAPTER_PACKAGES):
    on Colab such a change replaces a package that Colab's own code was tested with."""
    old, new = _versions(before), _versions(after)
    return [f"{name} {version} -> {new.get(name, 'removed')}" for name, version in sorted(old.items())
            if name not in _CHAPTER_PACKAGES and new.get(name) != version]


def _preinstalled_constraints() -> Path:
    """Colab's versions of everything but the chapter packages, as pip constraints. Colab has all
    of its freeze installed, this venv only what the chapters need; so that pip, resolving what
    the bootstrap installs, picks Colab's release of a dependency (as it keeps a preinstalled one
    on Colab) instead of the newest."""
    path = BUILD_DIR / "colab-preinstalled.txt"
    path.write_text("".join(f"{name}=={version}\n" for name, version in colab_pins().items()
                            if canonicalize_name(name) not in _CHAPTER_PACKAGES))
    return path


def kernel_environment(content: Path, book_repo: str) -> dict:
    """The kernel's environment: this machine's, minus the book's venv, plus what Colab sets."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "JUPYTER", "MPLBACKEND", "BOOK_SITE"))}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(REPO_ROOT))]
    env.update(
        PATH=os.pathsep.join([str(VENV_DIR / "bin"), *path]),
        BOOK_REPO=book_repo,
        BOOK_DIR=str(content / "book"),
        # The CPU kernels show the extension builds and loads; nvcc would add minutes per build.
        MYLINEAROPS_CUDA="0",
        PIP_CONFIG_FILE=os.devnull,  # pip as on Colab: PyPI, not this machine's settings
        PIP_CONSTRAINT=str(_preinstalled_constraints()),
        # Two chapters share the cores (LANES): OpenMP threads sleep at a barrier instead of
        # spinning on a core the other kernel's threads need; torch.compile compiles in the
        # kernel's process instead of starting a pool of workers. Scheduling only; no result changes.
        OMP_WAIT_POLICY="PASSIVE",
        TORCHINDUCTOR_COMPILE_THREADS="1",
    )
    return env


def run(chapters: list[Path]) -> int:
    from jupyter_client.kernelspec import KernelSpecManager

    make_venv()
    workdir = BUILD_DIR / "runtime"
    shutil.rmtree(workdir, ignore_errors=True)
    content = workdir / "content"  # Colab's working directory
    content.mkdir(parents=True)
    env = kernel_environment(content, _book_source(workdir))
    specs = KernelSpecManager(kernel_dirs=[str(VENV_DIR / "share" / "jupyter" / "kernels")])
    versions = subprocess.run(
        [str(venv_python()), "-c", "import sys, torch, pandas, numpy; print(sys.version.split()[0], "
         "torch.__version__, pandas.__version__, numpy.__version__)"], capture_output=True, text=True, env=env)
    print(f"Colab runtime ({freeze_file().name}): Python, torch, pandas, numpy = {versions.stdout.strip()}")

    def run_one(path: Path) -> dict:
        start = time.perf_counter()
        fresh = execute_notebook(path, kernel_name=KERNEL_NAME, kernel_specs=specs, cwd=content, env=env,
                                 stop_on_error=False)
        report = compare(nbformat.read(path, as_version=4), fresh)
        report["seconds"] = round(time.perf_counter() - start, 1)
        _print_chapter(path.stem, report)
        return report

    # The first chapter alone: its bootstrap clones the book and installs into the venv.
    first, rest = chapters[:1], _longest_first(chapters[1:])
    reports = {path.stem: run_one(path) for path in first}
    with ThreadPoolExecutor(LANES) as lanes:
        reports |= dict(zip((p.stem for p in rest), lanes.map(run_one, rest)))
    changed = changed_preinstalled((VENV_DIR / ".installed").read_text(), _installed())
    if changed:
        print("CHANGED Colab's own packages (the bootstraps may only add, or raise a chapter package):",
              ", ".join(changed))
    failed = bool(changed) or any(r["raised"] or r["did_not_raise"] for r in reports.values())
    reports = dict(sorted(reports.items()))
    (BUILD_DIR / "report.json").write_text(json.dumps(reports, indent=1))
    print(f"{len(chapters)} chapters; report: {(BUILD_DIR / 'report.json').relative_to(REPO_ROOT)}")
    return 1 if failed else 0


def _longest_first(chapters: list[Path]) -> list[Path]:
    """By the seconds each took in the last run's report (unknown ones first, in their order)."""
    try:
        last = {name: r["seconds"] for name, r in json.loads((BUILD_DIR / "report.json").read_text()).items()}
    except (OSError, ValueError, KeyError, TypeError):
        last = {}
    return sorted(chapters, key=lambda p: -last.get(p.stem, float("inf")))


def _print_chapter(name: str, r: dict) -> None:
    """One print per chapter, so that two lanes' reports do not interleave."""
    lines = [f"{name}: {r['cells']} cells in {r['seconds']:.0f} s; raised {len(r['raised'])}; outputs: "
             f"same {r['same']}, formatting {r['formatting']}, numbers {r['numbers']}, text {len(r['text'])}, "
             f"not compared {r['not compared']}"]
    if r.get("bootstrap", "").strip():
        lines.append(f"  bootstrap: {r['bootstrap'].strip()}")
    lines += [f"  RAISED cell {e['cell']}: {e['error']}" for e in r["raised"]]
    lines += [f"  DID NOT RAISE cell {i} (its lesson is an error)" for i in r["did_not_raise"]]
    lines += [f"  text differs, cell {t['cell']}: {t['first difference']}" for t in r["text"]]
    print("\n".join(lines), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.maintain.colab_runtime", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["venv", "run"])
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    if args.command == "venv":
        make_venv()
        return 0
    paths = [p.resolve() for p in args.notebooks] or all_notebooks()
    for p in paths:
        if p.suffix != ".ipynb" or not p.is_file():
            parser.error(f"not a notebook file: {p}")
    return run(paths)


if __name__ == "__main__":
    sys.exit(main())
