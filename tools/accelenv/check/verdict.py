"""Findings and the verdict: what `accelenv check` prints, and its JSON contract (schema/check.schema.json)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from accelenv.records import frozen


class Status(StrEnum):
    PASS = "pass"  # noqa: S105 - a check status, not a password
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@frozen
class Finding:
    """One check: what was expected, what was found, and what to do when they differ."""

    id: str
    status: Status
    expected: str
    found: str
    message: str
    fix: str = ""

    def as_json(self) -> dict[str, str]:
        return {
            "id": self.id,
            "status": str(self.status),
            "expected": self.expected,
            "found": self.found,
            "message": self.message,
            "fix": self.fix,
        }


def verdict(findings: list[Finding]) -> Status:
    """fail if anything failed; else warn if anything warned; else pass."""
    statuses = {f.status for f in findings}
    if Status.FAIL in statuses:
        return Status.FAIL
    if Status.WARN in statuses:
        return Status.WARN
    return Status.PASS


def verdict_json(
    env: str, findings: list[Finding], *, source: str, judged: dict[str, str] | None = None
) -> dict[str, Any]:
    """`judged`: what the verdict judged (`check.subject.Judged.as_json`), when known."""
    counts = {str(s): sum(1 for f in findings if f.status is s) for s in Status}
    return {
        "env": env,
        "verdict": str(verdict(findings)),
        "source": source,
        **({"judged": judged} if judged is not None else {}),
        "counts": counts,
        "checks": [f.as_json() for f in findings],
    }
