"""Issue 41, hangs: a tool's descendant that leaves its process group with `setsid` and clears its environment (so
the ACCELENV_CHILD marker is gone too) does not outlive the run: it is reparented to accelenv while the tool runs
(host/reaper.py) and ended. Each daemon here is our own `sleep`, whose pid the tool writes to a file."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING

import pytest
from hostilekit import accelenv, tool

from accelenv.host.run import ToolRunner

if TYPE_CHECKING:
    from pathlib import Path

DAEMONS = {
    "env -i, setsid": 'env -i setsid sleep 300 >/dev/null 2>&1 </dev/null & echo $! > "{pids}/a"',
    "env -i, setsid, two levels": "(env -i setsid sh -c 'sleep 300 & echo $! > \"{pids}/b\"; wait' "
    ">/dev/null 2>&1 </dev/null &)",
    "marker removed": 'env -u ACCELENV_CHILD setsid sleep 300 >/dev/null 2>&1 </dev/null & echo $! > "{pids}/c"',
}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:  # noqa: PTH123
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _left(pids: Path) -> list[int]:
    time.sleep(0.5)  # a daemon writes its pid as it starts
    found = [int(p.read_text()) for p in pids.iterdir() if p.read_text().strip()]
    alive = [pid for pid in found if _alive(pid)]
    for pid in alive:  # ours: the test's own sleeps, ended so none outlives the test either way
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return alive


@pytest.mark.parametrize("body", DAEMONS.values(), ids=DAEMONS.keys())
def test_a_daemon_that_clears_its_environment_does_not_outlive_the_tool(tmp_path: Path, body: str) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "hl-smi", body.format(pids=pids) + "\nsleep 0.3\necho done")
    result = ToolRunner(timeout=10, path=f"{bin_dir}:/usr/bin:/bin").run(["hl-smi"])
    assert result.ok, result
    assert _left(pids) == []


def test_inspect_leaves_no_daemon_behind(tmp_path: Path, matrix: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "nvidia-smi", DAEMONS["env -i, setsid"].format(pids=pids) + "\necho 'NVIDIA-SMI has failed'\nexit 9")
    (tmp_path / "host").mkdir()
    result = accelenv(
        "--matrix", str(matrix), "inspect", "--root", str(tmp_path / "host"), env={"PATH": f"{bin_dir}:/usr/bin:/bin"}
    )
    assert result.returncode == 0, result.stderr
    assert list(pids.iterdir())  # the tool ran and started its daemon
    assert _left(pids) == []
