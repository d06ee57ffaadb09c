"""The driver rules: a runtime's driver range is a range (floors below the ceiling, accepted releases inside it), a
driver release reports a version, no SKU needs a driver its runtime refuses, and a SKU of a family with a kernel
driver says which driver it needs or why it cannot (NVIDIA's floors per driver branch are `driver_branches.py`).
Registered with the other rule families by `rules.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from accelenv.matrix.rulebook import Finding, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Matrix, Runtime


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
