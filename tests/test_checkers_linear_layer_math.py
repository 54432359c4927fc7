"""The linear_layer_math checkers accept right answers and reject wrong ones with a useful message."""

from __future__ import annotations

import pytest
import torch

from booktools.checkers import CheckFailed
from booktools.checkers import linear_layer_math as checks


def nn_linear_right(X, weight, G):
    return G @ weight, G.T @ X, G.sum(0)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda X, w, G: (G @ w, X.T @ G, G.sum(0)), r"dweight has shape \(3, 5\), expected \(5, 3\).*transpose"),
        (lambda X, w, G: (G @ w.T, G.T @ X, G.sum(0)), r"G \(4, 5\) raised RuntimeError: mat1 and mat2 shapes"),
        (lambda X, w, G: (G @ w, torch.ones_like(G).T @ X, G.sum(0)), r"G \(4, 5\): dweight is wrong"),  # ignores G
        (lambda X, w, G: (G @ w, G.T @ X, G.mean(0)), "db is wrong"),
        (lambda X, w, G: (G @ w, G.T @ X), "expected a tuple of 3 tensors"),
        (lambda X, w, G: (G @ w, G.T @ X, G.sum(1)), r"db has shape"),
    ],
)
def test_nn_linear_checker(wrong, message, capsys):
    checks.check_nn_linear_gradients(nn_linear_right)
    assert "passed" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=message):
        checks.check_nn_linear_gradients(wrong)


def test_nn_linear_checker_catches_a_transpose_that_only_a_square_layer_hides():
    # weight.T @ (G.T @ X) has the wrong shape except when K == M; reshape it to pass the shapes
    def transposed(X, w, G):
        return G @ w, (X.T @ G).reshape(w.shape), G.sum(0)
    with pytest.raises(CheckFailed, match="dweight is wrong"):
        checks.check_nn_linear_gradients(transposed)


def least_squares_right(X, W, T):
    return X.T @ (X @ W - T)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda X, W, T: X.T @ (X @ W + T), r"X \(5, 3\), W \(3, 2\), T \(5, 2\): dL/dW is wrong"),
        (lambda X, W, T: 2 * X.T @ (X @ W - T), "dL/dW is wrong"),                 # forgot the 1/2
        (lambda X, W, T: (X @ W - T).T @ X, r"dL/dW has shape \(2, 3\), expected \(3, 2\)"),
        (lambda X, W, T: X.T @ X @ W, "dL/dW is wrong"),
    ],
)
def test_least_squares_checker(wrong, message, capsys):
    checks.check_least_squares_gradient(least_squares_right)
    assert "passed" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=message):
        checks.check_least_squares_gradient(wrong)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda X, G: torch.einsum("nk,nm->nmk", X, G), r"has shape \(4, 5, 3\), expected \(4, 3, 5\).*shape of W"),
        (lambda X, G: torch.einsum("nk,nm->km", X, G).expand(X.shape[0], -1, -1), "per-sample gradients is wrong"),
        (lambda X, G: torch.einsum("nk,nm->nkm", X, torch.ones_like(G)), "per-sample gradients is wrong"),
        (lambda X, G: torch.einsum("nk,nm->km", X, G), r"has shape \(3, 5\), expected \(4, 3, 5\)"),
    ],
)
def test_per_sample_checker(wrong, message, capsys):
    checks.check_per_sample_gradients(lambda X, G: torch.einsum("nk,nm->nkm", X, G))
    assert "passed" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=message):
        checks.check_per_sample_gradients(wrong)


def bilinear_right(u, A, v, g):
    return g * (A @ v), g * torch.outer(u, v), g * (A.T @ u)


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda u, A, v, g: (A @ v, torch.outer(u, v), A.T @ u), "du is wrong"),          # forgot g
        (lambda u, A, v, g: (g * (A @ v), g * torch.outer(v, u), g * (A.T @ u)), r"dA has shape \(5, 3\)"),
        (lambda u, A, v, g: (g * (A @ v), g * torch.outer(u, v), g * (A @ u)), "raised RuntimeError"),
        (lambda u, A, v, g: (g * (A @ v), g * torch.outer(u, v), g * (u @ A.T)), "raised RuntimeError"),
    ],
)
def test_bilinear_checker(wrong, message, capsys):
    checks.check_bilinear_gradients(bilinear_right)
    assert "passed" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=message):
        checks.check_bilinear_gradients(wrong)


def test_bilinear_checker_catches_a_transpose_on_a_square_matrix():
    def transposed(u, A, v, g):
        du, dA, dv = bilinear_right(u, A, v, g)
        return du, dA, g * (A @ u) if A.shape[0] == A.shape[1] else dv
    with pytest.raises(CheckFailed, match=r"A \(4, 4\).*dv is wrong"):
        checks.check_bilinear_gradients(transposed)
