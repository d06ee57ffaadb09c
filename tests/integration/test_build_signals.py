"""SIGTERM during `accelenv build` cleans up as Ctrl-C does: no tag, the temporary build context removed, exit 130.

`accelenv build` runs as a process of its own on the local test matrix (tests/support/localmatrix.py), with its
temporary folder (TMPDIR) one of the test's, so what it leaves there can be seen. Once the engine reports the
first build step, SIGTERM goes to that process alone, by its pid. `--no-cache` keeps the build running long
enough for the signal to land during it.
Under CI=true a missing engine or base image fails this test instead of skipping it.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from localmatrix import local_matrix

from accelenv.cli import main

if TYPE_CHECKING:
    from accelenv.build.engine import DockerEngine

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
STARTUP = 600.0  # locked wheels and .debs are fetched on the host before the engine's first step


def wait_for(process: subprocess.Popen[str], needle: str, deadline: float) -> list[str]:
    """The lines `process` printed up to the first that contains `needle`; fails at the deadline or at its end."""
    assert process.stdout is not None
    seen: list[str] = []
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=max(0.0, deadline - time.monotonic())):
                continue
            line = process.stdout.readline()
            if not line:
                pytest.fail(f"accelenv build ended (rc {process.wait(timeout=30)}) before {needle!r}:\n{''.join(seen)}")
            seen.append(line)
            if needle in line:
                return seen
    pytest.fail(f"no {needle!r} from accelenv build in {STARTUP:.0f}s:\n{''.join(seen)}")


def test_sigterm_during_a_build_leaves_no_tag_and_no_context(
    engine: DockerEngine, repository: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = local_matrix(tmp_path / "repo" / "matrix.toml", {"ci-image": ["six==1.17.0"]}, runtime="ci-bookworm")
    assert main(["--matrix", str(matrix), "lock", "ci-image"]) == 0
    capsys.readouterr()
    temp = tmp_path / "tmp"
    temp.mkdir()
    environment = {
        **os.environ,
        "PYTHONPATH": str(REPO / "tools"),
        "PYTHONUNBUFFERED": "1",
        "TMPDIR": str(temp),
    }
    command = [sys.executable, "-m", "accelenv", "--matrix", str(matrix), "build", "ci-image"]
    process = subprocess.Popen(
        [*command, "--repository", repository, "--no-cache"],
        cwd=tmp_path / "repo",
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        seen = wait_for(process, "] step ", time.monotonic() + STARTUP)
        assert any("context ready" in line for line in seen), seen
        assert list(temp.glob("accelenv-ci-image-*")), "the build context is not in TMPDIR while it builds"
        os.kill(process.pid, signal.SIGTERM)
        rest, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)
    output = "".join(seen) + rest
    assert process.returncode == 130, output
    assert "accelenv: interrupted" in output
    assert engine.tags(repository) == []  # neither the content tag nor the human tag
    assert list(temp.iterdir()) == []  # the temporary build context (accelenv-ci-image-*) is gone, and all else
    log = (tmp_path / "repo" / ".accelenv" / "build-logs" / "ci-image.log").read_text(encoding="utf-8")
    assert log.rstrip().endswith("FAILED: interrupted")
