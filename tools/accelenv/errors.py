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
