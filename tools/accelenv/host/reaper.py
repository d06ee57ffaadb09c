"""Descendants of a vendor tool that leave its process group with `setsid` and also clear their environment (`env -i
setsid daemon &`), so neither the group nor the `ACCELENV_CHILD` marker (host/run.py) finds them.

While tools run, this process is a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): a descendant whose parent dies
is reparented here instead of to init. After each tool, every child of this process that was adopted that way is
ended and reaped. An adopted child is told apart from this process's own children by what it must be: it is not a
tool still running here, and it started no earlier than the tool whose run is ending (a descendant cannot start
before its ancestor). The flag is set only while at least one tool runs, so outside tool runs the process is as it
was. Where prctl is not available (not Linux), nothing is adopted and the marker alone holds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_lock = threading.RLock()  # held while a tool is started and while an adopted child is told apart
_depth = 0
_running: set[int] = set()


def _subreaper(on: bool) -> None:
    with contextlib.suppress(OSError, AttributeError):
        import ctypes  # only when a tool runs

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)


@contextlib.contextmanager
def adopting() -> Iterator[None]:
    """This process adopts orphaned descendants for the duration (nested and concurrent uses share it)."""
    global _depth  # noqa: PLW0603 - one flag per process, counted across threads
    with _lock:
        _depth += 1
        if _depth == 1:
            _subreaper(True)
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _subreaper(False)


def spawning() -> threading.RLock:
    """Hold while starting a tool and marking it `running`: no other thread's `end_adopted` takes it meanwhile
    for an adopted child (it is this process's child, started after that thread's tool)."""
    return _lock


def running(pid: int, *, done: bool = False) -> None:
    """Mark the tool `pid` as running here (or, with `done`, no longer): it is never taken for an adopted child."""
    with _lock:
        (_running.discard if done else _running.add)(pid)


def start_time(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (/proc/<pid>/stat), or None."""
    fields = _stat(pid)
    return int(fields[19]) if fields else None


def end_adopted(since: int) -> list[int]:
    """End and reap every adopted child of this process that started at `since` or later; their ids."""
    me = os.getpid()
    ended: list[int] = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]  # noqa: PTH208 - names only
    except OSError:
        return ended
    for pid in pids:
        fields = _stat(pid)
        if not fields or int(fields[1]) != me or int(fields[19]) < since:
            continue
        with _lock:
            if pid in _running:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)  # it is this process's child now: reaped, not left a zombie
    return ended


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state first: [0] state, [1] ppid, [19] starttime)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.read(fd, 4096).decode("ascii", "replace")  # one bounded read: the line is a few hundred bytes
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = text[text.rfind(")") + 2 :].split()
    return fields if len(fields) > 19 else None
