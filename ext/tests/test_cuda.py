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


def test_cuda_large_square_product():
    # 4096^3: 32 x 32 tiles of the register-blocked kernel and 512 k steps of its double buffer
    A = torch.randn(4096, 4096, device="cuda")
    B = torch.randn(4096, 4096, device="cuda")
    expected = A.double() @ B.double()  # float64 on the GPU: a CPU reference would take seconds
    for algo in KERNELS:
        out = mylinearops.matmul(A, B, algo=algo)
        assert_close_to_reference(out, expected.cpu(), 4096)


def test_cuda_grid_limits():
    # Columns of C go to blockIdx.y (at most 65535 blocks): register_blocked's 128-wide
    # blocks reach 8,388,480 columns, naive's 16-wide ones 1,048,560; past that, a clear error.
    n = 65535 * 16 + 1
    A = torch.randn(3, 2, device="cuda")
    B = torch.randn(2, n, device="cuda")
    out = mylinearops.matmul(A, B, algo="register_blocked")
    torch.testing.assert_close(out, A @ B, rtol=1e-5, atol=1e-5)
    with pytest.raises(RuntimeError, match=r"a 3 x 1048561 output is too large for the naive CUDA kernel's grid"):
        mylinearops.matmul(A, B, algo="naive")
    tall = torch.randn(70_000, 4, device="cuda")  # rows go to blockIdx.x: no such limit
    W = torch.randn(4, 5, device="cuda")
    assert_close_to_reference(mylinearops.matmul(tall, W), reference(tall, W), 4)


def test_gpu_fma_loop_runs_every_step():
    # 8 chains per thread, x <- x * a + b from x = 1..8: after s steps each chain is
    # a**s * x0 + b * (1 - a**s) / (1 - a), with a and b the float32 values of the defaults.
    out = torch.empty(1000, device="cuda")
    iterations = 3
    flops = torch.ops.mylinearops.cuda_fma_loop(out, iterations)
    steps = 16 * iterations
    assert flops == 2 * 8 * steps * out.numel()
    a, b = (float(torch.tensor(v, dtype=torch.float32)) for v in (0.9999, 0.0001))
    expected = sum(a**steps * x0 + b * (1 - a**steps) / (1 - a) for x0 in range(1, 9))
    torch.testing.assert_close(out.cpu(), torch.full((1000,), expected), rtol=1e-5, atol=0)


def test_gpu_fma_peak_is_measured():
    run, per_iteration = mylinearops.gpu_fma_loop()
    assert run(2) == 2 * per_iteration
    assert mylinearops.gpu_fma_peak_gflops(seconds=0.01, repeats=2) > 0


def test_gpu_fma_loop_errors():
    with pytest.raises(cpp_error(TypeError), match=r"out must be float32 .* but it is float64"):
        torch.ops.mylinearops.cuda_fma_loop(torch.empty(8, dtype=torch.float64, device="cuda"), 1)
    with pytest.raises(RuntimeError, match=r"out must be a contiguous 1-D tensor .* shape \[4, 2\]"):
        torch.ops.mylinearops.cuda_fma_loop(torch.empty(4, 2, device="cuda"), 1)
    with pytest.raises(cpp_error(ValueError), match=r"iterations must be at least 1, got 0"):
        torch.ops.mylinearops.cuda_fma_loop(torch.empty(8, device="cuda"), 0)
