"""The body of an environment's nox session: check the host, then run the device tests where the framework is.

1. The lock is current (else the exact `accelenv lock` to run).
2. The host check, in the session's own virtualenv (the Python that runs nox): a machine without the devices or
   the driver is told so before anything else is needed.
3. The environment's Python (a family session takes a Python variant of its environment when only that one's
   Python is here), a virtualenv beside the session's, the lock installed with hashes.
4. Where the framework is:
   - from the lock: in that virtualenv;
   - from the base image (AMD, Neuron, Gaudi): in that virtualenv when the host's Python has the vendor's
     framework at the version and build the matrix declares (the virtualenv sees it through
     --system-site-packages, and `accelenv check` verifies it), else inside the environment's image through
     `accelenv run`, the same wiring users get. Neither: the session fails with the next step.
5. The device tests write a tally and a result record; a run that tested nothing fails, and the session ends on
   the record's state in the record's words (`record_line`): passed, FAILED, NOT PROVEN (tests skipped for want
   of a device, as --skip-missing-hardware asked: the session succeeds, and says it proved nothing), INCOMPLETE.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelenv.check.framework import declared, origin
from accelenv.errors import UsageError
from accelenv.fileio import read_bytes
from accelenv.matrix.model import FrameworkSource
from accelenv.matrix.paths import lock_path
from accelenv.plan.interpreters import find_interpreter, missing_python_message, uv_binary
from accelenv.plan.lock import LockState, glibc_of, lock_state
from accelenv.plan.sessions import hardware_flags

if TYPE_CHECKING:
    from collections.abc import Callable

    from accelenv.matrix import Environment, Matrix

TALLY_DIR = Path(".accelenv") / "device-tests"  # inside the working tree: a container run writes it too


def choose_env(matrix: Matrix, env_id: str, variants: tuple[str, ...], find_python: Callable[[str], str | None]) -> str:
    """`env_id`, or the first of its Python variants whose Python this machine has (`env_id` when none has)."""
    if not variants:
        return env_id
    for candidate in (env_id, *variants):
        if find_python(matrix.envs[candidate].python) is not None:
            return candidate
    return env_id


def closing_line(session_name: str, tally: dict[str, Any]) -> str | None:
    """None for a hardware pass; the not-proven line when tests skipped for want of a device (used when the run
    left no record to take the words from)."""
    skipped = int(tally.get("no_device", 0))
    if not skipped:
        return None
    return (
        f"{session_name}: NOT PROVEN: {skipped} device test(s) skipped, no device here "
        f"(--skip-missing-hardware); {int(tally.get('passed', 0))} passed"
    )


WORDS = {"passed": "passed", "failed": "FAILED", "not_proven": "NOT PROVEN", "incomplete": "INCOMPLETE"}


def record_line(session_name: str, env_id: str, folder: Path, since: float) -> str | None:
    """The session's last line from the newest result record of `env_id` in `folder` begun at or after `since`
    (seconds since 1970): its state, why, and the file; None when the run left none."""
    from accelenv.results.record import SUFFIX, parse_time

    best: tuple[int, str, dict[str, Any]] | None = None
    for path in folder.glob(f"{env_id}-*{SUFFIX}") if folder.is_dir() else ():
        try:
            data = json.loads(read_bytes(path, limit=8 << 20, what="result record"))
            started = parse_time(str(data["started"])) or 0
        except (UsageError, ValueError, KeyError, TypeError):
            continue
        if started >= int(since) - 1 and (best is None or (started, str(path)) > best[:2]):
            best = (started, str(path), data)
    if best is None:
        return None
    data = best[2]
    word = WORDS.get(str(data.get("outcome")), str(data.get("outcome")).upper())
    note = f": {data['note']}" if data.get("note") else ""
    return f"{session_name}: {word}{note} (record {best[1]})"


def tally_problem(env_id: str, tally: dict[str, Any] | None) -> str | None:
    """Why a finished device-test run is not a result, or None."""
    if tally is None:
        return f"the device tests of {env_id} wrote no tally ({TALLY_DIR}/{env_id}.json): they did not run"
    if not any(int(tally.get(key, 0)) for key in ("passed", "failed", "no_device")):
        return f"no device test of {env_id} ran (all {int(tally.get('skipped', 0))} skipped): nothing was tested"
    return None


def run_environment(
    session: Any,
    matrix: Matrix,
    env_id: str,
    repo: Path,
    *,
    variants: tuple[str, ...] = (),
    find_python: Callable[[str], str | None] = find_interpreter,
    on_closing_line: Callable[[str], None] | None = None,
    tally_root: Path | None = None,
) -> None:
    """The body of an environment's session (`session` is a nox.Session); see the module's docstring."""
    chosen = choose_env(matrix, env_id, variants, find_python)
    if chosen != env_id:
        session.log(
            f"{env_id} runs on Python {matrix.envs[env_id].python}, which this machine does not have: running "
            f"{chosen} (Python {matrix.envs[chosen].python}), the same tests of the same framework"
        )
    env = matrix.envs[chosen]
    lock = _current_lock(session, matrix, env, repo)
    flags, pytest_args, note = hardware_flags(list(session.posargs), dict(os.environ))
    if note:
        session.warn(note)
    session.install("-e", str(repo))
    session.log(f"checking the host against {env.id} before installing anything")
    session.run("accelenv", "check", env.id, "--host-only", *flags)
    framework = env.framework
    from_image = framework is not None and framework.source is FrameworkSource.BASE_IMAGE
    python = find_python(env.python)
    if python is None and not from_image:
        session.error(missing_python_message(env.id, env.python))
    tally_file = TALLY_DIR / f"{env.id}.json"  # relative: the image sees the working tree at its own path
    tally_path = (tally_root or repo) / tally_file
    tally_path.unlink(missing_ok=True)
    extra = ["--accelenv-allow-missing-hardware"] if flags else []
    tests = [*env.tests, "-o", "filterwarnings=default", *extra, *pytest_args]
    bin_dir = _install(session, env, repo, lock, python, system_site=from_image) if python else None
    import time

    import nox.command  # the session's own edge: nox is there whenever this body runs

    records = Path(os.environ.get("ACCELENV_RESULTS") or (tally_root or repo) / "results")
    began = time.time()
    try:
        _tests(session, matrix, env, tests, flags=flags, bin_dir=bin_dir, tally=(tally_path, tally_file))
    except nox.command.CommandFailed:
        line = record_line(session.name, env.id, records, began)
        if line and on_closing_line is not None:
            on_closing_line(line)
        raise
    _judge_tally(session, env.id, tally_path, on_closing_line, record=record_line(session.name, env.id, records, began))


def _tests(
    session: Any,
    matrix: Matrix,
    env: Environment,
    tests: list[str],
    *,
    flags: list[str],
    bin_dir: Path | None,
    tally: tuple[Path, Path],
) -> None:
    """The device tests with the result-record plugin: in the environment's virtualenv, or its image."""
    tally_path, tally_file = tally
    framework = env.framework
    from_image = framework is not None and framework.source is FrameworkSource.BASE_IMAGE
    if bin_dir is not None and (not from_image or _host_has_framework(session, env, bin_dir, flags)):
        tests = [*tests, "--accelenv-summary", str(tally_path)]
        session.log(f"checking {env.id} again with its locked requirements installed")
        session.run(str(bin_dir / "accelenv"), "check", env.id, *flags, external=True)
        session.run(
            str(bin_dir / "python"),
            "-m",
            "pytest",
            "-p",
            "accelenv.results.plugin",  # a result record (and JUnit XML) in ./results or $ACCELENV_RESULTS
            *tests,
            env={"ACCELENV_ENV": env.id, "ACCELENV_ALLOW_MISSING_HARDWARE": "1" if flags else ""},
            external=True,
        )
    else:
        tests = [*tests, "--accelenv-summary", str(tally_file)]
        _in_image(session, matrix, env, tests, flags=flags, bin_dir=bin_dir)


def _current_lock(session: Any, matrix: Matrix, env: Environment, repo: Path) -> Path:
    lock = lock_path(repo, env.id)
    state = lock_state(repo, env, glibc_of(matrix, env))
    if state is LockState.UNLOCKED:
        urls = [env.requirements.index_url or "https://pypi.org/simple", *env.requirements.extra_index_urls]
        session.error(
            f"{env.id} has no lock file ({lock.relative_to(repo)}). Create it where its indexes are reachable "
            f"({', '.join(urls)}): `accelenv lock {env.id}`, then commit it."
        )
    if state is LockState.STALE:
        session.error(f"{lock.relative_to(repo)} no longer matches matrix.toml: run `accelenv lock {env.id}`.")
    return lock


def _install(session: Any, env: Environment, repo: Path, lock: Path, python: str, *, system_site: bool) -> Path:
    """The environment's virtualenv beside the session's, with the lock installed; its bin folder.
    `system_site`: it sees the interpreter's own packages (a vendor framework installed on the host)."""
    location = Path(session.virtualenv.location)
    venv = location.with_name(f"{location.name}-py{env.python}")
    session.log(f"installing {env.id}'s lock into {venv} (Python {env.python})")
    extra = ["--system-site-packages"] if system_site else []
    uv = uv_binary()
    session.run_install(uv, "venv", "--clear", "--quiet", *extra, "--python", python, str(venv), external=True)
    target = ("--python", str(venv / "bin" / "python"))
    session.run_install(uv, "pip", "install", "--quiet", *target, "-e", str(repo), external=True)
    session.run_install(uv, "pip", "install", "--quiet", *target, "--require-hashes", "-r", str(lock), external=True)
    from accelenv.plugins import install_spec, installed

    plugin = installed().of(env.family)  # a plugin's family: the venv's accelenv needs the plugin to read the matrix
    if plugin is not None:
        session.run_install(uv, "pip", "install", "--quiet", "--no-deps", *target, install_spec(plugin), external=True)
    return venv / "bin"


def _host_has_framework(session: Any, env: Environment, bin_dir: Path, flags: list[str]) -> bool:
    """Whether the host's Python has the vendor framework the matrix declares: True when `accelenv check`
    passes its framework finding, False when the framework is not installed (the image route is next). A
    framework at another version or build fails the session here: the host has the wrong one."""
    framework = env.framework
    if framework is None:
        return True
    out = session.run(
        str(bin_dir / "accelenv"), "check", env.id, "--json", *flags, external=True, silent=True, success_codes=[0, 1]
    )
    try:
        checks = json.loads(out)["checks"]
    except (TypeError, ValueError, KeyError):
        session.error(f"`accelenv check {env.id} --json` printed no verdict: {str(out)[-2000:]}")
    finding = next((c for c in checks if str(c.get("id", "")).startswith("framework.")), None)
    if finding is None or finding.get("status") == "pass":
        session.log(f"the host's Python {env.python} has {declared(framework)}: testing it here")
        return True
    if finding.get("found") == "not installed":
        session.log(
            f"the host's Python {env.python} has no {framework.name}: {env.id}'s framework, {declared(framework)}, "
            f"comes from its base image, so its device tests run inside the environment's image"
        )
        return False
    session.run(str(bin_dir / "accelenv"), "check", env.id, *flags, external=True)  # prints the verdict, fails
    session.error(f"the host has another {framework.name} than {declared(framework)}: {finding.get('message')}")
    return False  # pragma: no cover - session.error raises


def _in_image(
    session: Any, matrix: Matrix, env: Environment, tests: list[str], *, flags: list[str], bin_dir: Path | None
) -> None:
    """The device tests inside the environment's image, through `accelenv run` (its devices, its wiring)."""
    accelenv = str(bin_dir / "accelenv") if bin_dir is not None else "accelenv"
    next_step = (
        f"the device tests of {env.id} run where its framework is, {origin(matrix, env)}, and the environment's "
        f"image could not be started here (the lines above say why). Next step: `accelenv build {env.id}`, then "
        f"run this session again on a host with {matrix.families[env.family].name} devices and a container engine "
        f"that can give them (`accelenv run {env.id} -- accelenv check {env.id}` shows what is missing)"
    )
    if bin_dir is None:
        next_step += f"; or install Python {env.python} with the vendor's framework on the host"
    import nox.command  # the session's own edge: nox is there whenever this body runs

    session.log(f"running {env.id}'s device tests inside its image (accelenv run {env.id})")
    try:
        session.run(accelenv, "run", env.id, "--", "true", external=True)
    except nox.command.CommandFailed:
        session.error(next_step)
    session.run(accelenv, "run", env.id, "--", "accelenv", "check", env.id, *flags, external=True)
    session.run(
        accelenv, "run", env.id, "--", "python", "-m", "pytest", "-p", "accelenv.results.plugin", *tests, external=True
    )


def _judge_tally(
    session: Any, env_id: str, path: Path, on_closing_line: Callable[[str], None] | None, *, record: str | None
) -> None:
    tally = None
    try:
        tally = json.loads(read_bytes(path, limit=1 << 20, what="device-test tally"))
    except (UsageError, ValueError):
        tally = None
    problem = tally_problem(env_id, tally if isinstance(tally, dict) else None)
    if problem:
        session.error(problem)
    line = record or (closing_line(session.name, tally) if isinstance(tally, dict) else None)
    if line:
        (session.log if line.startswith(f"{session.name}: passed") else session.warn)(line)
        if on_closing_line is not None:
            on_closing_line(line)
