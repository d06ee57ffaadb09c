"""`accelenv which`: the environments a host can run, best first. Pure, on top of `check` (and `check.subject`
for what each verdict judged)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelenv.check.checks import check
from accelenv.check.subject import judge_with_own_python, not_judged
from accelenv.check.verdict import Status, verdict

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.interpreter import OwnPython
    from accelenv.host.report import HostReport
    from accelenv.matrix import Matrix

_ORDER = {Status.PASS: 0, Status.WARN: 1, Status.SKIP: 2, Status.FAIL: 3}
_TIER = {"pr": 0, "nightly": 1, "release": 2}


def rank_environments(
    matrix: Matrix,
    report: HostReport,
    own: Mapping[str, OwnPython | None] | None = None,
    *,
    host: str = "the host",
) -> list[dict[str, Any]]:
    """Every environment with its verdict on this host. With `own` (environment -> its own interpreter, as
    `host.interpreter.own_python` finds it; None for a snapshot), the host checks and that interpreter's
    (check.subject), and each row says what was judged; without, the host checks alone. Accelerator environments
    rank above CPU ones when they run, then by verdict, then defaults first, then by CI tier."""
    keyed: list[tuple[tuple[bool, bool, int, bool, int], dict[str, Any]]] = []
    for env in matrix.envs.values():
        if own is None:
            findings, judged = check(matrix, env, report, host_only=True), not_judged(host, "host checks only")
        else:
            findings, judged = judge_with_own_python(matrix, env, report, host=host, own=own.get(env.id))
        status = verdict(findings)
        failing = [f for f in findings if f.status is Status.FAIL]
        warning = [f for f in findings if f.status is Status.WARN]
        skipped = [f for f in findings if f.id == "python.judged" and f.status is Status.SKIP]
        reason = "; ".join(f.message for f in failing or warning) or "; ".join(
            ["all host checks pass", *(f.message for f in skipped)]
        )
        accelerated = bool(matrix.families[env.family].pci_vendor_ids)
        key = (status is Status.FAIL, not accelerated, _ORDER[status], not env.default, _TIER[env.ci_tier])
        row = {
            "id": env.id,
            "family": env.family,
            "default": env.default,
            "runnable": status is not Status.FAIL,
            "verdict": str(status),
            "reason": reason,
            "judged": judged.as_json(),
        }
        keyed.append((key, row))
    keyed.sort(key=lambda pair: pair[0])
    return [row for _, row in keyed]
