"""`accelenv which`: the environments a host can run, best first. Pure, on top of `check`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelenv.check.checks import check
from accelenv.check.verdict import Status, verdict

if TYPE_CHECKING:
    from accelenv.host.report import HostReport
    from accelenv.matrix import Matrix

_ORDER = {Status.PASS: 0, Status.WARN: 1, Status.SKIP: 2, Status.FAIL: 3}
_TIER = {"pr": 0, "nightly": 1, "release": 2}


def rank_environments(matrix: Matrix, report: HostReport) -> list[dict[str, Any]]:
    """Every environment with its host-level verdict (hardware, driver, architecture; Python pins are what the
    environment installs, so they do not count). Accelerator environments rank above CPU ones when they run,
    then by verdict, then defaults first, then by CI tier."""
    keyed: list[tuple[tuple[bool, bool, int, bool, int], dict[str, Any]]] = []
    for env in matrix.envs.values():
        findings = check(matrix, env, report, host_only=True)
        status = verdict(findings)
        failing = [f for f in findings if f.status is Status.FAIL]
        warning = [f for f in findings if f.status is Status.WARN]
        reason = "; ".join(f.message for f in failing or warning) or "all host checks pass"
        accelerated = bool(matrix.families[env.family].pci_vendor_ids)
        key = (status is Status.FAIL, not accelerated, _ORDER[status], not env.default, _TIER[env.ci_tier])
        row = {
            "id": env.id,
            "family": env.family,
            "default": env.default,
            "runnable": status is not Status.FAIL,
            "verdict": str(status),
            "reason": reason,
        }
        keyed.append((key, row))
    keyed.sort(key=lambda pair: pair[0])
    return [row for _, row in keyed]
