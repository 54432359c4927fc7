"""Every CPU kernel variant against torch (float64 reference), on many shapes and layouts."""

from __future__ import annotations

import pytest
import torch

import mylinearops
from conftest import CPU_ALGOS, assert_close_to_reference, reference

DTYPES = (torch.float32, torch.float64)

# (m, k, n). Chosen to hit the kernels' edges: 1x1, primes, tall/skinny,
# sizes just past the micro-tile (12 x 32), k longer than one kc block (256,
# so the packed kernel accumulates across k steps), several macro tiles.
SHAPES = [
    (1, 1, 1),
    (2, 3, 4),
    (7, 13, 11),
    (31, 37, 41),
    (1, 64, 1),
    (1000, 3, 2),
    (2, 3, 1000),
    (3, 1000, 2),
    (13, 33, 33),
    (129, 257, 65),
    (37, 600, 45),
    (300, 70, 1100),
]


@pytest.mark.parametrize("algo", CPU_ALGOS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_matches_torch(algo, dtype, shape):
    m, k, n = shape
    A = torch.randn(m, k, dtype=dtype)
    B = torch.randn(k, n, dtype=dtype)
    out = mylinearops.matmul(A, B, algo=algo)
    assert out.shape == (m, n) and out.dtype == dtype and out.is_contiguous()
    assert_close_to_reference(out, reference(A, B), k)


@pytest.mark.parametrize("algo", CPU_ALGOS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(37, 600, 45), (5, 300, 70), (2, 1, 3)], ids=lambda s: "x".join(map(str, s)))
def test_linearop_bias_added_once(algo, dtype, shape):
    # k > 256 makes the packed kernel write C in several k steps: the bias
    # must be added in the first one only.
    m, k, n = shape
    X, W, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype), torch.randn(n, dtype=dtype)
    out = mylinearops.linearop(X, W, b, algo=algo)
    assert_close_to_reference(out, reference(X, W, b), k)


def _layouts(m, k, n, dtype):
    """(name, A, B) with the same values in different memory layouts."""
    A = torch.randn(m, k, dtype=dtype)
    B = torch.randn(k, n, dtype=dtype)
    wide = torch.randn(m, 2 * k, dtype=dtype)
    yield "contiguous", A, B
    yield "A transposed view", A.t().contiguous().t(), B
    yield "B transposed view", A, B.t().contiguous().t()
    yield "both transposed views", A.t().contiguous().t(), B.t().contiguous().t()
    yield "A column slice (row stride 2k)", wide[:, :k], B
    yield "A every other column", wide[:, ::2], B
    yield "B every other row", A, torch.randn(2 * k, n, dtype=dtype)[::2]
    yield "B broadcast row (stride 0)", A, torch.randn(1, n, dtype=dtype).expand(k, n)
    yield "A storage offset", torch.randn(m * k + 1, dtype=dtype)[1:].view(m, k), B


@pytest.mark.parametrize("algo", CPU_ALGOS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_inputs(algo, dtype):
    for m, k, n in [(7, 5, 3), (45, 300, 70)]:
        for name, A, B in _layouts(m, k, n, dtype):
            out = mylinearops.matmul(A, B, algo=algo)
            try:
                assert_close_to_reference(out, reference(A, B), k)
            except AssertionError as e:
                raise AssertionError(f"{name}, shape {(m, k, n)}: {e}") from None


@pytest.mark.parametrize("algo", [a for a in CPU_ALGOS if a.startswith("packed")])
@pytest.mark.parametrize("k", [1, 3, 4, 6, 69])
def test_packed_row_major_a_any_row_stride_and_k(algo, k):
    # 1040 rows, more than the tuned rule ever reads in place (tuning.h): A is packed, in 4 x 4
    # blocks through registers where the tile's MR allows and the last k % 4 columns element
    # by element, from rows k + 5 floats apart.
    wide, B = torch.randn(1040, k + 5), torch.randn(k, 100)  # wider than any tile
    for name, A in [("column slice", wide[:, :k]), ("storage offset", wide[:, 5:])]:
        out = mylinearops.matmul(A, B, algo=algo)
        assert mylinearops.last_gemm_plan()["pack_a"], name
        try:
            assert_close_to_reference(out, reference(A, B), k)
        except AssertionError as e:
            raise AssertionError(f"{name}, k={k}: {e}") from None


@pytest.mark.parametrize("algo", CPU_ALGOS)
def test_strided_bias(algo):
    X, W = torch.randn(9, 20), torch.randn(20, 6)
    b = torch.randn(12)[::2]  # stride 2
    assert_close_to_reference(mylinearops.linearop(X, W, b, algo=algo), reference(X, W, b), 20)


@pytest.mark.parametrize("algo", CPU_ALGOS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_zero_size_dimensions(algo, dtype):
    # k == 0: a sum over nothing, so zeros (or the bias); m or n == 0: empty.
    A, B = torch.randn(3, 0, dtype=dtype), torch.randn(0, 4, dtype=dtype)
    out = mylinearops.matmul(A, B, algo=algo)
    assert out.shape == (3, 4) and torch.equal(out, torch.zeros(3, 4, dtype=dtype))
    b = torch.randn(4, dtype=dtype)
    out = mylinearops.linearop(A, B, b, algo=algo)
    assert torch.equal(out, b.expand(3, 4))
    out[0, 0] = 123.0  # the result never aliases the bias
    assert b[0] != 123.0
    for m, k, n in [(0, 3, 4), (3, 4, 0), (0, 0, 0), (0, 5, 0)]:
        out = mylinearops.matmul(torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype), algo=algo)
        assert out.shape == (m, n) and out.dtype == dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_linearop_leading_batch_dims(dtype):
    W, b = torch.randn(5, 3, dtype=dtype), torch.randn(3, dtype=dtype)
    for lead in [(), (4,), (2, 3), (2, 1, 3), (0, 4)]:
        X = torch.randn(*lead, 5, dtype=dtype)
        out = mylinearops.linearop(X, W, b)
        assert out.shape == (*lead, 3)
        torch.testing.assert_close(out, X @ W + b)
    X = torch.randn(2, 5, 4, dtype=dtype).transpose(1, 2)  # non-contiguous batch
    torch.testing.assert_close(mylinearops.linearop(X, W), X @ W)


def test_linearop_matches_nn_functional_linear():
    X, W, b = torch.randn(8, 16), torch.randn(16, 4), torch.randn(4)
    torch.testing.assert_close(mylinearops.linearop(X, W, b), torch.nn.functional.linear(X, W.t(), b))


def test_auto_is_the_packed_kernel():
    A, B = torch.randn(50, 60), torch.randn(60, 70)
    assert torch.equal(mylinearops.matmul(A, B), mylinearops.matmul(A, B, algo="packed"))


@pytest.mark.parametrize("algo", ["blocked", "packed"])
def test_same_result_on_one_and_two_threads(algo):
    A, B = torch.randn(300, 200), torch.randn(200, 500)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = mylinearops.matmul(A, B, algo=algo)
        torch.set_num_threads(2)
        two = mylinearops.matmul(A, B, algo=algo)
    finally:
        torch.set_num_threads(threads)
    assert_close_to_reference(one, reference(A, B), 200)
    assert_close_to_reference(two, reference(A, B), 200)


def test_special_values_propagate():
    A, B = torch.randn(4, 4), torch.randn(4, 4)
    A[1, 2] = float("nan")
    B[0, 3] = float("inf")
    for algo in CPU_ALGOS:
        out = mylinearops.matmul(A, B, algo=algo)
        expected = A @ B
        assert torch.equal(out.isnan(), expected.isnan()), algo
        assert torch.equal(out.isinf(), expected.isinf()), algo


def test_available_algos():
    assert set(CPU_ALGOS) <= set(mylinearops.ALGOS["cpu"])
    assert {"reference", "blocked", "packed", "packed_generic", "auto"} <= set(CPU_ALGOS)
    assert set(mylinearops.ALGOS["cuda"]) == {"auto", "naive", "coalesced", "tiled", "register_blocked"}
    assert mylinearops.available_algos("meta") == ()
