"""The driver rules: a runtime's driver range is a range (floors below the ceiling, accepted releases inside it), a
driver release reports a version, no SKU needs a driver its runtime refuses, and a SKU of a family with a kernel
driver says which driver it needs or why it cannot (NVIDIA's floors per driver branch are `driver_branches.py`).
Registered with the other rule families by `rules.py`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from accelenv.matrix.rulebook import Finding, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import DriverRelease, Matrix, Runtime
    from accelenv.matrix.rulebook import Path


def _driver_findings(rt: Runtime) -> Iterator[Finding]:
    d = rt.driver
    base = ("runtimes", rt.id, "driver")
    if d.compat_min and d.min and d.compat_min > d.min:
        yield Finding(
            path=(*base, "compat_min"),
            message=f"compat_min {d.compat_min} is above min {d.min}: the degraded-mode floor must be the lower one",
            rule="driver-range",
        )
    if d.compat_min and not d.min:
        yield Finding(
            path=(*base, "compat_min"),
            message="compat_min without min: set min, the floor for the full feature set",
            rule="driver-range",
        )
    floor = d.compat_min or d.min
    if floor and d.max and floor >= d.max:
        yield Finding(
            path=(*base, "max"),
            message=f"max {d.max} is not above the floor {floor}: no driver could satisfy this runtime",
            rule="driver-range",
        )
    for i, accepted in enumerate(d.accepted):
        if d.max and Version(accepted) >= d.max:
            yield Finding(
                path=(*base, "accepted", i),
                message=f"accepted driver {accepted} is at or above max {d.max}",
                rule="driver-range",
            )


@rule
def driver_ranges(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    for rt in m.runtimes.values():
        yield from _driver_findings(rt)
    for release in m.drivers.values():
        try:
            Version(release.reports)
        except InvalidVersion:
            yield Finding(
                path=("drivers", release.id, "reports"),
                message=f"{release.reports!r} is not a version prefix (expected e.g. 6.16)",
                rule="driver-range",
            )
    for env in m.envs.values():
        env_rt = m.runtimes.get(env.runtime)
        ceiling = env_rt.driver.max if env_rt is not None else None
        if ceiling is None:
            continue
        for i, sku_id in enumerate(env.skus):
            sku = m.skus.get(sku_id)
            if sku and sku.driver_min and sku.driver_min >= ceiling:
                yield Finding(
                    path=("envs", env.id, "skus", i),
                    message=(
                        f"{sku.name} needs driver >= {sku.driver_min}, but {env.runtime} accepts only drivers "
                        f"below {ceiling}: no host could run this pair"
                    ),
                    rule="driver-range",
                )


@rule
def driver_floors(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """A SKU of a family with a kernel driver says which driver it needs, or why it cannot say: without a floor,
    a host whose driver predates the device would pass on the runtime's floor alone."""
    for sku in m.skus.values():
        family = m.families.get(sku.family)
        if family is None or not family.kernel_modules:
            continue
        path = ("skus", sku.id)
        if sku.driver_min is not None and sku.no_driver_min:
            yield Finding(
                path=(*path, "no_driver_min"),
                message="has both driver_min and no_driver_min: keep the floor, or the reason there is none",
                rule="driver-floor",
            )
        elif sku.driver_min is None and not sku.no_driver_min and not family.no_sku_driver_min:
            yield Finding(
                path=path,
                message=(
                    f'no driver_min: add driver_min = "<version>" (the oldest {family.kernel_modules[0]} driver '
                    "that supports the device, from the vendor's release notes or supported-device lists), or "
                    'no_driver_min = "<why the evidence gives no floor>"'
                ),
                rule="driver-floor",
            )


# ---- the version space hosts report ------------------------------------------------------------------------------
#
# A family whose [drivers.*] map release numbers to the version hosts report (AMD: "AMD GPU driver 30.10.x" reports
# amdgpu 6.14.14; the amdgpu-dkms package 1:6.16.6.30200000 is module 6.16.6 of driver 30.20.0) has three numberings
# a floor can be written in by mistake: the driver release (30.10), the runtime release (ROCm 7.14) and the module
# version hosts report (6.14.14). `check` compares a floor with what the host reports, so only the last one works:
# a floor in another numbering fails every correct host ("install driver 30.10 or newer").

_RELEASE_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)+")


def _starts_with(value: Version, prefix: Version) -> bool:
    return value.release[: len(prefix.release)] == prefix.release


def _reported(release: DriverRelease) -> Version | None:
    try:
        return Version(release.reports)
    except InvalidVersion:
        return None  # its own finding above


def _space_finding(m: Matrix, family: str, value: str, path: Path, key: str) -> Finding | None:
    """A finding when `value`, a driver floor of `family`, is written in a numbering hosts do not report."""
    releases = [r for r in m.drivers.values() if r.family == family]
    if not releases:
        return None  # the family's driver releases are numbered as hosts report them, or not declared
    try:
        version = Version(value.removesuffix(".x"))
    except InvalidVersion:
        return None
    reported = {r.id: v for r in releases if (v := _reported(r)) is not None}
    if any(_starts_with(version, v) or _starts_with(v, version) for v in reported.values()):
        return None
    module = (m.families[family].kernel_modules or ("driver",))[0] if family in m.families else "driver"
    said = "; ".join(f"{r.release} reports {r.reports}" for r in releases)
    for release in releases:
        for number in _RELEASE_NUMBER.findall(release.release):
            if _starts_with(version, Version(number)):
                return Finding(
                    path=path,
                    message=(
                        f"{key} {value} is the number of the driver release '{release.release}', not the {module} "
                        f"version hosts report, so check would fail every host that has it: write {key} = "
                        f'"{release.reports}" (what [drivers.{release.id}] says it reports)'
                    ),
                    rule="driver-space",
                )
    for rt in m.runtimes.values():
        if rt.family == family and rt.version is not None and _starts_with(rt.version, version):
            return Finding(
                path=path,
                message=(
                    f"{key} {value} is the version of the runtime {rt.name}, not the {module} version hosts report: "
                    f"write the {module} version of the oldest driver release that supports it ({said})"
                ),
                rule="driver-space",
            )
    reported_majors = {v.major for v in reported.values()}
    numbered = {Version(n).major for r in releases for n in _RELEASE_NUMBER.findall(r.release)} - reported_majors
    if numbered and version.major not in reported_majors and version.major >= min(numbered):
        return Finding(
            path=path,
            message=(
                f"{key} {value} is in the numbering of the family's driver releases, not the {module} version hosts "
                f"report: write the version the release reports ({said})"
            ),
            rule="driver-space",
        )
    return None


@rule
def driver_spaces(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Every driver floor and ceiling is a version hosts report (see above)."""
    for sku in m.skus.values():
        if sku.driver_min is not None:
            found = _space_finding(m, sku.family, str(sku.driver_min), ("skus", sku.id, "driver_min"), "driver_min")
            if found is not None:
                yield found
    for rt in m.runtimes.values():
        d = rt.driver
        bounds = [("min", d.min), ("compat_min", d.compat_min), ("max", d.max)]
        for key, value in bounds:
            if value is not None:
                found = _space_finding(m, rt.family, str(value), ("runtimes", rt.id, "driver", key), key)
                if found is not None:
                    yield found
        for i, accepted in enumerate(d.accepted):
            found = _space_finding(m, rt.family, accepted, ("runtimes", rt.id, "driver", "accepted", i), "accepted")
            if found is not None:
                yield found
