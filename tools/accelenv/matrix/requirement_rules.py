"""The rules on pins and wheel tags: a runtime's `wheel_tag` follows from its version by its family's format, every
requirement is one exact pin, and a local label (`+cu128`) is its runtime's wheel tag, from a declared vendor
index. Registered with the other rule families by `rules.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from accelenv.matrix.rulebook import Finding, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from packaging.requirements import Requirement
    from packaging.version import Version

    from accelenv.matrix.model import Matrix


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
