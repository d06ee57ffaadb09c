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
from accelenv.plan.lock import OsLock, OsPackage, os_lock_path, render_os_lock
from accelenv.plan.readiness import blocker, blockers, platform_blockers
from accelenv.plan.render import os_packages

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


def test_a_platform_without_its_os_lock_is_not_scheduled_there_and_named(tmp_path: Path) -> None:
    """An environment whose linux/amd64 image can be built but whose arm64 OS-package lock is missing runs its
    amd64 job only; the arm64 one is named with the command that makes its lock."""
    env = SHIPPED.envs["gpu-nvidia-cu132"]
    assert "linux/arm64" in env.platforms
    repo = _tree(tmp_path, env.id)
    image = SHIPPED.runtimes[env.runtime].base_images[env.os]
    packages = os_packages(SHIPPED, env)
    assert packages  # the CUDA base lacks the environment's Python: its image needs an OS-package lock
    debs = tuple(
        OsPackage(name=p, version="1", architecture="amd64", size=1, sha256="0" * 64, url=f"http://x/{p}.deb")
        for p in packages
    )
    lock = OsLock(base=image.reference, pin="sha256:" + "c" * 64, architecture="amd64", packages=debs)
    os_lock_path(repo, env.id).write_text(render_os_lock(env.id, packages, lock))
    assert blocker(SHIPPED, env, repo) is None
    blocked = blockers(SHIPPED, repo)
    assert env.id not in blocked
    per_platform = platform_blockers(SHIPPED, repo, blocked)
    assert per_platform[env.id, "linux/arm64"] == (
        f"no OS-package lock (envs/{env.id}/os-packages.arm64.lock): its image cannot be built; run `accelenv lock "
        f"{env.id} --platform linux/arm64` where {image.reference} can be pulled, then commit it"
    )
    scheduled = jobs(SHIPPED, tier=CiTier.RELEASE, blocked=blocked, blocked_platforms=per_platform)
    assert [job.platform for job in scheduled if job.env == env.id] == ["linux/amd64"]
    skipped = not_scheduled(SHIPPED, tier=CiTier.RELEASE, blocked=blocked, blocked_platforms=per_platform)
    assert (f"{env.id} (linux/arm64)", per_platform[env.id, "linux/arm64"]) in skipped


def test_each_job_names_its_architecture_for_artifact_names(tmp_path: Path) -> None:
    rows = [
        job.as_github()
        for job in jobs(SHIPPED, tier=CiTier.PR, blocked=blockers(SHIPPED, _tree(tmp_path, "cpu-py311")))
    ]
    names = [f"accelenv-{row['env']}-{row['arch']}" for row in rows]
    assert names  # cpu-py311 on both platforms
    assert len(set(names)) == len(names)
    assert all("/" not in name for name in names)
