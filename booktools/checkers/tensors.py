"""Checkers for the exercises of chapters/tensors.ipynb."""

from __future__ import annotations

import random

import torch

from booktools.checkers import expect_bool, passed


def check_broadcastable(broadcastable, pairs: int = 500, seed: int = 0) -> None:
    """`broadcastable(shape_a, shape_b) -> bool` must agree with torch.broadcast_shapes on
    random pairs of shapes (0 to 4 dimensions, sizes 0 to 3, so ones, zeros and mismatches
    are all common), and on a few hand-picked edge cases."""
    exercise = "tensors, broadcastable"
    rng = random.Random(seed)
    cases = [((), ()), ((3,), ()), ((0,), (1,)), ((0,), (2,)), ((2, 1), (1, 3)), ((4, 1, 3), (2, 1))]
    for _ in range(pairs):
        cases.append(tuple(tuple(rng.randint(0, 3) for _ in range(rng.randint(0, 4))) for _ in range(2)))
    for a, b in cases:
        try:
            torch.broadcast_shapes(a, b)
            expected = True
        except RuntimeError:
            expected = False
        got = broadcastable(a, b)
        expect_bool(exercise, f"broadcastable({a}, {b})", got, expected,
                    f"torch.broadcast_shapes {'accepts' if expected else 'rejects'} these shapes")
    passed(exercise, f"agrees with torch.broadcast_shapes on {len(cases)} pairs of shapes")
