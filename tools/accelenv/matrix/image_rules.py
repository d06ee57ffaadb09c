"""The image rules: an environment's OS has a base image in its runtime, pinned by digest (a warning without), its
platforms are ones its SKUs' hosts run, and its Python comes from the base image or the OS's package manager.
Registered with the other rule families by `rules.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.matrix.model import PLATFORM_MACHINES
from accelenv.matrix.problems import Severity
from accelenv.matrix.rulebook import Finding, reference, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Matrix


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
                yield from reference(m, skipped, "os", env.os, ("envs", env.id, "os"))
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
