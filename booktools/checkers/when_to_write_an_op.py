"""Checkers for the exercises of chapters/when_to_write_an_op.ipynb."""

from __future__ import annotations

import math
import random
import warnings

import torch

from booktools.checkers import fail, passed


def _first_line(error: object) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def check_scaled_relu(op) -> None:
    """`op(x, alpha)` must be a custom operator (torch.library.custom_op, or an OpOverload)
    computing `alpha * relu(x)`, with a fake implementation and an autograd formula: values
    are compared on ordinary and awkward inputs (empty, 0-d, strided, float64, alpha <= 0),
    then torch.library.opcheck and gradcheck (away from the kink at 0) must pass."""
    exercise = "when_to_write_an_op, scaled_relu"
    if not isinstance(op, (torch._library.custom_ops.CustomOpDef, torch._ops.OpOverload)):
        fail(exercise, f"{op!r} is not a custom operator: decorate it with @torch.library.custom_op")
    g = torch.Generator().manual_seed(0)
    cases = [
        (torch.randn(4, 5, generator=g), 1.5, "a 4x5 matrix, alpha=1.5"),
        (torch.randn(7, generator=g, dtype=torch.float64), 0.5, "a float64 vector"),
        (torch.randn((), generator=g), 2.0, "a 0-d tensor"),
        (torch.randn(0, 3, generator=g), 2.0, "an empty 0x3 matrix"),
        (torch.randn(6, 4, generator=g)[::2].mT, 3.0, "a transposed, strided view"),
        (torch.randn(3, 3, generator=g), -2.0, "alpha=-2"),
        (torch.tensor([-1.0, 0.0, 1.0]), 1.0, "[-1, 0, 1]"),
    ]
    for x, alpha, what in cases:
        try:
            got = op(x, alpha)
        except Exception as error:  # report whatever the reader's operator raised
            fail(exercise, f"scaled_relu failed on {what}: {type(error).__name__}: {_first_line(error)}")
        expected = torch.relu(x) * alpha
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dtype != expected.dtype:
            fail(exercise, f"scaled_relu({what}) returned {getattr(got, 'shape', got)!r} "
                           f"{getattr(got, 'dtype', '')}, expected shape {tuple(expected.shape)} {expected.dtype}")
        if not torch.allclose(got, expected):
            fail(exercise, f"scaled_relu({what}) differs from alpha * relu(x) by up to "
                           f"{(got - expected).abs().max():.3g}")
    x = torch.randn(3, 4, generator=g, dtype=torch.float64)
    x = (x + 0.2 * x.sign()).requires_grad_()          # away from the kink, where relu has no derivative
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = torch.library.opcheck(op, (x, 1.5), raise_exception=False)
        for test, result in results.items():
            if result != "SUCCESS":
                fail(exercise, f"torch.library.opcheck: {test} failed: {_first_line(result)}")
        y = op(x, 1.5)
        if not y.requires_grad:
            fail(exercise, "the output does not require grad: register the formula with register_autograd")
        y.sum().backward()
    if any("autograd kernel was not registered" in str(w.message) for w in caught):
        fail(exercise, "no autograd kernel is registered: register the formula with register_autograd")
    x.grad = None
    if not torch.autograd.gradcheck(lambda x: op(x, -0.75), (x,), raise_exception=False):
        fail(exercise, "gradcheck failed: the backward formula is not the derivative of alpha * relu(x)")
    passed(exercise, f"equals alpha * relu(x) on {len(cases)} inputs; opcheck and gradcheck pass")


def check_implied_share(implied_share, cases: int = 300, seed: int = 0) -> None:
    """`implied_share(S, s) -> f` must invert Amdahl's law S = 1 / ((1 - f) + f / s): given the
    step's speed-up S and the kernel's speed-up s (s != 1), the share f of the step that the
    kernel's operation took. Checked by round trips from known f, s (also slow-downs, s < 1)."""
    exercise = "when_to_write_an_op, implied share"
    rng = random.Random(seed)
    trials = [(0.5, 2.0), (0.0, 1.5), (1.0, 3.0), (0.9, 0.5), (0.25, 0.8)]
    trials += [(rng.random(), rng.choice([rng.uniform(0.3, 0.95), rng.uniform(1.05, 10.0)])) for _ in range(cases)]
    for f, s in trials:
        S = 1 / ((1 - f) + f / s)
        got = implied_share(S, s)
        try:
            ok = math.isclose(float(got), f, rel_tol=1e-6, abs_tol=1e-9)
        except (TypeError, ValueError):
            fail(exercise, f"implied_share({S:.6g}, {s:.6g}) returned {got!r}, not a number")
        if not ok:
            fail(exercise, f"implied_share(S={S:.6g}, s={s:.6g}) returned {got!r}, but a share f = {f:.6g} "
                           f"of the step sped up {s:.6g} times gives the step speed-up S = {S:.6g}")
    passed(exercise, f"inverts Amdahl's law on {len(trials)} (f, s) pairs")
