"""Text helpers shared by the vendor parsers: quoting what was found, reading JSON amid noise, PCI addresses."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from accelenv.host.facts import ParseError

EXCERPT_CHARS = 60
_BDF = re.compile(r"(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])", re.IGNORECASE)


def excerpt(text: str) -> str:
    """A short quote of what was found, for error messages."""
    flat = " ".join(text.split())
    if not flat:
        return "empty output"
    return repr(flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS] + "...")


def load_json(text: str, what: str) -> object:
    """The JSON document in `text`, skipping lines before it (a shell prompt, `instance-type:` lines, Python
    warnings on stderr)."""
    start = _json_start(text)
    if start is None:
        raise ParseError(f"{what}: expected JSON output, found {excerpt(text)}")
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as error:
        problem = (
            "the output ends inside the JSON document (truncated)"
            if error.pos >= len(text.rstrip())
            else f"malformed JSON at line {error.lineno}, column {error.colno} ({error.msg.removesuffix(' at')})"
        )
        raise ParseError(f"{what}: {problem}, found {excerpt(text[start:])}") from None
    except (ValueError, RecursionError) as error:  # integers over Python's digit limit; absurd nesting
        raise ParseError(f"{what}: JSON could not be read ({error}), found {excerpt(text[start:])}") from None
    if text[end:].strip():
        raise ParseError(f"{what}: unexpected text after the JSON document: {excerpt(text[end:])}")
    return value


def _json_start(text: str) -> int | None:
    """Where the first line that opens a JSON object or list starts its JSON."""
    position = 0
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip()
        if stripped.startswith(("{", "[")):
            return position + len(line) - len(stripped)
        position += len(line)
    return None


def describe(value: object) -> str:
    """What a JSON value is, for error messages (never the whole of a nested value)."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return excerpt(str(value))


def bdf(value: str | None) -> str | None:
    """`0000:1E:00.0` -> `0000:1e:00.0`; a missing domain is 0000 (neuron-ls -j drops it on trn2). None when the
    value is not a PCI address."""
    if value is None:
        return None
    match = _BDF.fullmatch(value.strip())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return f"{(domain or '0000').lower()}:{bus.lower()}:{device.lower()}.{function}"


# What vendor tools print in a field they cannot fill: nvidia-smi's [N/A], [Not Supported], [Unknown Error] and
# [Requested functionality has been deprecated]; amd-smi's and rocm-smi's N/A and "Unknown"; hl-smi's N/A.
_PLACEHOLDERS = frozenset({"", "n/a", "na", "none", "null", "unknown", "not supported", "not available", "-", "--"})
# A bare PCI id where a product name belongs: older rocm-smi fills "Card series"/"Card model" with the vendor id
# (0x1002) or the device id (0x74a1); no product is called that.
_BARE_HEX = re.compile(r"0x[0-9a-f]{1,8}", re.IGNORECASE)


def placeholder(value: str | None) -> bool:
    """Whether a tool's value says "no value": empty, N/A, [N/A], [Not Supported], [Unknown Error], Unknown ..."""
    if value is None:
        return True
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        return True
    return text.casefold() in _PLACEHOLDERS


def product_name(value: object) -> str | None:
    """A product or model name as a tool printed it, or None when the field holds no name: a placeholder (see
    `placeholder`), a bare PCI id (`0x1002`, `0x74a1`, `0x233010DE`), or text that is only digits and
    punctuation. The one rule every family's name fields go through."""
    if not isinstance(value, str):
        return None
    text = " ".join(value.split())
    if placeholder(text) or _BARE_HEX.fullmatch(text) or not any(c.isalpha() for c in text):
        return None
    return text
