"""The Python stack of each Ray Direct Transport (RDT) transport the environment declares: the distributions it
imports (accelenv.matrix.transports) installed in the checked Python. Missing is a warning, not a failure: the
environment's other workloads run without them, and its RDT conformance test fails on its own, naming the import.
A Python without torch (the CPU environment's lock carries none) is not judged: the finding says it was skipped.
The host pieces a transport's workloads need (nvidia_peermem, EFA, InfiniBand, memlock) are the environment's
`requires`, judged by `topology` and `limits`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.check.verdict import Finding, Status
from accelenv.matrix.model import canonical_name
from accelenv.matrix.transports import TRANSPORTS

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.host.report import HostReport
    from accelenv.matrix import Environment


def transport_findings(env: Environment, report: HostReport) -> Iterator[Finding]:
    """One `rdt.<transport>` finding per declared transport: PASS with the distributions found, WARN naming the
    missing ones and how to install them."""
    installed = report.python.distributions
    for name in env.transports:
        transport = TRANSPORTS[name]
        if not installed.get("torch"):
            yield Finding(
                id=f"rdt.{name.lower()}",
                status=Status.SKIP,
                expected="torch, which every RDT transport imports",
                found="torch not installed",
                message=f"RDT over {name} not checked: this Python has no torch (the environment's own workloads "
                "need none); its packages are checked where torch is installed",
                fix=f"install torch beside envs/{env.id}/requirements.lock where this host moves tensors over {name}",
            )
            continue
        found, missing = [], []
        for choices in transport.packages:
            have = next((c for c in choices if installed.get(canonical_name(c))), None)
            if have is None:
                missing.append(" or ".join(choices))
            else:
                found.append(f"{have} {installed[canonical_name(have)][0]}")
        expected = ", ".join(" or ".join(c) for c in transport.packages)
        if not missing:
            yield Finding(
                id=f"rdt.{name.lower()}",
                status=Status.PASS,
                expected=expected,
                found=", ".join(found),
                message=f"RDT over {name}: {', '.join(found)}",
            )
            continue
        yield Finding(
            id=f"rdt.{name.lower()}",
            status=Status.WARN,
            expected=expected,
            found="missing: " + "; ".join(missing),
            message=f"{env.id} declares RDT over {name}, which imports {expected}; not installed: {'; '.join(missing)}",
            fix=f"install {'; '.join(missing)} beside envs/{env.id}/requirements.lock where this host moves tensors "
            f"over {name} (docs/transports.md)",
        )
