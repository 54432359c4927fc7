"""Checkers for the exercises of chapters/writing_the_extension.ipynb."""

from __future__ import annotations

import random
import warnings

import torch

from booktools.checkers import fail, passed


def _first_line(error: object) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def check_scale_op(op) -> None:
    """`op` must be an operator `scale(Tensor x, float alpha) -> Tensor` registered with
    torch.library (pass `torch.ops.<namespace>.scale.default`), computing `x * alpha` on CPU
    tensors of any shape and strides, with a fake implementation and an autograd formula:
    its values are compared with `x * alpha`, it must run on meta tensors, and
    torch.library.opcheck and gradcheck must pass."""
    exercise = "writing_the_extension, scale"
    if isinstance(op, torch._ops.OpOverloadPacket):
        op = op.default
    if not isinstance(op, torch._ops.OpOverload):
        fail(exercise, f"{op!r} is not an operator registered with torch.library: define it in a "
                       "torch.library.Library and pass torch.ops.<namespace>.scale.default")
    arguments = [argument.name for argument in op._schema.arguments]
    if len(arguments) != 2:
        fail(exercise, f"the schema should take (Tensor x, float alpha), but it is {op._schema}")
    g = torch.Generator().manual_seed(0)
    cases = [
        (torch.randn(4, 3, generator=g), 2.0, "a 4x3 matrix, alpha=2"),
        (torch.randn(5, generator=g, dtype=torch.float64), -1.5, "a float64 vector, alpha=-1.5"),
        (torch.randn((), generator=g), 0.5, "a 0-d tensor"),
        (torch.randn(0, 7, generator=g), 3.0, "an empty 0x7 matrix"),
        (torch.randn(6, 4, generator=g)[::2].mT, 0.25, "a transposed, strided view"),
        (torch.randn(3, 3, generator=g), 0.0, "alpha=0"),
    ]
    for x, alpha, what in cases:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = op(x, alpha)
        except Exception as error:  # report whatever the reader's kernel raised
            fail(exercise, f"scale failed on {what}: {type(error).__name__}: {_first_line(error)}")
        expected = x * alpha
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dtype != expected.dtype:
            fail(exercise, f"scale({what}) returned {getattr(got, 'shape', got)!r} "
                           f"{getattr(got, 'dtype', '')}, expected shape {tuple(expected.shape)} {expected.dtype}")
        if not torch.allclose(got, expected):
            fail(exercise, f"scale({what}) differs from x * alpha by up to {(got - expected).abs().max():.3g}")
    try:
        meta = op(torch.empty(2, 3, device="meta"), 2.0)
    except Exception as error:
        fail(exercise, f"scale cannot run on meta tensors ({type(error).__name__}: {_first_line(error)}); "
                       "register a fake implementation with torch.library.register_fake")
    if meta.shape != (2, 3):
        fail(exercise, f"the fake implementation returned shape {tuple(meta.shape)} for a 2x3 input")
    for x in (torch.randn(3, 4, generator=g, requires_grad=True),
              torch.randn(2, 5, generator=g, dtype=torch.float64, requires_grad=True)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results = torch.library.opcheck(op, (x, 1.5), raise_exception=False)
        for test, result in results.items():
            if result != "SUCCESS":
                fail(exercise, f"torch.library.opcheck: {test} failed: {_first_line(result)}")
    x = torch.randn(3, 2, generator=g, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = op(x, 2.0)
        if y.requires_grad:
            try:
                torch.autograd.grad(y.sum(), x, allow_unused=True)
            except Exception as error:
                fail(exercise, f"the backward pass failed: {type(error).__name__}: {_first_line(error)}")
    if not y.requires_grad or any("autograd kernel was not registered" in str(w.message) for w in caught):
        fail(exercise, "no autograd kernel is registered for scale, so autograd cannot differentiate it "
                       "(register a formula with torch.library.register_autograd)")
    try:
        ok = torch.autograd.gradcheck(lambda x: op(x, -0.75), (x,), raise_exception=False)
    except Exception as error:
        fail(exercise, f"gradcheck could not run: {type(error).__name__}: {_first_line(error)}")
    if not ok:
        fail(exercise, "gradcheck failed: the backward formula is not the derivative of x * alpha")
    passed(exercise, f"equals x * alpha on {len(cases)} inputs; meta tensors, opcheck and gradcheck pass")


def check_silent_reshape(silent, cases: int = 600, seed: int = 0) -> None:
    """`silent(x_shape, in_features) -> bool` must say whether `X.reshape(-1, in_features)`
    succeeds although `X.shape[-1] != in_features`: the wrong shapes that an unchecked
    `linearop` would turn into a silently wrong result. Compared with what torch.reshape
    does, on random shapes (sizes 0 to 6) and in_features from 0 to 8."""
    exercise = "writing_the_extension, silent reshape"
    rng = random.Random(seed)
    pairs = [((4, 6), 3), ((4, 6), 6), ((0, 5), 3), ((3, 0), 0), ((2, 3), 0), ((12,), 4), ((2, 2, 3), 4)]
    for _ in range(cases):
        pairs.append((tuple(rng.randint(0, 6) for _ in range(rng.randint(1, 3))), rng.randint(0, 8)))
    for shape, in_features in pairs:
        try:
            torch.empty(shape).reshape(-1, in_features)
            reshapes = True
        except RuntimeError:
            reshapes = False
        expected = reshapes and shape[-1] != in_features
        got = silent(shape, in_features)
        if not isinstance(got, bool):
            fail(exercise, f"silent({shape}, {in_features}) returned {got!r}, not a bool")
        if got != expected:
            what = ("reshape(-1, {k}) fails" if not reshapes else
                    "the shapes match, so nothing is wrong" if shape[-1] == in_features else
                    "reshape(-1, {k}) succeeds with the wrong last dimension").format(k=in_features)
            fail(exercise, f"silent({shape}, {in_features}) returned {got}, but for X of shape {list(shape)}, {what}")
    passed(exercise, f"agrees with torch.reshape on {len(pairs)} pairs of shapes")
