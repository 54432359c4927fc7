"""The static rules every committed notebook follows (`make check`): bootstrap cell, execution
counts, table of contents, exempt-output share, exercises paired with solutions, figures with alt
text, provenance, no measured figure typed into prose, generated modules up to date."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from booktools.colab import bootstrap_cell_source
from booktools.maintain.notebooks import (
    MAX_IGNORED_SHARE,
    RAISES_TAG,
    code_cells,
    is_ignored,
    stale_exports,
)
from booktools.paths import REPO_ROOT, repository_url

# -------------------------------------------------------------------------------------- check
# A measured figure typed into prose: a speed, a bandwidth, a clock, a time, a cache or
# memory size, a ratio ("1.6x", "2×") or a share ("75%"). Such numbers must come from the
# run's outputs (myst-nb `{glue:text}` roles) or be read in a cell from a named results file.
_MEASURED_FIGURE = re.compile(
    r"\d[\d.,]*\s*(GFLOP/s|TFLOP/s|FLOP/s|GB/s|MB/s|GHz|MHz|FLOPs? per cycle|ms|µs|us|ns|s|seconds|minutes"
    r"|KB|KiB|MB|MiB|GB|GiB)\b"
    r"|\d+(\.\d+)?\s*[x×](?!\s*\d)(?=[\s,.;:)]|$)"
    r"|\d+(\.\d+)?\s*%"
    # comparisons and widths that are hardware facts just as much as a GFLOP/s figure
    r"|\b(?:twofold|threefold|fourfold|twice as (?:fast|slow|many)|half as (?:fast|slow)|\d+ times (?:faster|slower))\b"
    r"|\b\d+-bit (?:FMA|vector|SIMD|execution|data ?path|pipes?|units?)\b",
    re.I,
)
# What may legitimately hold such text: glue roles, math, code spans and blocks, link targets.
_NOT_PROSE = re.compile(r"\{glue(:\w+)?\}`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|```.*?```|`[^`]*`|\]\([^)]*\)", re.S)


def typed_figures(nb) -> list[str]:
    """Lines of markdown that state a measured figure in prose instead of gluing it."""
    found = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for line in _NOT_PROSE.sub(" ", cell.source).splitlines():
            if line.lstrip().startswith(">"):  # a quotation (the notes' own claims), not ours
                continue
            match = _MEASURED_FIGURE.search(line)
            if match:
                found.append(f"cell {i}: ...{line[max(0, match.start() - 40):match.end() + 20].strip()}...")
    return found


# Exercises (sphinx-exercise): every `{exercise}` has a gated, collapsed solution with the same
# label right after it, so that its code cells run (and are compared) with the chapter.
_EXERCISE_LABEL = re.compile(r"^(?::::|```)\{exercise\}[^\n]*\n:label:\s*(\S+)", re.M)
_SOLUTION_START = re.compile(r"^```\{solution-start\}\s+(\S+)\s*\n((?::\w+:[^\n]*\n)*)", re.M)
_SOLUTION_END = re.compile(r"^```\{solution-end\}", re.M)


def exercise_labels(nb) -> list[str]:
    return [m.group(1) for cell in nb.cells if cell.cell_type == "markdown"
            for m in _EXERCISE_LABEL.finditer(cell.source)]


def exercise_problems(nb, stem: str) -> list[str]:
    """Exercises without a solution, solutions without an exercise, unclosed or open solutions."""
    found, pending, open_solution = [], [], None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for label in (m.group(1) for m in _EXERCISE_LABEL.finditer(cell.source)):
            if not label.startswith(f"{stem}-"):
                found.append(f"cell {i}: exercise label {label!r} does not start with the chapter name {stem!r}-")
            pending.append(label)
        start = _SOLUTION_START.search(cell.source)
        if start:
            label, options = start.groups()
            if open_solution:
                found.append(f"cell {i}: solution {label!r} starts inside solution {open_solution!r}")
            if label not in pending:
                found.append(f"cell {i}: solution {label!r} follows no exercise of that label")
            else:
                pending.remove(label)
            if ":class: dropdown" not in options:
                found.append(f"cell {i}: solution {label!r} is not collapsed (`:class: dropdown`)")
            open_solution = label
        if _SOLUTION_END.search(cell.source):
            if not open_solution:
                found.append(f"cell {i}: solution-end without a solution-start")
            open_solution = None
    if open_solution:
        found.append(f"solution {open_solution!r} is never closed with solution-end")
    found += [f"exercise {label!r} has no worked solution" for label in pending]
    return found


# `show_source` is for what must live outside notebooks (ext/ sources, CMake files, PyTorch's
# own code); lesson code from booktools belongs in the chapter's cells.
_SHOW_SOURCE_ARG = re.compile(r"show_source\(\s*([^,)\s]+)")
_FROM_BOOKTOOLS = re.compile(r"^\s*from\s+(booktools[\w.]*)\s+import\s+\(?([^)\n]+)", re.M)
_IMPORT_BOOKTOOLS = re.compile(r"^\s*import\s+(booktools[\w.]*)(?:\s+as\s+(\w+))?", re.M)


def booktools_code_shown(nb) -> list[str]:
    """`show_source` calls that display code from booktools (a path or an imported name)."""
    names = {"booktools"}
    for cell in code_cells(nb):
        for module, imported in _FROM_BOOKTOOLS.findall(cell.source):
            for item in imported.split(","):
                name = item.split(" as ")[-1].strip().strip("()\\ ")
                if name and not (module == "booktools.source" and name == "show_source"):
                    names.add(name)
        for module, alias in _IMPORT_BOOKTOOLS.findall(cell.source):
            names.add(alias or module.split(".")[0])
    found = []
    for i, cell in enumerate(code_cells(nb), 1):
        for arg in _SHOW_SOURCE_ARG.findall(cell.source):
            path = arg.strip("\"'")
            if arg[0] in "\"'" and (path.startswith("booktools/") or "/booktools/" in path):
                found.append(f"code cell {i}: show_source({arg})")
            elif arg[0] not in "\"'" and arg.split(".")[0] in names:
                found.append(f"code cell {i}: show_source({arg}) displays code defined in booktools")
    return found


def problems(path: Path, toc_text: str, bootstrap_source: str) -> list[str]:
    """What is wrong with one committed notebook, as readable sentences."""
    nb = nbformat.read(path, as_version=4)
    found = []
    name = path.relative_to(REPO_ROOT).with_suffix("").as_posix()
    if f"file: {name}\n" not in toc_text + "\n":
        found.append(f"{name} is not listed in _toc.yml")
    cells = code_cells(nb)
    if not cells or cells[0].source != bootstrap_source:
        found.append("the first code cell is not the current Colab bootstrap cell (run `make sync`)")
    elif cells[0].outputs:
        found.append("the bootstrap cell has output; outside Colab it must print nothing")
    for i, cell in enumerate(cells, 1):
        if cell.source.strip() and cell.execution_count is None:
            found.append(f"code cell {i} has no execution count, so nbval would not check it")
        for out in cell.outputs:
            if out.output_type == "error" and RAISES_TAG not in cell.metadata.get("tags", []):
                found.append(f"code cell {i} stores an error but is not tagged {RAISES_TAG}")
        shows_figure = any("image/png" in out.get("data", {}) or "image/svg+xml" in out.get("data", {})
                           for out in cell.outputs)
        if shows_figure and not cell.metadata.get("mystnb", {}).get("image", {}).get("alt"):
            found.append(f"code cell {i} shows a figure without alt text (cell metadata mystnb.image.alt)")
    if not nb.metadata.get("book", {}).get("provenance"):
        found.append("no provenance record of the run that produced the outputs (run `make notebook`)")
    found += exercise_problems(nb, path.stem)
    ignored = sum(is_ignored(c) for c in cells)
    if cells and ignored / len(cells) > MAX_IGNORED_SHARE:
        found.append(f"{ignored} of {len(cells)} code cells are exempt from output comparison (max 10%)")
    return found


def check(paths: list[Path]) -> int:
    toc_text = (REPO_ROOT / "_toc.yml").read_text(encoding="utf-8")
    source = bootstrap_cell_source(repository_url())
    bad = 0
    for path in paths:
        for problem in problems(path, toc_text, source):
            print(f"{path.relative_to(REPO_ROOT)}: {problem}")
            bad += 1
    for problem in stale_exports():
        print(problem)
        bad += 1
    return bad


