"""`nox -s conformance-cpu`: the conformance suite every accelerator runs (distributed, recovery, performance),
on this machine's CPU, from a fresh clone, in one command, with a result record as CI writes it.

1. The cpu environment for this machine's Python (cpu-py311, or a Python variant), its lock installed with hashes
   into a virtualenv beside the session's.
2. A framework: torch for the CPU from PyTorch's CPU index (https://download.pytorch.org/whl/cpu), or a local
   wheel named by $ACCELENV_CPU_TORCH_WHEEL. When neither can be had, the JAX path: the jax and jaxlib the TPU
   environment of this Python pins, from PyPI, and the JAX conformance file. The session says which ran.
3. The suite under the result-record plugin (ACCELENV_ENV set), record in ./results or $ACCELENV_RESULTS; the
   session ends on the record's state (`device_session.record_line`), and fails unless it passed.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelenv.matrix.paths import lock_path
from accelenv.plan.device_session import choose_env, record_line
from accelenv.plan.interpreters import find_interpreter, uv_binary

if TYPE_CHECKING:
    from collections.abc import Callable

    from accelenv.matrix import Matrix

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
CONFORMANCE = [
    "tests/devices/test_conformance_distributed.py",
    "tests/devices/test_conformance_recovery.py",
    "tests/devices/test_conformance_perf.py",
    "tests/devices/test_cpu_devices.py",
]
JAX_CONFORMANCE = ["tests/devices/test_conformance_jax.py", "tests/devices/test_cpu_devices.py"]


TORCH_VERSION = "import torch; print(torch.__version__)"


def _python(venv: Path) -> tuple[str, str]:
    return (str(venv / "bin" / "python"), "-c")


def jax_requirements(matrix: Matrix, python: str) -> list[str]:
    """The jax and jaxlib pins of the TPU environment for `python` (its libtpu is for TPU hosts only)."""
    for env in matrix.envs.values():
        if env.family == "tpu" and env.python == python:
            return [str(r) for r in env.requirements.packages if r.name in ("jax", "jaxlib")]
    return []


def run_cpu_conformance(
    session: Any,
    matrix: Matrix,
    repo: Path,
    *,
    env_id: str,
    variants: tuple[str, ...] = (),
    on_closing_line: Callable[[str], None] | None = None,
) -> None:
    """The body of `nox -s conformance-cpu` (`session` is a nox.Session); see the module's docstring."""
    import nox.command

    env = matrix.envs[choose_env(matrix, env_id, variants, find_interpreter)]
    python = find_interpreter(env.python)
    if python is None:
        session.error(f"the CPU conformance suite runs in {env.id}, on Python {env.python}: install it")
    location = Path(session.virtualenv.location)
    venv = location.with_name(f"{location.name}-py{env.python}")
    uv, target = uv_binary(), ("--python", str(venv / "bin" / "python"))
    session.run_install(uv, "venv", "--clear", "--quiet", "--python", python, str(venv), external=True)
    lock = lock_path(repo, env.id)
    session.run_install(uv, "pip", "install", "--quiet", *target, "--require-hashes", "-r", str(lock), external=True)
    session.run_install(uv, "pip", "install", "--quiet", *target, "--no-deps", "-e", str(repo), external=True)
    wheel = os.environ.get("ACCELENV_CPU_TORCH_WHEEL")
    source = wheel or TORCH_CPU_INDEX
    tests = CONFORMANCE
    try:
        # torch from that index alone: another index (PyPI) would give the CUDA build on Linux
        torch = [wheel] if wheel else ["--index-url", TORCH_CPU_INDEX, "torch"]
        session.run_install(uv, "pip", "install", "--quiet", *target, *torch, external=True)
        session.run_install(uv, "pip", "install", "--quiet", *target, "numpy", external=True)
        version = str(session.run(*_python(venv), TORCH_VERSION, external=True, silent=True)).strip()
        if not version.endswith("+cpu"):
            session.error(
                f"{source} gave torch {version}, not a CPU build (+cpu): refusing to run the CPU suite with it; "
                "set ACCELENV_CPU_TORCH_WHEEL to a torch CPU wheel"
            )
        ran = f"torch {version} from {source}"
    except nox.command.CommandFailed:
        jax = jax_requirements(matrix, env.python)
        if not jax:
            session.error(
                f"torch could not be installed from {source}, and no TPU environment pins a JAX for Python "
                f"{env.python}: set ACCELENV_CPU_TORCH_WHEEL to a torch CPU wheel"
            )
        session.warn(
            f"torch could not be installed from {source} (unreachable?): running the JAX path instead "
            f"({', '.join(jax)} from PyPI, {JAX_CONFORMANCE[0]})"
        )
        session.run_install(uv, "pip", "install", "--quiet", *target, *jax, external=True)
        ran, tests = f"the JAX path ({', '.join(jax)} from PyPI), not torch", JAX_CONFORMANCE
    session.log(f"running the CPU conformance suite of {env.id} with {ran}")
    records = Path(os.environ.get("ACCELENV_RESULTS") or repo / "results")
    began = time.time()
    try:
        session.run(
            str(venv / "bin" / "python"),
            *("-m", "pytest", "-p", "accelenv.results.plugin", "-o", "filterwarnings=default", *tests),
            *session.posargs,
            env={"ACCELENV_ENV": env.id, "ACCELENV_RESULTS": str(records)},
            external=True,
        )
    finally:
        line = record_line(session.name, env.id, records, began)
        if line and on_closing_line is not None:
            on_closing_line(f"{line}; ran {ran}")
