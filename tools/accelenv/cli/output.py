"""How the command line prints: JSON for machines, tables that fit the terminal, one mark per check status.

Everything a command prints goes through `SafeText`: secrets are redacted and control characters (ANSI escape
sequences from a hostile matrix key or sysfs file) are shown as escapes, never sent to the terminal. JSON is
redacted before it is serialised, every value and key (`dump_json`), so every string in it is clean too, and the
stream then only makes it terminal-safe.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, TextIO, cast

from accelenv.errors import AccelenvError
from accelenv.redact import redact_json, redact_text, terminal_safe

if TYPE_CHECKING:
    from collections.abc import Callable

    from accelenv.check.verdict import Finding


class OutputFailedError(AccelenvError):
    """Standard output (or error) cannot be written: the disk is full, the file is read-only, the stream is
    closed. Whatever the command did besides printing is done."""


class SafeText:
    """A text stream in front of `target` that redacts secrets and neutralises control characters, a line at a
    time (so a secret split over two writes is still seen whole). A failed write is an `OutputFailedError`
    naming the stream. A closed pipe (`accelenv check ENV | head -1`, `| true`) is no failure of the command: what
    follows is dropped, the command runs to its end, and its exit status is its verdict's, not the pipe's."""

    def __init__(self, target: TextIO, name: str, *, quiet: bool = False) -> None:
        self.target = target
        self.name = name
        self.quiet = quiet  # standard error: a failure there has nowhere to be told, so it is dropped
        self._pending: list[str] = []
        self.failed = False
        self.reader_gone = False  # the pipe's reader closed it: the rest of the output has nowhere to go

    def write(self, text: str) -> int:
        if "\n" not in text:
            self._pending.append(text)
            return len(text)
        head, _, tail = text.rpartition("\n")
        self._pending.append(head + "\n")
        self._emit("".join(self._pending))
        self._pending = [tail] if tail else []
        return len(text)

    def write_redacted(self, text: str) -> None:
        """`text` that is redacted already (`dump_json`'s, from `redact_json`), made terminal-safe and written
        after what is pending: redacting it again would scan megabytes for what each value was scanned for."""
        if self._pending:
            self._emit("".join(self._pending))
            self._pending = []
        clean = terminal_safe(text)
        self._guard(lambda: self.target.write(clean))

    def flush(self) -> None:
        if self._pending:
            self._emit("".join(self._pending))
            self._pending = []
        if not self.reader_gone:
            self._guard(self.target.flush)

    def isatty(self) -> bool:
        try:
            return self.target.isatty()
        except (AttributeError, ValueError, OSError):
            return False

    def fileno(self) -> int:
        return self.target.fileno()

    def _emit(self, text: str) -> None:
        if self.reader_gone:
            return
        clean = terminal_safe(redact_text(text))
        self._guard(lambda: self.target.write(clean))

    def _guard(self, action: Callable[[], object]) -> None:
        try:
            action()
        except BrokenPipeError:
            self.failed = True
            self.reader_gone = True
        except (OSError, ValueError) as error:  # ValueError: "I/O operation on closed file"
            self.failed = True
            if self.quiet:
                return
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            raise OutputFailedError(f"cannot write to {self.name}: {reason}") from error


def safe_text(target: TextIO, name: str, *, quiet: bool = False) -> TextIO:
    """`target` behind a `SafeText`, typed as the stream the commands write to."""
    return cast("TextIO", SafeText(target, name, quiet=quiet))


MARKS = {"pass": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}
"""The four-letter mark of a check status (by its value), as `check` and `verify` print it."""


def dump_json(data: object, out: TextIO) -> None:
    """`data` as indented JSON and a newline, keys in the order given; secrets redacted. Redacted once, value by
    value, before it is serialised (a value is redacted as itself, not as JSON text with its escapes): the safe
    stream then only makes it terminal-safe, instead of scanning the whole text for secrets a second time."""
    text = json.dumps(redact_json(data), indent=2, sort_keys=False) + "\n"
    if isinstance(out, SafeText):
        out.write_redacted(text)
    else:
        out.write(text)


def terminal_width(out: TextIO) -> int | None:
    """The width to fit when `out` is a terminal; None for files and pipes, which get whole lines (one row a
    line, for grep and cut), unless $COLUMNS asks for a width (`COLUMNS=100 accelenv list | less`)."""
    try:
        interactive = out.isatty()
    except (AttributeError, ValueError):
        interactive = False
    if interactive:
        import shutil  # here: 3 ms of start-up (bz2, lzma) that a command writing to a pipe never needs

        return shutil.get_terminal_size().columns
    asked = os.environ.get("COLUMNS", "")
    return int(asked) if asked.isdigit() and int(asked) > 0 else None


MIN_ROOM = 24  # the narrowest last column worth wrapping beside the others; below it, it goes under its row
INDENT = 4  # of a last column put under its row


def table(rows: list[list[str]], headers: list[str], out: TextIO, *, width: int | None = None) -> None:
    """Aligned columns. Fitted to `width` (by default the terminal's; none for pipes and files): the last
    column wraps at spaces beside the others, or, when the others leave it less than MIN_ROOM, goes on lines of
    its own under its row; other columns wider than the line are cut with an ellipsis."""
    width = width if width is not None else terminal_width(out)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lead = sum(widths[:-1]) + 2 * (len(widths) - 1)
    if width is None:
        for row in [headers, *rows]:
            out.write(_line(row, widths) + "\n")
        return
    last = max((len(r[-1]) for r in [headers, *rows]), default=0)
    room = width - lead
    if room >= min(MIN_ROOM, last):
        for row in [headers, *rows]:
            lines = _wrap(row[-1], room)
            out.write(_line([*row[:-1], lines[0]], widths) + "\n")
            for more in lines[1:]:
                out.write(" " * lead + more + "\n")
        return
    widths = _shrink(widths[:-1], width)
    for row in [headers, *rows]:
        out.write(_line([_cut(c, w) for c, w in zip(row[:-1], widths, strict=True)], widths) + "\n")
        for more in _wrap(row[-1], width - INDENT):
            if more:
                out.write(" " * INDENT + more + "\n")


def _line(cells: list[str], widths: list[int]) -> str:
    padded = [c.ljust(w) for c, w in zip(cells[:-1], widths, strict=False)]
    return "  ".join([*padded, cells[-1]]).rstrip()


def _wrap(cell: str, room: int) -> list[str]:
    """`cell` in lines of at most `room` characters, broken at spaces only (ids keep their dashes)."""
    import textwrap

    return textwrap.wrap(cell, max(room, 1), break_on_hyphens=False, break_long_words=False) or [""]


def _cut(cell: str, width: int) -> str:
    return cell if len(cell) <= width else cell[: width - 1] + "…"


def _shrink(widths: list[int], width: int) -> list[int]:
    """Column widths that fit `width` with two spaces between: the widest column gives way first, down to 6."""
    widths = list(widths)
    while sum(widths) + 2 * (len(widths) - 1) > width and max(widths[1:], default=0) > 6:
        widest = max(range(1, len(widths)), key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def findings(found: list[Finding], out: TextIO, *, id_width: int, details: tuple[str, ...] = ("fail", "warn")) -> None:
    """One line per finding (mark, id, message); what was expected, what was found and the fix under those
    whose status is in `details`."""
    for f in found:
        out.write(f"  {MARKS[f.status.value]}  {f.id:<{id_width}} {f.message}\n")
        if f.status.value in details:
            out.write(f"        expected {f.expected}; found {f.found}\n")
            if f.fix:
                out.write(f"        fix: {f.fix}\n")
