"""Checkers for the exercises of chapters/building_and_testing.ipynb."""

from __future__ import annotations

import torch
from torch import nn

from booktools.checkers import fail, passed


# ------------------------------------------------------------------- gradcheck_module
class _LinearFunction(torch.autograd.Function):
    """y = X W^T + b with a backward that can be broken on purpose, one gradient at a time."""

    @staticmethod
    def forward(X, W, b, broken):
        return X @ W.mT + b

    @staticmethod
    def setup_context(ctx, inputs, output):
        X, W, b, broken = inputs
        ctx.save_for_backward(X, W)
        ctx.broken = broken

    @staticmethod
    def backward(ctx, grad):
        X, W = ctx.saved_tensors
        dX, dW, db = grad @ W, grad.mT @ X, grad.sum(0)
        if ctx.broken == "input":
            dX = 2 * dX
        elif ctx.broken == "weight":
            dW = 2 * dW
        elif ctx.broken == "bias":
            db = db + 1
        return dX, dW, db, None


class _Linear(nn.Linear):
    def __init__(self, i, o, broken=None):
        super().__init__(i, o, dtype=torch.float64)
        self.broken = broken

    def forward(self, X):
        return _LinearFunction.apply(X, self.weight, self.bias, self.broken)


class _Scale(nn.Module):
    """A parameter used elementwise; its gradient is wrong when broken."""

    def __init__(self, n, broken=False):
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, n, dtype=torch.float64))
        self.broken = broken

    def forward(self, X):
        scale = self.scale
        if self.broken:  # forward value unchanged, gradient halved
            scale = 0.5 * scale + (0.5 * scale).detach()
        return X * scale


def check_gradcheck_module(gradcheck_module, seed: int = 0) -> None:
    """`gradcheck_module(module, X) -> bool` must return True for modules whose backward is
    right and False for modules with a wrong gradient for the input, for a weight, for a
    bias or for a parameter deep inside a Sequential, without raising, and must leave the
    module's parameters as they were."""
    exercise = "building_and_testing, gradcheck_module"
    torch.manual_seed(seed)
    X = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    cases = [
        ("a correct linear layer", _Linear(5, 3), True),
        ("nn.Linear without bias", nn.Linear(5, 3, bias=False, dtype=torch.float64), True),
        ("a correct two-layer network", nn.Sequential(_Linear(5, 4), nn.Tanh(), _Linear(4, 2)), True),
        ("a layer whose input gradient is doubled", _Linear(5, 3, broken="input"), False),
        ("a layer whose weight gradient is doubled", _Linear(5, 3, broken="weight"), False),
        ("a layer whose bias gradient is off by one", _Linear(5, 3, broken="bias"), False),
        ("a network whose last layer's weight gradient is doubled",
         nn.Sequential(_Linear(5, 4), nn.Tanh(), _Linear(4, 2, broken="weight")), False),
        ("a network whose elementwise scale gets half its gradient",
         nn.Sequential(_Linear(5, 4), _Scale(4, broken=True)), False),
    ]
    for name, module, expected in cases:
        before = {k: v.detach().clone() for k, v in module.state_dict().items()}
        try:
            got = gradcheck_module(module, X)
        except Exception as error:  # noqa: BLE001 - the reader's helper must not raise
            fail(exercise, f"on {name} it raised {type(error).__name__}: {str(error).splitlines()[0][:200]} "
                           "(pass raise_exception=False to gradcheck, so that it returns False)")
        if not isinstance(got, bool):
            fail(exercise, f"on {name} it returned {got!r}, not a bool")
        if got != expected:
            why = ("a right backward was reported wrong" if expected else
                   "a wrong gradient was not caught: are all the parameters among gradcheck's inputs?")
            fail(exercise, f"on {name} it returned {got}: {why}")
        if any(not torch.equal(v, module.state_dict()[k]) for k, v in before.items()):
            fail(exercise, f"on {name} it changed the module's parameters; check copies of them")
    passed(exercise, f"right on {len(cases)} modules, {sum(not e for *_, e in cases)} of them with a wrong gradient")


# ------------------------------------------------------------------------- scale_rows
def check_scale_rows(op) -> None:
    """`op(x, scale)`, a custom operator, must compute x * scale[:, None] (checked on four
    samples, one with no rows), pass all four tests of torch.library.opcheck with inputs that
    require gradients, and gradcheck with respect to both inputs."""
    exercise = "building_and_testing, scale_rows"
    torch.manual_seed(0)
    samples = [((4, 3), torch.float32), ((1, 5), torch.float32), ((0, 2), torch.float32), ((6, 1), torch.float64)]
    for shape, dtype in samples:
        x, scale = torch.randn(*shape, dtype=dtype), torch.randn(shape[0], dtype=dtype)
        try:
            got = op(x, scale)
        except Exception as error:  # noqa: BLE001 - report it as the reader's mistake
            fail(exercise, f"on x of shape {shape} ({dtype}) and scale of shape ({shape[0]},) it raised "
                           f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")
        if not isinstance(got, torch.Tensor) or got.shape != x.shape or not torch.allclose(got, x * scale[:, None]):
            fail(exercise, f"on x of shape {shape} ({dtype}) it returned a wrong result; expected x * scale[:, None]")
    # opcheck compiles the operator (its slowest test), so two samples: both inputs requiring
    # gradients, and only the scale (one row, float64).
    for shape, dtype, grads in [((4, 3), torch.float32, (True, True)), ((1, 5), torch.float64, (False, True))]:
        x = torch.randn(*shape, dtype=dtype, requires_grad=grads[0])
        scale = torch.randn(shape[0], dtype=dtype, requires_grad=grads[1])
        try:
            results = torch.library.opcheck(op, (x, scale), raise_exception=False)
        except Exception as error:  # noqa: BLE001
            fail(exercise, f"torch.library.opcheck could not run it ({type(error).__name__}: "
                           f"{str(error).splitlines()[0][:200]}); is it a torch.library.custom_op?")
        for test, result in results.items():
            if result != "SUCCESS":
                fail(exercise, f"opcheck's {test} failed for x {list(shape)} requires_grad={grads[0]}, "
                               f"scale requires_grad={grads[1]}: {str(result).splitlines()[0][:300]}")
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    scale = torch.randn(5, dtype=torch.float64, requires_grad=True)
    if not torch.autograd.gradcheck(op, (x, scale), raise_exception=False):
        fail(exercise, "gradcheck failed: the backward does not match finite differences")
    passed(exercise, f"right values on {len(samples)} samples, opcheck with gradients, gradcheck")
