"""How the command line prints: JSON for machines, tables that fit the terminal, one mark per check status."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from accelenv.check.verdict import Finding

MARKS = {"pass": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}
"""The four-letter mark of a check status (by its value), as `check` and `verify` print it."""


def dump_json(data: object, out: TextIO) -> None:
    """`data` as indented JSON and a newline, keys in the order given."""
    json.dump(data, out, indent=2, sort_keys=False)
    out.write("\n")


def terminal_width(out: TextIO) -> int | None:
    """The width to fit when `out` is a terminal; None for files and pipes, which get whole lines."""
    try:
        interactive = out.isatty()
    except (AttributeError, ValueError):
        return None
    return shutil.get_terminal_size().columns if interactive else None


def table(rows: list[list[str]], headers: list[str], out: TextIO, *, width: int | None = None) -> None:
    """Aligned columns. With `width` (or on a terminal), the last column is cut to fit, with an ellipsis."""
    width = width if width is not None else terminal_width(out)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lead = sum(widths[:-1]) + 2 * (len(widths) - 1)
    room = width - lead if width is not None else None

    def fit(cell: str) -> str:
        if room is None or len(cell) <= room or room < 8:
            return cell
        return cell[: room - 1] + "…"

    for row in [headers, *rows]:
        cells = [c.ljust(w) for c, w in zip(row[:-1], widths, strict=False)]
        out.write("  ".join([*cells, fit(row[-1])]).rstrip() + "\n")


def findings(found: list[Finding], out: TextIO, *, id_width: int, details: tuple[str, ...] = ("fail", "warn")) -> None:
    """One line per finding (mark, id, message); what was expected, what was found and the fix under those
    whose status is in `details`."""
    for f in found:
        out.write(f"  {MARKS[f.status.value]}  {f.id:<{id_width}} {f.message}\n")
        if f.status.value in details:
            out.write(f"        expected {f.expected}; found {f.found}\n")
            if f.fix:
                out.write(f"        fix: {f.fix}\n")
