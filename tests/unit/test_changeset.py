"""A change to several files as one step (`accelenv.changeset`): written whole, or left with a journal that
finishes or undoes it; a journal that does not read, or that names a path outside the repository, is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelenv import changeset
from accelenv.errors import UsageError
from accelenv.fileio import write_atomic
from accelenv.plan.render import refresh_targets

ALLOWED = refresh_targets("matrix.toml")


def _tree(tmp_path: Path) -> None:
    for folder in ("envs/e1", "envs/e2", "envs/e3", "images/e1", "images/e2"):
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)


def test_a_whole_change_lands_and_leaves_no_journal(tmp_path: Path) -> None:
    _tree(tmp_path)
    (tmp_path / "matrix.toml").write_text("old a\n")
    (tmp_path / "images/e2/Dockerfile").write_text("stale\n")
    (tmp_path / "envs/e3/env.json").write_text("same\n")
    changed = changeset.commit(
        tmp_path,
        {
            "matrix.toml": "new a\n",
            "envs/e2/requirements.lock": "new b\n",
            "images/e2/Dockerfile": None,
            "envs/e3/env.json": "same\n",
        },
        purpose="refresh",
        allowed=ALLOWED,
    )
    assert changed == ["envs/e2/requirements.lock", "images/e2/Dockerfile", "matrix.toml"]
    assert (tmp_path / "matrix.toml").read_text() == "new a\n"
    assert (tmp_path / "envs/e2/requirements.lock").read_text() == "new b\n"
    assert not (tmp_path / "images/e2/Dockerfile").exists()
    assert not (tmp_path / changeset.JOURNAL).exists()
    assert changeset.pending(tmp_path) is None


def interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    (tmp_path / "matrix.toml").write_text("old a\n")
    (tmp_path / "images/e1/Dockerfile").write_text("old c\n")
    real = write_atomic
    count = []

    def failing(path: Path, text: str, *, inside: Path | None = None) -> None:
        if path.name != "changeset.json":
            count.append(path)
            if len(count) == 2:
                raise OSError(28, "No space left on device")
        real(path, text, inside=inside)

    monkeypatch.setattr(changeset, "write_atomic", failing)
    with pytest.raises(OSError, match="No space"):
        changeset.commit(
            tmp_path,
            {"matrix.toml": "new a\n", "envs/e1/env.json": "new b\n", "images/e1/Dockerfile": None},
            purpose="refresh",
            allowed=ALLOWED,
        )
    monkeypatch.setattr(changeset, "write_atomic", real)


def test_an_interrupted_change_is_refused_then_undone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    interrupted(tmp_path, monkeypatch)
    assert (tmp_path / "envs/e1/env.json").read_text() == "new b\n"  # half of it landed
    assert not (tmp_path / "images/e1/Dockerfile").exists()
    assert (tmp_path / "matrix.toml").read_text() == "old a\n"
    found = changeset.pending(tmp_path)
    assert found is not None
    assert found.files == ("envs/e1/env.json", "images/e1/Dockerfile", "matrix.toml")
    with pytest.raises(UsageError, match=r"an earlier refresh was interrupted with 3 file\(s\) to write"):
        changeset.commit(tmp_path, {"matrix.toml": "other\n"}, purpose="refresh", allowed=ALLOWED)
    assert changeset.finish(tmp_path, "undo", allowed=ALLOWED) == [
        "envs/e1/env.json",
        "images/e1/Dockerfile",
        "matrix.toml",
    ]
    assert (tmp_path / "matrix.toml").read_text() == "old a\n"
    assert not (tmp_path / "envs/e1/env.json").exists()
    assert (tmp_path / "images/e1/Dockerfile").read_text() == "old c\n"
    assert changeset.pending(tmp_path) is None


def test_an_interrupted_change_is_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    interrupted(tmp_path, monkeypatch)
    changeset.finish(tmp_path, "resume", allowed=ALLOWED)
    assert (tmp_path / "matrix.toml").read_text() == "new a\n"
    assert (tmp_path / "envs/e1/env.json").read_text() == "new b\n"
    assert not (tmp_path / "images/e1/Dockerfile").exists()
    with pytest.raises(UsageError, match="no interrupted change to resume"):
        changeset.finish(tmp_path, "resume", allowed=ALLOWED)


@pytest.mark.parametrize(
    "document",
    [
        "{not json",
        json.dumps({"version": 99, "purpose": "refresh", "files": {}}),
        json.dumps({"version": 1, "purpose": "refresh", "files": {"../outside.txt": {"old": None, "new": "x"}}}),
        json.dumps({"version": 1, "purpose": "refresh", "files": {"/etc/passwd": {"old": None, "new": "x"}}}),
        json.dumps({"version": 1, "purpose": "refresh", "files": {"matrix.toml": {"old": 3, "new": "x"}}}),
        json.dumps({"version": 1, "purpose": "refresh", "files": {"matrix.toml": {"new": "x"}}}),
        json.dumps([1, 2]),
    ],
)
def test_a_journal_that_does_not_read_is_never_acted_on(tmp_path: Path, document: str) -> None:
    journal = tmp_path / changeset.JOURNAL
    journal.parent.mkdir()
    journal.write_text(document)
    for action in (lambda: changeset.finish(tmp_path, "resume", allowed=ALLOWED), lambda: changeset.pending(tmp_path)):
        with pytest.raises(UsageError, match="journal does not read; nothing was done"):
            action()
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".accelenv", "changeset.json"]


WRITERS = [
    ["render"],
    ["lock", "cpu-py311"],
    ["add", "sku", "mi300a", "family=amd", 'name="AMD Instinct MI300A"', "arch=gfx942", 'sources=["rocm-gpu-specs"]'],
    ["attach", "h100-sxm", "gpu-nvidia-cu126"],
    ["detach", "h100-sxm", "gpu-nvidia-cu126"],
    ["pin"],
    ["refresh"],
]


@pytest.mark.parametrize("command", WRITERS, ids=lambda c: c[0])
def test_every_command_that_writes_the_tree_refuses_over_an_interrupted_change(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command that writes matrix.toml, locks or generated files stops before anything (and before the
    network) while a journal says an earlier change was interrupted; the journal and the files stay as they are."""
    import shutil

    from accelenv.cli import main

    interrupted(tmp_path, monkeypatch)  # a refresh stopped half-way: its journal is left
    monkeypatch.undo()
    shutil.copy(Path(__file__).resolve().parents[2] / "matrix.toml", tmp_path / "matrix.toml")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert main(["--matrix", str(tmp_path / "matrix.toml"), *command]) == 2
    err = capsys.readouterr().err
    assert "an earlier refresh was interrupted" in err
    assert "accelenv refresh --resume" in err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
