"""`lazy(pattern)`: a regular expression compiled when it is first used, not when its module is imported.

Python compiles a pattern in Python code (`re._compiler`), from 0.1 ms for a short one to over 1 ms for the secret
shapes of `redact.py`, and no bytecode cache keeps the result. A module on the start-up path of `check` whose
pattern serves only some hosts (CDI specs, secrets in tool output) declares it with `lazy` so that the hosts
without them do not pay for it.
"""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    """Stands for `re.compile(pattern, flags)`: attribute access (`.sub`, `.match`, `.search` ...) compiles it
    once and goes to the compiled pattern."""

    __slots__ = ("_compiled", "_source")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(*self._source)
        return getattr(self._compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._source[0]!r}, {self._source[1]!r})"


def lazy(pattern: str, flags: int = 0) -> Any:
    """`re.compile(pattern, flags)`, compiled on first use. Typed `Any`: it is used as the `re.Pattern` it stands
    for."""
    return LazyPattern(pattern, flags)
