"""Command-line values, typed by the schema: `key=value` for `accelenv add` read as the TOML value of the type
the schema gives the key, and set (or unset, `key=`) inside a new entry's table.

A key the schema says is a string takes the text as written (`driver_min=570`, `arch=gfx950`); a list or a table
must be written as one (`pci_device_ids='["0x74a0"]'`), and the refusal shows how.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

import tomlkit
import tomlkit.exceptions

from accelenv.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Sequence

SECTIONS = {"sku": "skus", "runtime": "runtimes", "env": "envs", "family": "families", "os": "os", "source": "sources"}
DEFINITIONS = {"sku": "sku", "runtime": "runtime", "env": "env", "family": "family", "os": "os", "source": "source"}


def parse_value(text: str) -> Any:
    """A TOML value (`"sm_90"`, `["0x2330"]`, `true`, `{ min = "570" }`), or the text itself as a string."""
    try:
        return tomlkit.parse(f"value = {text}")["value"]
    except tomlkit.exceptions.TOMLKitError:
        return text


def key_parts(key: str) -> list[str]:
    """A dotted TOML key as its parts: `driver.min` -> [driver, min]; `base_images."ubuntu24.04"` keeps the
    quoted part whole."""
    import tomllib

    try:
        node: Any = tomllib.loads(f"{key} = 0")
    except tomllib.TOMLDecodeError:
        raise UsageError(
            f'{key!r} is not a key: write a name or a dotted path such as driver.min or base_images."ubuntu24.04"'
        ) from None
    parts = []
    while isinstance(node, dict) and len(node) == 1:
        part, node = next(iter(node.items()))
        parts.append(part)
    return parts


def _schema_node(kind: str, parts: Sequence[str]) -> dict[str, Any] | None:
    """The JSON Schema of key `parts` of a `kind` entry, or None when the schema does not know the key (then
    validation names it, with a did-you-mean)."""
    from accelenv.matrix.schema import matrix_schema

    schema = matrix_schema()
    node: dict[str, Any] = schema["$defs"][DEFINITIONS[kind]]
    for part in parts:
        while "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        properties = node.get("properties", {})
        if part in properties:
            node = properties[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


_TYPE_WORDS = {"array": "list", "object": "table", "integer": "integer", "string": "string", "boolean": "boolean"}


def _example(node: dict[str, Any], text: str) -> str:
    """How `text` is written as the value `node` expects, for the message."""
    match node.get("type"):
        case "array":
            inner = text.strip("[]\"' ") or "..."
            return f"'[\"{inner}\"]'"
        case "object":
            return "'{ key = \"value\" }'"
        case "integer":
            return "81559"
        case "boolean":
            return "true"
        case _:
            return f"'\"{text}\"'"


def typed_value(kind: str, key: str, text: str, entry_id: str = "<id>") -> Any:
    """The value of `key=text` for a `kind` entry, as the schema types the key. A string key takes the text as
    written (a TOML number, date or boolean is not what was meant: `driver_min=570`, `arch=0x10`); for the
    other types the TOML value must already be of that type, and the refusal shows how to write it."""
    parts = key_parts(key)
    value = parse_value(text)
    node = _schema_node(kind, parts)
    expected = node.get("type") if node else None
    if expected is None:
        return value
    if expected == "string":
        if isinstance(value, str):
            return value
        return text  # the literal text: 0x74a0 stays 0x74a0, 1.10 stays 1.10
    kinds = {"array": list, "object": dict, "integer": int, "boolean": bool}
    wanted = kinds.get(str(expected))
    ok = wanted is not None and isinstance(value, wanted) and not (expected == "integer" and isinstance(value, bool))
    if ok or wanted is None:
        return value
    what = _TYPE_WORDS.get(str(expected), str(expected))
    items = node.get("items", {}) if node else {}
    if expected == "array" and items.get("type") == "string":
        what = "list of quoted strings"
    found = f"the {toml_kind(value)} {text}" if not isinstance(value, str) else f"the text {text!r}"
    name = parts[-1]
    raise UsageError(
        f"{key}={text}: {SECTIONS[kind]}.{entry_id}.{'.'.join(parts)} is {'an' if what[0] in 'aeiou' else 'a'} "
        f"{what}, not {found}; "
        f"write {name}={_example(node or {}, text)}"
        + (" (each PCI id a lower-case hex string)" if name.endswith("pci_device_ids") else "")
    )


def set_key(table: Any, parts: list[str], value: Any) -> None:
    *parents, last = parts
    node = table
    for depth, part in enumerate(parents):
        if part not in node:  # inline, so it stays inside the entry's table: driver = { min = "..." }
            node[part] = tomlkit.inline_table()
        node = node[part]
        if not isinstance(node, dict):  # tomlkit tables (and inline tables) are dicts
            reached = ".".join(parents[: depth + 1])
            raise UsageError(
                f"{'.'.join(parts)}: {reached} is a {toml_kind(node)}, not a table, so it has no key {last!r}; "
                f"set {reached} itself (e.g. {reached}=...)"
            )
    node[last] = value


def unset_key(table: Any, parts: list[str], template: str | None) -> None:
    *parents, last = parts
    node = table
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or last not in node:
        present = sorted(str(k) for k in node) if isinstance(node, dict) else []
        close = difflib.get_close_matches(last, present, n=1)
        hint = f"; did you mean '{close[0]}='?" if close else ""
        origin = f" (--from {template} did not copy it)" if template else ""
        raise UsageError(f"{'.'.join(parts)}=: nothing to unset, the new entry has no {'.'.join(parts)}{origin}{hint}")
    del node[last]


def toml_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    kinds = ((str, "string"), (int, "integer"), (float, "number"), (list, "list"), (dict, "table"))
    return next((name for kind, name in kinds if isinstance(value, kind)), type(value).__name__)
