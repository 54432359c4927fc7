"""Maintain the committed notebooks: `python -m booktools.nbtools {sync,refresh,check} [NOTEBOOK ...]`.

- sync:    make the first code cell of every notebook the Colab bootstrap cell for the
           repository URL in _config.yml.
- refresh: re-execute notebooks and store their outputs. It starts the kernel exactly as
           `pytest --nbval --nbval-current-env` does (same kernel spec, working directory and
           message handling), so what is stored is what nbval will compare against.
- check:   static rules every committed notebook must follow (see `problems`).

With no NOTEBOOK arguments, every notebook in chapters/ is processed.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import nbformat

from booktools.colab import BOOTSTRAP_TAG, bootstrap_cell_source
from booktools.paths import CHAPTERS_DIR, REPO_ROOT, repository_url

IGNORE_TAGS = {"nbval-ignore-output", "nbval-skip"}
RAISES_TAG = "raises-exception"
MAX_IGNORED_SHARE = 0.10
CELL_TIMEOUT_S = 600


def all_notebooks() -> list[Path]:
    return sorted(p for p in CHAPTERS_DIR.glob("*.ipynb"))


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def is_ignored(cell) -> bool:
    tags = set(cell.metadata.get("tags", []))
    return bool(tags & IGNORE_TAGS) or bool(re.search(r"#\s*NBVAL_(IGNORE_OUTPUT|SKIP)", cell.source))


# --------------------------------------------------------------------------------------- sync
def sync_bootstrap(nb, source: str) -> bool:
    """Put the bootstrap cell first (replacing an older one). Returns True if the notebook changed."""
    cells = code_cells(nb)
    first = cells[0] if cells else None
    if first is not None and BOOTSTRAP_TAG in first.metadata.get("tags", []):
        if first.source == source:
            return False
        first.source = source
        return True
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": [BOOTSTRAP_TAG]})
    # After the title cell, so the page still starts with its heading.
    at = 1 if nb.cells and nb.cells[0].cell_type == "markdown" else 0
    nb.cells.insert(at, cell)
    return True


# ------------------------------------------------------------------------------------ refresh
def _collect_outputs(kernel, msg_id, timeout):
    """Mirror of nbval's IPyNbCell.runtest message loop (nbval 0.11): same kept messages,
    clear_output ignored, streams coalesced."""
    from nbformat import NotebookNode
    from nbval.plugin import coalesce_streams

    kernel.await_reply(msg_id, timeout=timeout)
    outs, error = [], None
    while True:
        msg = kernel.get_message(stream="iopub", timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        msg_type, content = msg["msg_type"], msg["content"]
        if msg_type == "status" and content["execution_state"] == "idle":
            break
        if msg_type in ("display_data", "execute_result"):
            out = NotebookNode(output_type=msg_type, metadata=content["metadata"], data=content["data"])
            if msg_type == "execute_result":
                out.execution_count = content["execution_count"]
            outs.append(out)
        elif msg_type == "stream":
            outs.append(NotebookNode(output_type="stream", name=content["name"], text=content["text"]))
        elif msg_type == "error":
            error = NotebookNode(
                output_type="error",
                ename=content["ename"],
                evalue=content["evalue"],
                traceback=content["traceback"],
            )
            outs.append(error)
    return coalesce_streams(outs), error


def execute_notebook(path: Path, timeout: int = CELL_TIMEOUT_S) -> nbformat.NotebookNode:
    """Execute `path` as nbval would and return the notebook with fresh outputs."""
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, RunningKernel

    nb = nbformat.read(path, as_version=4)
    kernel = RunningKernel(CURRENT_ENV_KERNEL_NAME, cwd=str(path.parent))
    try:
        count = 0
        for cell in code_cells(nb):
            if "nbval-skip" in cell.metadata.get("tags", []):
                continue
            count += 1
            msg_id = kernel.execute_cell_input(cell.source, allow_stdin=False)
            outputs, error = _collect_outputs(kernel, msg_id, timeout)
            cell.outputs = outputs
            cell.execution_count = count
            for out in outputs:
                if out.output_type == "execute_result":
                    out.execution_count = count
            if error is not None and RAISES_TAG not in cell.metadata.get("tags", []):
                tb = "\n".join(error.traceback)
                raise RuntimeError(f"{path.name}: cell {count} raised {error.ename}: {error.evalue}\n{tb}")
    finally:
        kernel.stop()
    nb.metadata.pop("widgets", None)
    return nb


def refresh(paths: list[Path]) -> None:
    source = bootstrap_cell_source(repository_url())
    for path in paths:
        start = time.perf_counter()
        nb = nbformat.read(path, as_version=4)
        if sync_bootstrap(nb, source):
            nbformat.write(nb, path)
        nb = execute_notebook(path)
        nbformat.validate(nb)
        nbformat.write(nb, path)
        print(f"refreshed {path.relative_to(REPO_ROOT)} in {time.perf_counter() - start:.1f} s")


# -------------------------------------------------------------------------------------- check
# A measured figure typed into prose: a speed, a bandwidth, a clock, a time, a cache or
# memory size, a ratio ("1.6x", "2×") or a share ("75%"). Such numbers must come from the
# run's outputs (myst-nb `{glue:text}` roles) or be read in a cell from a named results file.
_MEASURED_FIGURE = re.compile(
    r"\d[\d.,]*\s*(GFLOP/s|TFLOP/s|FLOP/s|GB/s|MB/s|GHz|MHz|FLOPs? per cycle|ms|µs|us|ns|s|seconds|minutes"
    r"|KB|KiB|MB|MiB|GB|GiB)\b"
    r"|\d+(\.\d+)?\s*[x×](?!\s*\d)(?=[\s,.;:)]|$)"
    r"|\d+(\.\d+)?\s*%"
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
    return bad


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.nbtools", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["sync", "refresh", "check"])
    parser.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or all_notebooks()
    for p in paths:
        if p.suffix != ".ipynb" or not p.is_file():
            parser.error(f"not a notebook file: {p}")
    if args.command == "sync":
        source = bootstrap_cell_source(repository_url())
        for path in paths:
            nb = nbformat.read(path, as_version=4)
            if sync_bootstrap(nb, source):
                nbformat.write(nb, path)
                print(f"updated the bootstrap cell of {path.relative_to(REPO_ROOT)}")
        return 0
    if args.command == "refresh":
        refresh(paths)
        return 0
    return 1 if check(paths) else 0


if __name__ == "__main__":
    sys.exit(main())
