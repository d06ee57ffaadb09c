"""What a rule is, and the book every rule family writes itself into.

A rule is a function over the model that yields `Finding`s; `@rule` registers it, in the order its module is
imported (`rules.py` imports every family, and runs them all). What the schema cannot say is said here, one
family of rules per module: `reference_rules`, `architecture_rules`, `requirement_rules`, `identity_rules`,
`driver_rules`, `image_rules`, `runtime_rules`, `framework_rules`, `ray_rules`. The compatibility knowledge
itself (which architectures a runtime supports, which driver it needs, how a version becomes a wheel tag, which
host CPU a SKU comes in) is data in the matrix; the rules only compare.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from accelenv.matrix.problems import Severity, suggest
from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.matrix.model import Matrix

Path = tuple[str | int, ...]


@frozen
class Finding:
    path: Path
    message: str
    rule: str
    severity: Severity = Severity.ERROR


Rule = Callable[["Matrix", frozenset[tuple[str, str]]], Iterator[Finding]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def reference(
    m: Matrix, skipped: frozenset[tuple[str, str]], section: str, value: str, path: Path
) -> Iterator[Finding]:
    """A finding when `value` names no entry of `section` (and that entry was not refused by the schema)."""
    known: Mapping[str, object] = getattr(m, section)
    if value in known or (section, value) in skipped:
        return
    close = suggest(value, known)
    hint = f"did you mean '{close}'?" if close else f"known: {', '.join(sorted(known)) or 'none'}"
    what = {
        "sources": "source",
        "families": "family",
        "runtimes": "runtime",
        "skus": "SKU",
        "os": "OS base",
        "drivers": "driver release",
    }[section]
    yield Finding(path=path, message=f"{what} '{value}' is not defined under [{section}]; {hint}", rule="reference")


def complete(skipped: frozenset[tuple[str, str]], section: str) -> bool:
    """True when the schema refused no entry of `section`: only then may a rule conclude that something is
    missing from it ("no default environment", "in no environment"). A refused entry is left out of the model,
    and it may be the very one that was looked for; its own problem is reported, and the conclusion waits."""
    return not any(s == section for s, _ in skipped)
