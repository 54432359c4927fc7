"""Checkers for the exercises of chapters/making_kernels_fast.ipynb."""

from __future__ import annotations

import torch

from booktools.checkers import fail, passed


def check_blocked_matmul(blocked_matmul) -> None:
    """`blocked_matmul(A, B, kc, mc, nc) -> C` must compute A @ B block by block, for any block
    sizes: blocks that do not divide the matrix, blocks larger than it, a single row or column,
    k = 0 (C is zeros), empty outputs, and transposed inputs. Compared with torch.mm in float64,
    where the order of the additions changes the result by far less than the tolerance."""
    exercise = "making_kernels_fast, blocked matmul"
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    cases = [
        ((64, 48, 32), (16, 16, 16), "sizes that are multiples of the blocks"),
        ((37, 50, 29), (8, 16, 12), "sizes that are not multiples of the blocks"),
        ((7, 5, 3), (64, 64, 64), "blocks larger than the matrices"),
        ((1, 33, 17), (4, 8, 4), "a single row of A (1 x k)"),
        ((19, 23, 1), (5, 6, 2), "a single column of B (n = 1)"),
        ((9, 1, 11), (2, 3, 4), "k = 1"),
        ((6, 0, 5), (2, 2, 2), "k = 0 (C must be zeros)"),
        ((0, 7, 5), (2, 2, 2), "m = 0"),
        ((12, 9, 7), (1, 1, 1), "blocks of 1"),
    ]
    for (m, k, n), (kc, mc, nc), what in cases:
        A, B = randn(m, k), randn(k, n)
        for A_in, B_in, layout in ((A, B, ""), (A.T.contiguous().T, B.T.contiguous().T, ", transposed views")):
            try:
                C = blocked_matmul(A_in, B_in, kc, mc, nc)
            except Exception as error:  # report whatever the reader's code raised
                fail(exercise, f"failed for A {m}x{k}, B {k}x{n}, kc={kc} mc={mc} nc={nc} ({what}{layout}): "
                               f"{type(error).__name__}: {error}")
            expected = A @ B
            if not isinstance(C, torch.Tensor) or tuple(C.shape) != (m, n):
                fail(exercise, f"for A {m}x{k}, B {k}x{n} ({what}) it returned "
                               f"{getattr(C, 'shape', C)!r}, expected shape ({m}, {n})")
            if not torch.allclose(C, expected, rtol=1e-10, atol=1e-10):
                worst = (C - expected).abs().max().item()
                fail(exercise, f"wrong result for A {m}x{k}, B {k}x{n}, kc={kc} mc={mc} nc={nc} "
                               f"({what}{layout}): off by up to {worst:.3g}")
    passed(exercise, f"equals torch.mm on {2 * len(cases)} shapes, block sizes and layouts")


def _reference_tile_loads(size: int, b_transposed: bool, tile: int = 32, warp: int = 32,
                          sector_bytes: int = 32, nbytes: int = 4) -> tuple[int, int]:
    # First warp of the tiled kernel's block (0, 0) at p0 = 0: threads tx = 0..31, ty = 0.
    threads = [(t % tile, t // tile) for t in range(warp)]
    sector = lambda element: element * nbytes // sector_bytes
    a = {sector(ty * size + tx) for tx, ty in threads}                      # As[ty][tx] = A[row=ty, p=tx]
    if b_transposed:                                                        # B = W.mT: B[p, col] = W[col, p]
        b = {sector(tx * size + ty) for tx, ty in threads}
    else:
        b = {sector(ty * size + tx) for tx, ty in threads}                  # Bs[ty][tx] = B[p=ty, col=tx]
    return len(a), len(b)


def check_tile_load_sectors(tile_load_sectors) -> None:
    """`tile_load_sectors(size, b_transposed) -> (sectors of A, sectors of B)`: the 32-byte
    sectors that the first warp of the tiled CUDA kernel touches when it loads its tiles,
    `As[ty][tx] = A[row, p0 + tx]` and `Bs[ty][tx] = B[p0 + ty, col]`, for size x size
    float32 matrices (A row-major; B row-major, or the transposed view W.mT of a row-major W)."""
    exercise = "making_kernels_fast, tile loads"
    for size in (1024, 100, 33):
        for b_transposed in (False, True):
            expected = _reference_tile_loads(size, b_transposed)
            got = tile_load_sectors(size, b_transposed)
            try:
                got = tuple(int(v) for v in got)
            except (TypeError, ValueError):
                fail(exercise, f"tile_load_sectors({size}, {b_transposed}) returned {got!r}, not two numbers")
            if got != expected:
                layout = "B = W.mT (transposed view)" if b_transposed else "B row-major"
                fail(exercise, f"tile_load_sectors({size}, {b_transposed}) returned {got}, but with {layout} "
                               f"a warp touches {expected[0]} sectors of A and {expected[1]} of B")
    passed(exercise, "sector counts agree for row-major and transposed B on three sizes")
