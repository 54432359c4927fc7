"""What the capped notebook runs may leave out, checked against the chapters themselves."""

import re
import subprocess

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
