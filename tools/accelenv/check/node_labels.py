"""The edge of `accelenv labels`: which family a host is, the checks whose verdicts become labels, the NVLink
fabric (one more `nvidia-smi -q` on NVIDIA hosts); what the platform says is the report's (`host/platform.py`).
The label set itself is `check.labels`, pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv import records
from accelenv.check.checks import check
from accelenv.check.labels import LabelSet, node_labels
from accelenv.check.subject import judge_with_own_python

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from accelenv.host.fabric import NvlinkDomain
    from accelenv.host.interpreter import OwnPython
    from accelenv.host.report import HostReport
    from accelenv.host.run import Runner
    from accelenv.matrix.model import Environment, Matrix


def host_family(matrix: Matrix, report: HostReport) -> str:
    """The accelerator family of the host: the first one with devices, in matrix order; else cpu."""
    for family in matrix.families:
        acc = report.accelerator(family)
        if acc is not None and acc.devices:
            return family
    return "cpu" if "cpu" in matrix.families else next(iter(matrix.families))


def environments(matrix: Matrix, family: str, chosen: Sequence[Environment]) -> list[Environment]:
    """The environments asked for, or the family's own."""
    return list(chosen) or [e for e in matrix.envs.values() if e.family == family]


def fabric_domain(report: HostReport, runner: Runner | None) -> tuple[NvlinkDomain | None, str | None]:
    """The host's multi-node NVLink domain and, when it could not be read, why. A snapshot answers from its raw
    `nvidia-smi -q` output when it has one; a live host runs the tool (`runner`)."""
    from accelenv.host.fabric import ARGS, RAW_KEY, nvlink_domain, parse_fabric
    from accelenv.host.facts import ParseError

    result = report.raw.get(RAW_KEY)
    if result is None and runner is not None:
        result = runner.run(["nvidia-smi", *ARGS])
    if result is None:
        return None, "no nvidia-smi -q output (a snapshot without it)"
    if not result.ok:
        return None, result.fault or f"nvidia-smi -q exited with {result.returncode}"
    try:
        return nvlink_domain(parse_fabric(result.stdout)), None
    except ParseError as error:
        return None, str(error)


def labels_for(
    matrix: Matrix,
    report: HostReport,
    chosen: Sequence[Environment] = (),
    *,
    runner: Runner | None = None,
    fabric: bool = True,
    metadata: dict[str, str] | None = None,
    own: Mapping[str, OwnPython | None] | None = None,
    host: str = "the host",
) -> tuple[LabelSet, list[str]]:
    """The node's label set from the findings `check` returns for each environment, and notes on what could not
    be read (the fabric of an NVIDIA host). With `own` (environment -> its own interpreter; `accelenv labels`),
    each verdict judges the host and that interpreter, never the report's Python (check.subject), and the set
    says what each judged; without (a Ray worker, whose Python is the environment's), the report's Python."""
    family = host_family(matrix, report)
    judged: dict[str, str] = {}
    verdicts = {}
    for env in environments(matrix, family, chosen):
        if own is None:
            verdicts[env.id] = check(matrix, env, report)
            continue
        verdicts[env.id], said = judge_with_own_python(matrix, env, report, host=host, own=own.get(env.id))
        judged[env.id] = said.words()
    from accelenv.check.labels import OWN_NAMES

    notes = [f"platform fact {name} ignored: only the node says its {name}" for name in sorted(metadata or {})
             if name in OWN_NAMES]  # fmt: skip
    domain = None
    if fabric and family == "nvidia":
        domain, why = fabric_domain(report, runner)
        if why:
            notes.append(f"NVLink fabric not read: {why}")
    found = node_labels(report, verdicts, family=family, nvlink=domain, metadata=metadata)
    return (records.replace(found, judged=judged) if judged else found), notes
