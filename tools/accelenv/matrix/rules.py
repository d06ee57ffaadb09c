"""Semantic rules: what the schema cannot say. Each rule reads the model and yields findings; all run, always.

The compatibility knowledge itself (which architectures a runtime supports, which driver it needs, how a
version becomes a wheel tag, which host CPU a SKU comes in) is data in the matrix; the rules only compare.

Why one module of ~600 lines: every rule is a short function over the model, registered in order, sharing the
reference and version helpers; "what does validate refuse" is answered by reading this one file (the README's
rule table indexes it).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from accelenv.matrix.model import (
    PLATFORM_MACHINES,
    DriverRelease,
    Environment,
    Family,
    OsBase,
    Runtime,
    Sku,
    release_line,
)
from accelenv.matrix.problems import Severity, suggest

if TYPE_CHECKING:
    from packaging.requirements import Requirement

    from accelenv.matrix.model import Matrix

Path = tuple[str | int, ...]


@dataclass(frozen=True, kw_only=True)
class Finding:
    path: Path
    message: str
    rule: str
    severity: Severity = Severity.ERROR


Rule = Callable[["Matrix", frozenset[tuple[str, str]]], Iterator[Finding]]
RULES: list[Rule] = []


def rule(fn: Rule) -> Rule:
    RULES.append(fn)
    return fn


def check_rules(matrix: Matrix, skipped: frozenset[tuple[str, str]] = frozenset()) -> list[Finding]:
    """Every finding of every rule. `skipped` names entries already refused by the schema."""
    return [finding for each in RULES for finding in each(matrix, skipped)]


def _ref(m: Matrix, skipped: frozenset[tuple[str, str]], section: str, value: str, path: Path) -> Iterator[Finding]:
    """A finding when `value` names no entry of `section` (and that entry was not refused by the schema)."""
    known: Mapping[str, object] = getattr(m, section)
    if value in known or (section, value) in skipped:
        return
    close = suggest(value, known)
    hint = f"did you mean '{close}'?" if close else f"known: {', '.join(sorted(known)) or 'none'}"
    what = {
        "sources": "source",
        "families": "family",
        "runtimes": "runtime",
        "skus": "SKU",
        "os": "OS base",
        "drivers": "driver release",
    }[section]
    yield Finding(path=path, message=f"{what} '{value}' is not defined under [{section}]; {hint}", rule="reference")


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
            yield from _ref(m, skipped, "families", entry.family, (section, entry.id, "family"))
        for i, src in enumerate(entry.sources):
            yield from _ref(m, skipped, "sources", src, (section, entry.id, "sources", i))
        if isinstance(entry, Sku) and entry.peak is not None:
            yield from _ref(m, skipped, "sources", entry.peak.source, (section, entry.id, "peak", "source"))
    for rt in m.runtimes.values():
        for i, driver_id in enumerate(rt.driver.releases):
            yield from _ref(m, skipped, "drivers", driver_id, ("runtimes", rt.id, "driver", "releases", i))
    for env in m.envs.values():
        base = ("envs", env.id)
        yield from _ref(m, skipped, "families", env.family, (*base, "family"))
        yield from _ref(m, skipped, "runtimes", env.runtime, (*base, "runtime"))
        for i, sku_id in enumerate(env.skus):
            yield from _ref(m, skipped, "skus", sku_id, (*base, "skus", i))


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


def _compiled(pattern: str) -> re.Pattern[str] | None:
    """The pattern, unless it is invalid or could backtrack catastrophically (then it is never run)."""
    from accelenv.matrix.regexes import backtracking_risk

    if backtracking_risk(pattern):
        return None
    try:
        return re.compile(pattern)
    except re.error:
        return None


@rule
def architecture_names(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    from accelenv.matrix.regexes import backtracking_risk

    for family in m.families.values():
        if risk := backtracking_risk(family.arch_pattern):
            yield Finding(
                path=("families", family.id, "arch_pattern"),
                message=f"{family.arch_pattern!r} could take exponential time to match ({risk}); "
                "write each repetition once, without nesting, e.g. sm_[0-9]{2,3}",
                rule="architecture",
            )
        elif _compiled(family.arch_pattern) is None:
            yield Finding(
                path=("families", family.id, "arch_pattern"),
                message=f"{family.arch_pattern!r} is not a valid regular expression",
                rule="architecture",
            )
    named: list[tuple[Path, str, str]] = [(("skus", s.id, "arch"), s.family, s.arch) for s in m.skus.values()]
    named += [
        (("runtimes", r.id, "architectures", i), r.family, arch)
        for r in m.runtimes.values()
        for i, arch in enumerate(r.architectures)
    ]
    for path, family_id, arch in named:
        owner = m.families.get(family_id)
        pattern = _compiled(owner.arch_pattern) if owner else None
        if owner and pattern and not pattern.fullmatch(arch):
            yield Finding(
                path=path,
                message=f"{arch!r} is not a {owner.id} architecture name (expected {owner.arch_pattern})",
                rule="architecture",
            )


def _runtimes_supporting(m: Matrix, sku: Sku) -> list[str]:
    return [rt.id for rt in m.runtimes.values() if rt.family == sku.family and sku.arch in rt.architectures]


@rule
def architecture_support(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Every SKU of an environment has an architecture its runtime compiles for."""
    for env in m.envs.values():
        rt = m.runtimes.get(env.runtime)
        if rt is None or rt.family != env.family:
            continue
        for i, sku_id in enumerate(env.skus):
            sku = m.skus.get(sku_id)
            if sku is None or sku.family != env.family or sku.arch in rt.architectures:
                continue
            others = _runtimes_supporting(m, sku)
            fix = (
                f"use a runtime that lists it ({', '.join(others)})" if others else "no runtime in the matrix lists it"
            )
            yield Finding(
                path=("envs", env.id, "skus", i),
                message=(
                    f"{sku.name} ({sku.id}, {sku.arch}) is not supported by {rt.name} ({rt.id}), "
                    f"whose architectures are {', '.join(rt.architectures)}; {fix}, or drop the SKU"
                ),
                rule="architecture-support",
            )


def wheel_tag_for(fmt: str, version: Version) -> str:
    release = (*version.release, 0, 0)
    return fmt.format(major=release[0], minor=release[1], patch=release[2])


@rule
def wheel_tags(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    for rt in m.runtimes.values():
        family = m.families.get(rt.family)
        if family is None or family.wheel_tag_format is None:
            continue
        if rt.version is None:
            yield Finding(
                path=("runtimes", rt.id),
                message=f"missing required key 'version' ({family.id} runtimes are versioned)",
                rule="wheel-tag",
            )
            continue
        expected = wheel_tag_for(family.wheel_tag_format, rt.version)
        if rt.wheel_tag is None:
            yield Finding(
                path=("runtimes", rt.id),
                message=f"missing key 'wheel_tag': {family.id} runtimes need one ({expected!r} for {rt.version})",
                rule="wheel-tag",
            )
        elif rt.wheel_tag != expected:
            yield Finding(
                path=("runtimes", rt.id, "wheel_tag"),
                message=(
                    f"{rt.wheel_tag!r} does not match version {rt.version}: "
                    f"families.{family.id}.wheel_tag_format gives {expected!r}"
                ),
                rule="wheel-tag",
            )


def _pinned_version(req: Requirement) -> str | None:
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
        return specs[0].version
    return None


@rule
def requirements(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Pins are exact; a local version label agrees with the runtime and comes from a declared index."""
    for env in m.envs.values():
        rt = m.runtimes.get(env.runtime)
        seen: dict[str, int] = {}
        has_index = bool(env.requirements.index_url or env.requirements.extra_index_urls)
        for i, req in enumerate(env.requirements.packages):
            path = ("envs", env.id, "requirements", "packages", i)
            name = canonicalize_name(req.name)
            if name in seen:
                yield Finding(
                    path=path,
                    message=f"'{req.name}' is already required at packages[{seen[name]}]; keep one pin per package",
                    rule="requirements",
                )
            seen.setdefault(name, i)
            version = _pinned_version(req)
            if version is None:
                yield Finding(
                    path=path,
                    message=f"'{req}' is not pinned: write one exact pin, e.g. {req.name}==<version>",
                    rule="requirements",
                )
                continue
            label = version.partition("+")[2]
            if not label:
                continue
            if rt is not None and rt.family == env.family and rt.wheel_tag is None:
                yield Finding(
                    path=path,
                    message=(
                        f"'{req}' is a +{label} build, but runtime {rt.id} declares no wheel_tag: "
                        "pin the plain version or give the runtime a wheel_tag"
                    ),
                    rule="local-label",
                )
            elif rt is not None and rt.family == env.family and label != rt.wheel_tag:
                yield Finding(
                    path=path,
                    message=(
                        f"'{req}' is a +{label} build, but the runtime {rt.id} takes +{rt.wheel_tag} builds: "
                        f"pin {req.name}=={version.partition('+')[0]}+{rt.wheel_tag} or change the runtime"
                    ),
                    rule="local-label",
                )
            if not has_index:
                yield Finding(
                    path=path,
                    message=(
                        f"'{req}' carries a local label, so it comes from a vendor index, but the environment "
                        "declares none: add requirements.extra_index_urls"
                    ),
                    rule="local-label",
                )


def _complete(skipped: frozenset[tuple[str, str]], section: str) -> bool:
    """True when the schema refused no entry of `section`: only then may a rule conclude that something is
    missing from it ("no default environment", "in no environment"). A refused entry is left out of the model,
    and it may be the very one that was looked for; its own problem is reported, and the conclusion waits."""
    return not any(s == section for s, _ in skipped)


@rule
def defaults(m: Matrix, skipped: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Exactly one default environment per family: the one its nox session runs."""
    by_family: dict[str, list[Environment]] = defaultdict(list)
    for env in m.envs.values():
        by_family[env.family].append(env)
    complete = _complete(skipped, "envs")
    for family in m.families.values():
        envs = by_family.get(family.id, [])
        marked = [e for e in envs if e.default]
        if not complete and not (envs and len(marked) > 1):
            continue  # an environment the schema refused may be this family's (default) one
        if not envs:
            yield Finding(
                path=("families", family.id),
                message=f"family '{family.id}' has no environment; `nox -s {family.session}` would have nothing to run",
                rule="default-env",
                severity=Severity.WARNING,
            )
        elif not marked:
            yield Finding(
                path=("envs", envs[0].id, "default"),
                message=(
                    f"family '{family.id}' has no default environment: set default = true on one of "
                    f"{', '.join(e.id for e in envs)}"
                ),
                rule="default-env",
            )
        elif len(marked) > 1:
            for env in marked[1:]:
                yield Finding(
                    path=("envs", env.id, "default"),
                    message=f"family '{family.id}' already has default environment '{marked[0].id}'; keep one",
                    rule="default-env",
                )


@rule
def unique_names(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Sessions, vendor ids, product names and device ids each identify one thing."""
    sessions: dict[str, str] = {}
    for family in m.families.values():
        if family.session in sessions:
            yield Finding(
                path=("families", family.id, "session"),
                message=f"session '{family.session}' is already the session of family '{sessions[family.session]}'",
                rule="unique",
            )
        sessions.setdefault(family.session, family.id)
    for env in m.envs.values():
        if env.id in sessions:
            yield Finding(
                path=("envs", env.id),
                message=(
                    f"environment id '{env.id}' collides with the nox session of family '{sessions[env.id]}'; "
                    "rename the environment (e.g. add its runtime: gpu-nvidia-cu128)"
                ),
                rule="unique",
            )
    vendors: dict[str, str] = {}
    for family in m.families.values():
        for i, vid in enumerate(family.pci_vendor_ids):
            if vid in vendors and vendors[vid] != family.id:
                yield Finding(
                    path=("families", family.id, "pci_vendor_ids", i),
                    message=f"PCI vendor {vid} already belongs to family '{vendors[vid]}'",
                    rule="unique",
                )
            vendors.setdefault(vid, family.id)
    claimed: dict[tuple[str, str, str], str] = {}
    for sku in m.skus.values():
        keys = [("pci_device_ids", d.lower()) for d in sku.pci_device_ids]
        keys += [("product_names", " ".join(n.split()).casefold()) for n in sku.product_names]
        for field, value in keys:
            owner = claimed.get((sku.family, field, value))
            if owner and owner != sku.id:
                index = [k for k in keys if k[0] == field].index((field, value))
                yield Finding(
                    path=("skus", sku.id, field, index),
                    message=f"{value!r} already identifies SKU '{owner}'; a host device must match one SKU only",
                    rule="unique",
                )
            claimed.setdefault((sku.family, field, value), sku.id)


def _witnesses(sku: Sku) -> list[str]:
    """Names a host tool may print for `sku`: its literal product names, and each glob with its wildcards taken
    as nothing (`*MI300A*` -> `MI300A`, `NVIDIA GH200 144G*` -> `NVIDIA GH200 144G`), and its marketing name."""
    names = [sku.name, *(p.replace("*", "").replace("?", "") for p in sku.product_names)]
    return [" ".join(n.split()) for n in dict.fromkeys(names) if n.strip()]


@rule
def overlapping_product_names(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """No product-name glob of one SKU matches a name of another SKU of its family: a host device whose tool
    prints that name would match both, and the first in file order would win (`match_sku`).

    Whether two globs overlap in general is the wrong question: any two globs of the form `*A*` and `*B*` do
    (the text "AB" matches both), and the matrix has many such pairs (`*MI300X*`, `*MI308X*`), yet no product is
    named both. So each glob is matched against what the other SKUs are known to be called: their marketing
    name, their literal product names and each glob with its wildcards taken as nothing (`_witnesses`). Every
    finding names a real string that both SKUs claim (no false alarms); a glob that overlaps only on names no
    SKU is called (`*MI3*` against a future `MI3`) is not caught until that SKU is added."""
    import fnmatch

    skus = list(m.skus.values())
    for sku in skus:
        for i, pattern in enumerate(sku.product_names):
            if not any(c in pattern for c in "*?"):
                continue  # a literal name: two equal ones are the `unique` rule's
            glob = " ".join(pattern.split()).casefold()
            for other in skus:
                if other.id == sku.id or other.family != sku.family:
                    continue
                hit = next((n for n in _witnesses(other) if fnmatch.fnmatchcase(n.casefold(), glob)), None)
                if hit is None:
                    continue
                yield Finding(
                    path=("skus", sku.id, "product_names", i),
                    message=(
                        f"{pattern!r} also matches {hit!r}, a name of SKU '{other.id}': a host device must match "
                        f"one SKU only; make the pattern name this model alone (e.g. the full product name)"
                    ),
                    rule="unique",
                )


NO_ENVIRONMENT = "no environment:"
"""How a SKU says why no environment lists it: its `notes` begin with these words (inf1's do)."""


@rule
def skus_in_environments(m: Matrix, skipped: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Every SKU is in an environment of its family, or its notes say why not ("No environment: ..."): a SKU no
    environment lists is one `accelenv which` can name but no session tests."""
    if not _complete(skipped, "envs"):
        return
    listed = {sku_id for env in m.envs.values() for sku_id in env.skus}
    families_with_envs = {env.family for env in m.envs.values()}
    for sku in m.skus.values():
        if sku.id in listed or sku.family not in families_with_envs:  # a family with none is `default-env`'s
            continue
        if sku.notes.strip().casefold().startswith(NO_ENVIRONMENT):
            continue
        envs = [env.id for env in m.envs.values() if env.family == sku.family]
        yield Finding(
            path=("skus", sku.id),
            message=(
                f"no environment lists this SKU: `accelenv attach {sku.id} ENV...` (the {sku.family} "
                f'environments are {", ".join(envs)}), or begin its notes with "No environment: <why>"'
            ),
            rule="sku-environment",
            severity=Severity.WARNING,
        )


@rule
def identification(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    for sku in m.skus.values():
        family = m.families.get(sku.family)
        if family and family.pci_vendor_ids and not (sku.product_names or sku.pci_device_ids):
            yield Finding(
                path=("skus", sku.id),
                message="no product_names and no pci_device_ids: a host device could never be matched to this SKU",
                rule="identification",
            )
    for env in m.envs.values():
        family = m.families.get(env.family)
        has_skus = any(s.family == env.family for s in m.skus.values())
        if family and has_skus and not env.skus:
            yield Finding(
                path=("envs", env.id, "skus"),
                message="lists no SKUs: name the devices this environment is meant for",
                rule="identification",
            )


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
def images_and_platforms(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    for env in m.envs.values():
        rt = m.runtimes.get(env.runtime)
        if rt and env.os not in rt.base_images:
            yield Finding(
                path=("envs", env.id, "os"),
                message=(
                    f"runtime '{rt.id}' has no base image for {env.os!r}; it has "
                    f"{', '.join(rt.base_images)}: pick one of those or add runtimes.{rt.id}.base_images"
                ),
                rule="base-image",
            )
        archs = {PLATFORM_MACHINES[p] for p in env.platforms}
        for i, sku_id in enumerate(env.skus):
            sku = m.skus.get(sku_id)
            if sku and not archs & set(sku.host_arch):
                yield Finding(
                    path=("envs", env.id, "skus", i),
                    message=(
                        f"{sku.name} hosts are {'/'.join(sku.host_arch)}, but the environment is built for "
                        f"{', '.join(env.platforms)}: add the matching platform or drop the SKU"
                    ),
                    rule="platform",
                )
    for rt in m.runtimes.values():
        for os_label, image in rt.base_images.items():
            if image.digest is None:
                yield Finding(
                    path=("runtimes", rt.id, "base_images", os_label),
                    message=(
                        f"{image.reference} is not pinned by digest: builds may drift when the tag moves; "
                        "`accelenv pin` writes the digest (it asks the registry)"
                    ),
                    rule="unpinned",
                    severity=Severity.WARNING,
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
def python_source(m: Matrix, skipped: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """An environment's Python comes from its base image or from its OS's package manager; one of them must
    provide exactly that version."""
    for env in m.envs.values():
        rt = m.runtimes.get(env.runtime)
        image = rt.base_images.get(env.os) if rt else None
        if image is None:
            continue  # reported by base-image
        os_base = m.os.get(env.os)
        if os_base is None:
            if ("os", env.os) not in skipped:
                yield from _ref(m, skipped, "os", env.os, ("envs", env.id, "os"))
            continue
        if env.python in (image.python, os_base.python):
            continue
        shipped = f"the image ships Python {image.python}" if image.python else "the image ships no Python"
        provides = f"provides {os_base.python}" if os_base.python else "provides no verified Python"
        use = (
            f"use python = {os_base.python!r} or a base image with {env.python}"
            if os_base.python
            else (f"use a base image with Python {env.python}")
        )
        yield Finding(
            path=("envs", env.id, "python"),
            message=(f"no Python {env.python} on {image.reference}: {shipped} and {os_base.name} {provides}; {use}"),
            rule="python",
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


@rule
def support_window(m: Matrix, skipped: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """The support policy (README, "Support window"): one release per runtime line (major.minor), and no
    runtime kept that no environment uses unless it is its family's newest."""
    used = {env.runtime for env in m.envs.values()}
    by_family: dict[str, list[tuple[Version, Runtime]]] = defaultdict(list)
    for rt in m.runtimes.values():
        if rt.version is not None:
            by_family[rt.family].append((rt.version, rt))
    for family_id, runtimes in by_family.items():
        newest = max(runtimes, key=lambda pair: pair[0])[1]
        lines: dict[tuple[int, ...], Runtime] = {}
        for version, rt in runtimes:
            line = release_line(version)
            if line in lines:
                yield Finding(
                    path=("runtimes", rt.id, "version"),
                    message=(
                        f"{version} is in the same release line ({'.'.join(map(str, line))}) as runtime "
                        f"'{lines[line].id}' ({lines[line].version}): keep only the newest release of a line"
                    ),
                    rule="support-window",
                )
            lines.setdefault(line, rt)
            if rt.id not in used and rt is not newest and _complete(skipped, "envs"):
                yield Finding(
                    path=("runtimes", rt.id),
                    message=(
                        f"no environment uses {rt.name}, and {newest.name} is newer in family '{family_id}': "
                        "retire it, or add the environment that needs it"
                    ),
                    rule="support-window",
                    severity=Severity.WARNING,
                )


from accelenv.matrix import framework_rules  # noqa: E402, F401 - registers its rules once `rule` exists
