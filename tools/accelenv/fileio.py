"""The one way accelenv reads and writes the files it is pointed at: bounded, regular files only, atomically.

Reading opens without blocking (a FIFO or a device where a file is expected is refused, never waited on) and
stops at a size limit. Writing goes to a temporary file beside the target and renames it over the target, so
readers see the old or the new content, never a mix; it writes only to a regular file or a path that does not
exist yet (never over a device, FIFO, socket or folder), through a symlinked file to its target (the link
stays), and, when asked, only inside one folder. A read-modify-write holds a lock on the file's folder and
refuses to write over a file that changed since it was read. Every failure is an `AccelenvError` naming the path.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from accelenv.errors import UsageError, WriteFailedError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

MAX_TEXT = 64 * 1024 * 1024  # the largest file accelenv reads as a whole (matrix, lock, snapshot, Dockerfile)
CHUNK = 1024 * 1024
_TEMP_SUFFIX = ".tmp"
_ORPHAN_AGE = 3600.0  # a temporary file without a process id is left alone for this long (seconds)


# ---------------------------------------------------------------------------------------------------- reading


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symlink"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def read_bytes(path: Path, *, limit: int = MAX_TEXT, what: str = "file") -> bytes:
    """The content of the regular file `path`, at most `limit` bytes. Never blocks on a FIFO or a device:
    anything but a regular file, a file over the limit, or one that cannot be read is a `UsageError`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise UsageError(f"{path}: cannot read the {what}: {_reason(error)}") from error
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UsageError(f"{path}: the {what} is {kind_of(mode)}, not a regular file")
        data = _read_fd(fd, limit)
    except OSError as error:
        raise UsageError(f"{path}: cannot read the {what}: {_reason(error)}") from error
    finally:
        os.close(fd)
    if data is None:
        raise UsageError(f"{path}: the {what} is larger than {_size(limit)}; accelenv refuses to read it")
    return data


def read_text(path: Path, *, limit: int = MAX_TEXT, what: str = "file") -> str:
    """`read_bytes` decoded as UTF-8; text that is not UTF-8 is a `UsageError` saying where."""
    data = read_bytes(path, limit=limit, what=what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"{path}: the {what} is not UTF-8 text ({error.reason} at byte {error.start})") from error


def read_text_if_exists(path: Path, *, limit: int = MAX_TEXT, what: str = "file") -> str | None:
    """`read_text`, or None when nothing exists at `path` (a dangling symlink counts as nothing)."""
    if not path.exists():
        return None
    return read_text(path, limit=limit, what=what)


def _read_fd(fd: int, limit: int) -> bytes | None:
    """Up to `limit` bytes from `fd`; None when there are more."""
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, min(CHUNK, limit + 1 - size)):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return None
    return b"".join(chunks)


# ---------------------------------------------------------------------------------------------------- writing


def write_atomic(path: Path, text: str, *, inside: Path | None = None) -> None:
    """Write `text` to `path` so readers see the old or the new content, never a mix.

    `path` must be a regular file or not exist yet; a symlink to a regular file is written through (the link
    stays). With `inside`, the real path must lie inside that folder. Leftover temporary files of this target
    from killed runs are removed first."""
    target = _writable_target(path, inside)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(target)
        import tempfile  # only writers need it; readers are on the start-up path of `check`

        fd, name = tempfile.mkstemp(prefix=f".{target.name}.{os.getpid()}.", suffix=_TEMP_SUFFIX, dir=target.parent)
    except OSError as error:
        raise WriteFailedError(f"{path}: cannot write: {_reason(error)}; nothing was changed") from error
    tmp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        tmp.chmod(_mode_of(target))
        tmp.replace(target)
    except OSError as error:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise WriteFailedError(f"{path}: cannot write: {_reason(error)}; nothing was changed") from error
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _writable_target(path: Path, inside: Path | None) -> Path:
    """The real file a write to `path` replaces, after refusing anything but a regular file or a new path."""
    if inside is not None:
        check_inside(path, inside)
    try:
        mode = path.stat().st_mode  # follows symlinks the way the kernel does (/proc/self/fd/1 included)
    except FileNotFoundError:
        mode = None
    except OSError as error:
        raise WriteFailedError(f"{path}: cannot write: {_reason(error)}; nothing was changed") from error
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"{path}: is {kind_of(mode)}; accelenv writes only regular files: give a file path")
    if mode is None and path.is_symlink():  # a link to nothing: writing would create a file wherever it points
        raise UsageError(f"{path}: is a symlink to {path.readlink()}, which does not exist; remove the link")
    try:
        return path.resolve()
    except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop
        raise UsageError(f"{path}: cannot be resolved ({error}); remove the symlink loop") from error


def check_inside(path: Path, inside: Path) -> None:
    """Refuse `path` unless it lies inside the folder `inside` through real folders: no `..`, and no symlink
    (to a folder or to a file) between `inside` and `path`, so a write cannot land anywhere else."""
    try:
        parts = path.relative_to(inside).parts
    except ValueError:
        parts = ("..",)
    if ".." in parts:
        raise UsageError(f"{path}: outside {inside}; accelenv writes generated files only inside the repository")
    current = inside
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise UsageError(
                f"{current}: is a symlink; accelenv writes generated files only into real folders and files of "
                f"{inside}: replace the link with a folder (or remove it)"
            )


def _mode_of(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o777
    except FileNotFoundError:
        return 0o644


def remove_stale_temps(target: Path) -> list[Path]:
    """Remove temporary files `write_atomic` left beside `target` when its process was killed: those whose
    process is gone, or (older naming, no process id) older than an hour. Returns what was removed."""
    removed: list[Path] = []
    try:
        candidates = [p for p in target.parent.iterdir() if _is_temp_of(p.name, target.name)]
    except OSError:
        return removed
    for candidate in candidates:
        if _abandoned(candidate, target.name):
            with contextlib.suppress(OSError):
                candidate.unlink()
                removed.append(candidate)
    return removed


def _is_temp_of(name: str, target_name: str) -> bool:
    return name.startswith(f".{target_name}.") and name.endswith(_TEMP_SUFFIX)


def _abandoned(candidate: Path, target_name: str) -> bool:
    middle = candidate.name[len(target_name) + 2 : -len(_TEMP_SUFFIX)]
    pid_text, dot, _ = middle.partition(".")
    if dot and pid_text.isdigit() and len(pid_text) < 10:
        return not _process_alive(int(pid_text))
    try:
        return time.time() - candidate.lstat().st_mtime > _ORPHAN_AGE
    except OSError:
        return False


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: alive, another user's
        return True
    return True


# ---------------------------------------------------------------------------------------------------- updating


@contextlib.contextmanager
def folder_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on the folder of `path`'s real file, for a read-modify-write (other accelenv
    processes that edit the same file wait; the lock goes with the process)."""
    folder = path.resolve().parent
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise WriteFailedError(f"{folder}: cannot lock the folder: {_reason(error)}") from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def update_text(path: Path, change: Callable[[str], str], *, what: str = "file") -> tuple[str, str]:
    """Read `path`, compute its new text with `change`, and write it, holding the folder lock throughout and
    refusing to write when the file changed underneath (an editor that does not lock). Returns (old, new)."""
    with folder_lock(path):
        raw = read_bytes(path, what=what)
        old = _decode(path, raw, what)
        new = change(old)
        if new == old:
            return old, new
        if read_bytes(path, what=what) != raw:
            raise WriteFailedError(
                f"{path}: changed while accelenv was editing it; nothing was written: run the command again"
            )
        write_atomic(path, new)
    return old, new


def _decode(path: Path, raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(f"{path}: the {what} is not UTF-8 text ({error.reason} at byte {error.start})") from error


# ---------------------------------------------------------------------------------------------------- words


def _reason(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        return "no space left on the device"
    if error.errno == errno.EROFS:
        return "the file system is read-only"
    return error.strerror or str(error)


def _size(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 1024 * 1024 else f"{limit} bytes"
