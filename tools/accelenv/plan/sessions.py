"""nox sessions from the matrix: one per family (its default environment) and one per environment.

`session_specs` is pure. `run_environment` is the session body: check the host, install the lock with hashes,
check again with the pins in place, then run the environment's tests. It takes the nox session object as its
only edge, so noxfile.py stays a thin loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from accelenv.plan.lock import LockState, glibc_of, lock_path, lock_state

if TYPE_CHECKING:
    from pathlib import Path

    from accelenv.matrix import Matrix

SKIP_ENV_VAR = "ACCELENV_SKIP_MISSING_HARDWARE"
SKIP_FLAG = "--skip-missing-hardware"


@dataclass(frozen=True, kw_only=True)
class SessionSpec:
    name: str
    env: str
    python: str
    description: str


def session_specs(matrix: Matrix) -> list[SessionSpec]:
    specs = []
    for family in matrix.families.values():
        default = matrix.default_env(family.id)
        if default is not None:
            specs.append(_spec(matrix, family.session, default.id, prefix=f"{family.name}, default env {default.id}: "))
    specs += [
        _spec(matrix, env.id, env.id, prefix=f"{matrix.families[env.family].name}: ") for env in matrix.envs.values()
    ]
    return specs


def _spec(matrix: Matrix, name: str, env_id: str, *, prefix: str) -> SessionSpec:
    env = matrix.envs[env_id]
    runtime = matrix.runtimes[env.runtime]
    return SessionSpec(
        name=name, env=env_id, python=env.python, description=f"{prefix}{runtime.name}, Python {env.python}"
    )


def hardware_flags(posargs: list[str], environ: dict[str, str]) -> tuple[list[str], list[str], str | None]:
    """(flags for accelenv check, remaining pytest args, a note). Skipping missing hardware is an explicit
    opt-in for laptops; under CI it is refused."""
    wanted = SKIP_FLAG in posargs or environ.get(SKIP_ENV_VAR, "") not in ("", "0")
    rest = [a for a in posargs if a != SKIP_FLAG]
    if wanted and environ.get("CI", "").lower() in ("true", "1"):
        return [], rest, f"{SKIP_FLAG} ignored: CI never skips missing hardware"
    return (["--allow-missing-hardware"] if wanted else []), rest, None


def run_environment(session: Any, matrix: Matrix, env_id: str, repo: Path) -> None:
    """The body of an environment's session (`session` is a nox.Session)."""
    env = matrix.envs[env_id]
    lock = lock_path(repo, env_id)
    state = lock_state(repo, env, glibc_of(matrix, env))
    if state is LockState.UNLOCKED:
        urls = [env.requirements.index_url or "https://pypi.org/simple", *env.requirements.extra_index_urls]
        session.error(
            f"{env_id} has no lock file ({lock.relative_to(repo)}). Create it where its indexes are reachable "
            f"({', '.join(urls)}): `accelenv lock {env_id}`, then commit it."
        )
    if state is LockState.STALE:
        session.error(f"{lock.relative_to(repo)} no longer matches matrix.toml: run `accelenv lock {env_id}`.")
    flags, pytest_args, note = hardware_flags(list(session.posargs), dict(os.environ))
    if note:
        session.warn(note)
    session.install("-e", str(repo))
    session.log(f"checking the host against {env_id} before installing anything")
    session.run("accelenv", "check", env_id, "--host-only", *flags)
    session.install("--require-hashes", "-r", str(lock))
    session.log(f"checking {env_id} again with its locked requirements installed")
    session.run("accelenv", "check", env_id, *flags)
    session.run(
        "pytest",
        *env.tests,
        "-o",
        "filterwarnings=default",
        *pytest_args,
        env={"ACCELENV_ENV": env_id, "ACCELENV_ALLOW_MISSING_HARDWARE": "1" if flags else ""},
    )
