"""The CUDA kernels' logic, checked without a GPU.

tests/cuda_emulator/ compiles csrc/cuda/matmul_kernels.cuh as plain C++
against a tiny CUDA shim (threads are coroutines, __syncthreads a scheduler
barrier, phases run in forward and reverse thread order) and compares every
kernel, dtype and operand layout with a float64 reference. It catches
indexing, bounds, layout-dispatch and missing-barrier bugs; timing and the
hardware memory model still need a real GPU (test_cuda.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # compiles the emulator: not in make test-fast

HERE = Path(__file__).resolve().parent


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the emulator uses glibc's ucontext")
def test_cuda_kernels_on_cpu_emulator(tmp_path):
    cxx = os.environ.get("CXX", "c++")
    if shutil.which(cxx) is None:
        pytest.skip(f"no C++ compiler ({cxx})")
    exe = tmp_path / "run_kernels"
    build = subprocess.run(
        [cxx, "-std=c++20", "-O1", "-Wall", "-Wno-unknown-pragmas", "-o", str(exe), str(HERE / "cuda_emulator" / "run_kernels.cpp")],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    assert run.stdout.strip().endswith(" 0 failures"), run.stdout[-2000:]
