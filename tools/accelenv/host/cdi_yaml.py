"""A strict reader for the YAML that CDI spec generators write, so `check` can judge `/etc/cdi/*.yaml` without
a YAML dependency (the checker also runs inside every image, whose Python carries only packaging and
jsonschema).

What it reads: block mappings and sequences (a sequence may sit at its key's indentation, as Go's yaml writes
it), plain, single- and double-quoted scalars on one line, flow sequences and mappings of scalars on one line
(`[ro, nosuid]`, `{}`), comments, and one leading `---`. nvidia-ctk, amd-ctk and Intel's CDI generators write
nothing else. Anything outside that (anchors, aliases, tags, block scalars, multi-line scalars, several
documents, tabs in indentation, a key given twice) is an error naming the line: the reader refuses rather than
guesses. Scalars stay strings (`0.5.0`, `"0"`, `true`); `null` and `~` are None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Value = str | None | list["Value"] | dict[str, "Value"]

_KEY = re.compile(
    r"""\A(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s'"#\[\]{},&*!|>%@`-][^#]*?|-[^\s#][^#]*?)"""
    r"""\s*:(?:\s+(?P<rest>.*))?\Z"""
)
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "n": "\n", "t": "\t", "r": "\r", "0": "\0", " ": " "}


class YamlError(ValueError):
    """The text is not in the subset this module reads, or not YAML."""


@dataclass(frozen=True)
class _Line:
    number: int  # 1-based, for messages
    indent: int
    text: str  # without indentation and comment


def loads(text: str) -> Value:
    """The document in `text`. Raises YamlError naming the line of the first construct it refuses."""
    lines = _lines(text)
    if not lines:
        raise YamlError("the document is empty")
    value, index = _block(lines, 0, lines[0].indent)
    if index != len(lines):
        raise YamlError(f"line {lines[index].number}: unexpected indentation")
    return value


def _lines(text: str) -> list[_Line]:
    found: list[_Line] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.lstrip(" ")
        if raw[: len(raw) - len(raw.lstrip(" \t"))].count("\t"):
            raise YamlError(f"line {number}: a tab in the indentation")
        content = _uncomment(stripped, number).rstrip()
        if not content:
            continue
        if content in ("---", "...") and raw.startswith(content):
            if content == "---" and not found:
                continue
            raise YamlError(f"line {number}: more than one document (or a document end marker)")
        if content.startswith("%"):
            raise YamlError(f"line {number}: YAML directives are not read")
        found.append(_Line(number, len(raw) - len(stripped), content))
    return found


def _uncomment(text: str, number: int) -> str:
    """`text` without its comment: a `#` at the start or after a space, outside quotes."""
    quote = ""
    i = 0
    while i < len(text):
        char = text[i]
        if quote:
            if char == "\\" and quote == '"':
                i += 1
            elif char == quote:
                if quote == "'" and text[i + 1 : i + 2] == "'":
                    i += 1
                else:
                    quote = ""
        elif char in "\"'" and (i == 0 or text[i - 1] in " :[{,-"):
            quote = char
        elif char == "#" and (i == 0 or text[i - 1] == " "):
            return text[:i]
        i += 1
    if quote:
        raise YamlError(f"line {number}: a quoted scalar does not end on its line")
    return text


def _block(lines: list[_Line], index: int, indent: int) -> tuple[Value, int]:
    first = lines[index]
    if first.indent != indent:
        raise YamlError(f"line {first.number}: unexpected indentation")
    if _is_item(first.text):
        return _sequence(lines, index, indent)
    if _KEY.match(first.text):
        return _mapping(lines, index, indent)
    if index + 1 < len(lines) and lines[index + 1].indent >= indent:
        raise YamlError(f"line {lines[index + 1].number}: a scalar continues onto another line")
    return _scalar(first.text, first.number), index + 1


def _sequence(lines: list[_Line], index: int, indent: int) -> tuple[Value, int]:
    items: list[Value] = []
    while index < len(lines) and lines[index].indent == indent and _is_item(lines[index].text):
        line = lines[index]
        rest = line.text[1:].lstrip(" ")
        if not rest:
            if index + 1 < len(lines) and lines[index + 1].indent > indent:
                value, index = _block(lines, index + 1, lines[index + 1].indent)
            else:
                value, index = None, index + 1
        else:
            # "- key: value" opens a mapping whose keys sit where `key` does
            column = indent + len(line.text) - len(rest)
            lines[index] = _Line(line.number, column, rest)
            value, index = _block(lines, index, column)
        items.append(value)
    return items, index


def _is_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _mapping(lines: list[_Line], index: int, indent: int) -> tuple[Value, int]:
    mapping: dict[str, Value] = {}
    while index < len(lines) and lines[index].indent == indent:
        line = lines[index]
        match = _KEY.match(line.text)
        if match is None:
            raise YamlError(f"line {line.number}: expected `key: value`, found {line.text[:60]!r}")
        key = _scalar(match["key"].strip(), line.number)
        if not isinstance(key, str):
            raise YamlError(f"line {line.number}: a key must be a string")
        if key in mapping:
            raise YamlError(f"line {line.number}: the key {key!r} is given twice")
        rest = match["rest"]
        index += 1
        if rest:
            mapping[key] = _scalar(rest, line.number)
            if index < len(lines) and lines[index].indent > indent:
                raise YamlError(f"line {lines[index].number}: a scalar continues onto another line")
        elif index < len(lines) and lines[index].indent > indent:
            mapping[key], index = _block(lines, index, lines[index].indent)
        elif index < len(lines) and lines[index].indent == indent and _is_item(lines[index].text):
            mapping[key], index = _sequence(lines, index, indent)  # Go's yaml: the dash under the key
        else:
            mapping[key] = None
    return mapping, index


def _scalar(text: str, number: int) -> Value:
    text = text.strip()
    if not text:
        return None
    head = text[0]
    if head in "&*!|>@`":
        what = {"&": "an anchor", "*": "an alias", "!": "a tag", "|": "a block scalar", ">": "a block scalar"}
        raise YamlError(f"line {number}: {what.get(head, 'a reserved character')} ({text[:40]!r}) is not read")
    if head == '"':
        return _double(text, number)
    if head == "'":
        if len(text) < 2 or not text.endswith("'") or "'" in text[1:-1].replace("''", ""):
            raise YamlError(f"line {number}: a single-quoted scalar must end its value: {text[:60]!r}")
        return text[1:-1].replace("''", "'")
    if head == "[":
        return _flow(text, "[", "]", number)
    if head == "{":
        return _flow(text, "{", "}", number)
    if text in ("null", "~", "Null", "NULL"):
        return None
    if ": " in text or text.endswith(":"):
        raise YamlError(f"line {number}: a mapping inside a scalar: {text[:60]!r}")
    return text


def _double(text: str, number: int) -> str:
    out: list[str] = []
    i = 1
    while i < len(text):
        char = text[i]
        if char == '"':
            if text[i + 1 :].strip():
                raise YamlError(f"line {number}: text after a quoted scalar: {text[:60]!r}")
            return "".join(out)
        if char == "\\":
            code = text[i + 1 : i + 2]
            if code == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            if code not in _ESCAPES:
                raise YamlError(f"line {number}: an escape the reader does not know: \\{code}")
            out.append(_ESCAPES[code])
            i += 2
            continue
        out.append(char)
        i += 1
    raise YamlError(f"line {number}: a double-quoted scalar does not end on its line")


def _flow(text: str, opening: str, closing: str, number: int) -> Value:
    if not text.endswith(closing):
        raise YamlError(f"line {number}: a flow collection must end on its line: {text[:60]!r}")
    inner = text[1:-1].strip()
    if any(char in inner for char in "[]{}"):
        raise YamlError(f"line {number}: nested flow collections are not read")
    parts = _split(inner, number) if inner else []
    if opening == "[":
        return [_scalar(part, number) for part in parts]
    mapping: dict[str, Value] = {}
    for part in parts:
        match = _KEY.match(part)
        if match is None:
            raise YamlError(f"line {number}: expected `key: value` in a flow mapping, found {part[:40]!r}")
        key = _scalar(match["key"].strip(), number)
        if not isinstance(key, str) or key in mapping:
            raise YamlError(f"line {number}: a flow mapping's key is missing or given twice")
        mapping[key] = _scalar(match["rest"] or "", number)
    return mapping


def _split(text: str, number: int) -> list[str]:
    """`a, "b, c", d` -> its three items (commas inside quotes stay)."""
    parts, current, quote = [], "", ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == ",":
            parts.append(current.strip())
            current = ""
            continue
        current += char
    parts.append(current.strip())
    if any(not part for part in parts):
        raise YamlError(f"line {number}: an empty item in a flow collection")
    return parts
