"""Item 2 and the failed writes: `-o FILE` writes only a regular file or a new path; anything else, and a write
that fails (disk full, file too large, a folder, a closed or full standard output), is a clean error that leaves
nothing half-written and no temporary file behind."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
from typing import TYPE_CHECKING

import pytest
from hostilekit import accelenv, assert_clean_error, char_device

from accelenv.errors import UsageError, WriteFailedError
from accelenv.fileio import write_atomic

if TYPE_CHECKING:
    from pathlib import Path


def _special(kind: str, path: Path) -> Path:
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "full-device":
        char_device(path, 1, 7)
    elif kind == "null-device":
        char_device(path, 1, 3)
    elif kind == "folder":
        path.mkdir()
    elif kind == "symlink-to-a-pipe":
        read_end, write_end = os.pipe()
        path.symlink_to(f"/proc/self/fd/{write_end}")  # what `-o /proc/self/fd/1` is when stdout is a pipe
        os.set_inheritable(write_end, True)
        os.close(read_end)
    return path


KINDS = ["fifo", "full-device", "null-device", "folder", "symlink-to-a-pipe"]


@pytest.mark.parametrize("kind", KINDS)
def test_write_atomic_refuses_what_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    target = _special(kind, tmp_path / "out")
    before = os.lstat(target)
    with pytest.raises(UsageError, match="accelenv writes only regular files"):
        write_atomic(target, "text\n")
    after = os.lstat(target)
    assert (stat.S_IFMT(after.st_mode), after.st_ino, after.st_rdev) == (
        stat.S_IFMT(before.st_mode),
        before.st_ino,
        before.st_rdev,
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary file left


@pytest.mark.parametrize("kind", ["fifo", "full-device", "folder"])
@pytest.mark.parametrize(
    "command", [["report", "-o"], ["snapshot", "-o"], ["schema", "--write", "-o"]], ids=["report", "snapshot", "schema"]
)
def test_output_options_refuse_special_files(matrix: Path, tmp_path: Path, kind: str, command: list[str]) -> None:
    if command[0] == "schema":  # -o names the folder; its files are what must not be special
        folder = tmp_path / "schemas"
        folder.mkdir()
        target = _special(kind, folder / "matrix.schema.json")
        argv = [*command, str(folder)]
    else:
        target = _special(kind, tmp_path / "out")
        argv = [*command, str(target)]
    mode = os.lstat(target).st_mode
    result = accelenv("--matrix", str(matrix), *argv, "--root", str(tmp_path)) if command[0] == "snapshot" else None
    result = result or accelenv("--matrix", str(matrix), *argv)
    assert_clean_error(result, code=2, says=str(target))
    assert stat.S_IFMT(os.lstat(target).st_mode) == stat.S_IFMT(mode)


def test_a_symlinked_file_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.md"
    real.write_text("old\n")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    write_atomic(link, "new\n")
    assert link.is_symlink()
    assert real.read_text() == "new\n"


def test_a_dangling_symlink_is_not_followed_to_create_a_file(tmp_path: Path) -> None:
    """A planted `docs/compatibility.md -> /etc/cron.d/x`: writing through it would create that file."""
    link = tmp_path / "report.md"
    link.symlink_to(tmp_path / "elsewhere" / "planted")
    with pytest.raises(UsageError, match="which does not exist; remove the link"):
        write_atomic(link, "text\n")
    assert not (tmp_path / "elsewhere").exists()


def _file_size_limit(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_write_that_fails_midway_leaves_nothing_half_written(matrix: Path) -> None:
    """RLIMIT_FSIZE makes the disk "full" at 2 KiB for the render process alone (Python ignores SIGXFSZ)."""
    repo = matrix.parent
    result = accelenv("--matrix", str(matrix), "render", preexec_fn=lambda: _file_size_limit(2048))
    assert_clean_error(result, code=1, says="cannot write: File too large; nothing was changed")
    leftovers = [p for p in repo.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    for written in [*repo.glob("images/*/Dockerfile"), *repo.glob("envs/*/env.json")]:
        assert written.read_text().endswith("\n")  # whole files only: the failed one was never renamed in


def test_report_to_a_folder_is_a_clean_error(matrix: Path, tmp_path: Path) -> None:
    result = accelenv("--matrix", str(matrix), "report", "-o", str(tmp_path))
    assert_clean_error(result, code=2, says="is a folder")


def test_standard_output_on_a_full_device(matrix: Path, tmp_path: Path) -> None:
    """`accelenv list > /dev/full`, with a full device of our own."""
    full = char_device(tmp_path / "full", 1, 7)
    with full.open("w") as sink:
        result = accelenv("--matrix", str(matrix), "list", stdout=sink.fileno())
    assert_clean_error(result, code=1, says="cannot write to standard output: No space left on device")
    assert "Exception ignored" not in result.stderr


def test_closed_standard_output(matrix: Path) -> None:
    """`accelenv list >&-`: a usage error, not an AttributeError."""
    result = in_shell(f'{{accelenv}} --matrix "{matrix}" list >&-')
    assert_clean_error(result, code=2, says="standard output is closed")


def test_standard_output_closed_by_the_reader(matrix: Path) -> None:
    """`accelenv list | head -1`: the reader goes away; accelenv ends quietly."""
    result = in_shell(f'{{accelenv}} --matrix "{matrix}" list --json | head -c 1 >/dev/null')
    assert result.stderr == ""


def in_shell(script: str) -> subprocess.CompletedProcess[str]:
    """Run `script` in /bin/sh with `{accelenv}` standing for this checkout's accelenv."""
    import sys

    from hostilekit import REPO

    return subprocess.run(
        ["/bin/sh", "-c", script.format(accelenv=f'"{sys.executable}" -m accelenv')],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "tools")},
        timeout=60,
        check=False,
    )


def test_write_failures_are_accelenv_errors(tmp_path: Path) -> None:
    """What the command line reports as rc 1: a write that the system refuses."""
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("")
    with pytest.raises(WriteFailedError, match=r"cannot write: .*nothing was changed"):
        write_atomic(blocked / "out.json", "{}\n")
