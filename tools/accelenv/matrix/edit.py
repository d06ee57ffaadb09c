"""`accelenv add`: a new SKU, runtime, environment (or family, OS, source) written into matrix.toml by hand's rules.

The new entry is placed after the last entry of its section, with everything else in the file (comments, order,
layout) untouched. The result must validate: otherwise nothing is written and every problem is shown.
"""

from __future__ import annotations

import copy
import difflib
from typing import Any

import tomlkit
import tomlkit.exceptions

from accelenv.errors import MatrixInvalidError, UsageError
from accelenv.matrix import validate_text

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
    for part in parents:
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
    node[last] = value


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


def add_entry(text: str, kind: str, entry_id: str, assignments: list[str], template: str | None) -> str:
    """The matrix text with the new entry; raises UsageError or MatrixInvalidError (nothing written)."""
    section = SECTIONS[kind]
    document = tomlkit.parse(text)
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
    validation = validate_text(new_text, source="matrix.toml")
    if any(p.is_error for p in validation.problems):
        raise MatrixInvalidError("matrix.toml with the new entry (nothing written)", validation.problems)
    return new_text


def diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}"))
