"""`results --merge FOLDER`: the records read, each written into one folder as `<id>.result.json`.

The folder collects runs from many CI artifacts, so what it holds is evidence: a record already there is never
replaced by another with the same id and other content (two runs cannot share an id; the later one is refused
and named), and every write stays inside the folder, through real folders only, never through a symlink found
there. Everything is checked before anything is written: a refusal leaves the folder as it was.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from accelenv.errors import UsageError
from accelenv.fileio import check_writable, read_text_if_exists, write_atomic
from accelenv.redact import one_line
from accelenv.results.record import MAX_RECORD, SUFFIX

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from accelenv.results.record import Record


def merge_into(folder: Path, records: Iterable[Record]) -> int:
    """Write each of `records` into `folder` (created if missing); the number written (those already there with
    the same content are left as they are)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{folder}: cannot make the merge folder: {error.strerror or error}") from error
    pending: list[tuple[Path, str]] = []
    clashes: list[str] = []
    for record in records:
        target = folder / f"{record.id}{SUFFIX}"
        check_writable(target, inside=folder)  # a symlink, FIFO or folder under the record's name is refused
        text = json.dumps(record.data, indent=2, sort_keys=True) + "\n"
        held = read_text_if_exists(target, limit=MAX_RECORD, what="merged record")
        if held is None:
            pending.append((target, text))
        elif _parsed(held) != record.data:
            clashes.append(f"{one_line(str(target))} holds another run with the id of {one_line(record.path)}")
    if clashes:
        raise UsageError(
            "results --merge: " + "; ".join(clashes) + "; two runs cannot share an id: nothing was written "
            "(remove the wrong one, or merge into a new folder)"
        )
    for target, text in pending:
        write_atomic(target, text, inside=folder)
    return len(pending)


def _parsed(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None  # not a record: a clash, never overwritten
