"""The environment's framework, judged like a pin: its exact version and the accelerator build it was made for.

A framework from the lock is also one of the lock's pins; a framework from the base image (AMD's, AWS's and
Intel's PyTorch) is pinned nowhere else, so without this check a venv that never saw the image's PyTorch, or an
image built on another base, would pass. The fix says where the framework should have come from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from accelenv.check.verdict import Finding, Status
from accelenv.matrix.model import FrameworkSource, canonical_name

if TYPE_CHECKING:
    from accelenv.host.report import HostReport
    from accelenv.matrix import Environment, Matrix
    from accelenv.matrix.model import Framework


def declared(framework: Framework) -> str:
    """`torch 2.13.0 (rocm10.0)`: the framework as a message names it."""
    return f"{framework.name} {framework.version}" + (f" ({framework.build})" if framework.build else "")


def origin(matrix: Matrix, env: Environment) -> str:
    """Where the framework comes from, as a reader can act on it: the lock file, or the base image by name."""
    framework = env.framework
    if framework is None or framework.source is FrameworkSource.LOCK:
        return f"{env.id}'s lock (envs/{env.id}/requirements.lock)"
    image = matrix.runtimes[env.runtime].base_images.get(env.os)
    return f"the base image {image.repository}:{image.tag}" if image else f"{env.id}'s base image"


def where_to_get_it(matrix: Matrix, env: Environment) -> str:
    """The one step that puts the framework where the tests run."""
    framework = env.framework
    if framework is None or framework.source is FrameworkSource.LOCK:
        return (
            f"install the environment's lock into this Python: pip install --require-hashes -r "
            f"envs/{env.id}/requirements.lock (`nox -s {env.id}` does so in a virtualenv of its own)"
        )
    return (
        f"run inside the environment's image (nox -s {env.id} runs its device tests there through `accelenv run`; "
        f"`accelenv build {env.id}` makes the image), or on a host whose Python has the vendor's {framework.name}"
    )


def framework_findings(matrix: Matrix, env: Environment, report: HostReport) -> list[Finding]:
    """One `framework.<name>` finding: PASS when the version (local label included when declared) and the build
    agree, FAIL with where the framework comes from otherwise. None for an environment that declares none."""
    framework = env.framework
    if framework is None:
        return []
    fid = f"framework.{canonical_name(framework.name)}"
    versions = report.python.distributions.get(canonical_name(framework.name), [])
    wanted = declared(framework)

    def fail(found: str, message: str, fix: str) -> list[Finding]:
        return [Finding(id=fid, status=Status.FAIL, expected=wanted, found=found, message=message, fix=fix)]

    if not versions:
        return fail(
            "not installed",
            f"{framework.name} is not installed: {env.id}'s framework comes from {origin(matrix, env)}",
            where_to_get_it(matrix, env),
        )
    if len(versions) > 1:
        return fail(
            ", ".join(versions),
            f"{framework.name} is installed {len(versions)} times; which one imports is an accident",
            f"recreate the environment: one {framework.name}, from {origin(matrix, env)}",
        )
    installed = versions[0]
    if not _same_release(installed, framework.version):
        return fail(
            installed,
            f"{framework.name} {installed} is installed, {env.id} declares {framework.version} "
            f"(from {origin(matrix, env)})",
            where_to_get_it(matrix, env),
        )
    build = _build_of(installed, report.python.builds.get(canonical_name(framework.name)))
    if framework.build is not None and build != framework.build:
        return fail(
            f"{installed} ({build or 'build unknown'})",
            f"{framework.name} {installed} is a {build or 'build whose accelerator is unknown'}, not a "
            f"{framework.build} build",
            where_to_get_it(matrix, env),
        )
    return [
        Finding(
            id=fid,
            status=Status.PASS,
            expected=wanted,
            found=installed + (f" ({build})" if build else ""),
            message=f"{framework.name} {installed}" + (f", a {build} build" if build else ""),
        )
    ]


def _same_release(installed: str, declared_version: str) -> bool:
    """Exact: with a declared local label both must carry it; without one the public versions must be equal
    (a vendor's 2.13.0+rocm10.0.0 is PyTorch 2.13.0; its build is judged apart)."""
    try:
        found, wanted = Version(installed), Version(declared_version)
    except InvalidVersion:
        return installed == declared_version
    if wanted.local is not None:
        return found == wanted and found.local == wanted.local
    return found.public == wanted.public


def _build_of(installed: str, probed: str | None) -> str | None:
    """The build the framework's own files declare (torch's version.py), else its local version label."""
    if probed:
        return probed
    try:
        return Version(installed).local
    except InvalidVersion:
        return None
