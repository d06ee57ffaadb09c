"""Which environments cannot run yet, and why: what `accelenv ci` leaves out of the jobs it schedules.

Read from the committed files only (no engine, no network): an environment without a current lock has nothing
to install, and one whose image needs an OS-package lock that is missing or stale cannot be built, so neither
build nor session could do its work in CI. The reason names the command that fixes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.plan.lock import LockState, glibc_of, lock_path, lock_state, os_lock_path, os_lock_state
from accelenv.plan.render import os_packages

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from accelenv.matrix import Environment, Matrix


def blocker(matrix: Matrix, env: Environment, repo: Path, platform: str = "linux/amd64") -> str | None:
    """Why `env` cannot run from this tree on `platform` (its OS-package lock is per platform), or None."""
    state = lock_state(repo, env, glibc_of(matrix, env))
    if state is not LockState.CURRENT:
        what = "no lock file" if state is LockState.UNLOCKED else "a stale lock"
        return (
            f"{what} ({lock_path(repo, env.id).relative_to(repo)}): nothing to install; run `accelenv lock "
            f"{env.id}` where its indexes are reachable, then commit it"
        )
    return _os_lock_blocker(matrix, env, repo, platform)


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


def blockers(matrix: Matrix, repo: Path) -> dict[str, str]:
    """Every environment that cannot run (on linux/amd64, its first platform: then on none), with why."""
    return {env.id: reason for env in matrix.envs.values() if (reason := blocker(matrix, env, repo)) is not None}


def platform_blockers(matrix: Matrix, repo: Path, blocked: Mapping[str, str]) -> dict[tuple[str, str], str]:
    """(environment, platform) for each other platform an environment not in `blocked` (see `blockers`) cannot
    run on (its OS-package lock for that platform is missing or stale), with why."""
    return {
        (env.id, platform): reason
        for env in matrix.envs.values()
        if env.id not in blocked
        for platform in env.platforms
        if platform != "linux/amd64" and (reason := _os_lock_blocker(matrix, env, repo, platform)) is not None
    }
