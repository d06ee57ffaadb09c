"""The error hierarchy. Inner code raises; only `cli.main` catches, prints and maps to an exit code."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from accelenv.matrix.problems import Problem


class AccelenvError(Exception):
    """Base of every error accelenv reports to a user. Its message is what gets printed."""

    exit_code: ClassVar[int] = 1


class UsageError(AccelenvError):
    """The command line asks for something that cannot be done (unknown env, missing file, bad flag)."""

    exit_code: ClassVar[int] = 2


class MatrixNotFoundError(UsageError):
    """No matrix.toml where one was expected."""


class MatrixInvalidError(AccelenvError):
    """The matrix failed the schema or the rules; carries every problem found, not just the first."""

    exit_code: ClassVar[int] = 1

    def __init__(
        self, source: str, problems: tuple[Problem, ...], *, hint: str = "run `accelenv validate` for details"
    ) -> None:
        self.source = source
        self.problems = problems
        self.hint = hint  # what to do next; an edit that wrote nothing has shown every problem already
        errors = sum(1 for p in problems if p.is_error)
        super().__init__(f"{source}: {errors} error(s) found")


class WriteFailedError(AccelenvError):
    """A file could not be written (disk full, read-only, not permitted); nothing was changed."""

    exit_code: ClassVar[int] = 1


class NetworkError(AccelenvError):
    """A network exchange failed: the server could not be reached, or its answer was refused. The message names
    the method and the URL (credentials redacted); `reason` is why alone (`connection refused`), for a caller that
    names the URL itself. The clients turn it into their own failure values."""

    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class DeadlineExceededError(NetworkError):
    """An exchange (connecting, headers and body together) ran past its deadline: a server that trickles bytes."""


class AnswerTooLargeError(NetworkError):
    """An answer's body passed its size cap; accelenv stopped reading it and closed the connection."""
