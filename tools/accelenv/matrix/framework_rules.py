"""Rules for an environment's `framework`: declared, and consistent with where it says it comes from.

A framework from the lock is one of the environment's pins at that exact version; one from the base image is
pinned nowhere (a lock pin would install a second copy over the vendor's); its build is the runtime's wheel tag.
Registered with the other rule families by `rules.py`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, assert_never

from accelenv.matrix.model import FrameworkSource, canonical_name
from accelenv.matrix.problems import Severity
from accelenv.matrix.rulebook import Finding, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Matrix


@rule
def frameworks(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    for env in m.envs.values():
        path = ("envs", env.id, "framework")
        framework = env.framework
        if framework is None:
            yield Finding(
                path=("envs", env.id),
                message=(
                    "declares no framework: `accelenv check` cannot verify what the device tests import; add "
                    'framework = { name = "...", version = "...", source = "lock" | "base-image" }'
                ),
                rule="framework",
                severity=Severity.WARNING,
            )
            continue
        name = canonical_name(framework.name)
        pinned = {canonical_name(written): version for written, version in env.requirements.pins}
        match framework.source:
            case FrameworkSource.LOCK:
                if name not in pinned:
                    yield Finding(
                        path=(*path, "source"),
                        message=(
                            f"'lock', but {framework.name} is not in requirements.packages: pin "
                            f'{framework.name}=={framework.version}, or say source = "base-image"'
                        ),
                        rule="framework",
                    )
                elif pinned[name] != framework.version:
                    yield Finding(
                        path=(*path, "version"),
                        message=(
                            f"{framework.version!r}, but requirements.packages pins {framework.name}=={pinned[name]}: "
                            "write the same version in both"
                        ),
                        rule="framework",
                    )
            case FrameworkSource.BASE_IMAGE:
                if name in pinned:
                    yield Finding(
                        path=(*path, "source"),
                        message=(
                            f"'base-image', but requirements.packages pins {framework.name}=={pinned[name]}: the "
                            'lock would install a second copy over the image\'s; drop the pin or say source = "lock"'
                        ),
                        rule="framework",
                    )
            case _ as unreachable:
                assert_never(unreachable)
        label = framework.version.partition("+")[2]
        if label and framework.build is not None and label != framework.build:
            yield Finding(
                path=(*path, "build"),
                message=f"{framework.build!r}, but the version {framework.version} is a +{label} build",
                rule="framework",
            )
        runtime = m.runtimes.get(env.runtime)
        if framework.build is not None and runtime is not None and runtime.wheel_tag not in (None, framework.build):
            yield Finding(
                path=(*path, "build"),
                message=(
                    f"{framework.build!r}, but runtime {runtime.id} takes {runtime.wheel_tag} builds: "
                    f'build = "{runtime.wheel_tag}"'
                ),
                rule="framework",
            )
