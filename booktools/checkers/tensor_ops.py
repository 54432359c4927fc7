"""Checkers for the exercises of chapters/tensor_ops.ipynb."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from booktools.checkers import fail, passed


class _LargestTensor(TorchDispatchMode):
    """Remember the largest tensor any ATen operator returns while the mode is active."""

    def __init__(self):
        super().__init__()
        self.numel, self.shape, self.op = 0, None, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.numel() > self.numel:
                self.numel, self.shape, self.op = t.numel(), tuple(t.shape), func.overloadpacket.__name__
        return out


def _call(exercise, fn, what, *args):
    try:
        return fn(*args)
    except Exception as error:  # the reader's code: report any failure with its input
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        fail(exercise, f"{what} raised {type(error).__name__}: {first}")


def check_pairwise_sq_distances(pairwise_sq_distances, seed: int = 0) -> None:
    """`pairwise_sq_distances(x, y) -> d` for x of shape (N, D) and y of shape (M, D) must return
    the (N, M) squared distances, never build an (N, M, D) intermediate, never return a negative
    value, keep the dtype, and agree with the exact result (computed in float64 by broadcasting)
    within what the expansion |x|^2 - 2 x.y + |y|^2 can promise: a few rounding errors of |x|^2 + |y|^2."""
    exercise = "tensor_ops, pairwise squared distances"
    gen = torch.Generator().manual_seed(seed)
    near = torch.randn(300, 3, generator=gen) + 1000.0            # far from the origin ...
    cases = [
        ("x (50, 30) and y (40, 30)", torch.randn(50, 30, generator=gen), torch.randn(40, 30, generator=gen)),
        ("x (1, 4) and y (6, 4)", torch.randn(1, 4, generator=gen), torch.randn(6, 4, generator=gen)),
        ("x (7, 1) and y (1, 1)", torch.randn(7, 1, generator=gen), torch.randn(1, 1, generator=gen)),
        ("float64 x (20, 8) and y (30, 8)", torch.randn(20, 8, generator=gen, dtype=torch.float64),
         torch.randn(30, 8, generator=gen, dtype=torch.float64)),
        # ... and nearly equal pairs: the expansion cancels there, and can go below zero
        ("x (300, 3) near (1000, 1000, 1000) and y = x + 1e-3", near, near + 1e-3),
    ]
    for label, x, y in cases:
        (n, d), m = x.shape, y.shape[0]
        with _LargestTensor() as largest:
            got = _call(exercise, pairwise_sq_distances, f"pairwise_sq_distances on {label}", x, y)
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != (n, m):
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            fail(exercise, f"on {label} it returned {shape}, expected a tensor of shape {(n, m)}")
        if min(n, m, d) > 1 and largest.numel >= n * m * d:
            fail(exercise, f"on {label}, `{largest.op}` built a tensor of shape {largest.shape}: "
                           f"the (N, M, D) intermediate the exercise asks you to avoid")
        if got.dtype != x.dtype:
            fail(exercise, f"on {label} it returned {got.dtype} for {x.dtype} inputs")
        if (got < 0).any():
            fail(exercise, f"on {label} it returned a negative squared distance ({got.min().item():.3g}): "
                           f"rounding in the expansion can go below zero; clamp the result at 0")
        x64, y64 = x.double(), y.double()
        exact = (x64[:, None, :] - y64[None, :, :]).pow(2).sum(-1)
        scale = x64.pow(2).sum(1)[:, None] + y64.pow(2).sum(1)[None, :]
        tolerance = 32 * d * torch.finfo(x.dtype).eps * scale + 1e-12
        error = (got.double() - exact).abs()
        if (error > tolerance).any():
            i, j = divmod(int((error - tolerance).argmax()), m)
            fail(exercise, f"on {label}, entry ({i}, {j}) is {got[i, j].item():.6g}, "
                           f"the squared distance is {exact[i, j].item():.6g}")
    passed(exercise, f"{len(cases)} pairs of point sets, no (N, M, D) intermediate, no negative distance")


def check_gather_2d(my_gather, seed: int = 0) -> None:
    """`my_gather(x, index)` must equal `torch.gather(x, 1, index)` for 2-D x and index, including
    an index with fewer rows or columns than x, repeated indices, an empty index and integer x."""
    exercise = "tensor_ops, gather by advanced indexing"
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 5, generator=gen)
    cases = [
        ("x (4, 5), index (4, 3)", x, torch.randint(0, 5, (4, 3), generator=gen)),
        ("x (4, 5), index (4, 1)", x, torch.randint(0, 5, (4, 1), generator=gen)),
        ("x (4, 5), index (4, 7) with repeats", x, torch.randint(0, 5, (4, 7), generator=gen)),
        ("x (4, 5), index (2, 3): fewer rows than x", x, torch.randint(0, 5, (2, 3), generator=gen)),
        ("x (4, 5), index (4, 0): empty", x, torch.empty(4, 0, dtype=torch.int64)),
        ("int64 x (3, 6), index (3, 6) reversing each row", torch.arange(18).reshape(3, 6),
         torch.arange(5, -1, -1).repeat(3, 1)),
    ]
    for label, source, index in cases:
        expected = torch.gather(source, 1, index)
        got = _call(exercise, my_gather, f"my_gather on {label}", source, index)
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
            fail(exercise, f"on {label} it returned {shape}, gather returns {tuple(expected.shape)} "
                           f"(the shape of the index)")
        if got.dtype != expected.dtype or not torch.equal(got, expected):
            fail(exercise, f"on {label} it returned {got.tolist()}, gather returns {expected.tolist()}")
    passed(exercise, f"equals torch.gather(x, 1, index) on {len(cases)} inputs")
