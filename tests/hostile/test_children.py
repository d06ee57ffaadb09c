"""Issue 28, hangs: every child process accelenv starts is in a group accelenv ends. A vendor tool's child that
calls setsid does not outlive the run; uv is ended with its group when accelenv times out or is stopped; and uv
never sees the machine's index settings (a lock is made only from the matrix's indexes).

Every process a test starts is ended by its id (the fixture below kills what it recorded)."""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hostilekit import tool

import accelenv
from accelenv.host.run import CHILD_MARKER, ToolRunner, run_in_group
from accelenv.plan.resolver import uv_environment

if TYPE_CHECKING:
    from collections.abc import Iterator


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:  # noqa: PTH123 - /proc by pid
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.fixture
def started() -> Iterator[list[int]]:
    """Ids of processes a test learns about; whatever is still alive at the end is killed by id."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _gone(pid: int, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_a_setsid_daemon_of_a_tool_does_not_outlive_the_run(tmp_path: Path, started: list[int]) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "nvidia-smi", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!; exit 0")
    result = ToolRunner(path=f"{bin_dir}:/usr/bin:/bin", timeout=10).run(["nvidia-smi"])
    pid = int(result.stdout.strip())
    started.append(pid)
    assert _gone(pid), "the setsid child outlived the tool run"


def test_a_hanging_tool_and_its_setsid_child_end_at_the_timeout(tmp_path: Path, started: list[int]) -> None:
    bin_dir = tmp_path / "bin"
    pid_file = tmp_path / "pid"
    tool(bin_dir, "rocm-smi", f"setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {pid_file}; sleep 300")
    result = ToolRunner(path=f"{bin_dir}:/usr/bin:/bin", timeout=1).run(["rocm-smi"])
    assert result.fault == "rocm-smi did not finish within 1 s"
    pid = int(pid_file.read_text())
    started.append(pid)
    assert _gone(pid)


def test_run_in_group_ends_the_group_on_a_timeout(tmp_path: Path, started: list[int]) -> None:
    pid_file = tmp_path / "pid"
    with pytest.raises(subprocess.TimeoutExpired):
        run_in_group(["/bin/sh", "-c", f"sleep 300 & echo $! > {pid_file}; wait"], input_text="", timeout=1)
    pid = int(pid_file.read_text())
    started.append(pid)
    assert _gone(pid)


def test_sigterm_during_a_resolution_ends_the_resolver(tmp_path: Path, started: list[int]) -> None:
    """A fake `uv` that hangs: SIGTERM to accelenv (mid-`lock`) ends accelenv and the fake uv's group."""
    pid_file = tmp_path / "uv.pid"
    script = (
        "import sys\n"
        "from accelenv.host.run import run_in_group\n"
        "from accelenv.cli import _terminate_as_interrupt\n"
        "_terminate_as_interrupt()\n"
        f"run_in_group(['/bin/sh', '-c', 'sleep 300 & echo $! > {pid_file}; wait'], input_text='', timeout=300)\n"
    )
    tools = str(Path(accelenv.__file__).parent.parent)
    proc = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": tools})
    started.append(proc.pid)
    end = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < end:
        time.sleep(0.05)
    child = int(pid_file.read_text())
    started.append(child)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)
    assert _gone(child), "uv's group outlived accelenv"


def test_uv_does_not_see_the_machines_index_settings() -> None:
    environ = {
        "UV_INDEX": "http://127.0.0.1:1/evil",
        "UV_EXTRA_INDEX_URL": "http://127.0.0.1:1/evil",
        "UV_INDEX_URL": "http://127.0.0.1:1/evil",
        "UV_DEFAULT_INDEX": "http://127.0.0.1:1/evil",
        "PIP_INDEX_URL": "http://127.0.0.1:1/evil",
        "PIP_EXTRA_INDEX_URL": "http://127.0.0.1:1/evil",
        "UV_CACHE_DIR": "/tmp/cache",
        "PATH": "/usr/bin",
    }
    assert uv_environment(environ) == {"UV_CACHE_DIR": "/tmp/cache", "PATH": "/usr/bin", "UV_NO_CONFIG": "1"}


def test_the_child_marker_is_set_for_every_child(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "hl-smi", f'echo "${CHILD_MARKER}"')
    result = ToolRunner(path=f"{bin_dir}:/usr/bin:/bin").run(["hl-smi"])
    assert len(result.stdout.strip()) == 16
    answer = run_in_group(["/bin/sh", "-c", f'echo "${CHILD_MARKER}"'], input_text="", timeout=10)
    assert len(answer.stdout.strip()) == 16


# ---------------------------------------------------------------------------------------------------- enumeration

_STARTERS = frozenset(
    {
        "subprocess.run",
        "subprocess.Popen",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "os.system",
        "os.popen",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.posix_spawnp",
        *(f"os.{name}" for name in ("execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe")),
        *(f"os.{name}" for name in ("spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle")),
    }
)


def _starts(tree: ast.AST) -> list[tuple[str, int]]:
    """Every call in `tree` that starts a process by itself: `module.function(...)` of `_STARTERS`, and the same
    names imported on their own (`from subprocess import run`)."""
    imported = {
        alias.asname or alias.name: f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in ("subprocess", "os")
        for alias in node.names
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            name = f"{func.value.id}.{func.attr}"
        elif isinstance(func, ast.Name):
            name = imported.get(func.id, "")
        else:
            continue
        if name in _STARTERS:
            found.append((name, node.lineno))
    return found


def test_every_child_process_starts_in_host_run() -> None:
    """Enumerates every call in the package that starts a process: only host/run.py may (ToolRunner for vendor
    tools, run_in_group for the rest), so every child is in a group accelenv ends on a timeout, SIGTERM or
    Ctrl-C, with the marker its setsid daemons are found by."""
    package = Path(accelenv.__file__).parent
    offenders = [
        f"{source.relative_to(package)}:{line}: {name}"
        for source in sorted(package.rglob("*.py"))
        if source.relative_to(package).as_posix() != "host/run.py"
        for name, line in _starts(ast.parse(source.read_text(encoding="utf-8")))
    ]
    assert offenders == [], "start it through accelenv.host.run (run_in_group or ToolRunner):\n" + "\n".join(offenders)


def test_the_enumeration_sees_a_start() -> None:
    """The check above can fail: a module that starts a process by itself is found, however it imports."""
    tree = ast.parse(
        "import os, subprocess\nfrom subprocess import check_output as co\nsubprocess.run(['x'])\nco(['y'])\n"
        "os.system('z')\nos.execvp('a', ['a'])\nsubprocess.TimeoutExpired\nprocess.run()\n"
    )
    assert sorted(name for name, _ in _starts(tree)) == [
        "os.execvp",
        "os.system",
        "subprocess.check_output",
        "subprocess.run",
    ]
    assert _starts(ast.parse("import host\nhost.run(['x'])\n")) == []
