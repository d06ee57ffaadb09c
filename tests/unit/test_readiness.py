"""`accelenv ci` schedules everything that can run, and says loudly what cannot: a session whose framework comes
from its lock runs without its image; an image or a session that cannot run is named with the command that fixes
it; a default environment with no session is an error unless the matrix records why (`ci_unschedulable`)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from accelenv.cli import main
from accelenv.matrix import load_matrix, validate_text
from accelenv.matrix.model import CiTier
from accelenv.plan.ci import plan
from accelenv.plan.ci_outputs import buildkite, summary, text
from accelenv.plan.lock import OsLock, OsPackage, os_lock_path, render_os_lock
from accelenv.plan.readiness import readiness
from accelenv.plan.render import os_packages

if TYPE_CHECKING:
    import pytest

REPO = Path(__file__).resolve().parents[2]
SHIPPED = load_matrix(REPO / "matrix.toml")
MATRIX_TEXT = (REPO / "matrix.toml").read_text(encoding="utf-8")
RECORDED = 'ci_unschedulable = "no OS-package lock yet'


def _tree(tmp_path: Path, *envs: str, matrix_text: str = MATRIX_TEXT) -> Path:
    """A working tree with the shipped matrix (or `matrix_text`) and the committed files of `envs` only."""
    (tmp_path / "matrix.toml").write_text(matrix_text, encoding="utf-8")
    for env_id in envs:
        shutil.copytree(REPO / "envs" / env_id, tmp_path / "envs" / env_id)
    return tmp_path


def _without_recorded_reason() -> str:
    lines = [line for line in MATRIX_TEXT.splitlines(keepends=True) if not line.startswith(RECORDED)]
    assert len(lines) == len(MATRIX_TEXT.splitlines()) - 1
    return "".join(lines)


def test_a_session_and_an_image_are_judged_apart(tmp_path: Path) -> None:
    repo = _tree(tmp_path, "cpu-py311", "gaudi-1-24", "gpu-nvidia-cu132")
    ready = readiness(SHIPPED, repo)
    assert ("cpu-py311", "linux/amd64") not in ready.sessions
    assert ("cpu-py311", "linux/amd64") not in ready.images
    no_lock = (
        "no lock file (envs/tpu-jax-0-12/requirements.lock): nothing to install; run `accelenv lock tpu-jax-0-12` "
        "where its indexes are reachable, then commit it"
    )
    assert ready.sessions["tpu-jax-0-12", "linux/amd64"] == ready.images["tpu-jax-0-12", "linux/amd64"] == no_lock
    # NVIDIA: the framework comes from the lock, so its session runs though its image cannot be built
    assert ("gpu-nvidia-cu132", "linux/amd64") not in ready.sessions
    assert ready.images["gpu-nvidia-cu132", "linux/amd64"].startswith(
        "no OS-package lock (envs/gpu-nvidia-cu132/os-packages.lock): its image cannot be built; run "
    )
    # Gaudi: the framework is the base image's, which cannot be built: neither runs
    image = (
        "no OS-package lock (envs/gaudi-1-24/os-packages.lock): its image cannot be built; run `accelenv lock "
        "gaudi-1-24` where vault.habana.ai/gaudi-docker/1.24.1/ubuntu24.04/habanalabs/pytorch-installer-2.11.0:latest "
        "can be pulled, then commit it"
    )
    assert ready.images["gaudi-1-24", "linux/amd64"] == image
    assert ready.sessions["gaudi-1-24", "linux/amd64"] == f"its framework comes from its base image, and {image}"
    lock = repo / "envs" / "cpu-py311" / "requirements.lock"
    lock.write_text(lock.read_text().replace("accelenv-lock-input: sha256:", "accelenv-lock-input: sha256:0"))
    assert readiness(SHIPPED, repo).sessions["cpu-py311", "linux/amd64"].startswith("a stale lock (envs/cpu-py311/")


def test_release_schedules_nvidia_without_its_image() -> None:
    """The shipped tree: gpu-nvidia-cu132 has its lock but no OS-package lock; its sessions (both platforms) are
    scheduled, its image jobs are named as not scheduled."""
    made = plan(SHIPPED, tier=CiTier.RELEASE, ready=readiness(SHIPPED, REPO))
    sessions = [(job.env, job.platform) for job in made.sessions if job.family == "nvidia"]
    assert sessions == [("gpu-nvidia-cu132", "linux/amd64"), ("gpu-nvidia-cu132", "linux/arm64")]
    assert [(u.kind, u.platform) for u in made.unscheduled if u.env == "gpu-nvidia-cu132"] == [
        ("image", "linux/amd64"),
        ("image", "linux/arm64"),
    ]
    assert made.errors == ()  # gaudi-1-24 cannot run, and the matrix says why


def test_an_nvidia_sku_change_yields_nvidia_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A vendor's pull request that adds an NVIDIA SKU to the default environment gets NVIDIA jobs."""
    before = MATRIX_TEXT.replace('"h200", "h200-nvl", "gh200"', '"h200", "gh200"', 1)
    assert before != MATRIX_TEXT
    base = tmp_path / "base-matrix.toml"
    base.write_text(before, encoding="utf-8")
    args = ["ci", "--format", "github", "--tier", "release", "--changed", "matrix.toml", "--base-matrix", str(base)]
    assert main(["--matrix", str(REPO / "matrix.toml"), *args]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {row["env"] for row in data["sessions"]["include"]} == {"gpu-nvidia-cu132"}
    assert (
        {row["artifact"] for row in data["sessions"]["include"]}
        == {e["artifact"] for e in data["expected"]}
        == {"accelenv-session-gpu-nvidia-cu132-amd64", "accelenv-session-gpu-nvidia-cu132-arm64"}
    )


def test_an_edited_sku_selects_its_familys_environments() -> None:
    from accelenv.records import replace

    sku = SHIPPED.skus["h200"]
    previous = replace(SHIPPED, skus={**SHIPPED.skus, "h200": replace(sku, memory_mib=(sku.memory_mib or 0) + 1)})
    made = plan(SHIPPED, tier=CiTier.RELEASE, changed=["matrix.toml"], previous=previous)
    assert {job.env for job in made.sessions} == {e.id for e in SHIPPED.envs.values() if e.family == "nvidia"}


def test_a_default_environment_that_cannot_run_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _tree(tmp_path, "cpu-py311")  # gpu-nvidia-cu132 (default, pr tier) has no lock here
    assert main(["--matrix", str(repo / "matrix.toml"), "ci", "--format", "github", "--tier", "pr"]) == 1
    out, err = capsys.readouterr()
    rows = json.loads(out)["sessions"]["include"]
    assert [(row["env"], row["platform"]) for row in rows] == [
        ("cpu-py311", "linux/amd64"),
        ("cpu-py311", "linux/arm64"),
    ]
    assert err.splitlines()[0] == (
        "accelenv ci: cpu-py312 session not scheduled: no lock file (envs/cpu-py312/requirements.lock): nothing to "
        "install; run `accelenv lock cpu-py312` where its indexes are reachable, then commit it"
    )
    assert err.splitlines()[-1] == (
        "accelenv ci: error: gpu-nvidia-cu132 is its family's default environment and CI can schedule no session "
        "of it; make it runnable (see why above), or record why it cannot run in matrix.toml: "
        'envs.gpu-nvidia-cu132.ci_unschedulable = "..."'
    )


def test_the_recorded_reason_is_what_keeps_release_green(tmp_path: Path) -> None:
    repo = _tree(
        tmp_path, *(p.name for p in (REPO / "envs").iterdir() if p.is_dir()), matrix_text=_without_recorded_reason()
    )
    matrix = load_matrix(repo / "matrix.toml")
    made = plan(matrix, tier=CiTier.RELEASE, ready=readiness(matrix, repo))
    assert [e.split(" ")[0] for e in made.errors] == ["gaudi-1-24"]
    shipped = plan(SHIPPED, tier=CiTier.RELEASE, ready=readiness(SHIPPED, REPO))
    recorded = SHIPPED.envs["gaudi-1-24"].ci_unschedulable
    assert recorded
    # the reason shows in the text output, the JSON, the run summary and the Buildkite pipeline
    assert f"(recorded: {recorded})" in text(shipped)
    assert f"(recorded: {recorded})" in summary(shipped)
    assert f"(recorded: {recorded})" in buildkite(shipped)
    gaudi = [u for u in shipped.as_json()["not_scheduled"] if u["env"] == "gaudi-1-24"]  # type: ignore[attr-defined]
    assert gaudi == [
        {
            "kind": "session",
            "env": "gaudi-1-24",
            "platform": "linux/amd64",
            "why": shipped.unscheduled[-1].why,
            "recorded": recorded,
        }
    ]


def test_a_recorded_reason_that_no_longer_applies_is_named() -> None:
    made = plan(SHIPPED, tier=CiTier.RELEASE)  # everything can run
    assert made.notes == (
        "envs.gaudi-1-24.ci_unschedulable no longer applies: every job of gaudi-1-24 is scheduled; remove it",
    )


def test_the_recorded_reason_is_one_line_of_text() -> None:
    bad = MATRIX_TEXT.replace(RECORDED, 'ci_unschedulable = "two\\nlines', 1)
    errors = [str(p) for p in validate_text(bad).problems if p.severity == "error"]
    assert len(errors) == 1
    assert "envs.gaudi-1-24.ci_unschedulable" in errors[0]
    assert "expected one line of text" in errors[0]


def test_a_platform_without_its_os_lock_is_not_scheduled_there_and_named(tmp_path: Path) -> None:
    """An image that can be built for linux/amd64 but lacks its arm64 OS-package lock gets its amd64 image job
    only; the arm64 one is named with the command that makes its lock; both sessions run."""
    env = SHIPPED.envs["gpu-nvidia-cu132"]
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
    made = plan(SHIPPED, tier=CiTier.RELEASE, ready=readiness(SHIPPED, repo))
    assert [job.platform for job in made.images if job.env == env.id] == ["linux/amd64"]
    assert [job.platform for job in made.sessions if job.env == env.id] == ["linux/amd64", "linux/arm64"]
    arm = next(u for u in made.unscheduled if u.env == env.id)
    assert (arm.kind, arm.target) == ("image", f"{env.id} (linux/arm64) image")
    assert arm.why == (
        f"no OS-package lock (envs/{env.id}/os-packages.arm64.lock): its image cannot be built; run `accelenv lock "
        f"{env.id} --platform linux/arm64` where {image.reference} can be pulled, then commit it"
    )


def test_artifact_names_are_unique_and_bound_to_kind_env_and_arch() -> None:
    made = plan(SHIPPED, tier=CiTier.RELEASE)
    names = [job.artifact for job in (*made.sessions, *made.images)]
    assert len(set(names)) == len(names)
    assert all("/" not in name and name.startswith(("accelenv-session-", "accelenv-image-")) for name in names)
