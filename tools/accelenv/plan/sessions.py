"""nox sessions from the matrix: one per family (its default environment) and one per environment.

`session_specs` is pure; the session body is `plan/device_session.py`'s `run_environment`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.matrix import Matrix

SKIP_ENV_VAR = "ACCELENV_SKIP_MISSING_HARDWARE"
SKIP_FLAG = "--skip-missing-hardware"


@frozen
class SessionSpec:
    name: str
    env: str
    python: str
    description: str
    variants: tuple[str, ...] = ()  # the family session's other choices, by Python, when this one's is missing


def session_specs(matrix: Matrix) -> list[SessionSpec]:
    specs = []
    for family in matrix.families.values():
        default = matrix.default_env(family.id)
        if default is not None:
            spec = _spec(matrix, family.session, default.id, prefix=f"{family.name}, default env {default.id}: ")
            specs.append(_with_variants(matrix, spec))
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


def python_variants(matrix: Matrix, env_id: str) -> tuple[str, ...]:
    """Environments of the same family that test the same framework with the same tests on another Python
    (cpu-py312 for cpu-py311): a family session runs the first whose Python this machine has."""
    env = matrix.envs[env_id]
    return tuple(
        other.id
        for other in matrix.envs.values()
        if other.id != env.id
        and other.family == env.family
        and other.python != env.python
        and other.tests == env.tests
        and other.framework is not None
        and other.framework == env.framework
    )


def _with_variants(matrix: Matrix, spec: SessionSpec) -> SessionSpec:
    variants = python_variants(matrix, spec.env)
    if not variants:
        return spec
    pythons = ", ".join(matrix.envs[v].python for v in variants)
    return SessionSpec(
        name=spec.name,
        env=spec.env,
        python=spec.python,
        description=f"{spec.description} (or {pythons}: {', '.join(variants)})",
        variants=variants,
    )


def hardware_flags(posargs: list[str], environ: dict[str, str]) -> tuple[list[str], list[str], str | None]:
    """(flags for accelenv check, remaining pytest args, a note). Skipping missing hardware is an explicit
    opt-in for laptops; under CI it is refused."""
    wanted = SKIP_FLAG in posargs or environ.get(SKIP_ENV_VAR, "") not in ("", "0")
    rest = [a for a in posargs if a != SKIP_FLAG]
    if wanted and environ.get("CI", "").lower() in ("true", "1"):
        return [], rest, f"{SKIP_FLAG} ignored: CI never skips missing hardware"
    return (["--allow-missing-hardware"] if wanted else []), rest, None
