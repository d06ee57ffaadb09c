"""An arm64 image built on this amd64 machine under QEMU user emulation, the way a Grace (GB200, GH200) node
would build it natively: hermetic, the lock's aarch64 wheels, the same image id build after build, verified by
`accelenv check` inside it, then pushed with its amd64 sibling as one multi-platform tag (an OCI image index).

.ci/run registers Debian's qemu-user-static with binfmt_misc and makes the arm64 stand-in base. Under CI=true
a missing engine, base, emulation or registry fails these tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import pytest
from localmatrix import ARM64_BASE_IMAGE, BASE_IMAGE, local_matrix, unavailable

from accelenv.build.platforms import emulation_problem, host_platform
from accelenv.cli import main

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = pytest.mark.integration
REGISTRY = os.environ.get("ACCELENV_CI_REGISTRY", "localhost:5000")
# a package with a compiled extension, so its wheel differs per machine; six for a pure one
PINS = ["markupsafe==3.0.2", "six==1.17.0"]
ENV = "ci-multi"


@pytest.fixture
def arm64_ready(engine: object) -> None:
    from accelenv.build.engine import DockerEngine

    assert isinstance(engine, DockerEngine)
    if host_platform() != "linux/amd64":
        pytest.skip("these tests emulate arm64 on an amd64 machine")
    problem = emulation_problem("linux/arm64", native="linux/amd64")
    if problem:
        unavailable(problem)
    if engine.image(ARM64_BASE_IMAGE) is None:
        unavailable(f"the arm64 stand-in base {ARM64_BASE_IMAGE} is missing")


def accelenv(matrix: Path, *args: str) -> int:
    return main(["--matrix", str(matrix), *args])


def _matrix(folder: Path, platforms: tuple[str, ...] = ("linux/amd64", "linux/arm64")) -> Path:
    return local_matrix(folder / "matrix.toml", {ENV: PINS}, runtime="ci-bookworm", base=BASE_IMAGE,
                        platforms=platforms)  # fmt: skip


def _build(matrix: Path, capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    code = accelenv(matrix, "build", ENV, "--json", *args)
    document = json.loads(capsys.readouterr().out)
    assert code == 0, document
    return document


@pytest.mark.heavy(seconds=420)
def test_arm64_image_reproducible_verified_and_pushed_with_its_amd64_sibling(
    engine: object, arm64_ready: None, repository: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import requests

    from accelenv.build.engine import DockerEngine, RunSpec

    assert isinstance(engine, DockerEngine)
    matrix = _matrix(tmp_path / "repo")
    assert accelenv(matrix, "lock", ENV, "--platform", "all") == 0
    out = capsys.readouterr().out
    folder = tmp_path / "repo" / "envs" / ENV
    assert "platforms linux/amd64, linux/arm64" in (folder / "requirements.lock").read_text()
    assert "# architecture: arm64;" in (folder / "os-packages.arm64.lock").read_text(), out
    assert "# architecture: amd64;" in (folder / "os-packages.lock").read_text(), out

    ids, tags = [], []
    for extra in ([], ["--no-cache"]):
        document = _build(matrix, capsys, "--platform", "linux/arm64", "--repository", repository, *extra)
        (result,) = document["results"]
        assert result["status"] == "built", result
        assert result["platform"] == "linux/arm64"
        assert result["reproducible_id"] is True
        ids.append(result["image_id"])
        tags.append(result["content_tag"])
    assert tags[0] == tags[1]
    assert str(tags[0]).startswith(f"{repository}:{ENV}-arm64-")
    assert ids[0] == ids[1], "the arm64 image id changed between two builds of the same inputs"
    info = engine.image(str(ids[0]))
    assert info is not None
    assert info.architecture == "arm64"
    # not the engine's platform: no plain human tag here (that stays the amd64 image's)
    assert not [t for t in info.tags if t.endswith("-py311")]

    # the aarch64 wheel of the lock, not the x86_64 one
    lines: list[str] = []
    probe = (
        "import platform, markupsafe, importlib.metadata as m; "
        "print(platform.machine()); print(m.distribution('markupsafe').read_text('WHEEL'))"
    )
    assert engine.run(RunSpec(image=str(ids[0]), command=["python", "-c", probe]), lines.append) == 0
    assert lines[0] == "aarch64"
    wheel_tags = [line for line in lines if line.startswith("Tag:")]
    assert wheel_tags
    assert all("aarch64" in line for line in wheel_tags), wheel_tags

    assert accelenv(matrix, "verify", ENV, "--platform", "linux/arm64", "--repository", repository, "--json") == 0
    verdict = json.loads(capsys.readouterr().out)
    assert {c["id"]: c["status"] for c in verdict["checks"]}["image.platform"] == "pass"

    # one multi-platform tag over both images in the loopback registry
    try:
        requests.get(f"http://{REGISTRY}/v2/", timeout=5).raise_for_status()
    except requests.RequestException as error:
        unavailable(f"no registry at {REGISTRY}: {error}")
    target = f"{REGISTRY}/{repository}"
    document = _build(matrix, capsys, "--platform", "all", "--repository", repository, "--push", target)
    results = document["results"]
    assert sorted(r["platform"] for r in results) == ["linux/amd64", "linux/arm64"]
    human = next(iter(results))["human_tag"].split(":", 1)[1]
    url = f"http://{REGISTRY}/v2/{repository}/{repository}/manifests/{human}"
    answer = requests.get(url, headers={"Accept": "application/vnd.oci.image.index.v1+json"}, timeout=10)
    assert answer.status_code == 200, answer.text
    index = answer.json()
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert sorted(m["platform"]["architecture"] for m in index["manifests"]) == ["amd64", "arm64"]
    for entry in index["manifests"]:  # each entry is a manifest the registry has
        manifest = requests.get(
            f"http://{REGISTRY}/v2/{repository}/{repository}/manifests/{entry['digest']}",
            headers={"Accept": entry["mediaType"]},
            timeout=10,
        )
        assert manifest.status_code == 200
    # again: nothing built, nothing pushed, the index is already there
    again = _build(matrix, capsys, "--platform", "all", "--repository", repository, "--push", target)
    assert {r["status"] for r in again["results"]} == {"skipped"}


def test_a_platform_the_lock_does_not_cover_is_refused(
    engine: object, arm64_ready: None, repository: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = _matrix(tmp_path / "repo", platforms=("linux/amd64",))
    assert accelenv(matrix, "build", ENV, "--platform", "linux/arm64", "--repository", repository) == 2
    err = capsys.readouterr().err
    assert f"{ENV} is not built for linux/arm64: envs.{ENV}.platforms declares linux/amd64" in err
    assert engine.tags(repository) == []  # type: ignore[attr-defined]
