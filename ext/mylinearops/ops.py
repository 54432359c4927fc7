"""The public functions, and the Python halves of the operators.

The C++ library (csrc/mylinearops.cpp, or csrc/stable/mylinearops_stable.cpp in
the stable-ABI build) registers two operators:

    mylinearops::matmul(Tensor A, Tensor B, str algo="auto") -> Tensor
    mylinearops::linearop(Tensor X, Tensor W, Tensor? b=None, str algo="auto") -> Tensor

with CPU and CUDA kernels, and (regular build) their autograd formulas
(csrc/autograd.cpp). This module adds the Python API around them, a fake
implementation (shapes only, for torch.compile and meta tensors) and, for the
stable-ABI build, which cannot reach C++ autograd, the autograd formulas.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["ALGOS", "available_algos", "build_info", "linearop", "matmul"]

_ops = torch.ops.mylinearops


def _parse_build_info() -> dict[str, object]:
    info: dict[str, object] = {}
    for item in _ops.build_info().split(";"):
        key, _, value = item.partition("=")
        info[key] = value
    info.setdefault("abi", "regular")  # libraries built before the stable build existed
    info["with_cuda"] = info["with_cuda"] == "1"
    info["openmp"] = info["openmp"] == "1"
    info["avx512_emulated"] = info.get("avx512_emulated") == "1"
    for key in ("cpu_algos", "cuda_algos", "cpu_microkernels"):
        info[key] = tuple(str(info[key]).split(",")) if info[key] else ()
    return info


_INFO = _parse_build_info()

#: Every ``algo=`` name per device type, as the C++ library defines them.
ALGOS: dict[str, tuple[str, ...]] = {"cpu": _INFO["cpu_algos"], "cuda": _INFO["cuda_algos"]}  # type: ignore[dict-item]


def build_info() -> dict[str, object]:
    """How the loaded library was built: abi (regular or stable), with_cuda, algos, CPU
    micro-kernels, compiler, openmp, avx512_emulated (a test build, see ext/README.md), origin
    (loaded_from: package or jit) and the library's file."""
    from . import _LOADED_FROM, jit

    info = dict(_INFO)
    info["loaded_from"] = _LOADED_FROM
    if _LOADED_FROM == "jit":
        info["library"] = jit._loaded.get("path")
    else:
        from . import _C

        info["library"] = _C.__file__
    return info


def available_algos(device: str | torch.device = "cpu") -> tuple[str, ...]:
    """The ``algo=`` names that run on this device type on this machine."""
    kind = torch.device(device).type
    if kind == "cpu":
        usable = set(_INFO["cpu_microkernels"])  # type: ignore[arg-type]
        return tuple(
            a for a in ALGOS["cpu"] if not a.startswith("packed_") or a.removeprefix("packed_") in usable
        )
    if kind == "cuda":
        return ALGOS["cuda"] if _INFO["with_cuda"] else ()
    return ()


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def matmul(A: Tensor, B: Tensor, *, algo: str = "auto") -> Tensor:
    """A (m, k) @ B (k, n) -> (m, n), float32 or float64, on CPU or CUDA.

    ``algo`` picks the kernel (see ``available_algos``); "auto" is the fastest.
    A and B may be any strided views (e.g. ``W.t()``): nothing is copied.
    """
    _check_tensor_args("mylinearops.matmul", A=A, B=B)
    return _ops.matmul(A, B, algo)


def linearop(X: Tensor, W: Tensor, b: Tensor | None = None, *, algo: str = "auto") -> Tensor:
    """Y = X @ W + b with W of shape (in_features, out_features).

    X is (..., in_features) like nn.Linear's input: leading batch dimensions
    are flattened for the kernel and restored on the output. b is None or
    (out_features,). Note W is the transpose of nn.Linear's weight.
    """
    op = "mylinearops.linearop"
    _check_tensor_args(op, X=X, W=W, b=b)
    # Plain `if`/`raise` rather than torch._check: torch.compile traces this
    # function, and cannot trace a torch._check message that mentions tensors.
    if W.dim() != 2:
        raise RuntimeError(f"{op}: W must be a 2-D matrix, but got a {W.dim()}-D tensor of shape {list(W.shape)}")
    if X.dim() < 1:
        raise RuntimeError(f"{op}: X must have shape (..., in_features), but got a 0-D tensor")
    # Checked before the reshape: X.reshape(-1, W.shape[0]) would otherwise
    # succeed for some wrong shapes and give a silently wrong result.
    if X.shape[-1] != W.shape[0]:
        raise RuntimeError(
            f"{op}: X's last dimension must equal W's first dimension (in_features): "
            f"X is {list(X.shape)} but W is {list(W.shape)}"
        )
    if X.dim() == 2:
        return _ops.linearop(X, W, b, algo)
    Y = _ops.linearop(X.reshape(-1, X.shape[-1]), W, b, algo)
    return Y.reshape(*X.shape[:-1], W.shape[1])


def _check_tensor_args(op: str, **args: object) -> None:
    for name, value in args.items():
        if value is None and name == "b":
            continue
        if not isinstance(value, Tensor):
            raise TypeError(f"{op}: {name} must be a torch.Tensor, but got {type(value).__name__}")


# ---------------------------------------------------------------------------
# Fake implementations: output shape/dtype/device, and the same input checks
# as the C++ operator layer (check_inputs in csrc/mylinearops.cpp), so
# torch.compile reports a bad call at trace time with the same message.
# tests/test_errors.py compares the two message by message.
# ---------------------------------------------------------------------------

_MATMUL_NAMES = ("mylinearops.matmul", "A", "B", "bias")
_LINEAROP_NAMES = ("mylinearops.linearop", "X", "W", "b")
_SUPPORTED_DTYPES = (torch.float32, torch.float64)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _check_inputs(names: tuple[str, str, str, str], A: Tensor, B: Tensor, bias: Tensor | None, algo: str) -> None:
    op, a, b, bn = names
    torch._check(
        A.dim() == 2, lambda: f"{op}: {a} must be a 2-D matrix, but got a {A.dim()}-D tensor of shape {list(A.shape)}"
    )
    torch._check(
        B.dim() == 2, lambda: f"{op}: {b} must be a 2-D matrix, but got a {B.dim()}-D tensor of shape {list(B.shape)}"
    )

    def check_dtype(name: str, t: Tensor) -> None:
        torch._check_type(
            t.dtype in _SUPPORTED_DTYPES,
            lambda: f"{op}: unsupported dtype {_dtype_name(t.dtype)} for {name} (shape {list(t.shape)}); "
            "supported dtypes are float32 and float64",
        )

    check_dtype(a, A)
    check_dtype(b, B)
    torch._check_type(
        A.dtype == B.dtype,
        lambda: f"{op}: {a} and {b} must have the same dtype, but {a} is {_dtype_name(A.dtype)} "
        f"{list(A.shape)} and {b} is {_dtype_name(B.dtype)} {list(B.shape)}",
    )
    torch._check(
        A.device == B.device,
        lambda: f"{op}: {a} and {b} must be on the same device, but {a} is on {A.device} and {b} is on {B.device}",
    )
    torch._check(
        A.shape[1] == B.shape[0],
        lambda: f"{op}: inner dimensions differ: {a} is {list(A.shape)} but {b} is {list(B.shape)}",
    )
    if bias is not None:
        check_dtype(bn, bias)
        torch._check_type(
            bias.dtype == A.dtype,
            lambda: f"{op}: {bn} must have the same dtype as {a} and {b} ({_dtype_name(A.dtype)}), "
            f"but {bn} is {_dtype_name(bias.dtype)}",
        )
        torch._check(
            bias.device == A.device,
            lambda: f"{op}: {bn} must be on the same device as {a} and {b} ({A.device}), but {bn} is on {bias.device}",
        )
        torch._check(
            bias.dim() == 1 and bias.shape[0] == B.shape[1],
            lambda: f"{op}: {bn} must be a 1-D tensor of size {B.shape[1]} ({b} is {list(B.shape)}), "
            f"but got shape {list(bias.shape)}",
        )
    _check_algo(op, algo, A.device.type)


def _check_algo(op: str, algo: str, device: str) -> None:
    names = ALGOS.get(device)
    if names is None or algo in names:  # e.g. real meta tensors: any name
        return
    for other, other_names in ALGOS.items():
        if algo in other_names:
            torch._check_value(
                False,
                lambda: f"{op}: algo '{algo}' is a {other} kernel, but the inputs are on {device}; "
                f"{device} algos are: {','.join(names)}",
            )
    torch._check_value(
        False, lambda: f"{op}: unknown algo '{algo}' for {device} tensors; choose one of: {','.join(names)}"
    )


# [book:fake-impl]
@torch.library.register_fake("mylinearops::matmul")
def _matmul_fake(A: Tensor, B: Tensor, algo: str = "auto") -> Tensor:
    _check_inputs(_MATMUL_NAMES, A, B, None, algo)
    return A.new_empty((A.shape[0], B.shape[1]))


@torch.library.register_fake("mylinearops::linearop")
def _linearop_fake(X: Tensor, W: Tensor, b: Tensor | None = None, algo: str = "auto") -> Tensor:
    _check_inputs(_LINEAROP_NAMES, X, W, b, algo)
    return X.new_empty((X.shape[0], W.shape[1]))


# [/book:fake-impl]


# Autograd: the regular build registers it in C++ (csrc/autograd.cpp) under the
# Autograd dispatch key: dA = dC @ B^T, dB = A^T @ dC, db = dC.sum(0). Not
# torch.library.register_autograd: a Python autograd kernel runs Python on
# every call, which costs as much as a small matrix product. The stable ABI
# has no C++ autograd, so the stable build pays that price: the same formulas,
# registered here.


# [book:stable-autograd]
def _setup_context(ctx, inputs, output) -> None:
    first, second, *rest = inputs
    ctx.algo = rest[-1]
    ctx.has_bias = len(rest) == 2 and rest[0] is not None
    # Save only what the requested gradients need (as csrc/autograd.cpp does).
    ctx.save_for_backward(
        first if ctx.needs_input_grad[1] else None, second if ctx.needs_input_grad[0] else None
    )


def _matmul_backward(ctx, grad):
    A, B = ctx.saved_tensors
    dA = _ops.matmul(grad, B.mT, ctx.algo) if ctx.needs_input_grad[0] else None
    dB = _ops.matmul(A.mT, grad, ctx.algo) if ctx.needs_input_grad[1] else None
    return dA, dB, None


def _linearop_backward(ctx, grad):
    dX, dW, _ = _matmul_backward(ctx, grad)
    db = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
    return dX, dW, db, None


if _INFO["abi"] == "stable":
    torch.library.register_autograd("mylinearops::matmul", _matmul_backward, setup_context=_setup_context)
    torch.library.register_autograd("mylinearops::linearop", _linearop_backward, setup_context=_setup_context)
# [/book:stable-autograd]
