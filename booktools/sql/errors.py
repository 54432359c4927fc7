"""Part IV's SQL errors: short and clear, never a driver's traceback."""

from __future__ import annotations







# ------------------------------------------------------------------------------------ errors
class SQLError(Exception):
    """A query failed; the message says why, in one or two lines."""


class UnknownTableError(SQLError):
    """The query names a table that was not loaded."""


class SQLSyntaxError(SQLError):
    """The text is not valid SQL for the engine that parsed it."""


class ServerUnavailableError(SQLError):
    """BOOK_MYSQL_URL is set but no server answers there."""


class PackageTooOldError(RuntimeError):
    """An installed package is older than Part IV needs; the message names the release."""


class ResultMismatch(AssertionError):
    """Two results that should be equal are not."""


