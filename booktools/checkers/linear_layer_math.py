"""Checkers for the exercises of chapters/linear_layer_math.ipynb.

Each checker takes the reader's hand-derived gradient formulas, as a function, and compares them
with autograd in float64 on several shapes. Rectangular shapes come first, so that a transposed
formula is reported as a shape error; square shapes follow, where a transposed formula has the
right shape and only the values can tell. Upstream gradients are random, never all ones: a
formula that ignores the upstream gradient is caught (the chapter's second slip of the notes).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from booktools.checkers import fail, passed

DOUBLE = torch.float64


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"


def _call(exercise, fn, what, *args):
    try:
        return fn(*args)
    except Exception as error:  # the reader's code: say on which input it failed
        fail(exercise, f"{what} raised {_first_line(error)}")


def _compare(exercise, label, name, got, expected, hint=""):
    """got must be a tensor of expected's shape and values (float64, tight tolerance)."""
    if not isinstance(got, torch.Tensor):
        fail(exercise, f"with {label}: {name} is a {type(got).__name__}, expected a tensor")
    if got.shape != expected.shape:
        fail(exercise, f"with {label}: {name} has shape {tuple(got.shape)}, expected {tuple(expected.shape)}"
                       f" (the shape of the variable it is the gradient of){hint}")
    if not torch.allclose(got.detach().to(DOUBLE), expected, rtol=1e-7, atol=1e-9):
        difference = (got.detach().to(DOUBLE) - expected).abs().max().item()
        fail(exercise, f"with {label}: {name} is wrong (largest difference from autograd: {difference:.3g}){hint}")


def _rand(gen, *shape):
    return torch.randn(shape, generator=gen, dtype=DOUBLE)


def _unpack(exercise, result, count, what):
    if not isinstance(result, (tuple, list)) or len(result) != count:
        fail(exercise, f"{what} returned {type(result).__name__}"
                       f"{f' of length {len(result)}' if isinstance(result, (tuple, list)) else ''}, "
                       f"expected a tuple of {count} tensors")
    return result


def check_nn_linear_gradients(gradients, seed: int = 0) -> None:
    """`gradients(X, weight, G) -> (dX, dweight, db)`: the gradients of L for Y = X @ weight.T + b
    (nn.Linear's convention, weight of shape (M, K)), given the upstream gradient G = dL/dY of
    shape (N, M). Compared with autograd through F.linear."""
    exercise = "linear_layer_math, nn.Linear's gradients"
    gen = torch.Generator().manual_seed(seed)
    shapes = [(4, 3, 5), (1, 4, 2), (6, 2, 1), (3, 3, 3)]    # N, K, M: rectangular first, square last
    for n, k, m in shapes:
        X = _rand(gen, n, k).requires_grad_()
        weight = _rand(gen, m, k).requires_grad_()
        b = _rand(gen, m).requires_grad_()
        G = _rand(gen, n, m)
        expected = torch.autograd.grad(F.linear(X, weight, b), (X, weight, b), G)
        label = f"X {(n, k)}, weight {(m, k)}, G {(n, m)}"
        got = _unpack(exercise, _call(exercise, gradients, f"gradients on {label}",
                                      X.detach(), weight.detach(), G), 3, "gradients")
        for name, g, e in zip(("dX", "dweight", "db"), got, expected):
            hint = ""
            if name == "dweight" and isinstance(g, torch.Tensor) and g.shape == e.shape[::-1]:
                hint = ": weight is (M, K), the transpose of the chapter's W"
            _compare(exercise, label, name, g, e, hint)
    passed(exercise, f"dX, dweight and db equal autograd's on {len(shapes)} shapes, a square one included")


def check_least_squares_gradient(grad_W, seed: int = 0) -> None:
    """`grad_W(X, W, T) -> dL/dW` for the squared error L = 1/2 * ||X @ W - T||^2 (the sum of
    squares of all entries), with X (N, K), W (K, M) and T (N, M). Compared with autograd; one
    case has W at the least-squares solution, where the gradient must vanish."""
    exercise = "linear_layer_math, least-squares gradient"
    gen = torch.Generator().manual_seed(seed)
    cases = []
    for n, k, m in [(5, 3, 2), (1, 3, 1), (4, 4, 4)]:
        cases.append((f"X {(n, k)}, W {(k, m)}, T {(n, m)}", _rand(gen, n, k), _rand(gen, k, m), _rand(gen, n, m)))
    X, T = _rand(gen, 8, 3), _rand(gen, 8, 2)
    cases.append(("W at the least-squares solution for X (8, 3), T (8, 2)", X, torch.linalg.lstsq(X, T).solution, T))
    for label, X, W, T in cases:
        W = W.clone().requires_grad_()
        expected, = torch.autograd.grad(0.5 * (X @ W - T).pow(2).sum(), W)
        got = _call(exercise, grad_W, f"grad_W on {label}", X, W.detach(), T)
        _compare(exercise, label, "dL/dW", got, expected)
    passed(exercise, f"equals autograd's gradient on {len(cases)} cases, the least-squares solution included")


def check_per_sample_gradients(per_sample, seed: int = 0) -> None:
    """`per_sample(X, G) -> P` of shape (N, K, M) with P[n] the gradient with respect to W of
    sample n's part of the loss, for Y = X @ W + b with X (N, K) and upstream gradient G (N, M).
    Compared with autograd, one sample at a time; the sum over n must be dL/dW = X.T @ G."""
    exercise = "linear_layer_math, per-sample gradients"
    gen = torch.Generator().manual_seed(seed)
    for n, k, m in [(4, 3, 5), (1, 2, 3), (3, 3, 3)]:
        X, W, G = _rand(gen, n, k), _rand(gen, k, m).requires_grad_(), _rand(gen, n, m)
        label = f"X {(n, k)}, G {(n, m)}"
        expected = torch.stack([torch.autograd.grad(X[i:i + 1] @ W, W, G[i:i + 1])[0] for i in range(n)])
        got = _call(exercise, per_sample, f"per_sample on {label}", X, G)
        hint = ""
        if isinstance(got, torch.Tensor) and got.shape == (n, m, k) and k != m:
            hint = ": each P[n] has the shape of W, (K, M)"
        _compare(exercise, label, "the per-sample gradients", got, expected, hint)
        if not torch.allclose(got.sum(0), X.T @ G):
            fail(exercise, f"with {label}: the per-sample gradients do not sum to X.T @ G")
    passed(exercise, "one gradient per sample, equal to autograd's, summing to X.T @ G, on 3 shapes")


def check_bilinear_gradients(gradients, seed: int = 0) -> None:
    """`gradients(u, A, v, g) -> (du, dA, dv)`: the gradients of L for y = u @ A @ v (u of
    shape (P,), A (P, Q), v (Q,)), given the upstream gradient g = dL/dy, a 0-d tensor. Compared
    with autograd, with g never 1, so a formula that forgets g is caught."""
    exercise = "linear_layer_math, bilinear form"
    gen = torch.Generator().manual_seed(seed)
    shapes = [(3, 5), (1, 4), (2, 1), (4, 4)]      # P, Q: rectangular first
    for p, q in shapes:
        u, A, v = (_rand(gen, *s).requires_grad_() for s in [(p,), (p, q), (q,)])
        g = _rand(gen).add(3.0)                                     # around 3, not 1
        expected = torch.autograd.grad(u @ A @ v, (u, A, v), g)
        label = f"u {(p,)}, A {(p, q)}, v {(q,)}, g = {g.item():.3f}"
        got = _unpack(exercise, _call(exercise, gradients, f"gradients on {label}",
                                      u.detach(), A.detach(), v.detach(), g), 3, "gradients")
        for name, mine, theirs in zip(("du", "dA", "dv"), got, expected):
            _compare(exercise, label, name, mine, theirs)
    passed(exercise, f"du, dA and dv equal autograd's on {len(shapes)} shapes, with upstream gradients other than 1")
