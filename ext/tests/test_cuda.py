"""CUDA kernels: each checked against a float64 reference. Skipped (with the
reason) where there is no GPU; the CUDA sources are still compiled by every
build that finds nvcc (see test_build.py)."""

from __future__ import annotations

import pytest
import torch

import mylinearops
from conftest import CUDA_ALGOS, assert_close_to_reference, cpp_error, reference, requires_gpu

pytestmark = requires_gpu

KERNELS = tuple(a for a in CUDA_ALGOS if a != "auto")
DTYPES = (torch.float32, torch.float64)
SHAPES = [
    (1, 1, 1),
    (7, 13, 11),
    (1, 64, 1),
    (1000, 3, 2),
    (2, 3, 1000),
    (3, 1000, 2),
    (127, 9, 129),  # one past / short of the 128 x 128 block tile
    (128, 8, 128),  # exactly one tile, one k step
    (129, 257, 65),
    (300, 70, 520),
    (512, 512, 512),
]


@pytest.fixture(autouse=True)
def _no_tf32():
    # Our kernels are exact FP32; compare against FP32 cuBLAS, not TF32.
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32 = old


@pytest.mark.parametrize("algo", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_cuda_matmul_matches_reference(algo, dtype, shape):
    m, k, n = shape
    A = torch.randn(m, k, dtype=dtype, device="cuda")
    B = torch.randn(k, n, dtype=dtype, device="cuda")
    out = mylinearops.matmul(A, B, algo=algo)
    assert out.device == A.device and out.shape == (m, n) and out.is_contiguous()
    assert_close_to_reference(out, reference(A, B), k)


def _operand(rows, cols, layout, dtype):
    """A rows x cols matrix on the GPU stored row-major, column-major, strided, or misaligned."""
    if layout == "row":
        return torch.randn(rows, cols, dtype=dtype, device="cuda")
    if layout == "col":
        return torch.randn(cols, rows, dtype=dtype, device="cuda").t()
    if layout == "strided":
        return torch.randn(rows, 2 * cols, dtype=dtype, device="cuda")[:, ::2]
    if layout == "misaligned":  # row-major but starting 1 element into the storage
        return torch.randn(rows * cols + 1, dtype=dtype, device="cuda")[1:].view(rows, cols)
    raise ValueError(layout)


LAYOUTS = ("row", "col", "strided", "misaligned")


@pytest.mark.parametrize("algo", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout_a", LAYOUTS)
@pytest.mark.parametrize("layout_b", LAYOUTS)
def test_cuda_layouts(algo, dtype, layout_a, layout_b):
    # Covers every tile-loading path of the register-blocked kernel
    # (row-major / column-major vector loads, scalar fallback), plus
    # sizes where vector loads are not allowed (k, n not multiples of 4).
    for m, k, n in [(136, 24, 200), (67, 13, 70)]:
        A, B = _operand(m, k, layout_a, dtype), _operand(k, n, layout_b, dtype)
        out = mylinearops.matmul(A, B, algo=algo)
        assert_close_to_reference(out, reference(A, B), k)


@pytest.mark.parametrize("algo", KERNELS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_linearop_bias(algo, dtype):
    for m, k, n in [(5, 300, 70), (130, 17, 131)]:
        X = torch.randn(m, k, dtype=dtype, device="cuda")
        W = torch.randn(k, n, dtype=dtype, device="cuda")
        b = torch.randn(2 * n, dtype=dtype, device="cuda")[::2]
        assert_close_to_reference(mylinearops.linearop(X, W, b, algo=algo), reference(X, W, b), k)


@pytest.mark.parametrize("algo", KERNELS)
def test_cuda_zero_size(algo):
    A, B, b = (torch.randn(3, 0, device="cuda"), torch.randn(0, 4, device="cuda"), torch.randn(4, device="cuda"))
    assert torch.equal(mylinearops.matmul(A, B, algo=algo), torch.zeros(3, 4, device="cuda"))
    assert torch.equal(mylinearops.linearop(A, B, b, algo=algo), b.expand(3, 4))
    assert mylinearops.matmul(torch.randn(0, 5, device="cuda"), torch.randn(5, 2, device="cuda"), algo=algo).shape == (0, 2)


@pytest.mark.parametrize("algo", KERNELS)
def test_cuda_gradcheck(algo):
    X = torch.randn(4, 6, dtype=torch.float64, device="cuda", requires_grad=True)
    W = torch.randn(6, 3, dtype=torch.float64, device="cuda", requires_grad=True)
    b = torch.randn(3, dtype=torch.float64, device="cuda", requires_grad=True)
    assert torch.autograd.gradcheck(lambda *t: mylinearops.linearop(*t, algo=algo), (X, W, b))


def test_cuda_runs_on_the_current_stream():
    A, B = torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1024, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = mylinearops.matmul(A, B)
        out_copy = out.clone()  # ordered after the kernel only if it ran on `side`
    torch.cuda.synchronize()
    torch.testing.assert_close(out_copy, A @ B, rtol=1e-4, atol=1e-3)


def test_cuda_error_on_mixed_devices():
    with pytest.raises(RuntimeError, match=r"A and B must be on the same device, but A is on cpu and B is on cuda:0"):
        mylinearops.matmul(torch.randn(2, 3), torch.randn(3, 4, device="cuda"))
    with pytest.raises(RuntimeError, match=r"b must be on the same device as X and W \(cuda:0\), but b is on cpu"):
        mylinearops.linearop(torch.randn(2, 3, device="cuda"), torch.randn(3, 4, device="cuda"), torch.randn(4))
    with pytest.raises(cpp_error(ValueError), match=r"algo 'packed' is a cpu kernel, but the inputs are on cuda"):
        mylinearops.matmul(torch.randn(2, 3, device="cuda"), torch.randn(3, 4, device="cuda"), algo="packed")


def test_cuda_linear_layer_trains_like_nn_linear():
    torch.manual_seed(0)
    ref = torch.nn.Linear(32, 8).cuda()
    ours = mylinearops.LinearLayer.from_linear(ref)
    assert ours.weight.device.type == "cuda"
    x = torch.randn(16, 32, device="cuda")
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-4, atol=1e-5)
    ours(x).square().sum().backward()
    ref(x).square().sum().backward()
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad.t(), rtol=1e-4, atol=1e-4)


def test_cuda_opcheck_and_compile():
    A = torch.randn(6, 5, device="cuda", requires_grad=True)
    B = torch.randn(5, 4, device="cuda", requires_grad=True)
    torch.library.opcheck(torch.ops.mylinearops.matmul.default, (A, B))
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: mylinearops.matmul(a, b).relu(), fullgraph=True)
    torch.testing.assert_close(compiled(A, B), mylinearops.matmul(A, B).relu())
