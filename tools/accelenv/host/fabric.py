"""NVIDIA multi-node NVLink: the fabric each GPU belongs to, read from the `Fabric` section of `nvidia-smi -q`.

On a GB200/GB300 NVL72 rack every GPU the NVLink switches join reports the same cluster UUID and clique id once
the fabric manager has registered it (`State: Completed`, `Status: Success`); GPUs that share both can reach each
other over NVLink across hosts, so (cluster UUID, clique id) names a domain a scheduler can pack on. An all-zero
cluster UUID (a single-host system, or a fabric that was never set up) is no multi-node domain. The parser is pure;
running the tool is the caller's job (`accelenv labels`, which asks for it only on NVIDIA hosts).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelenv.host.facts import ParseError
from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.host.report import HostReport
    from accelenv.host.run import Runner

ARGS = ["-q"]  # nvidia-smi arguments whose output `parse_fabric` reads
RAW_KEY = "nvidia-smi-q"  # the key of that output among a report's raw tool results, when a snapshot has it
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_CLIQUE = re.compile(r"\d{1,10}")
_FIELD = re.compile(r"\A(?P<indent>\s*)(?P<key>[A-Za-z][A-Za-z ]*?)\s*:\s*(?P<value>.*?)\s*\Z")
_SECTION = re.compile(r"\A(?P<indent>\s+)Fabric\s*\Z")
_GPU = re.compile(r"\AGPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]\s*\Z")
MAX_GPUS = 4096


@frozen
class GpuFabric:
    """One GPU's fabric registration as nvidia-smi reports it (None where it says N/A or nothing)."""

    state: str | None
    status: str | None
    clique_id: str | None
    cluster_uuid: str | None

    @property
    def registered(self) -> bool:
        """In a multi-node NVLink domain: registered with a fabric that has a real (non-zero) cluster UUID."""
        return (
            self.state == "Completed"
            and self.status == "Success"
            and self.cluster_uuid is not None
            and self.cluster_uuid != ZERO_UUID
            and self.clique_id is not None
        )


@frozen
class NvlinkDomain:
    cluster_uuid: str
    clique_id: str

    @property
    def name(self) -> str:
        """`<cluster uuid>.<clique id>`: 36 + 1 + at most 10 characters, a valid label value."""
        return f"{self.cluster_uuid}.{self.clique_id}"


def parse_fabric(text: str) -> tuple[GpuFabric, ...]:
    """Every GPU's `Fabric` section of `nvidia-smi -q`, in output order. A GPU without the section (a driver or
    board without multi-node NVLink) is left out. Values that are not a UUID or a clique id read as None, so
    nothing but those shapes leaves the parser. Raises ParseError on output that is not `nvidia-smi -q`."""
    if "Driver Version" not in text and "==============NVSMI LOG==============" not in text:
        raise ParseError("nvidia-smi -q: expected its report (a Driver Version line), found something else")
    found: list[GpuFabric] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines) and len(found) < MAX_GPUS:
        section = _SECTION.match(lines[i])
        i += 1
        if not section:
            continue
        depth = len(section["indent"])
        fields: dict[str, str] = {}
        while i < len(lines):
            line = lines[i]
            if line.strip() and (len(line) - len(line.lstrip()) <= depth or _GPU.match(line)):
                break
            field = _FIELD.match(line)
            if field and len(field["indent"]) == depth + 4:  # the section's own fields, not Health's
                fields.setdefault(field["key"].strip(), field["value"])
            i += 1
        uuid = fields.get("ClusterUUID", "")
        clique = fields.get("CliqueId", "")
        found.append(
            GpuFabric(
                state=_word(fields.get("State")),
                status=_word(fields.get("Status")),
                clique_id=clique if _CLIQUE.fullmatch(clique) else None,
                cluster_uuid=uuid.lower() if _UUID.fullmatch(uuid) else None,
            )
        )
    return tuple(found)


def nvlink_domain(gpus: tuple[GpuFabric, ...]) -> NvlinkDomain | None:
    """The multi-node NVLink domain of this host: the (cluster UUID, clique id) every GPU is registered in, or None
    when there is no fabric, a GPU is not registered, the UUID is all zero, or the GPUs disagree."""
    if not gpus or not all(g.registered for g in gpus):
        return None
    domains = {(g.cluster_uuid or "", g.clique_id or "") for g in gpus}  # `registered`: neither is None
    if len(domains) != 1:
        return None
    uuid, clique = domains.pop()
    return NvlinkDomain(cluster_uuid=uuid, clique_id=clique)


def _word(value: str | None) -> str | None:
    return value if value and re.fullmatch(r"[A-Za-z][A-Za-z ]{0,40}", value) else None


def with_fabric_output(report: HostReport, runner: Runner) -> HostReport:
    """`report` with the raw `nvidia-smi -q` output (under `RAW_KEY`) on a host with NVIDIA devices, so a snapshot
    can replay the NVLink domain; unchanged elsewhere, or when it already has it."""
    from accelenv import records

    nvidia = report.accelerator("nvidia")
    if nvidia is None or not nvidia.devices or RAW_KEY in report.raw:
        return report
    return records.replace(report, raw={**report.raw, RAW_KEY: runner.run(["nvidia-smi", *ARGS])})
