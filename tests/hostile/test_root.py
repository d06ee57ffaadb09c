"""Item 4, the FIFO under --root, and issue 15's unreadable files: reads under a root stay under it, never block,
stay small, and a file that exists but cannot be read is told apart from a missing one."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hostilekit import accelenv, assert_clean_error, char_device
from hostkit import Pci, make_root

from accelenv.errors import UsageError
from accelenv.host.root import MAX_READ, Root

if TYPE_CHECKING:
    from collections.abc import Iterator

SECRET = "the-secret-outside-the-root\n"  # noqa: S105 - a marker, not a credential


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A captured NVIDIA host; a secret file lives beside it, outside the root."""
    (tmp_path / "secret").write_text(SECRET)
    return make_root(
        tmp_path / "root",
        pci=[Pci("0000:17:00.0", "0x10de", "0x2330", driver="nvidia")],
        modules={"nvidia": "570.124.06"},
        files={"/etc/os-release": 'ID=ubuntu\nPRETTY_NAME="Ubuntu 24.04"\n'},
    )


@pytest.mark.parametrize(
    "link",
    [
        "{outside}/secret",  # absolute, to the real file outside
        "/../../../../../../../../{outside_rel}/secret",  # absolute, climbing
        "../../../../secret",  # relative: sys/module/nvidia/version, four levels up is the root's parent
    ],
    ids=["absolute", "absolute-dotdot", "relative-dotdot"],
)
def test_symlinks_do_not_leave_the_root(host: Path, link: str) -> None:
    version = host / "sys/module/nvidia/version"
    version.unlink(missing_ok=True)
    outside = host.parent
    version.symlink_to(link.format(outside=outside, outside_rel=str(outside).lstrip("/")))
    root = Root(host)
    assert root.read_text("/sys/module/nvidia/version") != SECRET
    assert root.read_value("/sys/module/nvidia/version") is None


def test_an_absolute_symlink_means_the_same_path_under_the_root(host: Path) -> None:
    """As chroot does: /etc/os-release -> /usr/lib/os-release reads ROOT/usr/lib/os-release."""
    (host / "usr/lib").mkdir(parents=True)
    (host / "usr/lib/os-release").write_text("ID=captured\n")
    (host / "etc/os-release").unlink()
    (host / "etc/os-release").symlink_to("/usr/lib/os-release")
    assert Root(host).read_text("/etc/os-release") == "ID=captured\n"


def test_a_symlinked_folder_out_of_the_root_is_not_listed(host: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    (outside / "0000:99:00.0").mkdir(parents=True)
    devices = host / "sys/bus/pci/devices"
    for entry in devices.iterdir():
        (outside / entry.name).mkdir(exist_ok=True)
    other = host / "sys/bus/pci/devices-real"
    devices.rename(other)
    devices.symlink_to(outside)
    root = Root(host)
    assert "0000:99:00.0" not in root.listdir("/sys/bus/pci/devices")
    assert root.glob("/sys/bus/pci/devices/*") == []


def test_a_snapshot_under_root_holds_nothing_from_outside(host: Path, matrix: Path, tmp_path: Path) -> None:
    version = host / "sys/module/nvidia/version"
    version.unlink()
    version.symlink_to(tmp_path / "secret")
    out = tmp_path / "snap.json"
    result = accelenv("--matrix", str(matrix), "snapshot", "--root", str(host), "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "the-secret-outside-the-root" not in out.read_text()


def test_a_symlink_loop_is_unreadable_not_a_hang(host: Path) -> None:
    (host / "loop-a").symlink_to("/loop-b")
    (host / "loop-b").symlink_to("/loop-a")
    root = Root(host)
    assert root.read_text("/loop-a") is None
    assert root.unreadable == {"/loop-a": "a symlink loop"}


def test_a_fifo_under_the_root_does_not_block(host: Path) -> None:
    os.mkfifo(host / "sys/module/nvidia/version.fifo")
    (host / "sys/module/nvidia/version").unlink()
    (host / "sys/module/nvidia/version").symlink_to("version.fifo")
    os.mkfifo(host / "proc-limits")
    root = Root(host)
    start = time.monotonic()
    assert root.read_text("/sys/module/nvidia/version") is None
    assert root.read_text("/proc-limits") is None
    assert time.monotonic() - start < 2
    assert root.unreadable == {
        "/proc-limits": "a FIFO (named pipe) where a file was expected",
        "/sys/module/nvidia/version": "a FIFO (named pipe) where a file was expected",
    }


def test_fifos_everywhere_inspect_reads(host: Path, matrix: Path) -> None:
    """`inspect --root` with a FIFO as os-release, a sysfs attribute and /proc/self/limits: finishes, rc 0."""
    (host / "etc/os-release").unlink()
    os.mkfifo(host / "etc/os-release")
    (host / "sys/bus/pci/devices/0000:17:00.0/device").unlink()
    os.mkfifo(host / "sys/bus/pci/devices/0000:17:00.0/device")
    (host / "proc/self").mkdir(parents=True)
    os.mkfifo(host / "proc/self/limits")
    result = accelenv("--matrix", str(matrix), "inspect", "--root", str(host), "--timeout", "2", timeout=30)
    assert result.returncode == 0, result.stderr


def test_a_device_where_a_file_should_be(host: Path) -> None:
    """A zero device never ends: refused as a device, not read until memory runs out."""
    char_device(host / "zero", 1, 5)
    root = Root(host)
    assert root.read_text("/zero") is None
    assert root.unreadable["/zero"] == "a character device where a file was expected"


def test_a_huge_file_is_not_slurped(host: Path) -> None:
    with (host / "huge").open("wb") as handle:
        handle.truncate(MAX_READ + 1)
    root = Root(host)
    assert root.read_text("/huge") is None
    assert root.unreadable["/huge"] == "larger than 4 MiB"


def test_a_missing_file_is_absent_not_unreadable(host: Path) -> None:
    root = Root(host)
    assert root.read_text("/sys/module/nvidia/nope") is None
    assert root.read_text("/no/such/folder/file") is None
    assert root.listdir("/no/such/folder") == []
    assert root.unreadable == {}


def _as_nobody(action: object) -> str:
    """Run `action()` (returning text) in a child process that dropped root; its answer comes back through a pipe."""
    if os.geteuid() != 0:
        return str(action())  # type: ignore[operator]
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            answer = str(action())  # type: ignore[operator]
            os.write(write_end, answer.encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    return answer


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder anyone may enter (pytest's own tmp folders are private to their owner)."""
    folder = Path(tempfile.mkdtemp(prefix="accelenv-hostile-"))
    folder.chmod(0o755)
    yield folder
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(folder)


def test_a_file_that_exists_but_cannot_be_read(open_folder: Path) -> None:
    """Issue 15: permission denied is not "absent"; the root says which file and why."""
    host = make_root(open_folder / "root", modules={"nvidia": "570.124.06"}, files={"/etc/os-release": "ID=x\n"})
    for folder in [host, *host.rglob("*")]:
        folder.chmod(0o755 if folder.is_dir() else 0o644)
    (host / "sys/module/nvidia/version").chmod(0o000)
    (host / "sys/module").chmod(0o711)
    (host / "etc").chmod(0o700)

    def probe() -> str:
        root = Root(host)
        found = (root.read_text("/sys/module/nvidia/version"), root.read_text("/etc/os-release"), root.exists("/etc"))
        return repr((found, root.unreadable))

    answer = _as_nobody(probe)
    assert answer == repr(
        (
            (None, None, True),
            {"/etc/os-release": "permission denied", "/sys/module/nvidia/version": "permission denied"},
        )
    )


@pytest.mark.parametrize(
    ("value", "says"),
    [("/nonexistent-accelenv-root", "does not exist"), ("/etc/hostname", "is not a folder")],
)
def test_a_root_that_is_not_a_folder_is_a_usage_error(value: str, says: str, matrix: Path) -> None:
    with pytest.raises(UsageError, match=f"--root {value}: {says}"):
        Root.from_option(value)
    result = accelenv("--matrix", str(matrix), "inspect", "--root", value)
    assert_clean_error(result, code=2, says=f"--root {value}: {says}")
    result = accelenv("--matrix", str(matrix), "check", "cpu-py311", env={"ACCELENV_ROOT": value})
    assert_clean_error(result, code=2, says=f"$ACCELENV_ROOT {value}: {says}")
