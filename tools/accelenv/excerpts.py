"""Shortening text for a table cell or a message: at a word boundary, with a mark that says something was left out.

Every place that shows only the start of a longer text goes through `clip`, so none cuts a word in two without
saying so ("heartbe" where "heartbeat timed out" was meant)."""

from __future__ import annotations

MARK = "…"


def clip(text: str, limit: int) -> str:
    """`text` when it fits in `limit` characters; otherwise its longest start that ends at a word boundary and fits
    with the mark after it (`"heartbeat timed out", 12` -> `"heartbeat …"`). A first word longer than the room is
    cut, and still marked."""
    if limit < 1:
        raise ValueError(f"clip: limit must be at least 1, not {limit}")
    if len(text) <= limit:
        return text
    room = limit - len(MARK)
    head = text[: room + 1]
    space = head.rfind(" ")
    kept = head[:space].rstrip() if space > 0 else text[:room]
    return (kept + " " + MARK) if space > 0 and len(kept) + 1 + len(MARK) <= limit else kept + MARK
