"""Operator registration checks (opcheck) and torch.compile(fullgraph=True)."""

from __future__ import annotations

import pytest
import torch

import mylinearops

ops = torch.ops.mylinearops


def _matmul_samples():
    for dtype in (torch.float32, torch.float64):
        for rg in (False, True):
            yield (torch.randn(3, 4, dtype=dtype, requires_grad=rg), torch.randn(4, 5, dtype=dtype, requires_grad=rg))
    yield (torch.randn(4, 3).t(), torch.randn(5, 4).t())  # transposed views
    yield (torch.randn(2, 0), torch.randn(0, 3))  # k == 0
    yield (torch.randn(3, 4, requires_grad=True), torch.randn(4, 5), "reference")
    yield (torch.randn(3, 4), torch.randn(4, 5, requires_grad=True), "blocked")


def _linearop_samples():
    for dtype in (torch.float32, torch.float64):
        X, W, b = torch.randn(6, 4, dtype=dtype), torch.randn(4, 3, dtype=dtype), torch.randn(3, dtype=dtype)
        yield (X, W, b)
        yield (X, W, None)
        yield (X.requires_grad_(), W.requires_grad_(), b.requires_grad_())
    yield (torch.randn(6, 4), torch.randn(4, 3, requires_grad=True), torch.randn(3, requires_grad=True), "packed")
    yield (torch.randn(2, 0), torch.randn(0, 3), torch.randn(3))


@pytest.mark.parametrize("args", list(_matmul_samples()), ids=lambda a: "sample")
def test_opcheck_matmul(args):
    torch.library.opcheck(ops.matmul.default, args)


@pytest.mark.parametrize("args", list(_linearop_samples()), ids=lambda a: "sample")
def test_opcheck_linearop(args):
    torch.library.opcheck(ops.linearop.default, args)


def test_fake_tensor_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        out = mylinearops.linearop(torch.randn(2, 7, 5), torch.randn(5, 3), torch.randn(3))
        assert out.shape == (2, 7, 3) and out.dtype == torch.float32
        assert mylinearops.matmul(torch.randn(4, 0), torch.randn(0, 6)).shape == (4, 6)


class _MLP(torch.nn.Module):
    def __init__(self, layer=mylinearops.LinearLayer):
        super().__init__()
        self.fc1, self.fc2 = layer(20, 16), layer(16, 4)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_compile_fullgraph_inductor_forward_and_backward():
    torch._dynamo.reset()
    model = _MLP()
    compiled = torch.compile(model, fullgraph=True, backend="inductor")
    x = torch.randn(8, 20)
    eager_out = model(x)
    compiled_out = compiled(x)
    torch.testing.assert_close(compiled_out, eager_out)
    eager_grads = torch.autograd.grad(eager_out.square().sum(), list(model.parameters()))
    compiled_grads = torch.autograd.grad(compiled(x).square().sum(), list(model.parameters()))
    for e, c in zip(eager_grads, compiled_grads):
        torch.testing.assert_close(c, e)


def test_compile_fullgraph_functions_and_algos():
    torch._dynamo.reset()

    def f(A, B, X, W, b):
        return mylinearops.matmul(A, B, algo="blocked").sum() + mylinearops.linearop(X, W, b, algo="reference")

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    args = (torch.randn(5, 6), torch.randn(6, 7), torch.randn(2, 3, 6), torch.randn(6, 4), torch.randn(4))
    torch.testing.assert_close(compiled(*args), f(*args))


def test_compile_dynamic_batch():
    # The fake implementation works with symbolic sizes: one graph, many batches.
    torch._dynamo.reset()
    layer = mylinearops.LinearLayer(6, 3)
    compiled = torch.compile(layer, fullgraph=True, dynamic=True, backend="aot_eager")
    for batch in (2, 5, 9):
        x = torch.randn(batch, 6)
        torch.testing.assert_close(compiled(x), layer(x))


def test_compile_reports_bad_shapes_at_trace_time():
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: mylinearops.matmul(a, b), fullgraph=True, backend="aot_eager")
    with pytest.raises(Exception, match=r"inner dimensions differ: A is \[3, 4\] but B is \[5, 6\]"):
        compiled(torch.randn(3, 4), torch.randn(5, 6))
