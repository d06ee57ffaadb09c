"""A change to several files as one step (`accelenv.changeset`): written whole, or left with a journal that
finishes or undoes it; a journal that does not read, or that names a path outside the repository, is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelenv import changeset
from accelenv.errors import UsageError
from accelenv.fileio import write_atomic


def test_a_whole_change_lands_and_leaves_no_journal(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old a\n")
    (tmp_path / "gone.txt").write_text("stale\n")
    (tmp_path / "same.txt").write_text("same\n")
    changed = changeset.commit(
        tmp_path,
        {"a.txt": "new a\n", "sub/b.txt": "new b\n", "gone.txt": None, "same.txt": "same\n"},
        purpose="refresh",
    )
    assert changed == ["a.txt", "gone.txt", "sub/b.txt"]
    assert (tmp_path / "a.txt").read_text() == "new a\n"
    assert (tmp_path / "sub" / "b.txt").read_text() == "new b\n"
    assert not (tmp_path / "gone.txt").exists()
    assert not (tmp_path / changeset.JOURNAL).exists()
    assert changeset.pending(tmp_path) is None


def interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.txt").write_text("old a\n")
    (tmp_path / "c.txt").write_text("old c\n")
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
        changeset.commit(tmp_path, {"a.txt": "new a\n", "b.txt": "new b\n", "c.txt": None}, purpose="refresh")
    monkeypatch.setattr(changeset, "write_atomic", real)


def test_an_interrupted_change_is_refused_then_undone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    interrupted(tmp_path, monkeypatch)
    assert (tmp_path / "a.txt").read_text() == "new a\n"  # half of it landed
    found = changeset.pending(tmp_path)
    assert found is not None
    assert found.files == ("a.txt", "b.txt", "c.txt")
    with pytest.raises(UsageError, match=r"an earlier refresh was interrupted with 3 file\(s\) to write"):
        changeset.commit(tmp_path, {"a.txt": "other\n"}, purpose="refresh")
    assert changeset.finish(tmp_path, "undo") == ["a.txt", "b.txt", "c.txt"]
    assert (tmp_path / "a.txt").read_text() == "old a\n"
    assert not (tmp_path / "b.txt").exists()
    assert (tmp_path / "c.txt").read_text() == "old c\n"
    assert changeset.pending(tmp_path) is None


def test_an_interrupted_change_is_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    interrupted(tmp_path, monkeypatch)
    changeset.finish(tmp_path, "resume")
    assert (tmp_path / "a.txt").read_text() == "new a\n"
    assert (tmp_path / "b.txt").read_text() == "new b\n"
    assert not (tmp_path / "c.txt").exists()
    with pytest.raises(UsageError, match="no interrupted change to resume"):
        changeset.finish(tmp_path, "resume")


@pytest.mark.parametrize(
    "document",
    [
        "{not json",
        json.dumps({"version": 99, "purpose": "refresh", "files": {}}),
        json.dumps({"version": 1, "purpose": "refresh", "files": {"../outside.txt": {"old": None, "new": "x"}}}),
        json.dumps({"version": 1, "purpose": "refresh", "files": {"/etc/passwd": {"old": None, "new": "x"}}}),
        json.dumps({"version": 1, "purpose": "refresh", "files": {"a.txt": {"old": 3, "new": "x"}}}),
        json.dumps({"version": 1, "purpose": "refresh", "files": {"a.txt": {"new": "x"}}}),
        json.dumps([1, 2]),
    ],
)
def test_a_journal_that_does_not_read_is_never_acted_on(tmp_path: Path, document: str) -> None:
    journal = tmp_path / changeset.JOURNAL
    journal.parent.mkdir()
    journal.write_text(document)
    for action in (lambda: changeset.finish(tmp_path, "resume"), lambda: changeset.pending(tmp_path)):
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
