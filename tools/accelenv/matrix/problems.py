"""What is wrong with a matrix: one `Problem` per finding, collected, never raised one at a time."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING

from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Iterable


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


class Category(StrEnum):
    """Who can fix a problem. `change`: the matrix edit itself (a vendor's pull request must leave none, checked by
    `validate --strict`). `registry`: only someone who can reach the image registries and package indexes (pin a
    digest, lock an environment), usually a maintainer before a release (`validate --release`)."""

    CHANGE = "change"
    REGISTRY = "registry"


REGISTRY_RULES = frozenset({"unpinned", "lock"})
"""The rules whose findings need a registry or an index to fix (`accelenv pin`, `accelenv lock`)."""


@frozen
class Problem:
    """One finding: where (dotted key path, line when known), what, and what to do about it."""

    path: str
    message: str
    severity: Severity = Severity.ERROR
    line: int | None = None
    rule: str = "schema"

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    @property
    def category(self) -> Category:
        return Category.REGISTRY if self.rule in REGISTRY_RULES else Category.CHANGE

    def render(self, source: str) -> str:
        where = f"{source}:{self.line}" if self.line else source
        path = f" {self.path}:" if self.path else ""
        kind = f"{self.severity} (registry)" if self.category is Category.REGISTRY else str(self.severity)
        return f"{where}: {kind}:{path} {self.message}"

    def as_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "severity": str(self.severity),
            "rule": self.rule,
            "category": str(self.category),
            "message": self.message,
        }


def dotted(parts: tuple[str | int, ...] | list[str | int]) -> str:
    """`("envs", "gpu-nvidia-cu128", "skus", 2)` -> `envs.gpu-nvidia-cu128.skus[2]`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            key = part if part.isprintable() and '"' not in part else _quoted(part)  # a newline would split lines
            out += f".{key}" if out else key
    return out


def _quoted(key: str) -> str:
    """A key with control characters, quoted and escaped as a TOML basic string (`"cpu-evil\\n"`)."""
    import json

    return json.dumps(key)


def suggest(wrong: str, known: Iterable[str]) -> str | None:
    """The known name a typo most likely meant: close spelling, or a shared 4-letter prefix (archs)."""
    names = sorted(known)
    import difflib  # only a wrong name pays for it

    close = difflib.get_close_matches(wrong, names, n=1)
    if close:
        return close[0]
    prefixed = [n for n in names if len(wrong) >= 4 and n.startswith(wrong[:4])]
    return prefixed[0] if len(prefixed) == 1 else None
