"""Checkers for the exercises of chapters/nn_module.ipynb."""

from __future__ import annotations

import torch
from torch import nn

from booktools.checkers import fail, passed

# What every nn.Module keeps in its own __dict__ (training flag, registries, hooks): not the
# reader's state.
_MODULE_INTERNALS = frozenset(vars(nn.Module()))


def _kinds(value, registered: set[int], depth: int = 0) -> set[str]:
    """The kinds of unregistered state ("module", "tensor") that `value` holds, looking into
    containers. Objects in `registered` (ids of the model's own modules, parameters and buffers)
    are references to registered state, which is fine (nn.LSTM keeps such a list)."""
    if id(value) in registered:
        return set()
    if isinstance(value, nn.Module):
        return {"module"}
    if isinstance(value, torch.Tensor):
        return {"tensor"}
    if depth < 3 and isinstance(value, (list, tuple, set, frozenset, dict)):
        items = value.values() if isinstance(value, dict) else value
        return set().union(*(_kinds(item, registered, depth + 1) for item in items))
    return set()


def check_everything_registered(model: nn.Module) -> None:
    """Every module, parameter and tensor that `model` (or any submodule) holds must be registered,
    so that parameters(), state_dict() and to() see it. Plain attributes holding a module, a tensor,
    or a list/tuple/dict of them are reported by name, with the fix."""
    exercise = "nn_module, everything registered"
    registered = {id(x) for x in [*model.modules(), *model.parameters(), *model.buffers()]}
    invisible = "invisible to parameters(), state_dict() and to()"
    for path, module in model.named_modules():
        for attr, value in vars(module).items():
            if attr in _MODULE_INTERNALS:
                continue
            kinds = _kinds(value, registered)
            where = f"{path}.{attr}" if path else attr
            if isinstance(value, torch.Tensor) and kinds:
                fail(exercise, f"{where} is a plain tensor, {invisible}: make it an nn.Parameter if it "
                               "is learned, or a buffer (register_buffer, nn.Buffer) if not")
            if isinstance(value, nn.Module) and kinds:
                fail(exercise, f"{where} is a module kept outside _modules, {invisible}: assign it "
                               "normally (self.name = module) so that __setattr__ registers it")
            if "module" in kinds:
                fail(exercise, f"{where} is a plain {type(value).__name__} holding modules, {invisible}: "
                               "use nn.ModuleList or nn.ModuleDict")
            if "tensor" in kinds:
                fail(exercise, f"{where} is a plain {type(value).__name__} holding tensors, {invisible}: "
                               "use nn.ParameterList / nn.ParameterDict, or register each tensor")
    parameters = list(model.parameters())
    if not parameters:
        fail(exercise, f"{type(model).__name__} has no parameters at all: nothing for an optimizer to train")
    passed(exercise, f"{len(parameters)} parameters, {len(list(model.buffers()))} buffers, "
                     f"{len(model.state_dict())} state_dict entries, nothing hidden")


# ------------------------------------------------------------------------- my_state_dict
class _Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.head = nn.Linear(2, 3)


class _WithBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(2))
        self.register_buffer("running", torch.zeros(2))
        self.register_buffer("cache", torch.zeros(2), persistent=False)
        self.register_buffer("unset", None)
        self.register_module("absent", None)
        self.norm = nn.BatchNorm2d(2)


def _state_dict_cases():
    torch.manual_seed(0)
    layer = nn.Linear(2, 2)
    return [
        ("a model with two children", _Tiny()),
        ("a model with parameters, buffers (one non-persistent, one None) and a batch norm", _WithBuffers()),
        ("nn.Linear(3, 2, bias=False)", nn.Linear(3, 2, bias=False)),
        ("a nested nn.Sequential", nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), nn.BatchNorm1d(2))),
        ("nn.ModuleList([layer] * 3), one layer under three names", nn.ModuleList([layer] * 3)),
    ]


def check_my_state_dict(my_state_dict) -> None:
    """`my_state_dict(module)` must return the same keys, in the same order, as
    `module.state_dict()`, each mapped to a detached tensor sharing memory with the real entry,
    on models with buffers (persistent or not), missing parameters, nesting and shared layers."""
    exercise = "nn_module, my_state_dict"
    for label, module in _state_dict_cases():
        want = module.state_dict()
        got = my_state_dict(module)
        if list(got) != list(want):
            missing = [k for k in want if k not in got]
            extra = [k for k in got if k not in want]
            detail = (f"missing {missing}" if missing else "") + ("; " if missing and extra else "") + \
                     (f"unexpected {extra}" if extra else "")
            fail(exercise, f"for {label}: keys {list(got)}, expected {list(want)}"
                           + (f" ({detail})" if detail else " (same keys, different order)"))
        for key, tensor in want.items():
            mine = got[key]
            if not isinstance(mine, torch.Tensor):
                fail(exercise, f"for {label}: {key!r} maps to a {type(mine).__name__}, not a tensor")
            if mine.data_ptr() != tensor.data_ptr() or mine.shape != tensor.shape:
                fail(exercise, f"for {label}: {key!r} does not share memory with the module's tensor "
                               "(state_dict returns views of the live tensors, not copies)")
            if mine.requires_grad:
                fail(exercise, f"for {label}: {key!r} requires grad: state_dict returns detached tensors")
    passed(exercise, f"same keys, order and tensors as state_dict() on {len(_state_dict_cases())} models")


# -------------------------------------------------------------------------- kwargs hook
class _Affine(nn.Module):
    def forward(self, x, scale=1.0, *, shift=0.0):
        return x * scale + shift


def check_default_kwarg_hook(add_default) -> None:
    """`add_default(name, value)` must return a forward pre-hook for
    `register_forward_pre_hook(hook, with_kwargs=True)` that passes `name=value` to forward
    unless the caller gave that argument, by keyword or by position. Tried on
    `forward(self, x, scale=1.0, *, shift=0.0)`, which returns x * scale + shift."""
    exercise = "nn_module, default keyword hook"
    module = _Affine()
    handle = module.register_forward_pre_hook(add_default("scale", 3.0), with_kwargs=True)
    x = torch.ones(1)
    calls = [("m(x)", (x,), {}, 3.0),
             ("m(x, scale=5.0)", (x,), {"scale": 5.0}, 5.0),
             ("m(x, shift=1.0)", (x,), {"shift": 1.0}, 4.0),
             ("m(x, 4.0), scale given by position", (x, 4.0), {}, 4.0),
             ("m(x=x)", (), {"x": x}, 3.0)]
    for label, args, kwargs, expected in calls:
        try:
            result = module(*args, **dict(kwargs))
        except Exception as error:  # noqa: BLE001 - report whatever the reader's hook caused
            fail(exercise, f"{label} raised {type(error).__name__}: {str(error).splitlines()[0]}")
        if result.item() != expected:
            fail(exercise, f"{label} returned {result.item()}, expected {expected}")
    handle.remove()
    if module(x).item() != 1.0:
        fail(exercise, "after handle.remove() the default is still added")
    passed(exercise, f"the default is added exactly when the caller does not pass it, on {len(calls)} calls")
