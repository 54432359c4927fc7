"""The checkers of when_to_write_an_op accept a right answer and reject wrong ones."""

from __future__ import annotations

import pytest
import torch

from booktools.checkers import CheckFailed
from booktools.checkers import when_to_write_an_op as checks

_count = 0


def _scaled_relu(*, forward=lambda x, alpha: torch.relu(x) * alpha, backward_factor=1.0, autograd=True):
    global _count
    _count += 1

    @torch.library.custom_op(f"test_checkers::scaled_relu_{_count}", mutates_args=())
    def op(x: torch.Tensor, alpha: float) -> torch.Tensor:
        return forward(x, alpha)

    @op.register_fake
    def _(x, alpha):
        return torch.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.alpha = inputs[1]

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x > 0) * ctx.alpha * backward_factor, None

    if autograd:
        op.register_autograd(backward, setup_context=setup_context)
    return op


def test_scaled_relu_checker_accepts_a_right_answer(capsys):
    checks.check_scaled_relu(_scaled_relu())
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "options, message",
    [
        ({"forward": lambda x, alpha: torch.relu(x * alpha)}, "alpha=-2"),    # relu(alpha x) != alpha relu(x)
        ({"backward_factor": 0.5}, "gradcheck failed"),
        ({"autograd": False}, "autograd"),
    ],
)
def test_scaled_relu_checker_rejects_wrong_answers(options, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_scaled_relu(_scaled_relu(**options))


def test_scaled_relu_checker_rejects_a_plain_function():
    with pytest.raises(CheckFailed, match="not a custom operator"):
        checks.check_scaled_relu(lambda x, alpha: torch.relu(x) * alpha)


def test_implied_share_checker(capsys):
    checks.check_implied_share(lambda S, s: (1 - 1 / S) / (1 - 1 / s))
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda S, s: (1 - 1 / s) / (1 - 1 / S), "gives the step speed-up"),   # S and s swapped
        (lambda S, s: (S - 1) / (s - 1), "gives the step speed-up"),           # forgets the inverses
        (lambda S, s: "f", "not a number"),
    ],
)
def test_implied_share_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_implied_share(wrong)
