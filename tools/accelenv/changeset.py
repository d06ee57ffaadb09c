"""A change to several files of the repository that lands as one step, or can be finished or undone.

`refresh` rewrites the matrix, locks and every generated file from one new matrix. Written one by one, a run
stopped midway (Ctrl-C, SIGTERM, a full disk) would leave a matrix whose generated files are stale. So every new
text is computed first; then a journal, `.accelenv/changeset.json`, records each file's old and new text (and
whether it existed), the files are written through `write_atomic`, and the journal is removed last. A journal
found later means a change was interrupted: `resume` writes every new text (again), `undo` puts every old text
back (a file that did not exist is removed again), and both remove the journal; any other write refuses until
one of them runs. The journal is written with the same writer, so it is complete or absent, never half.

The journal is read as untrusted input (a checkout may carry a planted one): its purpose must be one of
PURPOSES (it is named in the command the user is told to run), it may name only the files a refresh writes (the
matrix, and the generated files and locks under envs/ and images/: never `.git/config` or any other file), and
each file must still hold the journal's old or new text: a file edited by hand since the interruption is named
and nothing is written.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Literal

from accelenv.errors import UsageError, WriteFailedError
from accelenv.fileio import MAX_TEXT, check_inside, check_writable, read_text, read_text_if_exists, write_atomic
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

JOURNAL = ".accelenv/changeset.json"
VERSION = 1
PURPOSES = ("refresh",)  # the commands that write through a journal, each with --resume and --undo
MAX_ENTRIES = 10000


@frozen
class Pending:
    """An interrupted change: what it was for and how many files it held."""

    purpose: str
    files: tuple[str, ...]


def pending(repo: Path) -> Pending | None:
    """The interrupted change of `repo`, or None."""
    entries, purpose = _read_journal(repo)
    if entries is None:
        return None
    return Pending(purpose=purpose, files=tuple(sorted(entries)))


def refuse_if_pending(repo: Path) -> None:
    """A command that writes the repository's files does not start over an interrupted change."""
    found = pending(repo)
    if found is not None:
        what = found.purpose
        raise UsageError(
            f"{repo / JOURNAL}: an earlier {what} was interrupted with {len(found.files)} file(s) to write; "
            f"nothing was done: run `accelenv {what} --resume` to finish it or `accelenv {what} --undo` to put the "
            "files back as they were"
        )


def commit(repo: Path, changes: Mapping[str, str | None], *, purpose: str, allowed: Callable[[str], bool]) -> list[str]:
    """Write `changes` (repository-relative path -> new text, or None to remove the file) as one step: every
    target is checked first, the journal is written, then the files, then the journal is removed. Returns the
    paths whose content changed. Every path must be `allowed` (see `targets`), as a journal read back must."""
    if purpose not in PURPOSES:
        raise ValueError(f"unknown change purpose {purpose!r}")
    refuse_if_pending(repo)
    entries: dict[str, dict[str, str | None]] = {}
    for rel, new in sorted(changes.items()):
        if not allowed(rel):
            raise ValueError(f"{rel} is not a file a change may write")
        path = repo / rel
        check_inside(path, repo)
        old = read_text_if_exists(path, limit=MAX_TEXT, what="file")
        if old == new:
            continue
        check_writable(path, inside=repo)
        entries[rel] = {"old": old, "new": new}
    if not entries:
        return []
    document = {"version": VERSION, "purpose": purpose, "files": entries}
    write_atomic(repo / JOURNAL, json.dumps(document, indent=1, sort_keys=True) + "\n", inside=repo)
    _apply(repo, {rel: entry["new"] for rel, entry in entries.items()})
    _drop_journal(repo)
    return sorted(entries)


def finish(repo: Path, how: Literal["resume", "undo"], *, allowed: Callable[[str], bool]) -> list[str]:
    """Finish an interrupted change (`resume`: write every new text) or undo it (every old text); returns the
    paths it wrote or removed. Nothing pending is a usage error; so is a journal naming a file not `allowed`, and
    a file that holds neither its old nor its new text (edited by hand since): nothing is written then."""
    entries, _purpose = _read_journal(repo)
    if entries is None:
        raise UsageError(f"{repo / JOURNAL}: no interrupted change to {how}")
    outside = sorted(rel for rel in entries if not allowed(rel))
    if outside:
        raise UsageError(
            f"{repo / JOURNAL}: names {len(outside)} file(s) no change writes ({_shown(outside)}); nothing was done: "
            "this journal was not written by accelenv; remove it, and look at what put it there"
        )
    edited = [rel for rel, entry in sorted(entries.items()) if _now(repo, rel) not in (entry["old"], entry["new"])]
    if edited:
        raise UsageError(
            f"{repo / JOURNAL}: {_shown(edited)} changed since the change was interrupted (neither the old nor the "
            f"new text); nothing was done: keep your edit by removing the journal, or put the file back and {how} again"
        )
    side = "new" if how == "resume" else "old"
    _apply(repo, {rel: entry[side] for rel, entry in entries.items()})
    _drop_journal(repo)
    return sorted(entries)


def _now(repo: Path, rel: str) -> str | None:
    path = repo / rel
    check_inside(path, repo)
    return read_text_if_exists(path, limit=MAX_TEXT, what="file")


def _shown(rels: list[str]) -> str:
    from accelenv.redact import one_line

    return ", ".join(one_line(rel) for rel in rels[:5]) + (f" and {len(rels) - 5} more" if len(rels) > 5 else "")


def _apply(repo: Path, texts: Mapping[str, str | None]) -> None:
    for rel, text in sorted(texts.items()):
        path = repo / rel
        check_inside(path, repo)
        if text is not None:
            write_atomic(path, text, inside=repo)
        elif path.is_file() and not path.is_symlink():
            try:
                path.unlink()
            except OSError as error:
                raise WriteFailedError(f"{path}: cannot remove: {error.strerror or error}") from error
            with contextlib.suppress(OSError):  # its folder too, once empty (an environment that is gone)
                path.parent.rmdir()


def _drop_journal(repo: Path) -> None:
    try:
        (repo / JOURNAL).unlink()
    except FileNotFoundError:
        pass
    except OSError as error:
        raise WriteFailedError(f"{repo / JOURNAL}: cannot remove the journal: {error.strerror or error}") from error


def _read_journal(repo: Path) -> tuple[dict[str, dict[str, str | None]] | None, str]:
    """The journal's entries and purpose; (None, "") when there is none. A journal that does not read is an
    error that says what to do: accelenv never guesses which half of a change landed."""
    path = repo / JOURNAL
    check_inside(path, repo)
    if read_text_if_exists(path, what="change journal") is None:
        return None, ""
    text = read_text(path, what="change journal")
    broken = UsageError(
        f"{path}: an interrupted change's journal does not read; nothing was done: compare the files with git "
        "(`git status`), then remove the journal"
    )
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser
        raise broken from None
    if not isinstance(document, dict) or document.get("version") != VERSION:
        raise broken
    files, purpose = document.get("files"), document.get("purpose")
    if not isinstance(files, dict) or purpose not in PURPOSES or len(files) > MAX_ENTRIES:
        raise broken  # a purpose of another shape would be echoed into the command the user is told to run
    entries: dict[str, dict[str, str | None]] = {}
    for rel, entry in files.items():
        if (
            not isinstance(rel, str)
            or not isinstance(entry, dict)
            or not all(isinstance(entry.get(k), str | None) and k in entry for k in ("old", "new"))
            or rel.startswith("/")
            or ".." in rel.split("/")
            or not rel.isprintable()  # NUL, line breaks: no path a change writes holds them
        ):
            raise broken
        entries[rel] = {"old": entry["old"], "new": entry["new"]}
    return entries, purpose
