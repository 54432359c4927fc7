"""Checkers for the chapters' code exercises: one call on the reader's own answer.

Each chapter with code exercises has a module here (booktools.checkers.<chapter>) whose
`check_*` functions run the reader's answer against a reference on ordinary and awkward
inputs, then print one line that says it passed, or raise `CheckFailed` with the first
input on which it went wrong, what it returned and what was expected. They are tested with
wrong answers in tests/test_checkers_<chapter>.py.
"""

from __future__ import annotations


class CheckFailed(AssertionError):
    """The reader's answer is wrong; the message says on which input and how."""


def fail(exercise: str, message: str) -> None:
    raise CheckFailed(f"{exercise}: {message}")


def passed(exercise: str, what: str) -> None:
    print(f"{exercise}: passed ({what})")


def expect_bool(exercise: str, call: str, got: object, expected: bool, reference: str) -> None:
    """Fail unless the reader's predicate returned the bool `expected`; `call` shows the call
    (``f(1, 2)``), `reference` says what the reference decided (``"PyTorch chooses X"``)."""
    if not isinstance(got, bool):
        fail(exercise, f"{call} returned {got!r}, not a bool")
    if got != expected:
        fail(exercise, f"{call} returned {got}, but {reference}")
