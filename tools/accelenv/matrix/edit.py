"""`accelenv add`: a new SKU, runtime, environment (or family, OS, source) written into matrix.toml by hand's rules.

The new entry is placed after the last entry of its section, with everything else in the file (comments, order,
layout) untouched. The result must validate: otherwise nothing is written and every problem is shown.
"""

from __future__ import annotations

import copy
import difflib
import re
from typing import TYPE_CHECKING, Any

import tomlkit
import tomlkit.exceptions

from accelenv.errors import MatrixInvalidError, UsageError
from accelenv.matrix import validate_text
from accelenv.matrix.problems import Problem

if TYPE_CHECKING:
    from pathlib import Path

SECTIONS = {"sku": "skus", "runtime": "runtimes", "env": "envs", "family": "families", "os": "os", "source": "sources"}


def parse_value(text: str) -> Any:
    """A TOML value (`"sm_90"`, `["0x2330"]`, `true`, `{ min = "570" }`), or the text itself as a string."""
    try:
        return tomlkit.parse(f"value = {text}")["value"]
    except tomlkit.exceptions.TOMLKitError:
        return text


def _assign(table: Any, dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = table
    for depth, part in enumerate(parents):
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
        if not isinstance(node, dict):  # tomlkit tables (and inline tables) are dicts
            reached = ".".join(parents[: depth + 1])
            raise UsageError(
                f"{dotted}: {reached} is a {_toml_kind(node)}, not a table, so it has no key {last!r}; "
                f"set {reached} itself (e.g. {reached}=...)"
            )
    node[last] = value


def _toml_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    kinds = ((str, "string"), (int, "integer"), (float, "number"), (list, "list"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)


def _header(section: str, entry_id: str) -> str:
    key = entry_id if entry_id.replace("-", "").replace("_", "").isalnum() else f'"{entry_id}"'
    return f"[{section}.{key}]"


def _render(section: str, entry_id: str, table: Any) -> str:
    body = tomlkit.dumps(table).strip("\n")
    return f"{_header(section, entry_id)}\n{body}\n"


def _insertion_point(lines: list[str], section: str) -> int:
    """After the last line of the last entry of `section` (before trailing blank lines and the next banner)."""
    last = max((i for i, line in enumerate(lines) if line.startswith(f"[{section}.")), default=None)
    if last is None:
        return len(lines)
    end = last + 1
    while end < len(lines) and not lines[end].startswith("["):
        end += 1
    while end > last + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    return end


def add_to_file(
    path: Path, kind: str, entry_id: str, assignments: list[str], template: str | None, *, dry_run: bool
) -> tuple[str, str]:
    """(old text, new text) of the matrix at `path` with the new entry. Unless `dry_run`, written: under the
    matrix folder's lock, through a symlinked matrix.toml to its target, and only if nobody changed the file
    meanwhile (another `add`, a `pin`, an editor)."""
    from accelenv.fileio import read_text, update_text

    if dry_run:
        old = read_text(path, what="matrix")
        return old, add_entry(old, kind, entry_id, assignments, template, source=str(path))
    return update_text(
        path, lambda old: add_entry(old, kind, entry_id, assignments, template, source=str(path)), what="matrix"
    )


def add_entry(
    text: str, kind: str, entry_id: str, assignments: list[str], template: str | None, *, source: str = "matrix.toml"
) -> str:
    """The matrix text with the new entry; raises UsageError or MatrixInvalidError (nothing written). The text
    keeps its line endings (CRLF stays CRLF)."""
    section = SECTIONS[kind]
    _check_id(kind, entry_id)
    newline = "\r\n" if "\r\n" in text else "\n"
    text = text.replace("\r\n", "\n")
    document = _parse(text, source)
    existing = document.get(section, {})
    if entry_id in existing:
        raise UsageError(f"{section}.{entry_id} already exists; edit it in matrix.toml or choose another id")
    if template is not None:
        if template not in existing:
            close = difflib.get_close_matches(template, list(existing), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise UsageError(f"--from {template}: no {section}.{template}{hint}")
        table = copy.deepcopy(existing[template])
        if kind == "env" and "default" in table:
            del table["default"]  # one default per family: a copy never takes it over
    else:
        table = tomlkit.table()
    for assignment in assignments:
        key, sep, value = assignment.partition("=")
        if not sep or not key.strip():
            raise UsageError(
                f"{assignment!r}: expected KEY=VALUE, e.g. arch='\"sm_90\"' or pci_device_ids='[\"0x2330\"]'"
            )
        _assign(table, key.strip(), parse_value(value.strip()))
    lines = text.splitlines()
    at = _insertion_point(lines, section)
    block = _render(section, entry_id, table).splitlines()
    new_lines = [*lines[:at], "", *block, *lines[at:]] if at < len(lines) else [*lines, "", *block]
    new_text = "\n".join(new_lines) + "\n"
    validation = validate_text(new_text, source=source)
    if any(p.is_error for p in validation.problems):
        raise MatrixInvalidError(f"{source} with the new entry (nothing written)", validation.problems)
    return new_text.replace("\n", newline)


def _check_id(kind: str, entry_id: str) -> None:
    from accelenv.matrix.schema import ID, OS_LABEL

    pattern, hint = (
        (OS_LABEL, "an OS label such as ubuntu24.04") if kind == "os" else (ID, "lower-case letters, digits and dashes")
    )
    if not re.fullmatch(pattern, entry_id):
        raise UsageError(f"{entry_id!r} is not a valid {kind} id: expected {hint}")


def _parse(text: str, source: str) -> Any:
    """The tomlkit document of the matrix, or every problem with it (as `validate` reports them)."""
    if text.startswith("\ufeff"):
        raise UsageError(
            f"{source} starts with a byte-order mark (BOM); TOML files are UTF-8 without one: save it without"
        )
    try:
        return tomlkit.parse(text)
    except (tomlkit.exceptions.TOMLKitError, RecursionError) as error:
        problems = tuple(p for p in validate_text(text, source=source).problems if p.is_error)
        if not problems:
            problems = (Problem(path="", message=f"accelenv cannot edit it: {error}", rule="toml"),)
        raise MatrixInvalidError(source, problems) from error


def diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
