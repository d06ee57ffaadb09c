"""The container: are the host's CDI specs usable for the environment's family (`container.cdi`)? Pure, like
`checks.py`.

CDI has its own version of the project's headline failure: after a driver upgrade the spec still names the old
driver's libraries and every container asking for the device fails to start (nvidia-container-toolkit issue
856), and the unit meant to refresh it can fail at boot (issues 1611, 1982). So, for every spec file under
/etc/cdi and /var/run/cdi: it parses and its cdiVersion is a released one; for the family's own kind
(`container_cdi_kind`): the driver it was generated for is the loaded one, and every host path its
containerEdits name exists. The fix is the family's generator command (`container_cdi_generate`).

No finding at all where there are no spec files (CDI is optional: `run` then uses the family's older wiring),
and none for a family without devices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from accelenv.check.verdict import Finding, Status
from accelenv.host.cdi import KNOWN_VERSIONS

if TYPE_CHECKING:
    from accelenv.host.cdi import CdiSpec
    from accelenv.host.report import HostReport
    from accelenv.matrix import Family

FID = "container.cdi"
SHOWN = 3  # missing paths a finding names


def container_cdi(family: Family, report: HostReport) -> list[Finding]:
    """The container.cdi findings for `family` on the host `report` describes (none without spec files)."""
    specs = report.container.cdi
    if not specs or not family.pci_vendor_ids:
        return []
    kind = family.container_cdi_kind
    regenerate = family.container_cdi_generate or "regenerate the spec with the vendor's CDI generator"
    findings = [_broken(spec, kind, regenerate) for spec in specs if spec.error]
    findings += [_version(spec, kind, regenerate) for spec in specs if not spec.error and _unknown(spec)]
    findings += [_sensitive(spec, kind, regenerate) for spec in specs if not spec.error and spec.sensitive]
    own = [spec for spec in specs if kind and spec.kind == kind and not spec.error]
    acc = report.accelerator(family.id)
    driver = acc.driver_version if acc else None
    for spec in own:
        findings += _stale(spec, driver, regenerate)
    if kind and not own and not findings:
        findings.append(
            Finding(
                id=FID,
                status=Status.PASS,
                expected=f"no broken CDI spec; a {kind} spec is optional",
                found=f"{len(specs)} spec(s), none of kind {kind}",
                message=f"no {kind} CDI spec: accelenv run uses the family's other wiring",
                fix="",
            )
        )
    return findings


def _broken(spec: CdiSpec, kind: str | None, regenerate: str) -> Finding:
    ours = not spec.kind or spec.kind == kind
    return Finding(
        id=FID,
        status=Status.FAIL if ours else Status.WARN,
        expected="every CDI spec parses (JSON or YAML) and names a kind and its devices",
        found=f"{spec.path} {spec.error}",
        message=f"a CDI spec the engine cannot use: {spec.path}",
        fix=regenerate if spec.kind == kind else f"rewrite or remove {spec.path}",
    )


def _unknown(spec: CdiSpec) -> bool:
    return spec.cdi_version not in KNOWN_VERSIONS


def _version(spec: CdiSpec, kind: str | None, regenerate: str) -> Finding:
    try:
        newer = Version(spec.cdi_version) > Version(KNOWN_VERSIONS[-1])
    except InvalidVersion:
        newer = False
    return Finding(
        id=FID,
        status=Status.WARN if newer else Status.FAIL,
        expected=f"a released cdiVersion ({KNOWN_VERSIONS[0]} to {KNOWN_VERSIONS[-1]})",
        found=f"{spec.path}: cdiVersion {spec.cdi_version!r}",
        message="the spec's cdiVersion is newer than accelenv knows" if newer else "the spec's cdiVersion is unknown",
        fix="" if newer else (regenerate if spec.kind == kind else f"rewrite or remove {spec.path}"),
    )


def _sensitive(spec: CdiSpec, kind: str | None, regenerate: str) -> Finding:
    shown = ", ".join(spec.sensitive[:SHOWN])
    more = f" and {len(spec.sensitive) - SHOWN} more" if len(spec.sensitive) > SHOWN else ""
    return Finding(
        id=FID,
        status=Status.FAIL,
        expected=f"{spec.path} gives containers only what its devices need",
        found=f"{spec.path} gives every container using it {shown}{more}",
        message=f"the {spec.kind} CDI spec exposes the host (an engine socket, a secret or a whole system folder) "
        "to every container that asks for its devices",
        fix=(regenerate if spec.kind == kind else f"remove {spec.path}")
        + f", and find out who wrote {spec.path}: no device generator mounts these",
    )


def _stale(spec: CdiSpec, driver: str | None, regenerate: str) -> list[Finding]:
    if regenerate and spec.path not in regenerate:  # the generator writes elsewhere: this file would still be read
        regenerate = f"{regenerate}, then remove {spec.path} (the engine reads it too)"
    findings = []
    if spec.driver_version and driver and spec.driver_version != driver:
        findings.append(
            Finding(
                id=FID,
                status=Status.FAIL,
                expected=f"{spec.path} generated for the loaded driver {driver}",
                found=f"generated for driver {spec.driver_version}",
                message=f"the {spec.kind} CDI spec is stale: containers asking for {spec.device('all')} fail to "
                "start (it mounts the old driver's libraries)",
                fix=regenerate,
            )
        )
    if spec.missing_count:
        shown = ", ".join(spec.missing[:SHOWN])
        more = f" and {spec.missing_count - SHOWN} more" if spec.missing_count > SHOWN else ""
        findings.append(
            Finding(
                id=FID,
                status=Status.FAIL,
                expected=f"every host path {spec.path} mounts exists ({spec.paths})",
                found=f"{spec.missing_count} missing: {shown}{more}",
                message=f"the {spec.kind} CDI spec names host files that are gone: containers using it fail to start",
                fix=regenerate,
            )
        )
    if not findings and not spec.sensitive:  # a spec giving containers a sensitive path has its own failure
        generated = f"driver {spec.driver_version}" if spec.driver_version else "this host"
        findings.append(
            Finding(
                id=FID,
                status=Status.PASS,
                expected=f"{spec.kind} spec current",
                found=f"{spec.path}: cdiVersion {spec.cdi_version}, {len(spec.devices)} device(s), {generated}, "
                f"all {spec.paths} host paths present",
                message=f"the {spec.kind} CDI spec matches the host",
                fix="",
            )
        )
    return findings
