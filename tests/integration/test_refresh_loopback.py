"""`accelenv refresh` end to end against a package index served on loopback: a newer pin is written into the
matrix, the lock is re-resolved by uv from that index (with its hash), the generated files are rendered; an
environment whose index is down keeps its old pin and is named."""

from __future__ import annotations

import io
import os
import socket
from typing import TYPE_CHECKING

import pytest
import tomlkit
from hostkit import LoopbackServer, build_wheel, write_simple_index
from reference import REFERENCE_MATRIX

from accelenv.cli import main
from accelenv.matrix import load_matrix

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.integration


def matrix_with(folder: Path, envs: dict[str, tuple[str, list[str]]]) -> Path:
    """The reference matrix plus cpu environments (id -> (index url, pins)), written to folder/matrix.toml."""
    doc = tomlkit.parse(REFERENCE_MATRIX.read_text(encoding="utf-8"))
    for env_id, (index, pins) in envs.items():
        env = tomlkit.table()
        env.update(
            {
                "family": "cpu",
                "runtime": "cpu",
                "description": f"refresh test {env_id}",
                "os": "debian12",
                "python": "3.11",
                "platforms": ["linux/amd64"],
                "skus": ["cpu-x86-64"],
                "requirements": {"packages": pins, "index_url": index},
                "tests": ["tests/devices/test_cpu_devices.py"],
                "ci_tier": "pr",
            }
        )
        doc["envs"][env_id] = env
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "matrix.toml"
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


@pytest.fixture
def demo_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package index on loopback serving demo-lib 1.0 and 1.1, and none of the machine's own index settings."""
    simple = tmp_path / "www" / "simple"
    for version in ("1.0", "1.1"):
        build_wheel(simple / "demo-lib", "demo-lib", version)
    write_simple_index(simple)
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    with LoopbackServer(tmp_path / "www") as server:
        yield f"{server.url}/simple"


def test_refresh_bumps_relocks_and_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the new lock's checked files: not the user's
    simple = tmp_path / "www" / "simple"
    for version in ("1.0", "1.1"):
        build_wheel(simple / "demo-lib", "demo-lib", version)
    write_simple_index(simple)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    with LoopbackServer(tmp_path / "www") as server:
        live = f"{server.url}/simple"
        dead = f"http://127.0.0.1:{dead_port}/simple"
        path = matrix_with(
            tmp_path / "repo", {"demo-live": (live, ["demo-lib==1.0"]), "demo-dead": (dead, ["demo-lib==1.0"])}
        )
        # only these two environments: the rest of the reference matrix talks to the real indexes
        for name in ("UV_DEFAULT_INDEX", "UV_INDEX", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
        out = io.StringIO()
        code = main(
            [
                "--matrix",
                str(path),
                "refresh",
                "--env",
                "demo-live",
                "--env",
                "demo-dead",
                "-o",
                str(tmp_path / "pr.md"),
            ],
            out=out,
        )
    assert code == 0, out.getvalue()
    summary = out.getvalue()
    assert "- `demo-live`: demo-lib 1.0 -> 1.1" in summary
    assert "Re-locked: `demo-live`" in summary
    assert "demo-dead: demo-lib: " in summary  # could not be checked, with the reason
    assert (tmp_path / "pr.md").read_text(encoding="utf-8") == summary
    matrix = load_matrix(path, use_cache=False)
    assert matrix.envs["demo-live"].requirements.specs == ("demo-lib==1.1",)
    assert matrix.envs["demo-dead"].requirements.specs == ("demo-lib==1.0",)  # unchanged: its index is down
    lock = (path.parent / "envs" / "demo-live" / "requirements.lock").read_text(encoding="utf-8")
    assert "demo-lib==1.1 \\" in lock
    assert "--hash=sha256:" in lock
    assert (path.parent / "images" / "demo-live" / "Dockerfile").is_file()
    assert main(["--matrix", str(path), "render", "--check"]) == 0
    # what the scheduled workflow runs: a source that could not be checked fails the job
    strict = io.StringIO()
    code = main(["--matrix", str(path), "refresh", "--env", "demo-dead", "--dry-run", "--strict"], out=strict)
    assert code == 1, strict.getvalue()
    assert "### Could not be checked" in strict.getvalue()


def test_refresh_keeps_an_edit_made_while_it_asked_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], demo_index: str
) -> None:
    """refresh reads the matrix, asks the indexes (which can take minutes), then writes: an edit someone made
    meanwhile is not overwritten; refresh says so and writes nothing."""
    from accelenv.upstream import survey

    path = matrix_with(tmp_path / "repo", {"demo-live": (demo_index, ["demo-lib==1.0"])})
    real_check = survey.check_matrix

    def check_then_someone_edits(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        result = real_check(*args, **kwargs)  # type: ignore[arg-type]
        with path.open("a", encoding="utf-8") as handle:
            handle.write("# a colleague's edit\n")
        return result

    monkeypatch.setattr(survey, "check_matrix", check_then_someone_edits)
    out = io.StringIO()
    code = main(["--matrix", str(path), "refresh", "--env", "demo-live", "--no-lock"], out=out)
    err = capsys.readouterr().err
    assert code == 1, out.getvalue() + err
    assert "changed while refresh asked the indexes" in err
    text = path.read_text(encoding="utf-8")
    assert text.endswith("# a colleague's edit\n")
    assert '"demo-lib==1.0"' in text  # the bump was not written over the edit


@pytest.mark.parametrize("how", ["undo", "resume"])
def test_a_refresh_stopped_while_writing_is_undone_or_resumed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], demo_index: str, how: str
) -> None:
    """refresh writes the matrix, a lock and the generated files as one change: stopped (Ctrl-C) after some of
    them, it leaves a journal; the next refresh refuses to start over it, `--undo` puts every file back as it
    was and `--resume` finishes the change, after which the generated files match the matrix."""
    from accelenv import changeset
    from accelenv.fileio import write_atomic

    path = matrix_with(tmp_path / "repo", {"demo-live": (demo_index, ["demo-lib==1.0"])})
    repo = path.parent
    assert main(["--matrix", str(path), "render"], out=io.StringIO()) == 0
    before = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    real_write = write_atomic
    writes: list[str] = []

    def stopped_on_the_third_file(target: Path, text: str, *, inside: Path | None = None) -> None:
        if target.name != "changeset.json":
            writes.append(str(target.relative_to(repo)))
            if len(writes) == 3:
                raise KeyboardInterrupt
        real_write(target, text, inside=inside)

    monkeypatch.setattr(changeset, "write_atomic", stopped_on_the_third_file)
    code = main(["--matrix", str(path), "refresh", "--env", "demo-live"], out=io.StringIO())
    monkeypatch.setattr(changeset, "write_atomic", real_write)
    assert code == 130
    assert len(writes) == 3
    assert (repo / changeset.JOURNAL).is_file()
    assert main(["--matrix", str(path), "render", "--check"], out=io.StringIO()) == 1  # half a change: stale

    capsys.readouterr()
    assert main(["--matrix", str(path), "refresh", "--env", "demo-live", "--no-lock"], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "an earlier refresh was interrupted" in err
    assert "accelenv refresh --resume" in err
    assert "accelenv refresh --undo" in err

    out = io.StringIO()
    assert main(["--matrix", str(path), "refresh", f"--{how}"], out=out) == 0, out.getvalue()
    assert not (repo / changeset.JOURNAL).exists()
    after = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    assert main(["--matrix", str(path), "render", "--check"], out=io.StringIO()) == 0
    if how == "undo":
        assert after == before
    else:
        assert load_matrix(path, use_cache=False).envs["demo-live"].requirements.specs == ("demo-lib==1.1",)
        lock = (repo / "envs" / "demo-live" / "requirements.lock").read_text(encoding="utf-8")
        assert "demo-lib==1.1 \\" in lock
    assert main(["--matrix", str(path), "refresh", f"--{how}"], out=io.StringIO()) == 2  # nothing left to finish
