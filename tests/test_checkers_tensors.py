"""The exercise checkers accept a right answer and reject wrong ones with a useful message."""

from __future__ import annotations

import pytest

from booktools.checkers import CheckFailed
from booktools.checkers import tensors as tensor_checks


def broadcastable_right(a, b):
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and 1 not in (x, y):
            return False
    return True


def test_broadcastable_checker(capsys):
    tensor_checks.check_broadcastable(broadcastable_right)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, message",
    [
        (lambda a, b: len(a) == len(b), "torch.broadcast_shapes accepts"),            # ignores broadcasting
        (lambda a, b: all(x == y or 1 in (x, y) for x, y in zip(a, b)), "broadcast"),  # aligns from the left
        (lambda a, b: 1, "not a bool"),
    ],
)
def test_broadcastable_checker_rejects_wrong_answers(wrong, message):
    with pytest.raises(CheckFailed, match=message):
        tensor_checks.check_broadcastable(wrong)
