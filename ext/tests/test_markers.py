"""The book shows excerpts of the sources between `[book:NAME]` and
`[/book:NAME]` comments. Every marker must be closed, unique, and listed in
ext/README.md, so a chapter never silently shows the wrong code."""

from __future__ import annotations

import re
from pathlib import Path
from conftest import EXT_DIR

MARKER = re.compile(r"\[(/?)book:([a-z0-9-]+)\]")
SOURCES = sorted(
    [p for pattern in ("csrc/**/*.cpp", "csrc/**/*.h", "csrc/**/*.cu", "csrc/**/*.cuh") for p in EXT_DIR.glob(pattern)]
    + list(EXT_DIR.glob("mylinearops/*.py"))
)


def markers() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in SOURCES:
        open_name = None
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for closing, name in MARKER.findall(line):
                where = f"{path.relative_to(EXT_DIR)}:{lineno}"
                if not closing:
                    assert open_name is None, f"{where}: [book:{name}] opened inside [book:{open_name}]"
                    assert name not in found, f"{where}: marker {name} also in {found[name]}"
                    open_name = name
                    found[name] = path.relative_to(EXT_DIR)
                else:
                    assert open_name == name, f"{where}: [/book:{name}] closes {open_name!r}"
                    open_name = None
        assert open_name is None, f"{path}: [book:{open_name}] never closed"
    return found


def test_markers_balanced_and_listed_in_readme():
    found = markers()
    assert len(found) >= 10
    readme = (EXT_DIR / "README.md").read_text()
    listed = dict(re.findall(r"^\| `([a-z0-9-]+)` \| `([^`]+)` \|", readme, flags=re.M))
    assert set(listed) == set(found), f"README lists {sorted(listed)}, sources have {sorted(found)}"
    for name, path in found.items():
        assert listed[name] == str(path), f"README says {name} is in {listed[name]}, it is in {path}"
