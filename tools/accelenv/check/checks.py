"""`check(matrix, env, report)`: is this host the environment the matrix declares? Pure: it runs nothing.

The same function judges a live host, a replayed snapshot, a container, or each node of a cluster. Each check
returns a `Finding` with what was expected, what was found, and a fix. Rules come from the matrix (driver
floors, architectures, pins, visible-device variables); the checks only compare.

This module is the order of the verdict; each subject is a module of its own, read top to bottom:
`devices` (present, counted, SKUs, architectures, visible-device variables), `driver` (module, version,
sources), `runtime`, `tool_faults`, `consistency` (the host's layers agree), `container` (CDI specs), `topology`
(what the environment requires beyond devices), `requirements` (Python and the pins), `framework`, `limits`.
The checks of a family with devices are imported only when such a family is checked: `accelenv check` of a cpu
environment runs before every test session, and its start-up is part of the user's experience.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.check.devices import LISTED, cpu_architecture
from accelenv.check.framework import framework_findings
from accelenv.check.limits import limits
from accelenv.check.requirements import python_version, requirements
from accelenv.check.topology import topology
from accelenv.check.transports import transport_findings
from accelenv.check.verdict import Finding, Status

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.host.report import Accelerator, HostReport
    from accelenv.matrix import Environment, Family, Matrix, Runtime


def check(matrix: Matrix, env: Environment, report: HostReport, *, host_only: bool = False) -> list[Finding]:
    """Every finding for `env` on the host `report` describes. `host_only` leaves out the Python checks (used to
    rank which environments a host could run)."""
    family = matrix.families[env.family]
    runtime = matrix.runtimes[env.runtime]
    accelerator = report.accelerator(env.family)
    findings = list(_unreadable(report))
    findings += [python_version(env, report)] if not host_only else []
    if not family.pci_vendor_ids:
        findings.append(cpu_architecture(env, report))
    else:
        findings += _accelerator_checks(matrix, env, family, runtime=runtime, acc=accelerator, report=report)
    findings += list(topology(env, report))
    if not host_only:
        findings += list(requirements(env, report))
        findings += framework_findings(matrix, env, report)
        findings += list(transport_findings(env, report))
        findings += list(limits(family, report, required_unlimited=env.requires.memlock_unlimited))
    return findings


def _unreadable(report: HostReport) -> Iterator[Finding]:
    """Files that exist but could not be read were facts the checks could not see: say so, rather than judge the
    host as if they were absent."""
    if not report.unreadable:
        return
    paths = list(report.unreadable)
    shown = ", ".join(f"{path} ({report.unreadable[path]})" for path in paths[:LISTED])
    more = f" and {len(paths) - LISTED} more" if len(paths) > LISTED else ""
    yield Finding(
        id="host.readable",
        status=Status.FAIL,
        expected="every host file accelenv reads is readable",
        found=f"{len(paths)} unreadable: {shown}{more}",
        message=f"{len(paths)} host file(s) exist but could not be read, so the checks that rest on them judged "
        "without them",
        fix="run accelenv as a user that can read them (or with the groups that own them); with --root, give a "
        "complete capture of regular files",
    )


def _accelerator_checks(
    matrix: Matrix,
    env: Environment,
    family: Family,
    *,
    runtime: Runtime,
    acc: Accelerator | None,
    report: HostReport,
) -> list[Finding]:
    """The checks of a family with devices, in the verdict's order. Without a device of the family only
    `hardware.present` (and what the tools and CDI specs say) is judged: there is nothing else to compare."""
    from accelenv.check.container import container_cdi
    from accelenv.check.devices import architectures, device_count, device_skus, present, visible_devices
    from accelenv.check.driver import driver_module, driver_sources, driver_version
    from accelenv.check.runtime import runtime_version
    from accelenv.check.tool_faults import tool_errors, tool_faults

    findings = [present(env, family, acc)]
    if acc is not None and acc.devices:
        findings += driver_module(family, acc)
        findings += tool_errors(family, acc)
        findings += device_count(family, acc, report)
        findings += device_skus(matrix, env, acc)
        findings.append(architectures(matrix, runtime, acc))
        findings += driver_version(matrix, family, runtime, acc, report)
        findings += driver_sources(family, acc)
        findings += runtime_version(family, runtime, acc)
        findings += visible_devices(family, acc, report)
    findings += tool_faults(family, acc, report)
    if acc is not None:  # the host's layers agree (check/consistency.py)
        from accelenv.check.consistency import consistency_findings

        findings += consistency_findings(matrix, acc)
    findings += container_cdi(family, report)
    return findings
