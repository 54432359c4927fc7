"""Checkers for the exercises of chapters/autograd_function.ipynb.

The reference for the linear layer is the chapter's own `LinearFunction`, exported from the
chapter to booktools.generated.autograd_function. Every gradient is checked with respect to
*every* tensor input, the weight and the bias included: the notes ran gradcheck with respect to
the layer's input alone, which lets a wrong weight or bias gradient pass.
"""

from __future__ import annotations

import torch
from torch.autograd import gradcheck, gradgradcheck
from torch.autograd.gradcheck import GradcheckError

from booktools.checkers import fail, passed

DOUBLE = torch.float64


def _callable(function):
    """A Function subclass is called through .apply; anything else is called as it is."""
    if isinstance(function, type) and issubclass(function, torch.autograd.Function):
        return function.apply
    return function


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


def _describe(names, tensors) -> str:
    parts = []
    for name, t in zip(names, tensors):
        if t is None:
            parts.append(f"{name}=None")
        else:
            parts.append(f"{name} {tuple(t.shape)}" + ("" if t.requires_grad else " without grad"))
    return ", ".join(parts)


def _run(exercise, what, fn, *args):
    try:
        return fn(*args)
    except Exception as error:  # the reader's code: say where it failed
        fail(exercise, f"{what} raised {_first_line(error)}")


def _gradients(exercise, call, inputs, upstream, label):
    """Gradients of sum(upstream * output) with respect to the inputs that require grad
    (None for the others), computed through the reader's backward."""
    outputs = _run(exercise, f"forward with {label}", call, *inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    wanted = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    pairs = [(o, g) for o, g in zip(outputs, upstream) if g is not None]
    grads = _run(exercise, f"backward with {label}",
                 lambda: torch.autograd.grad([o for o, _ in pairs], wanted, [g for _, g in pairs], allow_unused=True))
    grads = iter(grads)
    return outputs, [next(grads) if isinstance(t, torch.Tensor) and t.requires_grad else None for t in inputs]


def _compare(exercise, names, label, got, expected, what="the gradient"):
    for name, g, e in zip(names, got, expected):
        if e is None:
            continue
        if g is None:
            fail(exercise, f"with {label}: no gradient for {name}, which requires one")
        if g.shape != e.shape:
            fail(exercise, f"with {label}: d{name} has shape {tuple(g.shape)}, expected {tuple(e.shape)}")
        if not torch.allclose(g, e, rtol=1e-7, atol=1e-9):
            fail(exercise, f"with {label}: d{name} is wrong (largest difference from {what}: "
                           f"{(g - e).abs().max().item():.3g})")


def _gradcheck(exercise, call, inputs, names, label, second_order=False):
    check, what = (gradgradcheck, "gradgradcheck") if second_order else (gradcheck, "gradcheck")
    try:
        check(call, inputs)
    except GradcheckError as error:
        message = str(error).strip().splitlines()[0].rstrip(",")
        for i, name in enumerate(names):  # gradcheck numbers the inputs; name them
            message = message.replace(f"input {i}", f"input {i} ({name})")
        hint = ("; a backward that leaves PyTorch or is @once_differentiable has no second derivative"
                if second_order else "")
        fail(exercise, f"{what} with {label} fails: {message}{hint}")
    except Exception as error:
        fail(exercise, f"{what} with {label} raised {_first_line(error)}")


def _saved(output) -> list[torch.Tensor]:
    return [t for t in output.grad_fn.saved_tensors if t is not None]


def _holds(saved, tensor) -> bool:
    """Whether one of the saved tensors is `tensor` (same shape and values)."""
    return any(t.shape == tensor.shape and torch.equal(t.detach(), tensor.detach()) for t in saved)


def check_linear_function(function, *, saves_only_what_is_needed: bool = False,
                          double_backward: bool = True, seed: int = 0) -> None:
    """`function` (a torch.autograd.Function, or a function calling one) computes X @ W + b for
    X (N, in), W (in, out) and b (out,) or None. Checked against the chapter's LinearFunction,
    in float64:

    1. the output, and each of dX, dW and db separately, with a random upstream gradient, for
       every pattern of which inputs need a gradient (X as data, W frozen, b None, ...);
    2. gradcheck with respect to X, W *and* b, and gradgradcheck (unless double_backward=False);
    3. an input changed in place between forward and backward must be detected, as
       ctx.save_for_backward does;
    4. with saves_only_what_is_needed=True: X is saved only when dW is needed, W only when dX is.
    """
    from booktools.generated.autograd_function import LinearFunction as reference

    exercise = "autograd_function, LinearFunction"
    call, names = _callable(function), ("X", "W", "b")
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape, grad=True):
        return torch.randn(*shape, generator=gen, dtype=DOUBLE).requires_grad_(grad)

    shapes = [(4, 3, 2), (3, 3, 3), (1, 5, 2)]     # ordinary, square (a transposed W fits), one row
    patterns = [  # which of X, W, b require grad; None: no bias
        (True, True, True), (False, True, True), (True, False, True),   # everything, X is data, W frozen
        (True, True, None), (False, True, None), (True, False, False),  # no bias, ..., only X
    ]
    for n, k, m in shapes:
        base = (rand(n, k), rand(k, m), rand(m))
        upstream = torch.randn(n, m, generator=gen, dtype=DOUBLE)
        for flags in patterns:
            inputs = tuple(None if f is None else t.detach().requires_grad_(f) for t, f in zip(base, flags))
            label = _describe(names, inputs)
            (got,), grads = _gradients(exercise, call, inputs, (upstream,), label)
            (expected,), ref_grads = _gradients(exercise, reference.apply, inputs, (upstream,), label)
            if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
                fail(exercise, f"with {label}: the output is {getattr(got, 'shape', type(got).__name__)}, "
                               f"expected shape {tuple(expected.shape)}")
            if not torch.allclose(got, expected, rtol=1e-7, atol=1e-9):
                fail(exercise, f"with {label}: the output differs from X @ W + b")
            _compare(exercise, names, label, grads, ref_grads, "the chapter's LinearFunction")
            if saves_only_what_is_needed and got.grad_fn is not None:
                saved = _saved(call(*inputs))
                X, W, _ = inputs
                if _holds(saved, W) and not X.requires_grad:
                    fail(exercise, f"with {label}: W is saved, but only dX needs it and X needs no gradient")
                if _holds(saved, X) and not W.requires_grad:
                    fail(exercise, f"with {label}: X is saved, but only dW needs it and W needs no gradient")

    X, W, b = rand(4, 3), rand(3, 2), rand(2)
    for inputs, label in [((X, W, b), "X, W and b"), ((X, W, None), "X and W, b=None")]:
        _gradcheck(exercise, call, inputs, names, f"respect to {label}")
        if double_backward:
            _gradcheck(exercise, call, inputs, names, f"respect to {label}", second_order=True)

    H = X.detach().clone()                 # dW needs H, so H is saved; then we change it
    Y = call(H, W, b)
    H.mul_(2)
    try:
        Y.backward(torch.ones_like(Y))
    except RuntimeError as error:
        if "inplace" not in str(error):
            fail(exercise, f"backward after an in-place change of X raised {_first_line(error)}")
    else:
        fail(exercise, "X was changed in place between forward and backward, and backward silently used the "
                       "new values: save tensors with ctx.save_for_backward, which checks their version")
    what = "; saves only what is needed" if saves_only_what_is_needed else ""
    passed(exercise, f"values, dX, dW and db for {len(shapes) * len(patterns)} cases, gradcheck"
                     f"{' and gradgradcheck' if double_backward else ''} with respect to X, W and b{what}")


def check_relu_function(function, seed: int = 0) -> None:
    """`function` computes max(x, 0) and saves its *output* for backward. Checked against
    torch.relu: values and gradients on float32 and float64 inputs with negative, positive and
    exactly zero elements (where torch.relu's gradient is 0), the saved tensor, gradcheck and
    gradgradcheck (in float64, away from 0, where finite differences are meaningful)."""
    exercise = "autograd_function, ReLUFunction"
    call = _callable(function)
    gen = torch.Generator().manual_seed(seed)
    cases = [
        ("x = [-2, -0.5, 0, 0.5, 2]", torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0])),
        ("float64 x of shape (3, 4)", torch.randn(3, 4, generator=gen, dtype=DOUBLE)),
        ("x of shape (2, 0)", torch.empty(2, 0)),
        ("a 0-d x = -1", torch.tensor(-1.0)),
    ]
    for label, x in cases:
        x = x.requires_grad_()
        upstream = torch.arange(1, x.numel() + 1, dtype=x.dtype).reshape(x.shape)   # 1, 2, 3, ...
        (got,), (grad,) = _gradients(exercise, call, (x,), (upstream,), label)
        (expected,), (ref_grad,) = _gradients(exercise, torch.relu, (x,), (upstream,), label)
        if got.shape != expected.shape or got.dtype != expected.dtype or not torch.equal(got, expected):
            fail(exercise, f"on {label} the output is {got.detach().tolist()}, torch.relu gives {expected.tolist()}")
        if not torch.equal(grad, ref_grad):
            fail(exercise, f"on {label} with upstream gradient {upstream.tolist()}, the gradient is "
                           f"{grad.tolist()}, torch.relu's is {ref_grad.tolist()}")
        if x.numel() and got.grad_fn is not None:
            output = call(x)
            if not _holds(_saved(output), output):
                fail(exercise, f"on {label} the saved tensors do not include the output: the "
                               f"exercise asks backward to use the output, saved with ctx.save_for_backward")
    x = torch.randn(10, generator=gen, dtype=DOUBLE)
    x = (x + x.sign() * 0.1).requires_grad_()          # at least 0.1 away from the kink
    _gradcheck(exercise, call, (x,), ("x",), "respect to x away from 0")
    _gradcheck(exercise, call, (x,), ("x",), "respect to x away from 0", second_order=True)
    passed(exercise, f"torch.relu's values and gradients on {len(cases)} inputs, the output saved, "
                     f"gradcheck and gradgradcheck")


def check_straight_through(function, seed: int = 0) -> None:
    """`function` rounds in forward (torch.round) and passes the upstream gradient through
    unchanged in backward."""
    exercise = "autograd_function, straight-through estimator"
    call = _callable(function)
    gen = torch.Generator().manual_seed(seed)
    cases = [
        ("x = [-1.7, -0.2, 0.3, 1.4, 2.6]", torch.tensor([-1.7, -0.2, 0.3, 1.4, 2.6])),
        ("float64 x of shape (2, 3)", 3 * torch.randn(2, 3, generator=gen, dtype=DOUBLE)),
    ]
    for label, x in cases:
        x = x.requires_grad_()
        upstream = torch.arange(1, x.numel() + 1, dtype=x.dtype).reshape(x.shape)   # 1, 2, 3, ...
        (got,), (grad,) = _gradients(exercise, call, (x,), (upstream,), label)
        expected = torch.round(x.detach())
        if got.shape != expected.shape or not torch.equal(got.detach(), expected):
            fail(exercise, f"on {label} the output is {got.detach().tolist()}, torch.round gives {expected.tolist()}")
        if grad is None or not torch.equal(grad, upstream):
            fail(exercise, f"on {label} the gradient is {None if grad is None else grad.tolist()}, "
                           f"expected the upstream gradient unchanged, {upstream.tolist()}")
    passed(exercise, f"rounds, and passes the gradient straight through, on {len(cases)} inputs")


def check_linear_with_row_sums(function, seed: int = 0) -> None:
    """`function(X, W, b)` returns two outputs, Y = X @ W + b and S = Y.sum(1) (the row sums of
    Y). Its gradients are checked against autograd when the loss uses Y only, S only, or both
    (so backward receives zeros, or None with ctx.set_materialize_grads(False), for an unused
    output), then with gradcheck with respect to X, W and b."""
    exercise = "autograd_function, a second output"
    call, names = _callable(function), ("X", "W", "b")
    gen = torch.Generator().manual_seed(seed)
    X, W, b = (torch.randn(*s, generator=gen, dtype=DOUBLE, requires_grad=True) for s in [(4, 3), (3, 2), (2,)])

    def reference(X, W, b):
        Y = X @ W + b
        return Y, Y.sum(1)

    G_Y, G_S = torch.randn(4, 2, generator=gen, dtype=DOUBLE), torch.randn(4, generator=gen, dtype=DOUBLE)
    for upstream, label in [((G_Y, None), "a loss that uses only Y"), ((None, G_S), "a loss that uses only S"),
                            ((G_Y, G_S), "a loss that uses Y and S")]:
        outputs, grads = _gradients(exercise, call, (X, W, b), upstream, label)
        if len(outputs) != 2:
            fail(exercise, f"it returned {len(outputs)} output(s), expected two: Y and its row sums")
        for name, got, expected in zip(("Y", "S"), outputs, reference(X, W, b)):
            if got.shape != expected.shape or not torch.allclose(got, expected):
                fail(exercise, f"output {name} has shape {tuple(got.shape)} or values different from "
                               f"{'X @ W + b' if name == 'Y' else 'the row sums of Y'}")
        _, ref_grads = _gradients(exercise, reference, (X, W, b), upstream, label)
        _compare(exercise, names, label, grads, ref_grads, "autograd's")
    _gradcheck(exercise, call, (X, W, b), names, "respect to X, W and b")
    passed(exercise, "both outputs, and dX, dW, db for losses using Y, S or both; gradcheck")
