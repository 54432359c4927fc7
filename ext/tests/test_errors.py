"""Bad inputs raise errors that name the problem and the shapes/dtypes involved.

Errors are part of the interface: every case below must raise the given
exception type with a message matching the pattern, never crash and never
return a (wrong) result. The C++ checks (eager) and the fake implementation
(torch.compile / FakeTensorMode) must say the same thing.
"""

from __future__ import annotations

import pytest
import torch

import mylinearops
from conftest import STABLE_ABI, either_error
from mylinearops import LinearLayer

f32, f64 = torch.float32, torch.float64
ops = torch.ops.mylinearops


def t(*shape, dtype=f32, device="cpu"):
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(*shape, dtype=dtype, device=device)
    return torch.zeros(*shape, dtype=dtype, device=device)


SUPPORTED = r"; supported dtypes are float32 and float64"

# (id, call, exception type, regex the message must match)
BAD_INPUTS = [
    # --- matmul: ranks
    ("A 1-D", lambda: mylinearops.matmul(t(3), t(3, 4)), RuntimeError,
     r"mylinearops\.matmul: A must be a 2-D matrix, but got a 1-D tensor of shape \[3\]"),
    ("A 3-D", lambda: mylinearops.matmul(t(2, 3, 4), t(4, 5)), RuntimeError,
     r"A must be a 2-D matrix, but got a 3-D tensor of shape \[2, 3, 4\]"),
    ("A 0-D", lambda: mylinearops.matmul(torch.tensor(1.0), t(1, 1)), RuntimeError,
     r"A must be a 2-D matrix, but got a 0-D tensor of shape \[\]"),
    ("B 1-D", lambda: mylinearops.matmul(t(3, 4), t(4)), RuntimeError,
     r"B must be a 2-D matrix, but got a 1-D tensor of shape \[4\]"),
    ("B 4-D", lambda: mylinearops.matmul(t(3, 4), t(1, 1, 4, 5)), RuntimeError,
     r"B must be a 2-D matrix, but got a 4-D tensor of shape \[1, 1, 4, 5\]"),
    # --- matmul: inner dimensions
    ("inner mismatch", lambda: mylinearops.matmul(t(3, 4), t(5, 6)), RuntimeError,
     r"mylinearops\.matmul: inner dimensions differ: A is \[3, 4\] but B is \[5, 6\]"),
    ("inner mismatch, A empty", lambda: mylinearops.matmul(t(3, 0), t(1, 2)), RuntimeError,
     r"inner dimensions differ: A is \[3, 0\] but B is \[1, 2\]"),
    ("transposed operand", lambda: mylinearops.matmul(t(3, 4), t(3, 4)), RuntimeError,
     r"inner dimensions differ: A is \[3, 4\] but B is \[3, 4\]"),
    # --- matmul: dtypes
    ("int32 A", lambda: mylinearops.matmul(t(3, 4, dtype=torch.int32), t(4, 5)), TypeError,
     r"mylinearops\.matmul: unsupported dtype int32 for A \(shape \[3, 4\]\)" + SUPPORTED),
    ("int64 B", lambda: mylinearops.matmul(t(3, 4), t(4, 5, dtype=torch.int64)), TypeError,
     r"unsupported dtype int64 for B \(shape \[4, 5\]\)" + SUPPORTED),
    ("bool", lambda: mylinearops.matmul(t(2, 2, dtype=torch.bool), t(2, 2, dtype=torch.bool)), TypeError,
     r"unsupported dtype bool for A \(shape \[2, 2\]\)" + SUPPORTED),
    ("uint8", lambda: mylinearops.matmul(t(2, 2, dtype=torch.uint8), t(2, 2, dtype=torch.uint8)), TypeError,
     r"unsupported dtype uint8 for A"),
    ("float16", lambda: mylinearops.matmul(t(2, 3, dtype=torch.float16), t(3, 2, dtype=torch.float16)), TypeError,
     r"unsupported dtype float16 for A \(shape \[2, 3\]\)" + SUPPORTED),
    ("bfloat16", lambda: mylinearops.matmul(t(2, 3), t(3, 2, dtype=torch.bfloat16)), TypeError,
     r"unsupported dtype bfloat16 for B \(shape \[3, 2\]\)"),
    ("complex64", lambda: mylinearops.matmul(t(2, 3, dtype=torch.complex64), t(3, 2)), TypeError,
     r"unsupported dtype complex64 for A"),
    ("float32 @ float64", lambda: mylinearops.matmul(t(3, 4), t(4, 5, dtype=f64)), TypeError,
     r"A and B must have the same dtype, but A is float32 \[3, 4\] and B is float64 \[4, 5\]"),
    # --- matmul: devices (meta stands in for a second device on GPU-less machines)
    ("cpu @ meta", lambda: mylinearops.matmul(t(3, 4), t(4, 5, device="meta")), RuntimeError,
     r"A and B must be on the same device, but A is on cpu and B is on meta"),
    # --- matmul: algo
    ("unknown algo", lambda: mylinearops.matmul(t(2, 2), t(2, 2), algo="fastest"), ValueError,
     r"unknown algo 'fastest' for cpu tensors; choose one of: auto,reference,blocked,packed"),
    ("CUDA algo on CPU tensors", lambda: mylinearops.matmul(t(2, 2), t(2, 2), algo="naive"), ValueError,
     r"algo 'naive' is a cuda kernel, but the inputs are on cpu; cpu algos are: auto,reference"),
    # --- matmul: not tensors
    ("A is a list", lambda: mylinearops.matmul([[1.0]], t(1, 1)), TypeError,
     r"mylinearops\.matmul: A must be a torch\.Tensor, but got list"),
    ("B is None", lambda: mylinearops.matmul(t(1, 1), None), TypeError,
     r"B must be a torch\.Tensor, but got NoneType"),
    # --- linearop: shapes
    ("W 1-D", lambda: mylinearops.linearop(t(2, 4), t(4)), RuntimeError,
     r"mylinearops\.linearop: W must be a 2-D matrix, but got a 1-D tensor of shape \[4\]"),
    ("X 0-D", lambda: mylinearops.linearop(torch.tensor(2.0), t(1, 3)), RuntimeError,
     r"X must have shape \(\.\.\., in_features\), but got a 0-D tensor"),
    ("X features != in_features", lambda: mylinearops.linearop(t(3, 5), t(4, 2)), RuntimeError,
     r"X's last dimension must equal W's first dimension \(in_features\): X is \[3, 5\] but W is \[4, 2\]"),
    # 2*6*4 = 48 = 16*3: a reshape(-1, 3) would "work" and compute garbage.
    ("batched X whose numel fits W", lambda: mylinearops.linearop(t(2, 6, 4), t(3, 5)), RuntimeError,
     r"X is \[2, 6, 4\] but W is \[3, 5\]"),
    # --- linearop: bias
    ("bias wrong length", lambda: mylinearops.linearop(t(2, 4), t(4, 6), t(5)), RuntimeError,
     r"mylinearops\.linearop: b must be a 1-D tensor of size 6 \(W is \[4, 6\]\), but got shape \[5\]"),
    ("bias 2-D", lambda: mylinearops.linearop(t(2, 4), t(4, 6), t(1, 6)), RuntimeError,
     r"b must be a 1-D tensor of size 6 \(W is \[4, 6\]\), but got shape \[1, 6\]"),
    ("bias 0-D", lambda: mylinearops.linearop(t(2, 4), t(4, 1), torch.tensor(1.0)), RuntimeError,
     r"b must be a 1-D tensor of size 1 \(W is \[4, 1\]\), but got shape \[\]"),
    ("bias float64", lambda: mylinearops.linearop(t(2, 4), t(4, 6), t(6, dtype=f64)), TypeError,
     r"b must have the same dtype as X and W \(float32\), but b is float64"),
    ("bias int64", lambda: mylinearops.linearop(t(2, 4), t(4, 6), t(6, dtype=torch.int64)), TypeError,
     r"unsupported dtype int64 for b \(shape \[6\]\)" + SUPPORTED),
    ("bias on another device", lambda: mylinearops.linearop(t(2, 4), t(4, 6), t(6, device="meta")), RuntimeError,
     r"b must be on the same device as X and W \(cpu\), but b is on meta"),
    ("bias is a list", lambda: mylinearops.linearop(t(2, 4), t(4, 6), [0.0] * 6), TypeError,
     r"mylinearops\.linearop: b must be a torch\.Tensor, but got list"),
    ("X float64, W float32", lambda: mylinearops.linearop(t(2, 4, dtype=f64), t(4, 6)), TypeError,
     r"X and W must have the same dtype, but X is float64 \[2, 4\] and W is float32 \[4, 6\]"),
    # --- the operators called directly (no Python wrapper)
    ("op: X 3-D", lambda: ops.linearop(t(2, 3, 4), t(4, 5)), RuntimeError,
     r"mylinearops\.linearop: X must be a 2-D matrix, but got a 3-D tensor of shape \[2, 3, 4\]"),
    ("op: inner mismatch", lambda: ops.linearop(t(3, 4), t(5, 6), None), RuntimeError,
     r"inner dimensions differ: X is \[3, 4\] but W is \[5, 6\]"),
    # --- LinearLayer
    ("LinearLayer wrong features", lambda: LinearLayer(4, 2)(t(3, 5)), RuntimeError,
     r"X is \[3, 5\] but W is \[4, 2\]"),
    ("LinearLayer float64 input", lambda: LinearLayer(4, 2)(t(3, 4, dtype=f64)), TypeError,
     r"X and W must have the same dtype, but X is float64 \[3, 4\] and W is float32 \[4, 2\]"),
    ("LinearLayer int input", lambda: LinearLayer(4, 2)(t(3, 4, dtype=torch.int64)), TypeError,
     r"unsupported dtype int64 for X \(shape \[3, 4\]\)"),
]


@pytest.mark.parametrize("call, exc, pattern", [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_raises_clear_error(call, exc, pattern):
    with pytest.raises(either_error(exc), match=pattern):
        call()


def test_at_least_25_bad_inputs():
    assert len(BAD_INPUTS) >= 25


# Operator-level calls whose C++ message (eager) and fake message (what
# torch.compile reports at trace time) must be identical.
PARITY_CASES = [
    ("matmul", (t(3), t(3, 4)), {}),
    ("matmul", (t(2, 3, 4), t(4, 5)), {}),
    ("matmul", (t(3, 4), t(5, 6)), {}),
    ("matmul", (t(3, 4, dtype=torch.int32), t(4, 5)), {}),
    ("matmul", (t(3, 4), t(4, 5, dtype=torch.bool)), {}),
    ("matmul", (t(3, 4), t(4, 5, dtype=f64)), {}),
    ("matmul", (t(2, 2), t(2, 2)), {"algo": "fastest"}),
    ("matmul", (t(2, 2), t(2, 2)), {"algo": "register_blocked"}),
    ("linearop", (t(2, 4), t(4, 6), t(5)), {}),
    ("linearop", (t(2, 4), t(4, 6), t(1, 6)), {}),
    ("linearop", (t(2, 4), t(4, 6), t(6, dtype=f64)), {}),
    ("linearop", (t(2, 4), t(4, 6), t(6, dtype=torch.int64)), {}),
    ("linearop", (t(2, 3, 4), t(4, 5), None), {}),
]


@pytest.mark.parametrize("name, args, kwargs", PARITY_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(PARITY_CASES)])
def test_fake_and_real_errors_agree(name, args, kwargs):
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = getattr(ops, name)
    with pytest.raises(Exception) as real:
        op(*args, **kwargs)
    with FakeTensorMode() as mode:
        fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        with pytest.raises(Exception) as fake:
            op(*fake_args, **kwargs)
    if STABLE_ABI:  # the C++ side can only raise RuntimeError there (conftest.cpp_error)
        assert type(real.value) is RuntimeError and isinstance(fake.value, (RuntimeError, TypeError, ValueError))
    else:
        assert type(fake.value) is type(real.value)
    real_msg = str(real.value).splitlines()[0]
    assert real_msg.startswith(f"mylinearops.{name}: ")
    assert real_msg == str(fake.value).splitlines()[0]


def test_errors_leave_no_partial_state():
    # A failed call must not poison later calls (e.g. scratch buffers).
    with pytest.raises(RuntimeError):
        mylinearops.matmul(t(3, 4), t(5, 6))
    A, B = t(3, 4), t(4, 5)
    torch.testing.assert_close(mylinearops.matmul(A, B), A @ B)


def test_gpu_fma_loop_refuses_what_it_cannot_run():
    # Checked before anything needs a GPU, so these hold on every machine and build.
    with pytest.raises(RuntimeError, match=r"mylinearops.cuda_fma_loop: out must be a CUDA tensor, but it is on cpu"):
        torch.ops.mylinearops.cuda_fma_loop(torch.empty(8), 1)
    with pytest.raises(ValueError, match=r"device must be a CUDA device, got cpu"):
        mylinearops.gpu_fma_loop("cpu")
    with pytest.raises(ValueError, match=r"seconds must be in \(0, 10\], got 0"):
        mylinearops.gpu_fma_peak_gflops(seconds=0)
