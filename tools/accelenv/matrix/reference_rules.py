"""The reference rules: every id an entry names is defined (with a "did you mean"), of the entry's own family,
and every source is cited and can be found. Registered with the other rule families by `rules.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.matrix.model import DriverRelease, Environment, Family, OsBase, Runtime, Sku
from accelenv.matrix.problems import Severity
from accelenv.matrix.rulebook import Finding, reference, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Matrix


@rule
def references(m: Matrix, skipped: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    entries: list[tuple[str, OsBase | Family | Sku | DriverRelease | Runtime | Environment]] = [
        *(("os", o) for o in m.os.values()),
        *(("families", f) for f in m.families.values()),
        *(("skus", s) for s in m.skus.values()),
        *(("drivers", d) for d in m.drivers.values()),
        *(("runtimes", r) for r in m.runtimes.values()),
        *(("envs", e) for e in m.envs.values()),
    ]
    for section, entry in entries:
        if not isinstance(entry, OsBase | Family | Environment):
            yield from reference(m, skipped, "families", entry.family, (section, entry.id, "family"))
        for i, src in enumerate(entry.sources):
            yield from reference(m, skipped, "sources", src, (section, entry.id, "sources", i))
        if isinstance(entry, Sku) and entry.peak is not None:
            yield from reference(m, skipped, "sources", entry.peak.source, (section, entry.id, "peak", "source"))
    for rt in m.runtimes.values():
        for i, driver_id in enumerate(rt.driver.releases):
            yield from reference(m, skipped, "drivers", driver_id, ("runtimes", rt.id, "driver", "releases", i))
    for env in m.envs.values():
        base = ("envs", env.id)
        yield from reference(m, skipped, "families", env.family, (*base, "family"))
        yield from reference(m, skipped, "runtimes", env.runtime, (*base, "runtime"))
        for i, sku_id in enumerate(env.skus):
            yield from reference(m, skipped, "skus", sku_id, (*base, "skus", i))


@rule
def same_family(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    for runtime in m.runtimes.values():
        for i, driver_id in enumerate(runtime.driver.releases):
            release = m.drivers.get(driver_id)
            if release and release.family != runtime.family:
                yield Finding(
                    path=("runtimes", runtime.id, "driver", "releases", i),
                    message=(
                        f"driver release '{driver_id}' is a '{release.family}' driver; "
                        f"this runtime is '{runtime.family}'"
                    ),
                    rule="family",
                )
    for env in m.envs.values():
        rt = m.runtimes.get(env.runtime)
        if rt and rt.family != env.family:
            yield Finding(
                path=("envs", env.id, "runtime"),
                message=f"runtime '{rt.id}' belongs to family '{rt.family}', but the environment is '{env.family}'",
                rule="family",
            )
        for i, sku_id in enumerate(env.skus):
            sku = m.skus.get(sku_id)
            if sku and sku.family != env.family:
                yield Finding(
                    path=("envs", env.id, "skus", i),
                    message=f"SKU '{sku.id}' is a '{sku.family}' device; this environment is '{env.family}'",
                    rule="family",
                )


@rule
def unused_sources(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    entries: list[OsBase | Family | Sku | DriverRelease | Runtime | Environment] = [
        *m.os.values(),
        *m.families.values(),
        *m.skus.values(),
        *m.drivers.values(),
        *m.runtimes.values(),
        *m.envs.values(),
    ]
    used = {s for entry in entries for s in entry.sources}
    used |= {sku.peak.source for sku in m.skus.values() if sku.peak is not None}
    for source in m.sources.values():
        if source.url is None and source.where is None:
            yield Finding(
                path=("sources", source.id),
                message="a source needs a url, or `where` to say how to find it (repository, path, commit)",
                rule="source",
            )
        if source.id not in used:
            yield Finding(
                path=("sources", source.id),
                message="no entry cites this source; remove it or cite it",
                rule="unused-source",
                severity=Severity.WARNING,
            )


@rule
def cited(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Every entry states facts (a SKU's identity and floor, a runtime's range, an OS's Python, an environment's
    pins), and every fact cites a source a reader can open: an entry without `sources` is a warning that
    `validate --strict` (what a contributor's or vendor's change must pass) refuses."""
    sections: list[tuple[str, dict[str, OsBase | Family | Sku | DriverRelease | Runtime | Environment]]] = [
        ("os", dict(m.os)),
        ("families", dict(m.families)),
        ("skus", dict(m.skus)),
        ("drivers", dict(m.drivers)),
        ("runtimes", dict(m.runtimes)),
        ("envs", dict(m.envs)),
    ]
    for section, entries in sections:
        for entry_id, entry in entries.items():
            if not entry.sources:
                yield Finding(
                    path=(section, entry_id, "sources"),
                    message=(
                        'cites no source: add sources = ["<id>"] naming a [sources.<id>] a reader can open (a '
                        "vendor page, a release note, a real capture) for the facts this entry states"
                    ),
                    rule="uncited",
                    severity=Severity.WARNING,
                )
