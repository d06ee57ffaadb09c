"""Which environments cannot run yet, and why: what `accelenv ci` leaves out of the jobs it schedules.

Read from the committed files only (no engine, no network): an environment without a current lock has nothing
to install; one whose image needs an OS-package lock that is missing or stale cannot be built. The image and the
session are judged apart (`readiness`): a framework from the lock is tested on the host, so its session runs
whether or not its image can be built; a framework from the base image is tested inside the image, so its
session needs the image. The reason names the command that fixes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.matrix.model import FrameworkSource
from accelenv.matrix.paths import lock_path
from accelenv.plan.lock import LockState, glibc_of, lock_state, os_lock_path, os_lock_state
from accelenv.plan.render import os_packages
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from accelenv.matrix import Environment, Matrix


def _lock_blocker(matrix: Matrix, env: Environment, repo: Path) -> str | None:
    """Why `env` has nothing to install (its lock is missing or stale), or None."""
    state = lock_state(repo, env, glibc_of(matrix, env))
    if state is LockState.CURRENT:
        return None
    what = "no lock file" if state is LockState.UNLOCKED else "a stale lock"
    return (
        f"{what} ({lock_path(repo, env.id).relative_to(repo)}): nothing to install; run `accelenv lock "
        f"{env.id}` where its indexes are reachable, then commit it"
    )


def _os_lock_blocker(matrix: Matrix, env: Environment, repo: Path, platform: str) -> str | None:
    """Why `env`'s image cannot be built for `platform`: its OS-package lock is missing or stale; or None."""
    image = matrix.runtimes[env.runtime].base_images.get(env.os)
    packages = os_packages(matrix, env)
    if image is None or not packages:
        return None
    os_state = os_lock_state(repo, env.id, image.reference, packages, platform)
    if os_state is LockState.CURRENT:
        return None
    what = "no OS-package lock" if os_state is LockState.UNLOCKED else "a stale OS-package lock"
    command = f"accelenv lock {env.id}" + ("" if platform == "linux/amd64" else f" --platform {platform}")
    return (
        f"{what} ({os_lock_path(repo, env.id, platform).relative_to(repo)}): its image cannot be built; run "
        f"`{command}` where {image.reference} can be pulled, then commit it"
    )


@frozen
class Readiness:
    """What `accelenv ci` cannot schedule, read from the committed files: (environment, platform) -> why its
    session cannot run there, and -> why its image cannot be built there. A session whose framework comes from
    its lock needs only the lock; one whose framework comes from the base image builds the image in its own job."""

    sessions: Mapping[tuple[str, str], str]
    images: Mapping[tuple[str, str], str]


def readiness(matrix: Matrix, repo: Path) -> Readiness:
    sessions: dict[tuple[str, str], str] = {}
    images: dict[tuple[str, str], str] = {}
    for env in matrix.envs.values():
        lock = _lock_blocker(matrix, env, repo)
        for platform in env.platforms:
            key = (env.id, platform)
            if lock is not None:
                sessions[key] = images[key] = lock
                continue
            image = _os_lock_blocker(matrix, env, repo, platform)
            if image is None:
                continue
            images[key] = image
            if env.framework is not None and env.framework.source is FrameworkSource.BASE_IMAGE:
                sessions[key] = f"its framework comes from its base image, and {image}"
    return Readiness(sessions=sessions, images=images)
