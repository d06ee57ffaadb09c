"""nox sessions. Thin on purpose: the logic lives in the accelenv package.

nox -s lint tests     the test suite (what .ci/run runs)
nox -s validate       check matrix.toml and the committed schema
"""

from __future__ import annotations

import nox

nox.needs_version = ">=2024.10"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]
nox.options.error_on_missing_interpreters = True

PYTHON = "3.11"
LINTED = ["tools", "tests", "noxfile.py", "benchmarks"]


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (lint and format) and mypy --strict over the package, tests, benchmarks and this file."""
    session.install("-e", ".[dev]")
    session.run("ruff", "check", *LINTED)
    session.run("ruff", "format", "--check", *LINTED)
    session.run("mypy", *LINTED)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """pytest: unit tests (no network, no docker, no vendor tools) and integration tests."""
    session.install("-e", ".[dev]")
    session.run("pytest", *session.posargs)


@nox.session(python=PYTHON)
def validate(session: nox.Session) -> None:
    """Validate matrix.toml against the schema and the rules, and check the committed schema is current."""
    session.install("-e", ".")
    session.run("accelenv", "validate")
    session.run("accelenv", "schema", "--check")
    session.run("accelenv", "list")
