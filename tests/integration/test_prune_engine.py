"""`accelenv prune` against the real Docker engine.

The images are cheap but real: each is built by accelenv's engine adapter from the local base
(`accelenv-ci/debian:bookworm-minbase`, which .ci/run makes) with a 1 MiB layer of its own and accelenv's labels,
then tagged as `accelenv build` tags: `<repository>:<env>-<16 hex>`, and the human tag on the newest. A container
made from the oldest holds it in use. `prune --keep 1 --dry-run` removes nothing; `prune --keep 1` removes exactly
the one that is neither kept nor in use. Each test uses a repository of its own and removes its own images.
Under CI=true a missing engine or base image fails these tests instead of skipping them.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

import pytest
from localmatrix import BASE_IMAGE

from accelenv.cli import main

if TYPE_CHECKING:
    from pathlib import Path

    from accelenv.build.engine import DockerEngine

pytestmark = pytest.mark.integration
MiB = 2**20


def make_image(engine: DockerEngine, folder: Path, env: str, n: int) -> str:
    """A small image with accelenv's labels and a 1 MiB layer of its own; its id."""
    folder.mkdir(parents=True)
    (folder / "Dockerfile").write_text(
        f"FROM {BASE_IMAGE}\n"
        f"RUN echo {n} > /accelenv-prune-test && head -c {MiB} /dev/urandom > /blob\n"
        f'LABEL dev.accelenv.env="{env}" dev.accelenv.family="cpu" dev.accelenv.python="3.11"\n',
        encoding="utf-8",
    )
    return engine.build(str(folder), tag=None, nocache=True, on_line=lambda _line: None)


def prune(repository: str, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["prune", "--repository", repository, *args])
    return code, capsys.readouterr().out


def test_prune_keeps_the_newest_skips_what_a_container_uses_and_removes_the_rest(
    engine: DockerEngine, repository: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = "prune-env"
    ids = [make_image(engine, tmp_path / f"image{n}", env, n) for n in range(3)]  # oldest first
    content = [f"{repository}:{env}-{uuid.uuid4().hex[:16]}" for _ in ids]
    for image_id, tag in zip(ids, content, strict=True):
        engine.tag(image_id, tag)
    human = f"{repository}:{env}-cpu-py311"
    engine.tag(ids[2], human)
    other_id = make_image(engine, tmp_path / "other", "prune-other", 9)
    other = f"{repository}:prune-other-{uuid.uuid4().hex[:16]}"
    engine.tag(other_id, other)
    container = engine._client.create_container(ids[0], command=["true"])["Id"]  # made, never started: in use
    try:
        code, out = prune(repository, "--keep", "1", "--dry-run", "--json", capsys=capsys)
        assert code == 0, out
        planned = json.loads(out)
        actions = {" ".join(i["tags"]): i["action"] for i in planned["images"]}
        assert actions == {
            " ".join(sorted([content[2], human])): "keep",
            content[1]: "remove",
            content[0]: "skip",
            other: "keep",
        }
        assert (planned["removed"], planned["skipped"], planned["failed"]) == (1, 1, 0)
        assert planned["freed_bytes"] >= MiB
        assert sorted(engine.tags(repository)) == sorted([*content, human, other])  # a dry run removes nothing

        code, out = prune(repository, "--keep", "1", capsys=capsys)
        assert code == 0, out
        summary = out.splitlines()[-1]
        assert summary.startswith("removed 1 image, ")
        assert summary.endswith(" freed; 1 skipped (in use)")
        assert f"skip         {content[0]} " in out
        assert "in use by container" in out
        assert sorted(engine.tags(repository)) == sorted([content[0], content[2], human, other])
        assert engine.image(ids[1]) is None  # gone from the engine, not only untagged
        assert engine.image(ids[0]) is not None

        # nothing more to do: a second run removes nothing
        code, out = prune(repository, "--keep", "1", capsys=capsys)
        assert code == 0
        assert out.splitlines()[-1] == "removed 0 images, 0 B freed; 1 skipped (in use)"
    finally:
        engine._client.remove_container(container, force=True)
