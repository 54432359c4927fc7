"""The checkers of making_kernels_fast accept a right answer and reject wrong ones."""

from __future__ import annotations

import pytest
import torch

from booktools.checkers import CheckFailed
from booktools.checkers import making_kernels_fast as checks

def blocked_right(A, B, kc, mc, nc):
    m, k = A.shape
    n = B.shape[1]
    C = torch.zeros(m, n, dtype=A.dtype)
    for p0 in range(0, k, kc):
        for j0 in range(0, n, nc):
            for i0 in range(0, m, mc):
                C[i0:i0 + mc, j0:j0 + nc] += A[i0:i0 + mc, p0:p0 + kc] @ B[p0:p0 + kc, j0:j0 + nc]
    return C

def blocked_drops_edges(A, B, kc, mc, nc):
    # only whole blocks: the classic bug when a size is not a multiple of the block
    m, k = A.shape
    n = B.shape[1]
    C = torch.zeros(m, n, dtype=A.dtype)
    for p0 in range(0, k - kc + 1, kc):
        for j0 in range(0, n, nc):
            for i0 in range(0, m, mc):
                C[i0:i0 + mc, j0:j0 + nc] += A[i0:i0 + mc, p0:p0 + kc] @ B[p0:p0 + kc, j0:j0 + nc]
    return C

def test_blocked_matmul_checker(capsys):
    checks.check_blocked_matmul(blocked_right)
    assert "passed" in capsys.readouterr().out

@pytest.mark.parametrize(
    "wrong, message",
    [
        (blocked_drops_edges, "not multiples of the blocks"),
        (lambda A, B, kc, mc, nc: (A @ B).T, "expected shape"),
        (lambda A, B, kc, mc, nc: blocked_right(A, B, kc, mc, nc).float().double(), "off by up to"),
    ],
)
def test_blocked_matmul_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_blocked_matmul(wrong)

def test_blocked_matmul_checker_catches_uninitialised_output():
    torch.manual_seed(0)
    with pytest.raises(CheckFailed, match=r"k = 0|off by"):
        for _ in range(3):      # empty() may happen to return zeros; fill the allocator with garbage first
            torch.full((64,), 7.0, dtype=torch.float64)
            checks.check_blocked_matmul(
                lambda A, B, kc, mc, nc: torch.full((A.shape[0], B.shape[1]), 1.0, dtype=A.dtype)
                if A.shape[1] == 0 else blocked_right(A, B, kc, mc, nc))

def test_tile_load_sectors_checker(capsys):
    checks.check_tile_load_sectors(lambda size, b_transposed: (4, 32 if b_transposed else 4))
    assert "passed" in capsys.readouterr().out

@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda size, b_transposed: (4, 4), "B = W.mT"),        # forgets the transposed layout
        (lambda size, b_transposed: (32, 4), "B row-major"),    # swaps which index walks A
        (lambda size, b_transposed: None, "not two numbers"),
    ],
)
def test_tile_load_sectors_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_tile_load_sectors(wrong)
