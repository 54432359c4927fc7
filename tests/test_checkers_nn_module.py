"""The nn.Module chapter's checkers accept a right answer and reject wrong ones with a useful message."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

from booktools.checkers import CheckFailed
from booktools.checkers import nn_module as checks


# ------------------------------------------------------------------- everything registered
class Branches(nn.Module):
    def __init__(self, container=dict):
        super().__init__()
        self.branches = container({"left": nn.Linear(4, 2), "right": nn.Linear(4, 2)})


class PlainTensor(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(2, 2)
        self.linear.mask = torch.ones(2)          # hidden one level down


class TensorsInAList(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = [torch.ones(1), torch.ones(1)]
        self.bias = nn.Parameter(torch.zeros(1))


class ModuleAroundSetattr(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(2, 2)
        object.__setattr__(self, "hidden", nn.Linear(2, 2))


@pytest.mark.parametrize("model", [Branches(nn.ModuleDict), nn.LSTM(3, 4), nn.TransformerEncoderLayer(8, 2),
                                   nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))])
def test_everything_registered_accepts_registered_models(model, capsys):
    checks.check_everything_registered(model)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "model, message",
    [
        (Branches(dict), "branches is a plain dict holding modules.*nn.ModuleList or nn.ModuleDict"),
        (Branches(lambda d: list(d.values())), "branches is a plain list holding modules"),
        (PlainTensor(), "linear.mask is a plain tensor.*nn.Parameter"),
        (TensorsInAList(), "scales is a plain list holding tensors"),
        (ModuleAroundSetattr(), "hidden is a module kept outside _modules"),
        (nn.ReLU(), "no parameters at all"),
    ],
)
def test_everything_registered_rejects_hidden_state(model, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_everything_registered(model)


# ---------------------------------------------------------------------------- my_state_dict
def my_state_dict(module, prefix=""):
    state = {}
    for name, parameter in module._parameters.items():
        if parameter is not None:
            state[prefix + name] = parameter.detach()
    for name, buffer in module._buffers.items():
        if buffer is not None and name not in module._non_persistent_buffers_set:
            state[prefix + name] = buffer.detach()
    for name, child in module._modules.items():
        if child is not None:
            state.update(my_state_dict(child, prefix + name + "."))
    return state


def keeps_non_persistent(module, prefix=""):
    state = {prefix + k: v.detach() for k, v in module._parameters.items() if v is not None}
    state.update({prefix + k: v.detach() for k, v in module._buffers.items() if v is not None})
    for name, child in module._modules.items():
        if child is not None:
            state.update(keeps_non_persistent(child, prefix + name + "."))
    return state


def copies(module):
    return {k: v.clone() for k, v in my_state_dict(module).items()}


def not_detached(module, prefix=""):
    state = {prefix + k: v for k, v in module._parameters.items() if v is not None}
    state.update({prefix + k: v for k, v in module._buffers.items()
                  if v is not None and k not in module._non_persistent_buffers_set})
    for name, child in module._modules.items():
        if child is not None:
            state.update(not_detached(child, prefix + name + "."))
    return state


def children_first(module, prefix=""):
    state = {}
    for name, child in module._modules.items():
        if child is not None:
            state.update(children_first(child, prefix + name + "."))
    state.update({prefix + k: v.detach() for k, v in module._parameters.items() if v is not None})
    state.update({prefix + k: v.detach() for k, v in module._buffers.items()
                  if v is not None and k not in module._non_persistent_buffers_set})
    return state


def test_my_state_dict_checker_accepts_the_right_answer(capsys):
    checks.check_my_state_dict(my_state_dict)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (keeps_non_persistent, r"unexpected \['cache'\]"),
        (copies, "does not share memory"),
        (not_detached, "requires grad"),
        (children_first, "same keys, different order"),
    ],
)
def test_my_state_dict_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_my_state_dict(wrong)


# ------------------------------------------------------------------------------ kwargs hook
def add_default(name, value):
    def hook(module, args, kwargs):
        given = inspect.signature(module.forward).bind_partial(*args, **kwargs).arguments
        if name not in given:
            kwargs = {**kwargs, name: value}
        return args, kwargs
    return hook


def overrides(name, value):
    def hook(module, args, kwargs):
        return args, {**kwargs, name: value}
    return hook


def keywords_only(name, value):
    def hook(module, args, kwargs):
        return args, kwargs if name in kwargs else {**kwargs, name: value}
    return hook


def returns_kwargs_only(name, value):
    def hook(module, args, kwargs):
        return {**kwargs, name: value}
    return hook


def test_kwarg_hook_checker_accepts_the_right_answer(capsys):
    checks.check_default_kwarg_hook(add_default)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (overrides, r"m\(x, scale=5.0\) returned 3.0, expected 5.0"),
        (keywords_only, "scale given by position raised TypeError.*multiple values"),
        (returns_kwargs_only, r"m\(x\) raised RuntimeError"),
    ],
)
def test_kwarg_hook_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_default_kwarg_hook(wrong)
