"""The engine's answers read as the untrusted data they are: each docker-py answer `build/engine.py` uses is checked
here for the shape the Engine API documents (an object where one is due, an image id that is text, a size that
is a whole number), so an engine, or whatever listens at DOCKER_HOST, that answers `/version` with a list or an
image without its `Id` is an `EngineError` naming what was wrong, never a KeyError from deep inside a command.

Pure: every function takes the decoded JSON and returns plain values or raises `BadAnswer`.
"""

from __future__ import annotations

from typing import Any

MAX_TEXT = 4096  # an id, a tag or a label value: the engine's own limits are far below


class BadAnswer(ValueError):
    """The answer is not what the Engine API says it is."""


def mapping(data: object, what: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise BadAnswer(f"{what} is {_kind(data)}, not an object")
    return data


def entries(data: object, what: str) -> list[dict[str, Any]]:
    """A list of objects (`/images/json`, `/containers/json`); None is an empty list."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise BadAnswer(f"{what} is {_kind(data)}, not a list")
    return [mapping(item, f"{what}[{i}]") for i, item in enumerate(data)]


def text(data: dict[str, Any], key: str, what: str, *, required: bool = False) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value) or len(value) > MAX_TEXT:
        raise BadAnswer(f"{what}.{key} is {_kind(value)}, not {'an id' if required else 'text'}")
    return value


def count(data: dict[str, Any], key: str, what: str) -> int:
    """A whole number of bytes or items, at least 0; missing or null is 0 (as docker-py's own callers take it)."""
    value = data.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadAnswer(f"{what}.{key} is {_kind(value)}, not a whole number")
    return value


def texts(data: dict[str, Any], key: str, what: str) -> tuple[str, ...]:
    value = data.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= MAX_TEXT for v in value):
        raise BadAnswer(f"{what}.{key} is {_kind(value)}, not a list of text")
    return tuple(value)


def labels(data: dict[str, Any], what: str) -> dict[str, str]:
    config = mapping(data.get("Config") or {}, f"{what}.Config")
    found = config.get("Labels") or {}
    if not isinstance(found, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
        raise BadAnswer(f"{what}.Config.Labels is {_kind(found)}, not a mapping of text")
    return found


def _kind(value: object) -> str:
    if value is None:
        return "missing"
    shown = repr(value)
    return f"{type(value).__name__} {shown[:40]}{'...' if len(shown) > 40 else ''}"
