"""The page's "Get started": the steps that set an environment up, which of them it may recommend in the
environment's current state, and the page's stamp.

A step that would fail now (a nox session without a current lock, `accelenv build` of an environment whose OS
package lock is missing) is not offered as a command to copy: it is shown as not available, with why and the
step that makes it available. The repository is read by `stamp_of` and `build.readiness.image_blockers`
(edges, called by the command line); `gate` and `stamp_html` are pure.
"""

from __future__ import annotations

import hashlib
import html
import shlex
import subprocess
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from accelenv import records
from accelenv.host.run import run_in_group
from accelenv.matrix.paths import LOCK_NAME
from accelenv.matrix.resolve import index_options, pip_command
from accelenv.plan.lock import LockState
from accelenv.records import frozen

if TYPE_CHECKING:
    from pathlib import Path

    from accelenv.matrix.model import Environment, Matrix

GIT_TIMEOUT = 10.0


@frozen
class Step:
    """One step of "Get started": what it does, and the shell text a reader copies (empty: nothing to run)."""

    label: str
    text: str
    note: str = ""
    available: bool = True  # False: it would fail now (`plan.start.gate`), `why` says why and `fix` what to do
    why: str = ""
    fix: str = ""


def start_steps(matrix: Matrix, env: Environment, lock: LockState | None, session: str) -> list[Step]:
    """The commands that set `env` up, in order: the nox session (`session`, the family's when `env` is its
    default), the host check, the image with the environment's tests, and plain pip for a reader without
    accelenv: the lock with hashes when it is current, else the pins (unhashed) and why."""
    tests = list(env.tests) or ["tests/devices"]
    steps = [
        Step(
            label="Check the host, install the lock and run the tests, in one step",
            text=shlex.join(["nox", "-s", session]),
            note="the family's default environment" if env.default else "this environment's own session",
        ),
        Step(label="Or step by step: verify this host first", text=shlex.join(["accelenv", "check", env.id])),
        Step(
            label="Build the image and run the environment's tests in it",
            text=shlex.join(["accelenv", "build", env.id])
            + " && "
            + shlex.join(["accelenv", "run", env.id, "--", "pytest", *tests]),
        ),
    ]
    python = f"python{env.python}"
    indexes = index_options(env)
    if lock in (LockState.CURRENT, None):
        lock_file = f"envs/{env.id}/{LOCK_NAME}"
        steps.append(
            Step(
                label=f"Without accelenv: the locked requirements, into Python {env.python}",
                text=f"{shlex.join([python, '-m', 'venv', '.venv'])} && . .venv/bin/activate\n"
                + shlex.join(["pip", "install", "--require-hashes", "--no-deps", *indexes, "-r", lock_file]),
                note="" if lock else "the lock's state is not known to this page",
            )
        )
    else:
        why = "is not locked" if lock is LockState.UNLOCKED else "has a stale lock"
        steps.append(
            Step(
                label=f"Without accelenv: {env.id} {why} (accelenv lock {env.id}); its pins, without hashes, "
                f"into Python {env.python}",
                text=shlex.join(pip_command(env)),
            )
        )
    return steps


@frozen
class Unavailable:
    """Why a step cannot be taken now, and what makes it possible."""

    why: str
    fix: str


def gate(steps: list[Step], env: Environment, lock: LockState | None, image: Unavailable | None) -> list[Step]:
    """`steps` with those that would fail now marked not available: the nox session and the build need a
    current lock (a lock state the page does not know leaves them offered); the build needs what
    `build.readiness.image_blockers` found."""
    lock_fix = f"accelenv lock {env.id}"
    lock_why = {
        LockState.UNLOCKED: f"envs/{env.id}/requirements.lock does not exist",
        LockState.STALE: f"envs/{env.id}/requirements.lock is stale (the matrix changed)",
    }
    gated = []
    for step in steps:
        blocker: Unavailable | None = None
        if step.text.startswith("nox ") and lock in lock_why:
            blocker = Unavailable(why=f"the session aborts: {lock_why[lock]}", fix=lock_fix)
        elif step.text.startswith("accelenv build "):
            lock_blocker = (
                Unavailable(why=f"accelenv build refuses it: {lock_why[lock]}", fix=lock_fix)
                if lock in lock_why
                else None
            )
            blocker = image or lock_blocker
        gated.append(
            step if blocker is None else records.replace(step, available=False, why=blocker.why, fix=blocker.fix)
        )
    return gated


@frozen
class Stamp:
    """What a copy of the page was made from: the matrix's content hash, its commit (None: not committed, or
    no git), and when."""

    matrix_sha256: str
    commit: str | None
    date: str  # the commit's date; the day the page was made when the matrix is not committed as it is


def stamp_of(matrix_path: Path, text: str, *, today: str | None = None) -> Stamp:
    """The stamp of the matrix at `matrix_path` whose text is `text`: its commit when git knows the file and
    it has no uncommitted change."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    commit = date = None
    folder = str(matrix_path.parent)
    try:
        status = _git(folder, "status", "--porcelain", "--", matrix_path.name)
        if status is not None and not status.strip():
            commit = _git(folder, "log", "-1", "--format=%H", "--", matrix_path.name)
            date = _git(folder, "log", "-1", "--format=%cs", "--", matrix_path.name) if commit else None
    except OSError:
        commit = None
    commit = (commit or "").strip() or None
    return Stamp(
        matrix_sha256=digest,
        commit=commit,
        date=(date or "").strip() if commit else today or datetime.now(UTC).date().isoformat(),
    )


def _git(folder: str, *args: str) -> str | None:
    try:
        proc = run_in_group(["git", "-C", folder, *args], input_text="", timeout=GIT_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def stamp_html(stamp: Stamp | None) -> str:
    """The page's stamp line, or "" without one."""
    if stamp is None:
        return ""
    commit = f"commit {stamp.commit[:12]}" if stamp.commit else "uncommitted"
    return (
        f'<p id="stamp" class="muted" data-matrix-sha256="{stamp.matrix_sha256}" '
        f'data-commit="{html.escape(stamp.commit or "")}">Matrix sha256:{stamp.matrix_sha256[:16]} \u00b7 '
        f"{commit} \u00b7 {html.escape(stamp.date)}</p>"
    )
