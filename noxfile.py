"""nox sessions. Thin on purpose: the logic lives in the accelenv package.

nox -s quick             the inner loop: unit and hostile tests, in parallel (no engine, cluster or network)
nox -s lint tests        the whole test suite, on every core (what .ci/run runs)
nox -s validate          check matrix.toml and the committed generated files
nox -s cpu               the cpu family's default environment: check the host, install the lock, run its tests
nox -s gpu-nvidia        likewise for NVIDIA (gpu-amd, tpu, neuron, gaudi); one session per environment too
nox -l                   every session with its family, runtime and Python
"""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
from pathlib import Path

import nox

REPO = Path(__file__).resolve().parent
sys.path.insert(0, str(REPO / "tools"))

from accelenv.errors import MatrixInvalidError  # noqa: E402 - the package is found through tools/ above
from accelenv.matrix import read_matrix  # noqa: E402
from accelenv.plan.device_session import run_environment  # noqa: E402
from accelenv.plan.sessions import session_specs  # noqa: E402

nox.needs_version = ">=2024.10"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]
nox.options.error_on_missing_interpreters = True

# The sessions that run accelenv's own code use the Python running nox: any supported one (3.11 or newer; this
# file imports accelenv, which needs that too), Debian 12's 3.11 and Ubuntu 24.04's 3.12 alike.
PYTHON = None
CLOSING: list[str] = []  # not-a-hardware-pass lines, printed after nox's own summary so they are the last lines


@atexit.register
def _closing_lines() -> None:
    for line in CLOSING:
        print(f"nox > {line}", file=sys.stderr, flush=True)


LINTED = ["tools", "tests", "noxfile.py", "benchmarks"]

PLUGINS = ("-e", "tools/plugins/accelenv-ascend")  # the reference family plugin, installed as a vendor's would be


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint and format) and mypy --strict over the package, tests, benchmarks and this file."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", *LINTED)
    session.run("ruff", "format", "--check", *LINTED)
    # one run per folder with a conftest.py (tests/unit, tests/integration, tests/devices, tests/hostile): mypy
    # wants module names unique
    session.run("mypy", "tools", "tests/unit", "tests/support", "noxfile.py", "benchmarks")
    session.run("mypy", "tests/integration")
    session.run("mypy", "tests/devices")
    session.run("mypy", "tests/hostile")


# The slowest tests of every run are printed, so one that starts to creep is seen when it starts.
DURATIONS = ("--durations=25", "--durations-min=5")


def _workers() -> str:
    """pytest-xdist's worker count: twice the cores, at least 4. Much of the tests' time is spent waiting (on the
    engine, the network on loopback, a Ray cluster starting, a deadline a test measures), so more workers than
    cores keep the cores busy (on 2 cores, the unit and hostile tests: 141 s with 2 workers, 111 s with 4)."""
    return str(max(4, 2 * (os.cpu_count() or 1)))


def _pytest(session: nox.Session, *args: str, timeout: int) -> None:
    """pytest with the suite's plugins installed, `timeout` seconds a test (a hung test fails with its stack and
    the run goes on; given here, not in pyproject.toml, because the device tests run with that file's settings in
    environments without pytest-timeout), the slowest tests printed, and a temporary root of the run's own: a shared
    /tmp/pytest-of-<user>, cleaned by earlier or concurrent runs, leaves pytest's walk of it
    (_pytest.pathlib.find_prefixed) holding a directory listing open when a folder vanishes under it, a
    ResourceWarning that warnings-as-errors turns into a failure."""
    session.install("-e", ".[dev]", *PLUGINS)
    temproot = tempfile.mkdtemp(prefix="accelenv-pytest-")
    limits = (f"--timeout={timeout}", "--timeout-method=signal")
    session.run("pytest", *args, *limits, *DURATIONS, *session.posargs, env={"PYTEST_DEBUG_TEMPROOT": temproot})


@nox.session(python=PYTHON)
def quick(session: nox.Session) -> None:
    """The inner loop: the unit and hostile tests (no engine, no Ray cluster, no network), on twice the cores: many
    of them wait on purpose (a server that trickles, a deadline), so more workers than cores finish sooner."""
    _pytest(session, "tests/unit", "tests/hostile", "-n", _workers(), timeout=300)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """pytest: unit tests (no network, no docker, no vendor tools) and integration tests, in parallel: a test at a
    time (--dist loadgroup), in the order tests/integration/conftest.py gives (the heavy tests spread over the
    start). 900 s a test: the slowest, an emulated arm64 image build, takes about 7 minutes beside the others."""
    _pytest(session, "-n", _workers(), "--dist", "loadgroup", timeout=900)


@nox.session(python=PYTHON)
def validate(session: nox.Session) -> None:
    """The matrix against schema and rules; generated files (schemas, Dockerfiles, env.json, locks) up to date."""
    session.install("-e", ".")
    session.run("accelenv", "validate")
    session.run("accelenv", "schema", "--check")
    session.run("accelenv", "render", "--check")
    session.run("accelenv", "lock", "--check")
    session.run("accelenv", "report", "--format", "md", "-o", "docs/compatibility.md", "--check")


@nox.session(python=PYTHON, default=False)
def outdated(session: nox.Session) -> None:
    """Newer upstream releases of the matrix's pins and runtimes (for a scheduled CI job; not run by default)."""
    session.install("-e", ".")
    session.run("accelenv", "outdated", "--format", "github", *session.posargs)


def _register(name: str, env_id: str, description: str, variants: tuple[str, ...]) -> None:
    def body(session: nox.Session) -> None:
        run_environment(session, MATRIX, env_id, REPO, variants=variants, on_closing_line=CLOSING.append)

    body.__doc__ = description
    # The session's own virtualenv uses the Python that runs nox: the host check needs nothing more. The
    # environment's Python (in the description) is looked for after the host check passes; a family session
    # takes a Python variant of its environment (cpu-py312 for cpu-py311) when only that one's Python is here.
    nox.session(name=name, default=False)(body)


def _register_cpu_conformance(env_id: str, variants: tuple[str, ...]) -> None:
    def conformance_cpu(session: nox.Session) -> None:
        """The conformance suite every accelerator runs, on this CPU, with a result record (docs/results.md)."""
        from accelenv.plan.cpu_conformance import run_cpu_conformance

        run_cpu_conformance(session, MATRIX, REPO, env_id=env_id, variants=variants, on_closing_line=CLOSING.append)

    nox.session(name="conformance-cpu", default=False)(conformance_cpu)


try:
    MATRIX = read_matrix(REPO / "matrix.toml")
except MatrixInvalidError as error:  # nox -l still works; `accelenv validate` says what is wrong
    print(f"noxfile: matrix.toml cannot be read ({error}); environment sessions are not registered", file=sys.stderr)
else:
    for spec in session_specs(MATRIX):
        _register(spec.name, spec.env, spec.description, spec.variants)
    for spec in session_specs(MATRIX):
        if MATRIX.envs[spec.env].family == "cpu":
            _register_cpu_conformance(spec.env, spec.variants)
            break
