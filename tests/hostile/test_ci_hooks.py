"""The gate a node runs before every CI job (`accelenv hook`), run against captured hosts that pass, drift and
fail: a drifted node refuses the job with the findings and exit status 75, and a step cannot switch the gate off
with its own PATH, PYTHONPATH, matrix or root, because the hook runs the node's pinned accelenv in an emptied
environment, never the checkout's."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from hostilekit import REPO, tool

from accelenv.cli import main
from accelenv.plan.ci_hooks import GATE_EXIT

if TYPE_CHECKING:
    from pathlib import Path

PINNED = f"{os.path.abspath(sys.executable)} -m accelenv"  # noqa: PTH100 - the venv's python, not its target


def host(tmp_path: Path, arch: str | None) -> Path:
    """A captured host whose CPU architecture is `arch` (None: a host that reports none)."""
    root = tmp_path / f"host-{arch}"
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    if arch:
        (root / "proc" / "sys" / "kernel" / "arch").write_text(arch + "\n")
    return root


def make_hook(tmp_path: Path, system: str, root: Path, *extra: str) -> Path:
    target = tmp_path / f"{system}-{root.name}.sh"
    args = ["--matrix", str(REPO / "matrix.toml"), "hook", "--system", system, "--accelenv", PINNED]
    assert main([*args, "--root", str(root), "-o", str(target), *extra]) == 0
    return target


def run_hook(path: Path, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """As each system runs it: GitHub with `bash -e FILE` ("Running scripts before or after a job"), Buildkite as
    an executable hook."""
    argv = ["/bin/bash", "-e", str(path)] if path.name.startswith("github") else [str(path)]
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    ("arch", "code", "says"),
    [
        ("x86_64", 0, "accelenv gate: this node passes cpu-py311"),
        ("riscv64", GATE_EXIT, "expected aarch64 or x86_64; found riscv64"),  # drifted: another machine
        (None, GATE_EXIT, "expected aarch64 or x86_64; found unknown"),  # failing: it reports nothing
    ],
)
@pytest.mark.parametrize("system", ["github", "buildkite"])
def test_the_gate_passes_a_good_node_and_refuses_a_drifted_one(
    tmp_path: Path, system: str, arch: str | None, code: int, says: str
) -> None:
    hook = make_hook(tmp_path, system, host(tmp_path, arch), "--env", "cpu-py311")
    env = {"PATH": "/usr/bin:/bin", "ACCELENV_ENV": "cpu-py311"}
    result = run_hook(hook, env, tmp_path)
    assert result.returncode == code, result.stdout + result.stderr
    assert says in result.stdout
    if code:
        assert "this node no longer passes accelenv check for cpu-py311: the job is refused" in result.stdout
        assert "take the node out of rotation" in result.stdout
        assert "fix: use a host of aarch64 or x86_64" in result.stdout


def test_a_step_cannot_switch_the_gate_off(tmp_path: Path) -> None:
    """The checkout's accelenv on PATH passes everything; ACCELENV_MATRIX, PYTHONPATH and ACCELENV_ROOT point
    elsewhere: the hook still runs the pinned accelenv on the node's matrix, and refuses."""
    hook = make_hook(tmp_path, "buildkite", host(tmp_path, "riscv64"))
    fake = tmp_path / "checkout" / "bin"
    tool(fake, "accelenv", "echo verdict: pass; exit 0")
    tool(fake, "env", "exit 0")
    tool(fake, "python3", "exit 0")
    env = {
        "PATH": f"{fake}:/usr/bin:/bin",
        "ACCELENV_ENV": "cpu-py311",
        "ACCELENV_MATRIX": "/nonexistent/matrix.toml",
        "ACCELENV_ROOT": str(host(tmp_path, "x86_64")),
        "PYTHONPATH": str(fake),
    }
    result = run_hook(hook, env, tmp_path / "checkout")
    assert result.returncode == GATE_EXIT, result.stdout + result.stderr
    assert "found riscv64" in result.stdout


def test_an_unsafe_environment_name_is_refused_before_anything_runs(tmp_path: Path) -> None:
    hook = make_hook(tmp_path, "buildkite", host(tmp_path, "x86_64"))
    marker = tmp_path / "ran"
    result = run_hook(hook, {"PATH": "/usr/bin:/bin", "ACCELENV_ENV": f"cpu;touch {marker}"}, tmp_path)
    assert result.returncode == GATE_EXIT
    assert "ACCELENV_ENV is not an environment id" in result.stdout
    assert not marker.exists()
    quiet = run_hook(hook, {"PATH": "/usr/bin:/bin"}, tmp_path)  # a step of no environment (the judge)
    assert (quiet.returncode, quiet.stdout.strip()) == (
        0,
        "accelenv gate: this step names no environment (ACCELENV_ENV): nothing to check",
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--system", "github"], "a GitHub runner's hook needs --env ENV"),
        (["--system", "github", "--env", "nope"], "--env 'nope': not an environment of"),
        (["--system", "buildkite", "--accelenv", "accelenv"], "give absolute paths"),
        (["--system", "buildkite", "--matrix-path", "matrix.toml"], "give the node's own matrix.toml as an absolute"),
        (["--system", "github", "--env", "cpu-py311", "-o", "/nonexistent/hook"], "name it *.sh"),
    ],
)
def test_a_hook_that_would_not_be_pinned_is_refused(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--matrix", str(REPO / "matrix.toml"), "hook", *args]) == 2
    assert says in capsys.readouterr().err
