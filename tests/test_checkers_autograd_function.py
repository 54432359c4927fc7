"""The autograd_function checkers accept right answers and reject wrong ones with a useful message."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import Function, gradcheck
from torch.autograd.function import once_differentiable

from booktools.checkers import CheckFailed
from booktools.checkers import autograd_function as checks
from booktools.generated.autograd_function import LinearFunction


def _apply_linear(ctx, X, W, b):
    Y = X @ W
    return Y if b is None else Y + b


class SavesOnlyWhatIsNeeded(Function):
    @staticmethod
    def forward(ctx, X, W, b):
        ctx.save_for_backward(X if ctx.needs_input_grad[1] else None, W if ctx.needs_input_grad[0] else None)
        return _apply_linear(ctx, X, W, b)

    @staticmethod
    def backward(ctx, grad_Y):
        X, W = ctx.saved_tensors
        return (grad_Y @ W.T if ctx.needs_input_grad[0] else None,
                X.T @ grad_Y if ctx.needs_input_grad[1] else None,
                grad_Y.sum(0) if ctx.needs_input_grad[2] else None)


class SavesTheWrongHalf(SavesOnlyWhatIsNeeded):
    @staticmethod
    def forward(ctx, X, W, b):
        ctx.save_for_backward(X if ctx.needs_input_grad[0] else None, W if ctx.needs_input_grad[1] else None)
        return _apply_linear(ctx, X, W, b)


class DoubledWeightGradient(LinearFunction):
    @staticmethod
    def backward(ctx, grad_Y):
        grad_X, grad_W, grad_b = LinearFunction.backward(ctx, grad_Y)
        return grad_X, None if grad_W is None else 2 * grad_W, grad_b


class MeanBiasGradient(LinearFunction):
    @staticmethod
    def backward(ctx, grad_Y):
        grad_X, grad_W, grad_b = LinearFunction.backward(ctx, grad_Y)
        return grad_X, grad_W, None if grad_b is None else grad_Y.mean(0)


class AlwaysReturnsBiasGradient(LinearFunction):
    @staticmethod
    def backward(ctx, grad_Y):
        X, W = ctx.saved_tensors
        return grad_Y @ W.T, X.T @ grad_Y, grad_Y.sum(0)


class KeepsTensorsOnCtx(LinearFunction):
    @staticmethod
    def forward(ctx, X, W, b):
        ctx.X, ctx.W = X, W
        return _apply_linear(ctx, X, W, b)

    @staticmethod
    def backward(ctx, grad_Y):
        return grad_Y @ ctx.W.T, ctx.X.T @ grad_Y, grad_Y.sum(0) if ctx.needs_input_grad[2] else None


class OnceDifferentiable(LinearFunction):
    @staticmethod
    @once_differentiable
    def backward(ctx, grad_Y):
        return LinearFunction.backward(ctx, grad_Y)


def test_the_chapters_reference_passes_its_own_checker(capsys):
    checks.check_linear_function(LinearFunction)
    checks.check_linear_function(SavesOnlyWhatIsNeeded, saves_only_what_is_needed=True)
    checks.check_linear_function(OnceDifferentiable, double_backward=False)
    assert capsys.readouterr().out.count("passed") == 3


def test_the_reference_is_x_at_w_plus_b():
    X, W, b = (torch.randn(*s, dtype=torch.float64, requires_grad=True) for s in [(5, 4), (4, 3), (3,)])
    G = torch.randn(5, 3, dtype=torch.float64)
    ours = torch.autograd.grad(LinearFunction.apply(X, W, b), (X, W, b), G)
    theirs = torch.autograd.grad(X @ W + b, (X, W, b), G)
    assert all(torch.allclose(o, t) for o, t in zip(ours, theirs))


def test_the_notes_check_misses_a_wrong_weight_gradient_and_the_checker_does_not():
    """The notes' gradcheck differentiates with respect to the input alone: a doubled dW passes."""
    X = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    W, b = torch.randn(3, 2, dtype=torch.float64), torch.randn(2, dtype=torch.float64)
    assert gradcheck(lambda X: DoubledWeightGradient.apply(X, W, b), (X,))
    with pytest.raises(CheckFailed, match=r"W \(3, 2\), b \(2,\): dW is wrong"):
        checks.check_linear_function(DoubledWeightGradient)


@pytest.mark.parametrize(
    "wrong, options, message",
    [
        (MeanBiasGradient, {}, "db is wrong"),
        (AlwaysReturnsBiasGradient, {}, "b=None raised RuntimeError: function AlwaysReturnsBiasGradientBackward "
                                        "returned a gradient different than None"),
        (KeepsTensorsOnCtx, {}, "changed in place between forward and backward"),
        (OnceDifferentiable, {}, r"gradgradcheck .* fails: .*input \d \([XWb]\); a backward that leaves PyTorch"),
        (SavesTheWrongHalf, {}, r"backward with X \(4, 3\) without grad, .* raised AttributeError"),
        (LinearFunction, {"saves_only_what_is_needed": True}, "W is saved, but only dX needs it"),
    ],
)
def test_linear_function_checker_rejects(wrong, options, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_linear_function(wrong, **options)


class ReLUFunction(Function):
    @staticmethod
    def forward(ctx, x):
        y = x.clamp(min=0)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * (y > 0)


class ReLUSavesInput(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * (x > 0)


class ReLUGradientOneAtZero(ReLUFunction):
    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * (y >= 0)


def test_relu_checker(capsys):
    checks.check_relu_function(ReLUFunction)
    assert "passed" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="the saved tensors do not include the output"):
        checks.check_relu_function(ReLUSavesInput)
    with pytest.raises(CheckFailed, match=r"the gradient is \[1.0, 2.0, 3.0, 4.0, 5.0\], torch.relu's is \[0.0, 0.0, 0.0"):
        checks.check_relu_function(ReLUGradientOneAtZero)


class StraightThrough(Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class FloorThrough(StraightThrough):
    @staticmethod
    def forward(ctx, x):
        return torch.floor(x)


class TrueDerivativeOfRound(StraightThrough):
    @staticmethod
    def backward(ctx, grad):
        return torch.zeros_like(grad)


def test_straight_through_checker(capsys):
    checks.check_straight_through(StraightThrough)
    assert "passed" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="torch.round gives"):
        checks.check_straight_through(FloorThrough)
    with pytest.raises(CheckFailed, match="expected the upstream gradient unchanged"):
        checks.check_straight_through(TrueDerivativeOfRound)


class WithRowSums(Function):
    @staticmethod
    def forward(ctx, X, W, b):
        ctx.save_for_backward(X, W)
        Y = X @ W + b
        return Y, Y.sum(1)

    @staticmethod
    def backward(ctx, grad_Y, grad_S):
        X, W = ctx.saved_tensors
        G = grad_Y + grad_S[:, None]          # S = Y @ ones: its gradient reaches every column of Y
        return G @ W.T, X.T @ G, G.sum(0)


class UnmaterializedGrads(WithRowSums):
    @staticmethod
    def forward(ctx, X, W, b):
        ctx.set_materialize_grads(False)      # an unused output's gradient arrives as None ...
        return WithRowSums.forward(ctx, X, W, b)


class IgnoresTheRowSums(WithRowSums):
    @staticmethod
    def backward(ctx, grad_Y, grad_S):
        return WithRowSums.backward(ctx, grad_Y, torch.zeros_like(grad_S))


def test_row_sums_checker(capsys):
    checks.check_linear_with_row_sums(WithRowSums)
    assert "passed" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match="a loss that uses only Y raised TypeError"):   # ... and is subscripted
        checks.check_linear_with_row_sums(UnmaterializedGrads)
    with pytest.raises(CheckFailed, match="a loss that uses only S: dX is wrong"):
        checks.check_linear_with_row_sums(IgnoresTheRowSums)
