"""Images with the real Docker engine, through accelenv's own commands, on a base made with debootstrap.

A test matrix adds an environment whose runtime's base image is the local `accelenv-ci/debian:bookworm-minbase`
(.ci/run makes it: no registry can be reached). Build it, rebuild it as a no-op, verify it, run a command in it,
then change a pin: verify must fail. A missing base image fails the build and leaves no tag.
Under CI=true a missing engine or base image fails these tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from localmatrix import BASE_IMAGE, local_matrix, unavailable

from accelenv.cli import main

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
BASE = BASE_IMAGE


def write_matrix(folder: Path, *, pin: str, base: str = BASE) -> Path:
    return local_matrix(folder / "matrix.toml", {"ci-image": [pin]}, runtime="ci-bookworm", base=base)


def accelenv(matrix: Path, *args: str) -> int:
    return main(["--matrix", str(matrix), *args])


@pytest.mark.heavy(seconds=100)
def test_build_noop_verify_run_and_break(
    engine: object, repository: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = write_matrix(tmp_path / "repo", pin="six==1.17.0")
    assert accelenv(matrix, "lock", "ci-image") == 0
    capsys.readouterr()
    assert accelenv(matrix, "build", "ci-image", "--repository", repository, "--json") == 0
    first = json.loads(capsys.readouterr().out)["results"][0]
    assert first["status"] == "built", first
    assert first["human_tag"] == f"{repository}:ci-image-cpu-py311"
    assert first["content_tag"].startswith(f"{repository}:ci-image-")
    assert first["size"] > 0
    assert Path(first["log"]).read_text().count("Step ") >= 10

    # the same content: nothing is built
    assert accelenv(matrix, "build", "ci-image", "--repository", repository, "--json") == 0
    again = json.loads(capsys.readouterr().out)["results"][0]
    assert again["status"] == "skipped"
    assert again["image_id"] == first["image_id"]

    assert accelenv(matrix, "verify", "ci-image", "--repository", repository) == 0
    assert "verdict: pass" in capsys.readouterr().out

    code = accelenv(
        matrix,
        "run",
        "ci-image",
        "--repository",
        repository,
        "--",
        "python",
        "-c",
        "import six, os; print('six', six.__version__, os.getcwd())",
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "six 1.17.0 /workspace" in out

    # any host user: a working tree owned by uid 4242 is written as 4242; stderr stays apart; /dev/shm is large
    tree = tmp_path / "tree"
    tree.mkdir()
    os.chown(tree, 4242, 4242)
    script = (
        "import os, sys; open('/workspace/made', 'w').write('x'); print('out', os.getuid()); "
        "print('err', file=sys.stderr); print('shm', os.statvfs('/dev/shm').f_blocks * os.statvfs('/dev/shm').f_frsize)"
    )
    old_cwd = Path.cwd()
    os.chdir(tree)
    try:
        code = accelenv(matrix, "run", "ci-image", "--repository", repository, "--", "python", "-c", script)
    finally:
        os.chdir(old_cwd)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "out 4242" in out
    assert "err" not in out
    assert "err" in err
    assert (tree / "made").stat().st_uid == 4242
    shm = int(next(line for line in out.splitlines() if line.startswith("shm ")).split()[1])
    assert shm > 64 * 2**20

    # break it on purpose: another pin, relocked, and the image no longer verifies
    write_matrix(tmp_path / "repo", pin="six==1.16.0")
    assert accelenv(matrix, "lock", "ci-image") == 0
    capsys.readouterr()
    assert accelenv(matrix, "verify", "ci-image", "--repository", repository) == 1
    out = capsys.readouterr().out
    assert "FAIL  image.distributions" in out
    assert "six 1.17.0 (lock: 1.16.0)" in out

    # and run refuses it before it starts: not the environment the matrix declares now, unless --stale-ok
    assert accelenv(matrix, "run", "ci-image", "--repository", repository, "--", "true") == 125
    assert "or pass --stale-ok to run it as it is" in capsys.readouterr().err
    assert accelenv(matrix, "run", "ci-image", "--repository", repository, "--stale-ok", "--", "true") == 0
    err = capsys.readouterr().err
    assert "running it anyway (--stale-ok)" in err
    assert "devices: CPU only needs no devices" in err


def test_a_missing_base_image_is_not_built_and_leaves_no_tag(
    engine: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from accelenv.build.engine import DockerEngine

    assert isinstance(engine, DockerEngine)
    matrix = write_matrix(tmp_path / "repo", pin="six==1.17.0", base="accelenv-ci/missing:nothing")
    assert accelenv(matrix, "lock", "ci-image") == 0  # the OS lock cannot be made: a warning
    out = capsys.readouterr().out
    assert "envs/ci-image/os-packages.lock: not locked (warning" in out
    assert accelenv(matrix, "build", "ci-image", "--repository", "accelenv-missing") == 1
    out = capsys.readouterr().out
    assert (
        "ci-image: not built (2 blockers):\n  - its base image accelenv-ci/missing:nothing is not on the engine" in out
    )
    assert "could not be pulled" in out
    assert "fix: accelenv lock ci-image, once the base is on the engine" in out
    assert engine.image("accelenv-missing:ci-image-cpu-py311") is None


@pytest.mark.heavy(seconds=115)
def test_reproducible_image_from_a_network_off_build(
    engine: object, repository: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same inputs built twice, the second time without the layer cache (as from a pruned cache): the same
    layers and the same image id, its config dated SOURCE_DATE_EPOCH (the base's creation time) with no build
    container in it. Every build runs with the network off, from a base pinned by image id, its .debs fetched on
    the host."""
    from accelenv.build.context import epoch_of
    from accelenv.build.engine import DockerEngine
    from accelenv.timestamps import rfc3339

    assert isinstance(engine, DockerEngine)
    matrix = write_matrix(tmp_path / "repo", pin="six==1.17.0")
    assert accelenv(matrix, "lock", "ci-image") == 0
    os_lock = (tmp_path / "repo" / "envs" / "ci-image" / "os-packages.lock").read_text()
    base = engine.image(BASE)
    assert base is not None
    assert f"pinned {base.id}" in os_lock
    assert "python3.11-venv " in os_lock
    capsys.readouterr()
    built, tags = [], []
    for extra in ([], ["--no-cache"]):
        assert accelenv(matrix, "build", "ci-image", "--repository", repository, "--json", *extra) == 0
        result = json.loads(capsys.readouterr().out)["results"][0]
        assert result["status"] == "built", result
        assert result["reproducible_id"] is True, result
        assert "reproducible image id" in Path(result["log"]).read_text()
        info = engine.image(result["image_id"])
        assert info is not None
        built.append(info)
        tags.append(result["content_tag"])
    assert tags[0] == tags[1], "accelenv's source changed between the two builds"
    first, second = built
    assert len(first.layers) >= 5
    assert first.layers == second.layers
    assert first.id == second.id
    assert first.created == rfc3339(epoch_of(base.created))
    raw = engine._client.inspect_image(first.id)
    assert raw["Container"] == ""
    assert raw["DockerVersion"] == ""
    assert raw["Config"]["Image"] == ""
    assert raw["Config"]["Labels"]["dev.accelenv.env"] == "ci-image"
    human = f"{repository}:ci-image-cpu-py311"
    # content, human and per-platform tags; the same id may carry other tests' tags too (it is reproducible)
    mine = [t for t in first.tags if t.startswith(f"{repository}:")]
    assert sorted(mine) == sorted([tags[0], human, f"{human}-amd64"])


def test_engine_missing_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from accelenv.build.engine import EngineError, connect

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    with pytest.raises(EngineError, match=r"no container engine answers at unix://.*docker.sock.*Start dockerd"):
        connect(timeout=1)


REGISTRY = os.environ.get("ACCELENV_CI_REGISTRY", "localhost:5000")


@pytest.mark.heavy(seconds=70)
def test_push_to_a_registry_then_skip(
    engine: object, repository: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import requests

    try:
        requests.get(f"http://{REGISTRY}/v2/", timeout=5).raise_for_status()
    except requests.RequestException as error:
        unavailable(f"no registry at {REGISTRY}: {error}")
    matrix = write_matrix(tmp_path / "repo", pin="six==1.17.0")
    assert accelenv(matrix, "lock", "ci-image") == 0
    target = f"{REGISTRY}/{repository}"
    capsys.readouterr()
    assert accelenv(matrix, "build", "ci-image", "--repository", repository, "--push", target, "--json") == 0
    first = json.loads(capsys.readouterr().out)["results"][0]
    content_tag = first["content_tag"].split(":", 1)[1]
    tags = requests.get(f"http://{REGISTRY}/v2/{target.split('/', 1)[1]}/{repository}/tags/list", timeout=5).json()
    # the content tag and the per-platform tag pushed; the human tag written as the multi-platform index
    assert sorted(tags["tags"]) == sorted([content_tag, "ci-image-cpu-py311-amd64", "ci-image-cpu-py311"])
    assert first["index"] == f"{target}/{repository}:ci-image-cpu-py311"
    # the registry has the content tag: nothing is built or pushed again
    assert accelenv(matrix, "build", "ci-image", "--repository", repository, "--push", target, "--json") == 0
    again = json.loads(capsys.readouterr().out)["results"][0]
    assert again["status"] == "skipped"
    assert "pushed" not in again["reason"]
    from accelenv.build.engine import DockerEngine

    assert isinstance(engine, DockerEngine)
    for tag in engine.tags(f"{target}/{repository}"):
        engine.remove(tag)


def test_a_missing_base_is_pulled_from_its_registry_with_progress(
    engine: object, repository: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The base only in the loopback registry: lock pulls it to lock its OS packages; with the local copy gone,
    build pulls it again (progress on stderr, the document on stdout) and builds on it."""
    import requests

    from accelenv.build.engine import DockerEngine

    assert isinstance(engine, DockerEngine)
    try:
        requests.get(f"http://{REGISTRY}/v2/", timeout=5).raise_for_status()
    except requests.RequestException as error:
        unavailable(f"no registry at {REGISTRY}: {error}")
    remote = f"{REGISTRY}/{repository}/base:minbase"
    base = engine.image(BASE)
    assert base is not None
    engine.tag(base.id, remote)
    engine.push(remote, lambda _line: None)
    engine.remove(remote)
    assert engine.image(remote) is None
    matrix = write_matrix(tmp_path / "repo", pin="six==1.17.0", base=remote)
    try:
        assert accelenv(matrix, "lock", "ci-image") == 0
        out, err = capsys.readouterr()
        assert "os-packages.lock: locked" in out, out
        engine.remove(remote)
        assert accelenv(matrix, "build", "ci-image", "--repository", repository, "--json") == 0
        out, err = capsys.readouterr()
        document = json.loads(out)
        assert document["ok"] is True
        assert document["pulled"] == [remote]
        assert document["results"][0]["status"] == "built"
        assert f"pulling {remote} (the base is not on the engine)" in err
        assert f"  {remote}: Status: " in err  # the registry's last word, as the pull stream gave it
    finally:
        if engine.image(remote) is not None:
            engine.remove(remote)
