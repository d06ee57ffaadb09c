"""The README's Quick start, exactly as written, from a system Python under PEP 668 (Debian 12's /usr/bin/python3
is one): its `sh quick-start` lines, then its `sh install-accelenv` lines, each run with bash in a copy of the
repository, with PATH holding that Python (as python3 and python3.X) and the machine's other tools, and HOME
empty. First it is shown that this Python refuses `python3 -m pip install nox` (externally-managed-environment),
the line the Quick start used to begin with.

Needs PyPI (nox, the cpu lock and accelenv's dependencies are installed from it) and a system Python marked
EXTERNALLY-MANAGED; the cpu session takes a minute or two.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from repocopy import copy_repository

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = Path(os.environ.get("ACCELENV_PEP668_PYTHON", "/usr/bin/python3"))
NOT_COPIED = ("python", "pydoc", "pip", "2to3", "idle", "nox", "uv", "accelenv")


def block(name: str) -> list[str]:
    """The lines of the README's ```sh NAME block, comments and all (bash ignores them)."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(f"```sh {name}") + 1
    return lines[start : lines.index("```", start)]


def externally_managed(python: Path) -> bool:
    stdlib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    return (Path(stdlib) / "EXTERNALLY-MANAGED").is_file()


def machine(tmp_path: Path) -> dict[str, str]:
    """PATH with the system Python as its only Python, and the machine's other tools; an empty HOME."""
    version = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    only, tools, home = tmp_path / "only-python", tmp_path / "tools", tmp_path / "home"
    for folder in (only, tools, home):
        folder.mkdir()
    for name in (f"python{version}", "python3"):
        (only / name).symlink_to(SYSTEM_PYTHON.resolve())
    for system in ("/usr/bin", "/bin"):
        for entry in sorted(Path(system).iterdir()):
            if not entry.name.startswith(NOT_COPIED) and not (tools / entry.name).exists():
                (tools / entry.name).symlink_to(entry)
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PYENV", "VIRTUAL_ENV", "ACCELENV_", "CI"))}
    environ |= {"PATH": f"{home / '.local' / 'bin'}{os.pathsep}{only}{os.pathsep}{tools}", "HOME": str(home)}
    environ.setdefault("UV_CACHE_DIR", str(Path.home() / ".cache" / "uv"))  # the real home's cache: no re-downloads
    environ.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    return environ


def bash(line: str, cwd: Path, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=environ, capture_output=True, text=True, timeout=1800, check=False
    )


@pytest.mark.heavy(seconds=35)
def test_the_quick_start_runs_as_written_from_a_pep_668_python(tmp_path: Path) -> None:
    if not SYSTEM_PYTHON.exists() or not externally_managed(SYSTEM_PYTHON):
        pytest.skip(f"{SYSTEM_PYTHON} is not an externally managed (PEP 668) Python: not the case this test is for")
    environ = machine(tmp_path)
    copy = tmp_path / "repo"
    copy_repository(REPO, copy)

    refused = bash("python3 -m pip install nox", copy, environ)
    assert refused.returncode != 0
    assert "externally-managed-environment" in refused.stdout + refused.stderr or "No module named pip" in (
        refused.stderr
    )

    quick = block("quick-start")
    assert [line.split()[0] for line in quick] == ["python3", ".venv/bin/nox"]
    for line in quick:
        result = bash(line, copy, environ)
        said = (result.stdout + result.stderr)[-4000:]
        assert result.returncode == 0, f"`{line}`:\n{said}"
    assert "accelenv check cpu-py3" in said  # the cpu session checked the host, then ran its device tests
    assert " passed" in said

    for line in block("install-accelenv"):
        result = bash(line, copy, environ)
        assert result.returncode == 0, f"`{line}`:\n{result.stdout[-2000:]}{result.stderr[-2000:]}"
    installed = bash("cd / && accelenv --matrix " + str(copy / "matrix.toml") + " which --all", copy, environ)
    assert installed.returncode == 0, installed.stderr[-2000:]
    assert installed.stdout.startswith("judged: host (root /) and each environment's own interpreter")
