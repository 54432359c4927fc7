"""The checkers of writing_the_extension accept a right answer and reject wrong ones."""

from __future__ import annotations

import pytest
import torch

from booktools.checkers import CheckFailed
from booktools.checkers import writing_the_extension as checks


def _scale_op(namespace, *, backward_factor=1.0, fake=True, autograd=True, kernel=None):
    lib = torch.library.Library(namespace, "DEF")
    lib.define("scale(Tensor x, float alpha) -> Tensor")
    lib.impl("scale", kernel or (lambda x, alpha: torch.as_tensor(x.numpy(force=True) * alpha)), "CPU")
    if fake:
        torch.library.register_fake(f"{namespace}::scale", lambda x, alpha: torch.empty_like(x), lib=lib)
    if autograd:
        def setup_context(ctx, inputs, output):
            ctx.alpha = inputs[1]

        def backward(ctx, grad):
            return grad * ctx.alpha * backward_factor, None

        torch.library.register_autograd(f"{namespace}::scale", backward, setup_context=setup_context, lib=lib)
    return lib, getattr(torch.ops, namespace).scale.default


def test_scale_checker_accepts_a_complete_operator(capsys):
    lib, op = _scale_op("test_scale_right")
    checks.check_scale_op(op)
    assert "passed" in capsys.readouterr().out
    del lib


@pytest.mark.parametrize(
    "options, message",
    [
        ({"fake": False}, "meta tensors"),
        ({"autograd": False}, "no autograd kernel is registered"),
        ({"autograd": False, "kernel": lambda x, alpha: x * alpha}, "opcheck: test_autograd_registration failed"),
        ({"backward_factor": 2.0}, "gradcheck failed"),
        ({"kernel": lambda x, alpha: x.contiguous().view(-1)[: x.numel()].view(x.shape) * alpha + 1}, "differs from x"),
    ],
)
def test_scale_checker_rejects_incomplete_operators(options, message):
    lib, op = _scale_op(f"test_scale_wrong_{abs(hash(message)) % 10**6}", **options)
    with pytest.raises(CheckFailed, match=message):
        checks.check_scale_op(op)
    del lib


def test_scale_checker_rejects_a_python_function():
    with pytest.raises(CheckFailed, match="not an operator registered"):
        checks.check_scale_op(lambda x, alpha: x * alpha)


def silent_right(shape, in_features):
    numel = 1
    for size in shape:
        numel *= size
    return in_features > 0 and numel % in_features == 0 and shape[-1] != in_features


def test_silent_reshape_checker(capsys):
    checks.check_silent_reshape(silent_right)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda s, k: s[-1] != k, "fails"),                                     # forgets divisibility
        (lambda s, k: k > 0 and (s[0] * s[-1]) % k == 0 and s[-1] != k, "silent"),   # 2-D only
        (lambda s, k: silent_right(s, k) or k == 0 and s[-1] != 0, "fails"),    # in_features = 0
        (lambda s, k: 1, "not a bool"),
    ],
)
def test_silent_reshape_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_silent_reshape(wrong)
