"""The one way accelenv reads and writes the files it is pointed at: bounded, regular files only, atomically.

Reading opens without blocking (a FIFO or a device where a file is expected is refused, never waited on) and
stops at a size limit. Writing (`write_atomic`, the one writer every
command uses) goes to a temporary file beside the target and renames it over the target relative to a folder
descriptor, so readers see the old or the new content, never a mix, and no folder swapped for a symlink midway
can redirect it; it writes only to a regular file or a path that does not exist yet (never over a device, FIFO,
socket, folder, read-only or hard-linked file), keeps the owner and mode of what it replaces, follows a symlinked
file the user named to its target (the link stays), and, when asked, only inside one folder, with no symlink on
the way. A read-modify-write holds a lock on the file's folder and
refuses to write over a file that changed since it was read. Every failure is an `AccelenvError` naming the path.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from typing import TYPE_CHECKING

from accelenv.errors import UsageError, WriteFailedError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

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


MAX_DEPTH = 64  # folders nested under one a command searches (CI artifacts nest a few levels)


def files_under(folder: Path, suffix: str, *, limit: int) -> list[Path]:
    """The files under `folder` whose names end in `suffix`, sorted: a walk without recursion that follows no
    symlinked folder, at most MAX_DEPTH folders deep and `limit` files found (more of either is a `UsageError`,
    never a RecursionError or an endless walk)."""
    found: list[Path] = []
    stack = [(folder, 0)]
    while stack:
        current, depth = stack.pop()
        try:
            with os.scandir(current) as entries:
                children = list(entries)
        except OSError as error:
            raise UsageError(f"{current}: cannot read the folder: {_reason(error)}") from error
        for entry in children:
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 > MAX_DEPTH:
                    raise UsageError(
                        f"{folder}: folders nest more than {MAX_DEPTH} deep ({entry.path}); name a "
                        "folder nearer the files"
                    )
                stack.append((current / entry.name, depth + 1))
            elif entry.name.endswith(suffix):
                found.append(current / entry.name)
                if len(found) > limit:
                    raise UsageError(f"more than {limit} files named *{suffix} under {folder}; name fewer folders")
    return sorted(found)


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
    """Write `text` to `path` so readers see the old or the new content, never a mix: the one writer of accelenv.

    The file is created beside the target in a folder opened once (a directory file descriptor) and renamed over
    the target relative to that descriptor, with `O_NOFOLLOW`, so nothing swapped in between a check and the
    write can redirect it. With `inside`, every folder from `inside` down is opened without following a symlink
    (missing ones are created the same way) and the target itself must not be a symlink; without it (a path the
    user named, `-o FILE`, `--matrix LINK`), a symlink to a regular file is written through (the link stays).
    Refused, with nothing changed: a target that is not a regular file (device, FIFO, socket, folder), a
    dangling symlink, a read-only file or one the caller may not write (it is not replaced behind its owner's
    back), and a file with other hard links (a rename would leave the old content under its other names).
    What replaces a file keeps its mode and its owner (root editing another user's tree leaves the files theirs);
    a new file under root gets the owner of its folder. Leftover temporary files of killed runs are removed."""
    folder, name, shown = _open_folder(path, inside)
    try:
        existing = _existing(folder, name, path, follow_ok=inside is None)
        remove_stale_temps_at(folder, name)
        _replace_at(folder, name, text.encode("utf-8"), existing, path)
    except OSError as error:
        raise WriteFailedError(f"{shown}: cannot write: {_reason(error)}; nothing was changed") from error
    finally:
        os.close(folder)


def check_writable(path: Path, *, inside: Path | None = None) -> None:
    """Refuse, before any work is done, a target `write_atomic` would refuse (the folders are not created)."""
    if inside is not None:
        check_inside(path, inside)
    target = path if inside is not None else _writable_target(path, None)
    try:
        folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # nothing there yet: a new file
    except OSError as error:
        raise WriteFailedError(f"{path}: cannot write: {_reason(error)}; nothing was changed") from error
    try:
        _existing(folder, target.name, path, follow_ok=inside is None)
    finally:
        os.close(folder)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


def _open_folder(path: Path, inside: Path | None) -> tuple[int, str, Path]:
    """A descriptor of the folder the target lies in, the target's name in it, and the path to show."""
    if inside is None:
        target = _writable_target(path, None)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            return os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC), target.name, path
        except OSError as error:
            raise WriteFailedError(f"{path}: cannot write: {_reason(error)}; nothing was changed") from error
    check_inside(path, inside)  # words for the common mistakes; the walk below is what holds
    parts = path.relative_to(inside).parts
    try:
        fd = os.open(inside, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as error:
        raise WriteFailedError(f"{inside}: cannot open the folder: {_reason(error)}; nothing was changed") from error
    current = inside
    for part in parts[:-1]:
        current = current / part
        try:
            child = _step(fd, part, current, inside)
        finally:
            os.close(fd)
        fd = child
    return fd, parts[-1], path


def _step(fd: int, part: str, shown: Path, inside: Path) -> int:
    """Open (creating if missing) the folder `part` under `fd` without following a symlink."""
    try:
        try:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
                _own_like_folder(fd, part, dir_fd=fd)
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UsageError(
                f"{shown}: is a symlink or not a folder; accelenv writes generated files only into real folders "
                f"and files of {inside}: replace the link with a folder (or remove it)"
            ) from error
        raise WriteFailedError(f"{shown}: cannot write: {_reason(error)}; nothing was changed") from error
    return child


def _existing(folder: int, name: str, path: Path, *, follow_ok: bool) -> os.stat_result | None:
    """What `name` is now in `folder` (None: nothing), after refusing what must not be replaced."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise WriteFailedError(f"{path}: cannot write: {_reason(error)}; nothing was changed") from error
    if stat.S_ISLNK(info.st_mode) and not follow_ok:
        raise UsageError(f"{path}: is a symlink; accelenv writes generated files only as real files: remove the link")
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{path}: is {kind_of(info.st_mode)}; accelenv writes only regular files: give a file path")
    if info.st_mode & 0o222 == 0 or not os.access(name, os.W_OK, dir_fd=folder, follow_symlinks=False):
        raise UsageError(
            f"{path}: is read-only for you (mode {stat.filemode(info.st_mode)}); accelenv does not replace it: "
            "make it writable (chmod u+w) if it should change"
        )
    if info.st_nlink > 1:
        raise UsageError(
            f"{path}: has {info.st_nlink - 1} other hard link(s); replacing it would leave the old content under "
            "the other names: break the link (cp the file over itself) or write elsewhere"
        )
    return info


def _replace_at(folder: int, name: str, data: bytes, existing: os.stat_result | None, path: Path) -> None:
    tmp = f".{name}.{os.getpid()}.{os.urandom(4).hex()}{_TEMP_SUFFIX}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            _keep_owner_and_mode(fd, existing, folder)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise
    with contextlib.suppress(OSError):
        os.fsync(folder)


def _keep_owner_and_mode(fd: int, existing: os.stat_result | None, folder: int) -> None:
    if existing is None:
        os.fchmod(fd, 0o644 & ~_umask())
        if os.geteuid() == 0:  # root creating a file in another user's tree: the file is theirs
            owner = os.fstat(folder)
            os.fchown(fd, owner.st_uid, owner.st_gid)
        return
    os.fchmod(fd, existing.st_mode & 0o7777)
    if (existing.st_uid, existing.st_gid) != (os.geteuid(), os.getegid()):
        with contextlib.suppress(PermissionError):  # not root: a group-writable file becomes the writer's
            os.fchown(fd, existing.st_uid, existing.st_gid)
        os.fchmod(fd, existing.st_mode & 0o7777)  # chown clears set-id bits; set the mode again


def _own_like_folder(fd: int, name: str, *, dir_fd: int) -> None:
    if os.geteuid() == 0:
        owner = os.fstat(fd)
        with contextlib.suppress(OSError):
            os.chown(name, owner.st_uid, owner.st_gid, dir_fd=dir_fd, follow_symlinks=False)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
    (to a folder or to a file) between `inside` and `path`. Words for the common mistakes only: `write_atomic`
    walks the folders by descriptor, so a folder swapped for a link after this check is still refused."""
    try:
        parts = path.relative_to(inside).parts
    except ValueError:
        parts = ("..",)
    if ".." in parts or not parts:
        raise UsageError(f"{path}: outside {inside}; accelenv writes generated files only inside the repository")
    current = inside
    for part in parts:
        current = current / part
        if current.is_symlink():
            raise UsageError(
                f"{current}: is a symlink; accelenv writes generated files only into real folders and files of "
                f"{inside}: replace the link with a folder (or remove it)"
            )


def remove_stale_temps(target: Path) -> list[Path]:
    """Remove temporary files `write_atomic` left beside `target` when its process was killed: those whose
    process is gone, or (older naming, no process id) older than an hour. Returns what was removed."""
    try:
        folder = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        return [target.parent / name for name in remove_stale_temps_at(folder, target.name)]
    finally:
        os.close(folder)


def remove_stale_temps_at(folder: int, target_name: str) -> list[str]:
    """`remove_stale_temps` for the target `target_name` in the open folder `folder`."""
    removed: list[str] = []
    try:
        candidates = [name for name in os.listdir(folder) if _is_temp_of(name, target_name)]
    except OSError:
        return removed
    for name in candidates:
        if _abandoned(folder, name, target_name):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=folder)
                removed.append(name)
    return removed


def _is_temp_of(name: str, target_name: str) -> bool:
    return name.startswith(f".{target_name}.") and name.endswith(_TEMP_SUFFIX)


def _abandoned(folder: int, name: str, target_name: str) -> bool:
    middle = name[len(target_name) + 2 : -len(_TEMP_SUFFIX)]
    pid_text, dot, _ = middle.partition(".")
    if dot and pid_text.isdigit() and len(pid_text) < 10:
        return not _process_alive(int(pid_text))
    try:
        return time.time() - os.stat(name, dir_fd=folder, follow_symlinks=False).st_mtime > _ORPHAN_AGE
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
