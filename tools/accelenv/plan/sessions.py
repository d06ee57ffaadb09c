"""nox sessions from the matrix: one per family (its default environment) and one per environment.

`session_specs` is pure. `run_environment` is the session body: check the host, find the environment's Python,
install the lock with hashes, check again with the pins in place, then run the environment's tests. It takes the
nox session object as its edge, so noxfile.py stays a thin loop.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelenv.plan.lock import LockState, glibc_of, lock_path, lock_state

if TYPE_CHECKING:
    from collections.abc import Callable

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


def find_interpreter(version: str) -> str | None:
    """A working `python<version>` on this machine: on PATH (a pyenv shim that cannot run it does not count),
    else one uv knows. None when there is none; nothing is downloaded."""
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    candidates = [path for path in (shutil.which(f"python{version}"),) if path]
    for candidate in candidates:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [candidate, "-c", probe], capture_output=True, text=True, timeout=20, check=False
            ).stdout.strip()
            if out == version:
                return candidate
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = subprocess.run(
            [_uv(), "python", "find", "--no-python-downloads", version],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if found.returncode == 0 and found.stdout.strip():
            return found.stdout.strip().splitlines()[-1]
    return None


def _uv() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        return "uv"
    return str(find_uv_bin())


def missing_python_message(env_id: str, version: str) -> str:
    return (
        f"{env_id} runs on Python {version}, which is not installed on this machine (the host check above "
        f"passed). Install it, then run the session again: `uv python install {version}`, your "
        f"distribution's python{version} package, or `pyenv install {version}` with it on PATH."
    )


def run_environment(
    session: Any,
    matrix: Matrix,
    env_id: str,
    repo: Path,
    *,
    find_python: Callable[[str], str | None] = find_interpreter,
) -> None:
    """The body of an environment's session (`session` is a nox.Session).

    The host check runs first, in the session's own virtualenv (the Python that runs nox), so a machine
    without the environment's devices or driver is told so before anything else is needed. Only then is the
    environment's Python looked for and its locked requirements installed, in a virtualenv of their own
    beside the session's."""
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
    python = find_python(env.python)
    if python is None:
        session.error(missing_python_message(env_id, env.python))
    venv = Path(session.virtualenv.location).with_name(f"{Path(session.virtualenv.location).name}-py{env.python}")
    bin_dir = venv / "bin"
    session.log(f"installing {env_id}'s lock into {venv} (Python {env.python})")
    session.run_install(_uv(), "venv", "--clear", "--quiet", "--python", str(python), str(venv), external=True)
    target = ("--python", str(bin_dir / "python"))
    session.run_install(_uv(), "pip", "install", "--quiet", *target, "-e", str(repo), external=True)
    session.run_install(_uv(), "pip", "install", "--quiet", *target, "--require-hashes", "-r", str(lock), external=True)
    session.log(f"checking {env_id} again with its locked requirements installed")
    session.run(str(bin_dir / "accelenv"), "check", env_id, *flags, external=True)
    session.run(
        str(bin_dir / "python"),
        "-m",
        "pytest",
        "-p",
        "accelenv.results.plugin",  # a result record (and JUnit XML) in ./results or $ACCELENV_RESULTS
        *env.tests,
        "-o",
        "filterwarnings=default",
        *pytest_args,
        env={"ACCELENV_ENV": env_id, "ACCELENV_ALLOW_MISSING_HARDWARE": "1" if flags else ""},
        external=True,
    )
