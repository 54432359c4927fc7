"""Gradients: gradcheck in float64, and no work for gradients nobody asked for."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck
from torch.utils._python_dispatch import TorchDispatchMode

import mylinearops
from conftest import STABLE_ABI

# gradcheck compares against finite differences, one column of the Jacobian
# at a time: small shapes keep it fast. Every CPU kernel variant is checked.
GRAD_ALGOS = ("reference", "blocked", "packed")


def _inputs(*shapes, requires_grad=True):
    return [torch.randn(*s, dtype=torch.float64, requires_grad=requires_grad) for s in shapes]


@pytest.mark.parametrize("algo", GRAD_ALGOS)
def test_gradcheck_matmul(algo):
    A, B = _inputs((3, 5), (5, 4))
    assert gradcheck(lambda a, b: mylinearops.matmul(a, b, algo=algo), (A, B))


@pytest.mark.parametrize("algo", GRAD_ALGOS)
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_gradcheck_linearop(algo, bias):
    X, W, b = _inputs((2, 3, 5), (5, 4), (4,))
    args = (X, W, b) if bias else (X, W)
    assert gradcheck(lambda *t: mylinearops.linearop(*t, algo=algo), args)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
def test_gradcheck_linear_layer(bias):
    layer = mylinearops.LinearLayer(5, 3, bias=bias).double()
    X = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    params = tuple(layer.parameters())

    def f(x, *p):
        return torch.func.functional_call(layer, dict(zip([n for n, _ in layer.named_parameters()], p)), (x,))

    assert gradcheck(f, (X, *params))


def test_gradgradcheck_matmul():
    # The backward is built from the same differentiable operators, so
    # second derivatives work too.
    A, B = _inputs((3, 4), (4, 2))
    assert gradgradcheck(mylinearops.matmul, (A, B))


def test_gradgradcheck_linearop():
    X, W, b = _inputs((3, 4), (4, 2), (2,))
    assert gradgradcheck(mylinearops.linearop, (X, W, b))


# The C++ autograd kernels skip the Function when nothing can want a node (autograd.cpp).
# These check what must still reach it, or must still be right without it. (The stable-ABI
# build registers its autograd from Python, whose forward-mode behaviour test_functorch shows.)
_OPS = {
    "matmul": (mylinearops.matmul, ((3, 4), (4, 2))),
    "linearop": (mylinearops.linearop, ((3, 4), (4, 2), (2,))),
}


@pytest.mark.skipif(STABLE_ABI, reason="the stable-ABI build has no C++ autograd kernel")
@pytest.mark.parametrize("op", _OPS)
def test_forward_mode_tangent_is_refused_not_dropped(op):
    # A dual tensor need not require a gradient; the call must still reach the Function,
    # which refuses the tangent, rather than return an output without one.
    fn, shapes = _OPS[op]
    args = _inputs(*shapes, requires_grad=False)
    with torch.autograd.forward_ad.dual_level():
        dual = torch.autograd.forward_ad.make_dual(args[0], torch.randn_like(args[0]))
        with pytest.raises(RuntimeError, match="jvp is not implemented for the c\\+\\+ API"):
            fn(dual, *args[1:])


@pytest.mark.parametrize("op", _OPS)
@pytest.mark.parametrize("mode", ["no_grad", "no_input_requires_grad", "grad"])
def test_output_records_a_node_exactly_when_autograd_wants_one(op, mode):
    fn, shapes = _OPS[op]
    args = _inputs(*shapes, requires_grad=mode != "no_input_requires_grad")
    with torch.set_grad_enabled(mode != "no_grad"):
        out = fn(*args)
    torch.testing.assert_close(out, args[0] @ args[1] + (args[2] if len(args) > 2 else 0))
    assert out.requires_grad == (mode == "grad")
    assert (out.grad_fn is not None) == (mode == "grad")
    if mode == "grad":
        if not STABLE_ABI:  # the C++ Function's node
            assert f"{op.capitalize()}Function" in out.grad_fn.name()
        out.sum().backward()
        assert all(a.grad is not None for a in args)


def test_gradients_match_torch_float32():
    X = torch.randn(64, 30, requires_grad=True)
    W = torch.randn(30, 20, requires_grad=True)
    b = torch.randn(20, requires_grad=True)
    grad_out = torch.randn(64, 20)
    ours = torch.autograd.grad(mylinearops.linearop(X, W, b), (X, W, b), grad_out)
    theirs = torch.autograd.grad(X @ W + b, (X, W, b), grad_out)
    for o, t in zip(ours, theirs):
        torch.testing.assert_close(o, t, rtol=1e-5, atol=1e-5)


def test_backward_accepts_expanded_grad():
    # y.sum() hands backward a stride-0 (expanded) gradient.
    A, B = torch.randn(6, 7, requires_grad=True), torch.randn(7, 5, requires_grad=True)
    mylinearops.matmul(A, B).sum().backward()
    torch.testing.assert_close(A.grad, torch.ones(6, 5) @ B.detach().t())
    torch.testing.assert_close(B.grad, A.detach().t() @ torch.ones(6, 5))


class _CountOps(TorchDispatchMode):
    """Records which operators run (below autograd)."""

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def _backward_ops(out):
    with _CountOps() as counter:
        out.backward(torch.ones_like(out))
    return counter.calls


@pytest.mark.parametrize(
    "needs, expected",
    [((True, True), 2), ((True, False), 1), ((False, True), 1)],
    ids=["dA_dB", "dA_only", "dB_only"],
)
def test_matmul_backward_computes_only_needed_grads(needs, expected):
    A = torch.randn(4, 3, requires_grad=needs[0])
    B = torch.randn(3, 5, requires_grad=needs[1])
    calls = _backward_ops(mylinearops.matmul(A, B))
    assert calls.count("mylinearops.matmul") == expected
    assert (A.grad is not None) == needs[0] and (B.grad is not None) == needs[1]


def test_linearop_backward_computes_only_needed_grads():
    # The usual training case: the input batch needs no gradient.
    X = torch.randn(8, 5)
    W = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    calls = _backward_ops(mylinearops.linearop(X, W, b))
    assert calls.count("mylinearops.matmul") == 1  # dW only, no dX
    assert calls.count("aten.sum") == 1  # db
    b_frozen = torch.randn(3)
    calls = _backward_ops(mylinearops.linearop(X, W, b_frozen))
    assert calls.count("mylinearops.matmul") == 1 and "aten.sum" not in calls


def test_backward_uses_no_transposed_copies():
    # dA = dY @ B.t() must read B.t() as a view: no copy/clone/contiguous.
    A, B = torch.randn(4, 3, requires_grad=True), torch.randn(3, 5, requires_grad=True)
    calls = _backward_ops(mylinearops.matmul(A, B))
    assert not any(c in calls for c in ("aten.clone", "aten.contiguous", "aten.copy_", "aten._to_copy")), calls


@pytest.mark.parametrize("algo", ["blocked", "reference"])
def test_backward_uses_the_forward_algo(algo, monkeypatch):
    A, B = torch.randn(4, 3, requires_grad=True), torch.randn(3, 5, requires_grad=True)
    seen = []

    class Spy(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if str(func.overloadpacket) == "mylinearops.matmul":
                seen.append(args[2] if len(args) > 2 else (kwargs or {}).get("algo", "auto"))
            return func(*args, **(kwargs or {}))

    out = mylinearops.matmul(A, B, algo=algo)
    with Spy():
        out.backward(torch.ones_like(out))
    assert seen == [algo, algo]
