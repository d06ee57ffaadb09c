"""`nox -s cpu` for real: the host check, the hash-locked install, the device tests; and a broken install caught.

This installs the cpu environment's lock (Ray and its dependencies) from PyPI into a throwaway nox folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelenv.plan.interpreters import find_interpreter

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def nox(*args: str, envdir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ACCELENV_ENV", "VIRTUAL_ENV")}
    return subprocess.run(
        [sys.executable, "-m", "nox", "--envdir", str(envdir), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=1200,
        check=False,
    )


def test_nox_lists_sessions_from_the_matrix(tmp_path: Path) -> None:
    result = nox("-l", envdir=tmp_path)
    assert result.returncode == 0, result.stderr
    for name in ("cpu", "gpu-nvidia", "gpu-amd", "tpu", "neuron", "gaudi", "gpu-nvidia-cu126"):
        assert f"- {name} -> " in result.stdout


@pytest.mark.parametrize("family", ["gpu-nvidia", "gpu-amd", "tpu", "neuron", "gaudi"])
def test_a_family_session_gets_to_the_host_check_and_stops_there(tmp_path: Path, family: str) -> None:
    """From a fresh clone on a machine without the devices (and without the environment's Python): no missing
    lock, no missing interpreter, but the host check's verdict with its fix."""
    result = nox("-s", family, envdir=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "has no lock file" not in output
    assert "Python interpreter" not in output
    assert "--host-only" in output
    assert "FAIL  hardware.present" in output, output[-3000:]
    assert "fix: run on a host with" in output


def test_cpu_session_passes_and_a_broken_pin_fails_it(tmp_path: Path) -> None:
    # the cpu environment of a Python this machine has: cpu-py311 where 3.11 is, else cpu-py312
    env_id, version = ("cpu-py311", "3.11") if find_interpreter("3.11") else ("cpu-py312", "3.12")
    result = nox("-s", "cpu", envdir=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert f"accelenv check {env_id} --host-only" in output
    assert "verdict: pass" in output
    assert "1 passed" in output  # tests/devices/test_cpu_devices.py: Ray on CPU
    # the environment's venv, beside the session's: nox names the session's folder by a hash of its name where the
    # envdir's path is long (a shebang has a length limit), so the folder is found by its -py<version> suffix
    [python] = tmp_path.glob(f"*-py{version}/bin/python")
    subprocess.run(
        [sys.executable, "-m", "uv", "pip", "install", "--python", str(python), "pytest==9.1.1"],
        check=True,
        capture_output=True,
    )
    broken = nox("-s", "cpu", "-R", envdir=tmp_path)  # reuse the venv, skip the installs
    output = broken.stdout + broken.stderr
    assert broken.returncode != 0
    assert f"FAIL  requirements.pytest          pytest 9.1.1 is installed, {env_id} pins 9.2.0" in output
