"""Shared helpers for the mylinearops tests.

The tests import the installed package (``pip install --no-build-isolation
./ext``); to test a JIT build of a source checkout instead, run with
``MYLINEAROPS_JIT=1 PYTHONPATH=ext``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import mylinearops

EXT_DIR = Path(__file__).resolve().parent.parent  # the extension's source tree
CPU_ALGOS = mylinearops.available_algos("cpu")
CUDA_ALGOS = tuple(a for a in mylinearops.ALGOS["cuda"])

# The stable-ABI build (MYLINEAROPS_ABI=stable): only std::exception crosses that ABI, so
# where the regular build raises TypeError or ValueError from C++, it raises RuntimeError
# (same message). Errors raised in Python (ops.py) keep their type in both builds.
STABLE_ABI = mylinearops.build_info()["abi"] == "stable"


def cpp_error(declared: type[BaseException]) -> type[BaseException]:
    """The exception type a C++ check declared as ``declared`` reaches Python as."""
    return RuntimeError if STABLE_ABI else declared


def either_error(declared: type[BaseException]) -> tuple[type[BaseException], ...]:
    """For pytest.raises where a case may fail in Python (keeps its type) or in C++."""
    return (declared, RuntimeError) if STABLE_ABI else (declared,)


HAS_GPU = torch.cuda.is_available()
HAS_CUDA_KERNELS = bool(mylinearops.build_info()["with_cuda"])
requires_gpu = pytest.mark.skipif(
    not (HAS_GPU and HAS_CUDA_KERNELS),
    reason="needs a CUDA GPU and a CUDA build of mylinearops"
    + ("" if HAS_GPU else " (no GPU visible: torch.cuda.is_available() is False)")
    + ("" if HAS_CUDA_KERNELS else " (this build has no CUDA kernels)"),
)


def reference(A: torch.Tensor, B: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """A @ B (+ bias) computed by torch in float64, on the CPU."""
    out = A.detach().cpu().double() @ B.detach().cpu().double()
    if bias is not None:
        out = out + bias.detach().cpu().double()
    return out


def assert_close_to_reference(out: torch.Tensor, expected: torch.Tensor, k: int) -> None:
    """float32 accumulates rounding error roughly with sqrt(k); float64 is near exact."""
    assert out.dtype in (torch.float32, torch.float64)
    if out.dtype == torch.float32:
        atol, rtol = 1e-5 * max(1, k) ** 0.5 * 4, 1e-5
    else:
        atol, rtol = 1e-12 * max(1, k), 1e-12
    torch.testing.assert_close(out.detach().cpu().double(), expected, atol=atol, rtol=rtol)


def pytest_configure(config):
    # also when the tests run outside the book (a scratch build): `make test-fast` leaves these out
    config.addinivalue_line("markers", "slow: builds or compiles something (left out by make test-fast)")


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
