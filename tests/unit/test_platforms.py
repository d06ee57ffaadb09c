"""Per-platform images: which platforms are built, emulation detected from binfmt_misc, where a foreign base
lives, per-platform tags and OS locks, and the multi-platform index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference import REFERENCE_MATRIX

from accelenv.build.context import BaseImage, BuildError, plan_build, platform_tag
from accelenv.build.image_config import with_architecture
from accelenv.build.index import Manifest, listed_digests, plan_index
from accelenv.build.platforms import base_reference, emulation_problem, host_platform, platforms_for
from accelenv.errors import UsageError
from accelenv.matrix import Matrix, load_matrix
from accelenv.plan.lock import OsLock, OsPackage, os_lock_name, os_lock_path, os_lock_state, render_os_lock

REPO = Path(__file__).resolve().parents[2]
LOCK = (REPO / "envs" / "cpu-py311" / "requirements.lock").read_text()
IMAGE_LOCK = (REPO / "envs" / "accelenv-image.lock").read_text()
BASE = BaseImage(id="sha256:" + "b" * 64, digest=None, created="2025-06-01T12:00:00Z")


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REFERENCE_MATRIX)


def _plan(matrix: Matrix, platform: str, *, native: bool) -> object:
    return plan_build(
        matrix,
        matrix.envs["cpu-py311"],
        matrix_text=REFERENCE_MATRIX.read_text(),
        lock=LOCK,
        image_lock=IMAGE_LOCK,
        accelenv_source="src",
        base=BASE,
        platform=platform,
        native=native,
    )


def test_host_platform_from_the_machine() -> None:
    assert host_platform("x86_64") == "linux/amd64"
    assert host_platform("aarch64") == "linux/arm64"
    assert host_platform("arm64") == "linux/arm64"  # what macOS and Docker's /info call it
    assert host_platform("amd64") == "linux/amd64"


def test_platforms_asked_for(matrix: Matrix) -> None:
    env = matrix.envs["cpu-py311"]
    assert set(env.platforms) == {"linux/amd64", "linux/arm64"}
    assert platforms_for(env, None, native="linux/amd64") == ["linux/amd64"]
    assert platforms_for(env, None, native="linux/arm64") == ["linux/arm64"]
    assert platforms_for(env, "all", native="linux/amd64") == ["linux/amd64", "linux/arm64"]  # native first
    assert platforms_for(env, "linux/arm64", native="linux/amd64") == ["linux/arm64"]
    with pytest.raises(UsageError, match=r"--platform linux/riscv64: not a platform accelenv builds"):
        platforms_for(env, "linux/riscv64", native="linux/amd64")


def test_a_platform_the_environment_does_not_declare_is_refused(matrix: Matrix) -> None:
    amd_only = next(e for e in matrix.envs.values() if e.platforms == ("linux/amd64",))
    with pytest.raises(UsageError) as error:
        platforms_for(amd_only, "linux/arm64", native="linux/amd64")
    assert f"envs.{amd_only.id}.platforms declares linux/amd64" in str(error.value)
    assert f"accelenv lock {amd_only.id}" in str(error.value)


def _binfmt(folder: Path, entry: str, text: str) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / entry).write_text(text)
    return folder


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: PF\noffset 0\n", None),
        ("disabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: PF\n", "is disabled"),
        ("enabled\ninterpreter /usr/bin/qemu-aarch64\nflags: P\n", "without the F (fix-binary) flag (P)"),
        (None, "is not registered"),
    ],
)
def test_emulation_is_read_from_binfmt_misc(tmp_path: Path, text: str | None, expected: str | None) -> None:
    folder = tmp_path / "binfmt"
    folder.mkdir()
    if text is not None:
        _binfmt(folder, "qemu-aarch64", text)
    problem = emulation_problem("linux/arm64", native="linux/amd64", binfmt=folder)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None
        assert expected in problem
        assert "update-binfmts --enable qemu-aarch64" in problem  # the setup step
    assert emulation_problem("linux/amd64", native="linux/amd64", binfmt=folder) is None  # native: nothing needed


def test_a_foreign_base_lives_under_accelenvs_own_name() -> None:
    assert base_reference("python:3.11-slim-bookworm", "linux/amd64", native="linux/amd64") == (
        "python:3.11-slim-bookworm"
    )
    assert base_reference("python:3.11-slim-bookworm", "linux/arm64", native="linux/amd64") == (
        "accelenv-platform/python:3.11-slim-bookworm-arm64"
    )
    assert base_reference("nvidia/cuda:13.2.1-base-ubuntu24.04", "linux/amd64", native="linux/arm64") == (
        "accelenv-platform/nvidia/cuda:13.2.1-base-ubuntu24.04-amd64"
    )
    by_digest = base_reference("python@sha256:" + "a" * 64, "linux/arm64", native="linux/amd64")
    assert by_digest.startswith("accelenv-platform/python:sha256-aaaa")
    assert by_digest.endswith("-arm64")


def test_content_tags_name_the_platform_and_differ(matrix: Matrix) -> None:
    native = _plan(matrix, "linux/amd64", native=True)
    foreign = _plan(matrix, "linux/arm64", native=False)
    assert native.content_tag.startswith("accelenv:cpu-py311-amd64-")  # type: ignore[attr-defined]
    assert foreign.content_tag.startswith("accelenv:cpu-py311-arm64-")  # type: ignore[attr-defined]
    assert native.content_hash != foreign.content_hash  # type: ignore[attr-defined]
    assert native.human_tag == foreign.human_tag  # type: ignore[attr-defined]
    assert platform_tag(foreign) == foreign.human_tag + "-arm64"  # type: ignore[arg-type, attr-defined]
    assert foreign.native is False  # type: ignore[attr-defined]


def test_an_os_lock_of_another_architecture_is_refused(matrix: Matrix) -> None:
    env = matrix.envs["gpu-nvidia-cu128"]  # its CUDA base lacks Python: the image installs locked .debs
    lock = OsLock(base="b", pin=BASE.id, architecture="amd64", packages=())
    kwargs: dict[str, object] = {
        "matrix_text": REFERENCE_MATRIX.read_text(),
        "lock": LOCK,
        "image_lock": IMAGE_LOCK,
        "accelenv_source": "src",
        "base": BASE,
        "os_lock": lock,
    }
    with pytest.raises(BuildError, match=r"covers amd64, not linux/arm64: run `accelenv lock gpu-nvidia-cu128 --pla"):
        plan_build(matrix, env, platform="linux/arm64", native=False, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(BuildError, match=r"os-packages.arm64.lock is missing"):
        plan_build(matrix, env, platform="linux/arm64", native=False, **{**kwargs, "os_lock": None})  # type: ignore[arg-type]
    assert plan_build(matrix, env, platform="linux/amd64", **kwargs).os_lock == lock  # type: ignore[arg-type]


def test_os_locks_are_per_platform(tmp_path: Path) -> None:
    assert os_lock_name("linux/amd64") == "os-packages.lock"
    assert os_lock_name("linux/arm64") == "os-packages.arm64.lock"
    package = OsPackage(
        name="python3.11", version="3.11.2-6", architecture="arm64", size=1, sha256="0" * 64, url="http://x/p.deb"
    )
    text = render_os_lock(
        "e", ("python3.11",), OsLock(base="b:1", pin="sha256:" + "c" * 64, architecture="arm64", packages=(package,))
    )
    # an arm64 lock put where the amd64 one belongs is not current there
    path = os_lock_path(tmp_path, "e", "linux/amd64")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert str(os_lock_state(tmp_path, "e", "b:1", ("python3.11",), "linux/amd64")) == "stale"
    path.rename(os_lock_path(tmp_path, "e", "linux/arm64"))
    assert str(os_lock_state(tmp_path, "e", "b:1", ("python3.11",), "linux/arm64")) == "current"


def test_an_imported_root_file_system_gets_its_platform() -> None:
    config = json.dumps({"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}})
    changed = json.loads(with_architecture(config.encode(), "arm64", "v8"))
    assert (changed["architecture"], changed["variant"]) == ("arm64", "v8")
    back = json.loads(with_architecture(json.dumps(changed).encode(), "amd64", ""))
    assert "variant" not in back
    with pytest.raises(ValueError, match="no rootfs"):
        with_architecture(b'{"architecture": "amd64"}', "arm64", "v8")


def test_the_index_lists_each_platform_once_in_order() -> None:
    arm = Manifest(
        platform="linux/arm64",
        media_type="application/vnd.docker.distribution.manifest.v2+json",
        digest="sha256:" + "a" * 64,
        size=10,
    )
    amd = Manifest(
        platform="linux/amd64",
        media_type="application/vnd.docker.distribution.manifest.v2+json",
        digest="sha256:" + "d" * 64,
        size=12,
    )
    body = plan_index([arm, amd])
    assert body == plan_index([amd, arm])  # deterministic
    document = json.loads(body)
    assert document["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert [m["platform"] for m in document["manifests"]] == [
        {"architecture": "amd64", "os": "linux"},
        {"architecture": "arm64", "os": "linux", "variant": "v8"},
    ]
    assert listed_digests(body) == {amd.digest, arm.digest}
    assert listed_digests(b"{}") is None
    assert listed_digests(b"not json") is None
