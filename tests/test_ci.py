"""What CI's passes rely on: which chapters the capped notebook runs may leave out (checked
against the chapters themselves), and an environment whose modules are byte-compiled."""

import importlib.util
import re
import subprocess
from pathlib import Path

import torch

from booktools.paths import CHAPTERS_DIR, REPO_ROOT

# What the caps change: PyTorch's CPU kernels, MKL, oneDNN and mylinearops, all reached
# through these imports (numpy's OpenBLAS is not capped).
USES_CAPPED_KERNELS = re.compile(r"\b(import|from) (torch|torchvision|mylinearops)\b")


def test_capped_runs_leave_out_only_chapters_without_torch():
    listed = subprocess.run(
        ["make", "--no-print-directory", "-s", "print-cpu-kernel-chapters"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()
    capped = {REPO_ROOT / path for path in listed}
    every = set(CHAPTERS_DIR.glob("*.ipynb"))
    assert capped <= every and capped, listed
    for chapter in sorted(every - capped):
        assert not USES_CAPPED_KERNELS.search(chapter.read_text(encoding="utf-8")), (
            f"{chapter.name} uses torch or mylinearops, so its outputs can depend on the CPU's "
            "kernels: add it to CPU_KERNEL_CHAPTERS in the Makefile"
        )
    for chapter in sorted(capped):  # and the list wastes no run on a chapter the caps cannot change
        assert USES_CAPPED_KERNELS.search(chapter.read_text(encoding="utf-8")), chapter.name


def test_the_book_environment_is_byte_compiled():
    """make setup byte-compiles what it installs (pip's default). Where PYTHONDONTWRITEBYTECODE
    is set, as on the machines this book is built on, nothing else stores it: each of make test's
    processes compiled torch's modules again (import torch, torchvision: 5.8 s, against 3.0 s)."""
    package = Path(torch.__file__).parent
    missing = [path.name for path in sorted(package.glob("*.py"))
               if not Path(importlib.util.cache_from_source(str(path))).is_file()]
    assert missing == [], (
        f"torch's modules without cached bytecode (installed with pip's --no-compile?): {missing}; "
        f"`python -m compileall -q {package.parent}` compiles them"
    )
