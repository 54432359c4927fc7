"""Show real source code in a chapter, so what the reader sees cannot drift from what runs.

`show_source` returns an `IPython.display.Code` object: highlighted on the website and in
Jupyter, and its text is the source itself, so nbval compares it with the file on every run.
Excerpts of a file are delimited by marker comments on lines of their own:

    // [book:cuda-naive-kernel]
    ...the excerpt...
    // [/book:cuda-naive-kernel]
"""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path

from booktools.paths import REPO_ROOT

LANGUAGES = {".py": "python", ".cpp": "cpp", ".h": "cpp", ".cu": "cuda", ".cuh": "cuda",
             ".txt": "text", ".cmake": "cmake", ".toml": "toml", ".yml": "yaml", ".yaml": "yaml"}


def excerpt(path: str | Path, marker: str) -> str:
    """The lines between `[book:marker]` and `[/book:marker]` in the file, dedented."""
    path = Path(path)
    if not path.is_absolute():
        path = REPO_ROOT / path
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if re.search(rf"\[book:{re.escape(marker)}\]", line)]
    ends = [i for i, line in enumerate(lines) if re.search(rf"\[/book:{re.escape(marker)}\]", line)]
    if len(starts) != 1 or len(ends) != 1 or ends[0] <= starts[0]:
        raise ValueError(
            f"{path.relative_to(REPO_ROOT)}: expected one [book:{marker}] ... [/book:{marker}] pair, "
            f"found {len(starts)} start and {len(ends)} end markers"
        )
    body = [line for line in lines[starts[0] + 1 : ends[0]] if not re.search(r"\[/?book:[\w.-]+\]", line)]
    return textwrap.dedent("\n".join(body)).strip("\n")


def show_source(target, marker: str | None = None, language: str | None = None):
    """Display a Python object's source, a whole file, or a marked excerpt of a file.

    target: a class or function, or a path (relative to the repository root) to a file.
    """
    from IPython.display import Code

    if isinstance(target, (str, Path)):
        path = Path(target)
        text = excerpt(path, marker) if marker else (REPO_ROOT / path).read_text(encoding="utf-8").strip("\n")
        language = language or LANGUAGES.get(path.suffix, "text")
    else:
        if marker is not None:
            raise ValueError("marker= applies to files, not to Python objects")
        text = textwrap.dedent(inspect.getsource(target)).strip("\n")
        language = language or "python"
    return Code(text, language=language)
