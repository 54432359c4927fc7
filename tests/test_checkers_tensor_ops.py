"""The tensor_ops checkers accept a right answer and reject wrong ones with a useful message."""

from __future__ import annotations

import pytest
import torch

from booktools.checkers import CheckFailed
from booktools.checkers import tensor_ops as checks


def distances_right(x, y):
    return (x.pow(2).sum(1)[:, None] - 2 * x @ y.T + y.pow(2).sum(1)[None, :]).clamp_min(0)


def distances_unclamped(x, y):
    return x.pow(2).sum(1)[:, None] - 2 * x @ y.T + y.pow(2).sum(1)[None, :]


def distances_by_broadcasting(x, y):
    return (x[:, None, :] - y[None, :, :]).pow(2).sum(-1)


def distances_wrong_sign(x, y):
    return (x.pow(2).sum(1)[:, None] + 2 * x @ y.T + y.pow(2).sum(1)[None, :]).clamp_min(0)


@pytest.mark.parametrize("answer", [distances_right, lambda x, y: torch.cdist(x, y) ** 2])
def test_pairwise_distances_checker_accepts(answer, capsys):
    checks.check_pairwise_sq_distances(answer)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (distances_by_broadcasting, r"built a tensor of shape \(50, 40, 30\)"),
        (distances_unclamped, "negative squared distance"),
        (distances_wrong_sign, r"entry \(\d+, \d+\) is"),
        (lambda x, y: distances_right(y, x), r"expected a tensor of shape \(50, 40\)"),
        (lambda x, y: distances_right(x.float(), y.float()), "returned torch.float32 for torch.float64"),
    ],
)
def test_pairwise_distances_checker_rejects(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_pairwise_sq_distances(wrong)


def gather_right(x, index):
    return x[torch.arange(index.shape[0])[:, None], index]


def test_gather_checker_accepts(capsys):
    checks.check_gather_2d(gather_right)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda x, i: x[torch.arange(x.shape[0])[:, None], i], r"index \(2, 3\): fewer rows than x raised IndexError"),
        (lambda x, i: x[torch.arange(i.shape[0]), i], "raised IndexError"),          # rows not broadcast
        (lambda x, i: x[:, i], r"returned \(4, 4, 3\), gather returns \(4, 3\)"),
        (lambda x, i: x.float()[torch.arange(i.shape[0])[:, None], i], "int64 x"),     # changes the dtype
    ],
)
def test_gather_checker_rejects(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        checks.check_gather_2d(wrong)
