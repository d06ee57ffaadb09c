"""A strict reader for the YAML that CDI spec generators write, so `check` can judge `/etc/cdi/*.yaml` without
a YAML dependency (the checker also runs inside every image, whose Python carries only packaging and
jsonschema).

What it reads: block mappings and sequences (a sequence may sit at its key's indentation, as Go's yaml writes
it), plain, single- and double-quoted scalars on one line, flow sequences and mappings of scalars on one line
(`[ro, nosuid]`, `{}`), comments, and one leading `---`. nvidia-ctk, amd-ctk and Intel's CDI generators write
nothing else. Anything outside that (anchors, aliases, tags, block scalars, multi-line scalars, several
documents, tabs in indentation, a key given twice) is an error naming the line: the reader refuses rather than
guesses. Its cost is linear in the text: each scan jumps between the characters that matter with a compiled
pattern, and nesting, lines and flow items are bounded (a hostile spec of the 4 MiB read limit is read or
refused in well under a second). A YAML library would not do here: the checker also runs inside the images.
Scalars stay strings (`0.5.0`, `"0"`, `true`); `null` and `~` are None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Value = str | None | list["Value"] | dict[str, "Value"]

MAX_DEPTH = 64  # nested collections; CDI specs nest fewer than ten
MAX_LINES = 65536  # lines with content; nvidia-ctk's spec of 8 GPUs with every MIG profile has a few thousand
MAX_FLOW_ITEMS = 4096  # items of one `[...]` or `{...}`; spec generators write a handful (mount options)
_NOT_FIRST = frozenset("'\"#[]{},&*!|>%@`-")
# Every scan below jumps with one of these from one character that matters to the next, so a line costs time in
# proportion to its length, in C rather than a Python loop per character (a spec line may be 4 MiB).
_KEY_END = re.compile(r":(?=\s|\Z)")
_COMMENT_SPECIAL = re.compile(r"[\"'#\\]")
_DOUBLE_SPECIAL = re.compile(r'["\\]')
_SINGLE_SPECIAL = re.compile(r"'")
_FLOW_SPECIAL = re.compile(r"[\"',]")
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
        if len(found) > MAX_LINES:
            raise YamlError(f"line {number}: more than {MAX_LINES} lines of content; no CDI spec is this long")
    return found


def _uncomment(text: str, number: int) -> str:
    """`text` without its comment: a `#` at the start or after a space, outside quotes."""
    if text.count('"') + text.count("'") > 2 * MAX_FLOW_ITEMS:
        raise YamlError(f"line {number}: more than {MAX_FLOW_ITEMS} quoted scalars on one line")
    quote = ""
    i = 0
    while (found := _COMMENT_SPECIAL.search(text, i)) is not None:  # jumps from one quote or `#` to the next
        j = found.start()
        char = text[j]
        i = j + 1
        if quote:
            if char == "\\" and quote == '"':
                i = j + 2
            elif char == quote:
                if quote == "'" and text[j + 1 : j + 2] == "'":
                    i = j + 2
                else:
                    quote = ""
        elif char in "\"'" and (j == 0 or text[j - 1] in " :[{,-"):
            quote = char
        elif char == "#" and (j == 0 or text[j - 1] == " "):
            return text[:j]
    if quote:
        raise YamlError(f"line {number}: a quoted scalar does not end on its line")
    return text


def _key(text: str) -> tuple[str, str | None] | None:
    """`text` as `key: rest` (the key as written, the rest or None), or None when it is not a mapping entry. One
    pass over the text: a key ends at the first `:` followed by whitespace or the end of the line (a regular
    expression with a lazy key and `\\s*:` retried every run of spaces, which made a long line quadratic)."""
    if not text:
        return None
    if text[0] in "\"'":
        end = _quoted_end(text)
        if end is None:
            return None
        after = text[end:].lstrip()
        if not after.startswith(":") or (len(after) > 1 and not after[1].isspace()):
            return None
        return text[:end], after[1:].strip() or None
    if text[0].isspace() or (text[0] in _NOT_FIRST and not _dash_key(text)):
        return None
    colon = _KEY_END.search(text, 2 if text[0] == "-" else 1)
    if colon is None or "#" in text[: colon.start()]:
        return None
    return text[: colon.start()], text[colon.end() :].strip() or None


def _dash_key(text: str) -> bool:
    return text[0] == "-" and len(text) > 1 and not text[1].isspace() and text[1] != "#"


def _quoted_end(text: str) -> int | None:
    """The index just past the quoted scalar `text` starts with, or None when it does not end."""
    quote, i = text[0], 1
    special = _DOUBLE_SPECIAL if quote == '"' else _SINGLE_SPECIAL
    while (found := special.search(text, i)) is not None:
        j = found.start()
        if text[j] == "\\" or (quote == "'" and text[j + 1 : j + 2] == "'"):  # an escape, or '' inside ''
            i = j + 2
        else:
            return j + 1
    return None


def _block(lines: list[_Line], index: int, indent: int, depth: int = 0) -> tuple[Value, int]:
    first = lines[index]
    if depth > MAX_DEPTH:
        raise YamlError(f"line {first.number}: collections nest more than {MAX_DEPTH} deep")
    if first.indent != indent:
        raise YamlError(f"line {first.number}: unexpected indentation")
    if _is_item(first.text):
        return _sequence(lines, index, indent, depth)
    if _key(first.text):
        return _mapping(lines, index, indent, depth)
    if index + 1 < len(lines) and lines[index + 1].indent >= indent:
        raise YamlError(f"line {lines[index + 1].number}: a scalar continues onto another line")
    return _scalar(first.text, first.number), index + 1


def _sequence(lines: list[_Line], index: int, indent: int, depth: int) -> tuple[Value, int]:
    items: list[Value] = []
    while index < len(lines) and lines[index].indent == indent and _is_item(lines[index].text):
        line = lines[index]
        rest = line.text[1:].lstrip(" ")
        if not rest:
            if index + 1 < len(lines) and lines[index + 1].indent > indent:
                value, index = _block(lines, index + 1, lines[index + 1].indent, depth + 1)
            else:
                value, index = None, index + 1
        else:
            # "- key: value" opens a mapping whose keys sit where `key` does
            column = indent + len(line.text) - len(rest)
            lines[index] = _Line(line.number, column, rest)
            value, index = _block(lines, index, column, depth + 1)
        items.append(value)
    return items, index


def _is_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _mapping(lines: list[_Line], index: int, indent: int, depth: int) -> tuple[Value, int]:
    mapping: dict[str, Value] = {}
    while index < len(lines) and lines[index].indent == indent:
        line = lines[index]
        entry = _key(line.text)
        if entry is None:
            raise YamlError(f"line {line.number}: expected `key: value`, found {line.text[:60]!r}")
        key = _scalar(entry[0].strip(), line.number)
        if not isinstance(key, str):
            raise YamlError(f"line {line.number}: a key must be a string")
        if key in mapping:
            raise YamlError(f"line {line.number}: the key {key!r} is given twice")
        rest = entry[1]
        index += 1
        if rest:
            mapping[key] = _scalar(rest, line.number)
            if index < len(lines) and lines[index].indent > indent:
                raise YamlError(f"line {lines[index].number}: a scalar continues onto another line")
        elif index < len(lines) and lines[index].indent > indent:
            mapping[key], index = _block(lines, index, lines[index].indent, depth + 1)
        elif index < len(lines) and lines[index].indent == indent and _is_item(lines[index].text):
            mapping[key], index = _sequence(lines, index, indent, depth + 1)  # Go's yaml: the dash under the key
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
    while (found := _DOUBLE_SPECIAL.search(text, i)) is not None:
        j = found.start()
        out.append(text[i:j])
        if text[j] == '"':
            if text[j + 1 :].strip():
                raise YamlError(f"line {number}: text after a quoted scalar: {text[:60]!r}")
            return "".join(out)
        code = text[j + 1 : j + 2]
        if code == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[j + 2 : j + 6]):
            out.append(chr(int(text[j + 2 : j + 6], 16)))
            i = j + 6
            continue
        if code not in _ESCAPES:
            raise YamlError(f"line {number}: an escape the reader does not know: \\{code}")
        out.append(_ESCAPES[code])
        i = j + 2
    raise YamlError(f"line {number}: a double-quoted scalar does not end on its line")


def _flow(text: str, opening: str, closing: str, number: int) -> Value:
    if not text.endswith(closing):
        raise YamlError(f"line {number}: a flow collection must end on its line: {text[:60]!r}")
    inner = text[1:-1].strip()
    if any(char in inner for char in "[]{}"):
        raise YamlError(f"line {number}: nested flow collections are not read")
    parts = _split(inner, number) if inner else []
    if len(parts) > MAX_FLOW_ITEMS:
        raise YamlError(f"line {number}: a flow collection of more than {MAX_FLOW_ITEMS} items")
    if opening == "[":
        return [_scalar(part, number) for part in parts]
    mapping: dict[str, Value] = {}
    for part in parts:
        entry = _key(part)
        if entry is None:
            raise YamlError(f"line {number}: expected `key: value` in a flow mapping, found {part[:40]!r}")
        key = _scalar(entry[0].strip(), number)
        if not isinstance(key, str) or key in mapping:
            raise YamlError(f"line {number}: a flow mapping's key is missing or given twice")
        mapping[key] = _scalar(entry[1] or "", number)
    return mapping


def _split(text: str, number: int) -> list[str]:
    """`a, "b, c", d` -> its three items (commas inside quotes stay)."""
    parts: list[str] = []
    start, quote = 0, ""
    for found in _FLOW_SPECIAL.finditer(text):  # quotes and commas only, not every character
        char = found[0]
        if len(parts) > MAX_FLOW_ITEMS:
            break  # too many already: the caller refuses it
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        else:
            parts.append(text[start : found.start()].strip())
            start = found.end()
    parts.append(text[start:].strip())
    if any(not part for part in parts):
        raise YamlError(f"line {number}: an empty item in a flow collection")
    return parts
