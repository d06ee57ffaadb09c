"""`accelenv ci` schedules only what can run: an environment without a current lock, or whose image needs an
OS-package lock it lacks, is left out of the jobs and named, with the command that fixes it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from accelenv.cli import main
from accelenv.matrix import load_matrix
from accelenv.matrix.model import CiTier
from accelenv.plan.ci import buildkite, jobs, not_scheduled
from accelenv.plan.readiness import blocker, blockers

if TYPE_CHECKING:
    import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = load_matrix(REPO / "matrix.toml")


def _tree(tmp_path: Path, *envs: str) -> Path:
    """A working tree with the shipped matrix and the committed files of `envs` only."""
    shutil.copy(REPO / "matrix.toml", tmp_path / "matrix.toml")
    for env_id in envs:
        shutil.copytree(REPO / "envs" / env_id, tmp_path / "envs" / env_id)
    return tmp_path


def test_what_cannot_run_says_why_and_what_to_run(tmp_path: Path) -> None:
    repo = _tree(tmp_path, "cpu-py311", "gaudi-1-24")
    assert blocker(SHIPPED, SHIPPED.envs["cpu-py311"], repo) is None
    assert blocker(SHIPPED, SHIPPED.envs["tpu-jax-0-12"], repo) == (
        "no lock file (envs/tpu-jax-0-12/requirements.lock): nothing to install; run `accelenv lock tpu-jax-0-12` "
        "where its indexes are reachable, then commit it"
    )
    (repo / "envs" / "gaudi-1-24" / "os-packages.lock").unlink(missing_ok=True)
    assert blocker(SHIPPED, SHIPPED.envs["gaudi-1-24"], repo) == (
        "no OS-package lock (envs/gaudi-1-24/os-packages.lock): its image cannot be built; run `accelenv lock "
        "gaudi-1-24` where vault.habana.ai/gaudi-docker/1.24.1/ubuntu24.04/habanalabs/pytorch-installer-2.11.0:latest "
        "can be pulled, then commit it"
    )
    lock = repo / "envs" / "cpu-py311" / "requirements.lock"
    lock.write_text(lock.read_text().replace("accelenv-lock-input: sha256:", "accelenv-lock-input: sha256:0"))
    assert str(blocker(SHIPPED, SHIPPED.envs["cpu-py311"], repo)).startswith("a stale lock (envs/cpu-py311/")


def test_blocked_environments_are_not_scheduled_but_named(tmp_path: Path) -> None:
    blocked = blockers(SHIPPED, _tree(tmp_path, "cpu-py311"))
    assert "cpu-py311" not in blocked
    assert "cpu-py312" in blocked
    scheduled = [(job.env, job.platform) for job in jobs(SHIPPED, tier=CiTier.PR, blocked=blocked)]
    # the pr tier's others (cpu-py312, gpu-nvidia-cu132) have nothing to run; cpu-py311 runs on both platforms
    assert scheduled == [("cpu-py311", "linux/amd64"), ("cpu-py311", "linux/arm64")]
    skipped = not_scheduled(SHIPPED, tier=CiTier.PR, blocked=blocked)
    assert [env for env, _ in skipped] == ["cpu-py312", "gpu-nvidia-cu132"]
    pipeline = buildkite(jobs(SHIPPED, tier=CiTier.PR, blocked=blocked), skipped)
    assert '  - label: ":warning: cpu-py312 not scheduled"\n' in pipeline
    assert pipeline.count("    soft_fail: true\n") == 2
    assert 'command: "nox -s cpu-py312"' not in pipeline


def test_ci_prints_the_jobs_on_stdout_and_what_is_not_scheduled_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = _tree(tmp_path, "cpu-py311")
    assert main(["--matrix", str(repo / "matrix.toml"), "ci", "--format", "github", "--tier", "pr"]) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)["include"]
    assert [(row["env"], row["platform"]) for row in rows] == [
        ("cpu-py311", "linux/amd64"),
        ("cpu-py311", "linux/arm64"),
    ]
    assert err.splitlines()[0] == (
        "accelenv ci: cpu-py312 not scheduled: no lock file (envs/cpu-py312/requirements.lock): nothing to install; "
        "run `accelenv lock cpu-py312` where its indexes are reachable, then commit it"
    )
