"""The CPU conformance run as CI does it: a virtualenv from the cpu environment's lock (uv, hash-checked), torch
for the CPU beside it (the cpu environment pins none, so the record names it as differing), and the device suite
run there with the result-record plugin. The JAX path runs the same way, with the JAX of the TPU environment for
this Python instead of torch. Shared by tests/integration and benchmarks/."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENV = "cpu-py311"
CONFORMANCE = [
    "tests/devices/test_conformance_distributed.py",
    "tests/devices/test_conformance_recovery.py",
    "tests/devices/test_conformance_perf.py",
]
BASIC = ["tests/devices/test_cpu_devices.py"]
RDT = ["tests/devices/test_conformance_rdt.py"]  # its own run: Ray 2.60.0's known defects fail two of its tests
JAX_CONFORMANCE = ["tests/devices/test_conformance_jax.py"]
JAX_ENVS = ("tpu-jax-0-10-py311", "tpu-jax-0-12")  # the TPU environments, by the Python they are for


def uv() -> str:
    from uv import find_uv_bin

    return str(find_uv_bin())


def torch_wheel() -> str | None:
    """A torch CPU wheel for this Python: $ACCELENV_CPU_TORCH_WHEEL, or the one the machine keeps in /opt/wheels."""
    named = os.environ.get("ACCELENV_CPU_TORCH_WHEEL")
    if named:
        return named
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    found = sorted(Path("/opt/wheels").glob(f"torch-*+cpu-{tag}-{tag}-*.whl"))
    return str(found[-1]) if found else None


def build_venv(venv: Path, wheel: str, *, timeout: float = 900) -> Path:
    """The venv's python, with the cpu lock, torch from `wheel`, numpy, and this checkout of accelenv."""
    return _build(venv, [wheel, "numpy"], timeout=timeout)


def jax_pins() -> list[str]:
    """The jax and jaxlib pins of the TPU environment for this Python (its libtpu is for TPU hosts only)."""
    from accelenv.matrix import find_matrix, load_matrix

    matrix = load_matrix(find_matrix(None, start=REPO))
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    env = next((matrix.envs[e] for e in JAX_ENVS if e in matrix.envs and matrix.envs[e].python == python), None)
    if env is None:
        raise LookupError(f"no TPU environment of {', '.join(JAX_ENVS)} is for Python {python}")
    return [str(r) for r in env.requirements.packages if r.name in ("jax", "jaxlib")]


def build_jax_venv(venv: Path, *, timeout: float = 900) -> Path:
    """The venv's python, with the cpu lock, the TPU environment's jax and jaxlib, and this checkout of accelenv."""
    return _build(venv, jax_pins(), timeout=timeout)


def _build(venv: Path, framework: list[str], *, timeout: float) -> Path:
    python = venv / "bin" / "python"
    lock = REPO / "envs" / ENV / "requirements.lock"
    steps = [
        [uv(), "venv", "--quiet", "--python", sys.executable, str(venv)],
        [uv(), "pip", "install", "--quiet", "--python", str(python), "--require-hashes", "-r", str(lock)],
        [uv(), "pip", "install", "--quiet", "--python", str(python), *framework],
        [uv(), "pip", "install", "--quiet", "--python", str(python), "--no-deps", "-e", str(REPO)],
    ]
    for step in steps:
        subprocess.run(step, check=True, timeout=timeout, capture_output=True)
    return python


def run_suite(
    python: Path, results: Path, tests: list[str], *, timeout: float = 1500
) -> subprocess.CompletedProcess[str]:
    # Ray's files (its session folders, the address file) under the test's folder, not in the machine's /tmp/ray;
    # short, for Ray's unix socket paths (107 bytes at most)
    ray_tmp = Path(tempfile.mkdtemp(prefix="ar-", dir="/tmp"))
    (ray_tmp / "ray").mkdir()
    environ = {
        **os.environ,
        "ACCELENV_ENV": ENV,
        "ACCELENV_RESULTS": str(results),
        "PYTHONPATH": "",
        "RAY_TMPDIR": str(ray_tmp),
        # the cluster's logs stay beside the results (pytest keeps the last runs' folders), for a failure to be read
        "ACCELENV_KEEP_RAY_LOGS": str(results.parent / "ray-logs"),
    }
    environ.pop("RAY_ADDRESS", None)
    command = [
        str(python),
        "-m",
        "pytest",
        "-p",
        "accelenv.results.plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "-o",
        "filterwarnings=default",
        *tests,
    ]
    try:
        return subprocess.run(
            command, cwd=REPO, env=environ, capture_output=True, text=True, timeout=timeout, check=False
        )
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
