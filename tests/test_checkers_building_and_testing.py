"""The checkers of chapters/building_and_testing.ipynb accept a right answer and reject wrong
ones with a message that says what is wrong."""

import pytest
import torch
from torch.autograd import gradcheck

from booktools.checkers import CheckFailed
from booktools.checkers.building_and_testing import check_gradcheck_module, check_scale_rows


# -------------------------------------------------------------------------- gradcheck_module
def gradcheck_module(module, X, **options):
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in module.parameters()]

    def call(X, *params):
        return torch.func.functional_call(module, dict(zip(names, params)), (X,))

    return gradcheck(call, (X, *params), raise_exception=False, **options)


def test_gradcheck_module_right_answers_pass(capsys):
    check_gradcheck_module(gradcheck_module)
    check_gradcheck_module(lambda module, X: gradcheck_module(module, X, fast_mode=True))
    assert capsys.readouterr().out.count("gradcheck_module: passed") == 2


def raising(module, X):
    """gradcheck_module without raise_exception=False: raises on a wrong gradient."""
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in module.parameters()]
    return gradcheck(lambda X, *ps: torch.func.functional_call(module, dict(zip(names, ps)), (X,)), (X, *params))


def in_place_parameters(module, X):
    """A right verdict, but the module's weights are changed on the way."""
    with torch.no_grad():
        for p in module.parameters():
            p.add_(1.0)
    return gradcheck_module(module, X)


@pytest.mark.parametrize("wrong, message", [
    (lambda module, X: gradcheck(module, (X,), raise_exception=False), "a wrong gradient was not caught"),
    (raising, "raised GradcheckError"),
    (lambda module, X: int(gradcheck_module(module, X)), "not a bool"),
    (lambda module, X: False, "a right backward was reported wrong"),
    (in_place_parameters, "changed the module's parameters"),
])
def test_gradcheck_module_wrong_answers_are_rejected(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        check_gradcheck_module(wrong)


# -------------------------------------------------------------------------------- scale_rows
@torch.library.custom_op("booktests::scale_rows_right", mutates_args=())
def scale_rows_right(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * scale[:, None]


@scale_rows_right.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    x, scale = ctx.saved_tensors
    return grad * scale[:, None], (grad * x).sum(1)


scale_rows_right.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("booktests::scale_rows_no_autograd", mutates_args=())
def scale_rows_no_autograd(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * scale[:, None]


@scale_rows_no_autograd.register_fake
def _(x, scale):
    return torch.empty_like(x)


@torch.library.custom_op("booktests::scale_rows_bad_fake", mutates_args=())
def scale_rows_bad_fake(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * scale[:, None]


@scale_rows_bad_fake.register_fake
def _(x, scale):
    return x.new_empty(x.shape[0])


scale_rows_bad_fake.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("booktests::scale_rows_bad_backward", mutates_args=())
def scale_rows_bad_backward(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return x * scale[:, None]


@scale_rows_bad_backward.register_fake
def _(x, scale):
    return torch.empty_like(x)


def _wrong_backward(ctx, grad):
    x, scale = ctx.saved_tensors
    return grad * scale[:, None], grad.sum(1)          # BUG: forgets x in d(scale)


scale_rows_bad_backward.register_autograd(_wrong_backward, setup_context=_setup_context)


def test_scale_rows_right_answer_passes(capsys):
    check_scale_rows(scale_rows_right)
    assert "scale_rows: passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, message", [
    (scale_rows_bad_fake, "opcheck's test_faketensor failed"),
    (scale_rows_no_autograd, "test_aot_dispatch_dynamic failed .* no autograd formula was registered"),
    (scale_rows_bad_backward, "gradcheck failed|opcheck's test_aot_dispatch_dynamic failed"),
    (lambda x, scale: x * scale[:, None], "is it a torch.library.custom_op"),
    (lambda x, scale: x * scale, "it raised RuntimeError"),
    (lambda x, scale: x * scale[:, None] + 1, "wrong result"),
])
def test_scale_rows_wrong_answers_are_rejected(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        check_scale_rows(wrong)
