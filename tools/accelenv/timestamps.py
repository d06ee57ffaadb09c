"""Times as RFC 3339 text (`2026-12-01T21:00:00Z`), read and written: the engine's image configs, result records
and anything else accelenv reads a time from. Pure; the base of every layer that reads one.
"""

from __future__ import annotations

import time

from accelenv.lazyre import lazy

_RFC3339 = lazy(r"\A(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)\Z")


def rfc3339_nanoseconds(text: str) -> int | None:
    """Nanoseconds since 1970 of an RFC 3339 time as the engine writes it (up to 9 decimals), or None when it does
    not read (another form, non-ASCII digits, month 13, February 30, an offset of +99:00)."""
    from datetime import UTC, datetime

    match = _RFC3339.fullmatch(text.strip())
    if match is None or not match[0].isascii():
        return None
    zone = "+00:00" if match[3] == "Z" else match[3]
    try:  # in UTC, so a time that is past year 9999 there does not read either
        seconds = int(datetime.fromisoformat(match[1] + zone).astimezone(UTC).timestamp())
    except (ValueError, OverflowError):
        return None
    return seconds * 10**9 + int((match[2] or "0").ljust(9, "0"))


def rfc3339_seconds(text: str) -> int | None:
    """Whole seconds since 1970 of an RFC 3339 time as the engine writes it (nanoseconds allowed), or None."""
    nanoseconds = rfc3339_nanoseconds(text)
    return None if nanoseconds is None else nanoseconds // 10**9


def rfc3339(epoch: int) -> str:
    """The RFC 3339 form of a time in seconds, in UTC: 2025-06-01T12:00:00Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
