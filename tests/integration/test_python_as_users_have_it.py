"""The Quick start on a machine whose only Python is 3.11 (Debian 12) and on one whose only Python is 3.12 (Ubuntu
24.04): PATH holds that one `python3.X` (and every other tool of /usr/bin and /bin, no other Python), HOME is
empty (no pyenv, no uv interpreters), and nox is installed with that Python, as `pip install nox` would. Then
`nox -s cpu` runs the cpu environment of that Python, and `nox -s tests` runs on it.

Needs PyPI (nox, uv and the cpu lock are installed from it) and both interpreters somewhere on this machine
(found as sessions find them: PATH, pyenv, uv).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from accelenv.plan.interpreters import find_interpreter

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
NOT_COPIED = ("python", "pydoc", "pip", "2to3", "idle")


def _machine(tmp_path: Path, version: str) -> tuple[Path, dict[str, str]]:
    """A nox installed with Python `version`, and an environment in which that is the only Python."""
    python = find_interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine to play the part of the only one")
    only, tools = tmp_path / "only-python", tmp_path / "tools"
    only.mkdir()
    tools.mkdir()
    real = Path(python).resolve()  # the interpreter itself, not a virtualenv's link to it
    for name in (f"python{version}", "python3", "python"):
        (only / name).symlink_to(real)
    for folder in ("/usr/bin", "/bin"):
        for entry in sorted(Path(folder).iterdir()):
            if not entry.name.startswith(NOT_COPIED) and not (tools / entry.name).exists():
                (tools / entry.name).symlink_to(entry)
    venv = tmp_path / "nox-venv"
    uv = [sys.executable, "-m", "uv"]
    subprocess.run([*uv, "venv", "--quiet", "--python", str(real), str(venv)], check=True, timeout=300)
    subprocess.run(
        [*uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), "nox", "uv"],
        check=True,
        timeout=900,
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYENV", "VIRTUAL_ENV", "ACCELENV_", "CI"))}
    home = tmp_path / "home"
    home.mkdir()
    environ |= {"PATH": f"{only}{os.pathsep}{tools}", "HOME": str(home)}
    environ.setdefault("UV_CACHE_DIR", str(Path.home() / ".cache" / "uv"))  # the real home's cache: no re-downloads
    return venv / "bin" / "nox", environ


def _nox(nox: Path, environ: dict[str, str], envdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(nox), "--envdir", str(envdir), *args],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


@pytest.mark.parametrize(("version", "env_id"), [("3.11", "cpu-py311"), ("3.12", "cpu-py312")])
def test_the_quick_start_works_with_only_one_python(tmp_path: Path, version: str, env_id: str) -> None:
    nox, environ = _machine(tmp_path, version)
    result = _nox(nox, environ, tmp_path / "envs", "-s", "cpu")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert f"accelenv check {env_id} --host-only" in output
    assert f"platform linux -- Python {version}." in output
    assert "1 passed" in output
    assert "Python interpreter" not in output  # nox found nothing missing

    result = _nox(nox, environ, tmp_path / "envs", "-s", "tests", "--", "tests/unit/test_device_session.py")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert f"platform linux -- Python {version}." in output
    assert re.search(r"\b\d+ passed\b", output), output[-4000:]
    assert " failed" not in output
