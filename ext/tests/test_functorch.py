"""torch.func transforms over the operators: what works, what is refused, what is wrong.

The operators have two possible autograd kernels. The regular build registers a C++
``torch::autograd::Function`` (csrc/autograd.cpp); the stable-ABI build registers the same
formulas from Python with ``torch.library.register_autograd`` (mylinearops/ops.py), and the
tests here put that Python kernel over the regular build's C++ one for the length of a test.
Neither is supported by torch.func:

- C++ ``autograd::Function``: grad, jacrev, jvp and jacfwd raise; vmap runs (through the
  batching fallback, one call per sample).
- ``register_autograd``: grad and jacrev raise; vmap runs; jvp and jacfwd run but return a
  ZERO tangent / Jacobian. That silently wrong result is a known limitation, pinned here so
  that a torch release which changes it is noticed.

Each result is compared with the same transform over plain torch (torch.mm,
torch.nn.functional.linear). The last tests pin the way that does work: a Python
``torch.autograd.Function`` with ``setup_context`` whose backward and jvp call the Function
itself (and only then: a backward or jvp that calls the operator directly is refused again),
as the chapter "Writing the C++/CUDA extension" shows.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import pytest
import torch
import torch.nn.functional as F
from torch.func import grad, jacfwd, jacrev, jvp, vmap

import mylinearops
from mylinearops import ops as mylinearops_ops

from conftest import STABLE_ABI

CPP_REFUSES = r"cannot use C\+\+ torch::autograd::Function with functorch transforms"
PYTHON_REFUSES = r"autograd\.Function with functorch transforms .* must override the setup_context staticmethod"

# vmap over an operator without a batching rule warns ("There is a performance drop because
# we have not yet implemented the batching rule"); the transforms may also warn from inside torch.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning")


def _f64(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, dtype=torch.float64)


@pytest.fixture
def cpp_kernel() -> Iterator[str]:
    """The regular build's C++ autograd::Function (csrc/autograd.cpp)."""
    if STABLE_ABI:
        pytest.skip("the stable-ABI build has no C++ autograd kernel")
    yield "cpp"


@pytest.fixture
def python_kernel() -> Iterator[str]:
    """ops.py's formulas registered with torch.library.register_autograd, for this test."""
    if STABLE_ABI:  # ops.py registered them already
        yield "python"
        return
    lib = torch.library.Library("mylinearops", "FRAGMENT")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        for name, backward in (
            ("matmul", mylinearops_ops._matmul_backward),
            ("linearop", mylinearops_ops._linearop_backward),
        ):
            torch.library.register_autograd(
                f"mylinearops::{name}",
                backward,
                setup_context=mylinearops_ops._setup_context,
                lib=lib,
            )
    try:
        yield "python"
    finally:
        del lib  # unregisters the Python kernel: the C++ one is back


@pytest.fixture(
    params=["cpp_kernel", "python_kernel"],
    ids=["cpp_autograd_function", "register_autograd"],
)
def path(request) -> str:
    """Either autograd kernel: "cpp" or "python"."""
    return request.getfixturevalue(request.param)


def test_path_fixture_installs_the_kernel(path):
    A = _f64(3, 4).requires_grad_()
    out = mylinearops.matmul(A, _f64(4, 2))
    name = (
        out.grad_fn.name()
    )  # read while `out` lives: torch 2.11 voids a Python node without it
    if path == "cpp":
        assert (
            name
            == "torch::autograd::CppNode<mylinearops::(anonymous namespace)::MatmulFunction>"
        )
    else:
        assert name.startswith("GeneratedBackwardFor_mylinearops_matmul")


# Each case: (our function, the plain-torch reference, the inputs). The transforms differentiate
# with respect to every tensor argument.
def _cases() -> dict[str, tuple[Callable, Callable, tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    A, B = _f64(3, 4), _f64(4, 2)
    X, W, b = _f64(5, 4), _f64(4, 3), _f64(3)
    return {
        "matmul": (mylinearops.matmul, torch.mm, (A, B)),
        "linearop": (
            mylinearops.linearop,
            lambda x, w, bias: F.linear(x, w.T, bias),
            (X, W, b),
        ),
    }


OPS = ["matmul", "linearop"]


def _argnums(args: tuple[torch.Tensor, ...]) -> tuple[int, ...]:
    return tuple(range(len(args)))


def _tangents(args: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(torch.randn_like(a) for a in args)


def _assert_same(out, expected) -> None:
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", OPS)
def test_vmap_runs_on_both_paths(path, op):
    fn, ref, args = _cases()[op]
    batched = torch.stack(
        [args[0], 2 * args[0], -args[0]]
    )  # a batch of first arguments
    in_dims = (0,) + (None,) * (len(args) - 1)
    _assert_same(
        vmap(fn, in_dims=in_dims)(batched, *args[1:]),
        vmap(ref, in_dims=in_dims)(batched, *args[1:]),
    )


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("transform", ["grad", "jacrev"])
def test_reverse_mode_transforms_are_refused(path, op, transform):
    fn, _, args = _cases()[op]
    if transform == "grad":
        call = grad(lambda *a: fn(*a).sum(), argnums=_argnums(args))
    else:
        call = jacrev(fn, argnums=_argnums(args))
    with pytest.raises(
        RuntimeError, match=CPP_REFUSES if path == "cpp" else PYTHON_REFUSES
    ):
        call(*args)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("transform", ["jvp", "jacfwd"])
def test_forward_mode_cpp_is_refused(cpp_kernel, op, transform):
    fn, _, args = _cases()[op]
    with pytest.raises(RuntimeError, match=CPP_REFUSES):
        if transform == "jvp":
            jvp(fn, args, _tangents(args))
        else:
            jacfwd(fn, argnums=_argnums(args))(*args)


@pytest.mark.parametrize("op", OPS)
def test_forward_mode_register_autograd_gives_zero(python_kernel, op):
    """KNOWN LIMITATION (silently wrong): the autograd.Function that register_autograd
    generates has no jvp, and forward-mode AD through it yields zeros instead of raising."""
    fn, ref, args = _cases()[op]
    tangents = _tangents(args)
    out, tangent = jvp(fn, args, tangents)
    ref_out, ref_tangent = jvp(ref, args, tangents)
    _assert_same(out, ref_out)  # the primal output is right...
    assert torch.count_nonzero(tangent) == 0  # ...the tangent is all zeros...
    assert not torch.allclose(tangent, ref_tangent)  # ...and that is wrong
    jacobians = jacfwd(fn, argnums=_argnums(args))(*args)
    ref_jacobians = jacfwd(ref, argnums=_argnums(args))(*args)
    for jac, ref_jac in zip(jacobians, ref_jacobians, strict=True):
        assert jac.shape == ref_jac.shape
        assert torch.count_nonzero(jac) == 0
        assert not torch.allclose(jac, ref_jac)


# --- What works: a Python autograd.Function with setup_context over the operator -------------


class Matmul(torch.autograd.Function):
    """mylinearops.matmul for torch.func: the backward and jvp call Matmul itself, so under a
    transform the operator is reached only through this Function, which torch.func supports."""

    generate_vmap_rule = True

    @staticmethod
    def forward(A, B):
        return mylinearops.matmul(A, B)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.save_for_forward(*inputs)

    @staticmethod
    def backward(ctx, dC):
        A, B = ctx.saved_tensors
        return Matmul.apply(dC, B.mT), Matmul.apply(A.mT, dC)

    @staticmethod
    def jvp(ctx, dA, dB):
        A, B = ctx.saved_tensors
        return Matmul.apply(dA, B) + Matmul.apply(A, dB)


TRANSFORMS = {
    "grad": lambda f: grad(lambda a, b: f(a, b).sum(), argnums=(0, 1)),
    "jacrev": lambda f: jacrev(f, argnums=(0, 1)),
    "jacfwd": lambda f: jacfwd(f, argnums=(0, 1)),
    "vmap": lambda f: vmap(f, in_dims=(0, None)),
    "hessian": lambda f: torch.func.hessian(lambda a, b: (f(a, b) ** 2).sum()),
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_autograd_function_wrapper_supports_torch_func(path, transform):
    torch.manual_seed(0)
    A, B = _f64(3, 4), _f64(4, 2)
    if transform == "vmap":
        A = torch.stack([A, 2 * A])
    call = TRANSFORMS[transform]
    _assert_same(call(Matmul.apply)(A, B), call(torch.mm)(A, B))


def test_autograd_function_wrapper_jvp(path):
    torch.manual_seed(0)
    args, tangents = (_f64(3, 4), _f64(4, 2)), (_f64(3, 4), _f64(4, 2))
    _assert_same(jvp(Matmul.apply, args, tangents), jvp(torch.mm, args, tangents))


class _BackwardCallsOperator(Matmul):
    @staticmethod
    def backward(ctx, dC):
        A, B = ctx.saved_tensors
        return mylinearops.matmul(dC, B.mT), mylinearops.matmul(A.mT, dC)


class _JvpCallsOperator(Matmul):
    @staticmethod
    def jvp(ctx, dA, dB):
        A, B = ctx.saved_tensors
        return mylinearops.matmul(dA, B) + mylinearops.matmul(A, dB)


def test_autograd_function_wrapper_must_not_call_the_operator_in_backward_or_jvp(
    cpp_kernel,
):
    """The condition for the wrapper: under grad the backward (under jvp the jvp) runs inside
    the transform, where a direct call of the operator reaches the C++ autograd::Function."""
    torch.manual_seed(0)
    A, B = _f64(3, 4), _f64(4, 2)
    with pytest.raises(RuntimeError, match=CPP_REFUSES):
        TRANSFORMS["grad"](_BackwardCallsOperator.apply)(A, B)
    _assert_same(
        jvp(_BackwardCallsOperator.apply, (A, B), (B.new_ones(3, 4), B)),
        jvp(torch.mm, (A, B), (B.new_ones(3, 4), B)),
    )
    with pytest.raises(RuntimeError, match=CPP_REFUSES):
        jvp(_JvpCallsOperator.apply, (A, B), (A, B))
    _assert_same(
        TRANSFORMS["grad"](_JvpCallsOperator.apply)(A, B),
        TRANSFORMS["grad"](torch.mm)(A, B),
    )
