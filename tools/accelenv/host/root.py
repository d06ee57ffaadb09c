"""Every file a probe reads goes through one `Root`, so a captured host (a folder) can stand in for a real one.

`Root("/")` is the live host; `Root("/tmp/captured-node")` reads `/tmp/captured-node/sys/...` wherever a probe
asks for `/sys/...`. Paths resolve as if the root were `/` (as `chroot` does): an absolute symlink under the
root points into the root, `..` stops at it, so no read leaves it. Reads never block and never raise: a FIFO or
a device where a file is expected, a file over 4 MiB, and a file that exists but cannot be read are `None`,
like a missing file, and the root remembers them (`unreadable`) so the checker can say which facts it could
not see and why.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from pathlib import Path

from accelenv.errors import UsageError

ROOT_ENV_VAR = "ACCELENV_ROOT"
MAX_READ = 4 * 1024 * 1024  # sysfs and proc files are small; refuse to slurp anything huge
CHUNK = 64 * 1024
MAX_LINKS = 40  # as the kernel: more symlinks than this on one path is a loop
_ABSENT = frozenset({errno.ENOENT, errno.ENOTDIR})
_WILDCARDS = frozenset("*?[")


_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.:+-]{1,64}")  # a driver or a PCI address


class Root:
    """The host (or captured host) every probe reads through; equal roots are the same path."""

    __slots__ = ("_unreadable", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        # host path -> why it exists but could not be read; filled as probes read (see `unreadable`)
        self._unreadable: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Root(path={self.path!r})"

    def __eq__(self, other: object) -> bool:
        return self.path == other.path if isinstance(other, Root) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.path)

    @classmethod
    def from_option(cls, value: str | None) -> Root:
        """`--root DIR`, else $ACCELENV_ROOT, else the live host. A root that is not a folder is a usage error."""
        chosen = value or os.environ.get(ROOT_ENV_VAR) or "/"
        path = Path(chosen)
        if not path.is_dir():
            origin = "--root" if value else f"${ROOT_ENV_VAR}"
            found = "does not exist" if not path.exists() else "is not a folder"
            raise UsageError(
                f"{origin} {chosen}: {found}; give the folder of a captured host (its sys/, proc/, dev/, etc/), "
                "or / for this host"
            )
        return cls(path)

    @property
    def is_live(self) -> bool:
        return self.path.resolve() == Path("/")

    @property
    def unreadable(self) -> dict[str, str]:
        """Host paths that exist but could not be read so far, with the reason (permission denied, a FIFO
        where a file was expected, larger than 4 MiB, a symlink loop ...), sorted by path."""
        return dict(sorted(self._unreadable.items()))

    def resolve(self, host_path: str) -> Path:
        """Where `host_path` (an absolute path on the host) lies under this root, before symlinks are resolved."""
        return self.path / host_path.lstrip("/")

    # -- reading -----------------------------------------------------------------------------------

    def read_text(self, host_path: str) -> str | None:
        fd = self._open(host_path, os.O_RDONLY | os.O_NONBLOCK)
        if fd is None:
            return None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                self._note(host_path, _kind(mode) + " where a file was expected")
                return None
            data = self._read(fd, host_path)
        except OSError as error:
            self._failed(host_path, error)
            return None
        finally:
            os.close(fd)
        return None if data is None else data.decode("utf-8", errors="replace")

    def read_value(self, host_path: str) -> str | None:
        """A one-value file (sysfs attribute): stripped, or None when absent or empty."""
        text = self.read_text(host_path)
        if text is None:
            return None
        return text.strip() or None

    def exists(self, host_path: str) -> bool:
        """Whether anything (a dangling symlink too) is at `host_path`."""
        located = self._locate(host_path, follow_last=False)
        if located is None:
            return False
        folder, name = located
        try:
            os.stat(name, dir_fd=folder, follow_symlinks=False)
        except OSError:
            return False
        finally:
            os.close(folder)
        return True

    def listdir(self, host_path: str) -> list[str]:
        fd = self._open(host_path, os.O_RDONLY | os.O_DIRECTORY)
        if fd is None:
            return []
        try:
            return sorted(os.listdir(fd))  # noqa: PTH208 - a descriptor resolved inside the root, not a path
        except OSError as error:
            self._failed(host_path, error)
            return []
        finally:
            os.close(fd)

    def link_name(self, host_path: str) -> str | None:
        """The last component of a symlink's target (sysfs `driver` links), or None: also for a link that names
        itself (a loop, `driver -> driver`) or a target whose name is not a plain name (`..`, control bytes), so
        no message reads "the driver driver holds ..."."""
        located = self._locate(host_path, follow_last=False)
        if located is None:
            return None
        folder, name = located
        try:
            target = os.readlink(name, dir_fd=folder)
        except OSError:
            return None
        finally:
            os.close(folder)
        name_of_target = Path(target).name
        if name_of_target in ("", ".", "..", Path(host_path).name) or not _PLAIN_NAME.fullmatch(name_of_target):
            return None
        return name_of_target

    def glob(self, pattern: str) -> list[str]:
        """Host paths under this root matching a glob such as `/dev/nvidia[0-9]*` (wildcards in any part)."""
        found = [""]
        for part in _parts(pattern):
            if _WILDCARDS.isdisjoint(part):
                found = [f"{base}/{part}" for base in found]
            else:
                found = [
                    f"{base}/{entry}"
                    for base in found
                    for entry in self.listdir(base or "/")
                    if fnmatch.fnmatchcase(entry, part)
                ]
        return sorted(path for path in found if path and self.exists(path))

    # -- resolution inside the root ------------------------------------------------------------------

    def _open(self, host_path: str, flags: int) -> int | None:
        """A descriptor of `host_path` with every symlink resolved inside the root; None when absent or refused
        (refusals are noted)."""
        located = self._locate(host_path, follow_last=True)
        if located is None:
            return None
        folder, name = located
        try:
            return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
        except OSError as error:
            self._failed(host_path, error)
            return None
        finally:
            os.close(folder)

    def _locate(self, host_path: str, *, follow_last: bool) -> tuple[int, str] | None:
        """(a descriptor of the folder holding the last part of `host_path`, that part's name), resolving every
        symlink on the way as if the root were `/`. None when a folder on the way is absent or refused."""
        try:
            top = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            self._failed(host_path, error)
            return None
        stack = [top]  # descriptors of the folders from the root down to the current one
        parts = _parts(host_path)
        links = 0
        try:
            while parts:
                name = parts.pop(0)
                if name == "..":
                    if len(stack) > 1:
                        os.close(stack.pop())
                    continue
                target = _link_target(stack[-1], name) if parts or follow_last else None
                if target is not None:
                    links += 1
                    if links > MAX_LINKS:
                        raise OSError(errno.ELOOP, "too many levels of symbolic links (a loop)")
                    if target.startswith("/"):
                        while len(stack) > 1:
                            os.close(stack.pop())
                    parts = _parts(target) + parts
                    continue
                if not parts:
                    return os.dup(stack[-1]), name
                stack.append(
                    os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=stack[-1])
                )
            return os.dup(stack[-1]), "."  # the path names a folder itself (the root, or one ending in ..)
        except OSError as error:
            self._failed(host_path, error)
            return None
        finally:
            for fd in stack:
                os.close(fd)

    def _read(self, fd: int, host_path: str) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        # small reads: procfs refuses a single multi-megabyte read (ENOMEM)
        while chunk := os.read(fd, CHUNK):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_READ:
                self._note(host_path, f"larger than {MAX_READ // (1024 * 1024)} MiB")
                return None
        return b"".join(chunks)

    def _failed(self, host_path: str, error: OSError) -> None:
        if error.errno not in _ABSENT:
            self._note(host_path, _words(error))

    def _note(self, host_path: str, reason: str) -> None:
        self._unreadable.setdefault("/" + "/".join(_parts(host_path)), reason)


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _link_target(folder: int, name: str) -> str | None:
    """The target of `name` in `folder` when it is a symlink; None otherwise (absent included)."""
    try:
        return os.readlink(name, dir_fd=folder)
    except OSError:
        return None


def _kind(mode: int) -> str:
    from accelenv.fileio import kind_of

    return kind_of(mode)


def _words(error: OSError) -> str:
    if error.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if error.errno == errno.ELOOP:
        return "a symlink loop"
    return error.strerror or str(error)
