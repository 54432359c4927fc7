"""pytest plugin (pytest.ini loads it): the longest test files start first, the tests that
reuse a chapter's builds last, and with `--durations`, the slowest files are listed too.

`make test` spreads whole files over two workers (pytest-xdist, `--dist loadfile
--no-loadscope-reorder`), handing them out in collection order. A file that takes minutes and
starts last keeps one worker busy while the other has nothing left to do; started first, it
runs beside the many short files. The order of the files not listed, and of the tests inside
every file (a notebook's cells), is unchanged.
"""

from __future__ import annotations

from collections import defaultdict

# Wall seconds per file in `make test` on a fresh 2-core machine (both workers busy), longest
# first; files under about 30 s keep their collection order after these. `--durations=N` prints
# the current figures (the "slowest files" table) when this list needs updating.
LONGEST_FIRST = (
    "chapters/data_to_deployment.ipynb",  # 194 s: training, AOTInductor, a C++ build
    "chapters/building_and_testing.ipynb",  # 112 s: a JIT build
    "chapters/shipping_the_extension.ipynb",  # 87 s (more if `make wheel` did not run first)
    "chapters/making_kernels_fast.ipynb",  # 79 s: benchmarks
    "tests/test_site.py",  # 49 s: a browser opens every page (and builds the site where make book did not)
    "chapters/writing_the_extension.ipynb",
    "chapters/resnet.ipynb",
    "chapters/when_to_write_an_op.ipynb",
    "chapters/alexnet.ipynb",
    "chapters/setup.ipynb",
)
# Tests that use what a chapter above builds (the same wheels and C++ programs, each built once
# under a lock): started last, they find it built instead of waiting for the lock
# (test_shipping waited 144 s for the chapter's wheels when both started first).
AFTER_THE_CHAPTERS = (
    "tests/test_cpp_inference.py",
    "tests/test_shipping.py",
)


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items):
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    rank.update({path: len(LONGEST_FIRST) + 1 + i for i, path in enumerate(AFTER_THE_CHAPTERS)})
    items.sort(key=lambda item: rank.get(_file_of(item.nodeid), len(LONGEST_FIRST)))  # stable sort


def pytest_terminal_summary(terminalreporter, config):
    count = config.getoption("durations", None)
    if count is None:
        return
    seconds: dict[str, float] = defaultdict(float)
    for reports in terminalreporter.stats.values():
        for report in reports:
            if hasattr(report, "duration") and hasattr(report, "nodeid") and report.nodeid:
                seconds[_file_of(report.nodeid)] += report.duration
    slowest = sorted(seconds.items(), key=lambda kv: -kv[1])[: count or None]
    terminalreporter.write_sep("=", f"slowest {len(slowest)} files (setup, call and teardown)")
    for path, total in slowest:
        terminalreporter.write_line(f"{total:8.1f}s  {path}")
