"""Running vendor tools: found on PATH, always with a timeout, never raising. A fault is a result.

A tool that is missing, hangs past its timeout, exits non-zero, is not permitted to run, or prints something
other than text comes back as a `ToolResult` whose `fault` says what happened, so the checker reports it as
a failed or skipped check instead of crashing.

Every child process accelenv starts (vendor tools here, `uv` through `run_in_group`) runs in a process group
of its own, which accelenv ends as a group when the child times out, prints too much, or accelenv itself is
stopped (SIGTERM or Ctrl-C: the exception unwinds through here). A descendant that leaves the group with
`setsid` (a daemon a tool starts) is found by a marker in its environment, `ACCELENV_CHILD=<run id>`, and ended
too once the run is over. A descendant that also clears its environment is reparented to accelenv while tools
run (a child subreaper) and ended as the run ends (`host/reaper.py`).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from accelenv.records import frozen

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Mapping, Sequence

DEFAULT_TIMEOUT = 10.0
CHILD_MARKER = "ACCELENV_CHILD"
MAX_OUTPUT = 8 * 1024 * 1024  # per stream: a tool that prints more is stopped, not read to the end
_POLL = 0.2  # seconds between checks whether the tool has exited
_DRAIN = 0.5  # seconds to keep reading after the tool exited (a child may still hold its pipes)


@frozen
class ToolResult:
    """What one run of one tool produced (a snapshot keeps these so a verdict can be replayed)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    fault: str | None  # None when the tool ran and exited 0

    @property
    def ok(self) -> bool:
        return self.fault is None

    def as_json(self) -> dict[str, object]:
        return {
            "argv": list(self.argv),
            "returncode": self.returncode,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "seconds": round(self.seconds, 3),
            "fault": self.fault,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ToolResult:
        argv = data.get("argv")
        code = data.get("returncode")
        seconds = data.get("seconds")
        fault = data.get("fault")
        return cls(
            argv=tuple(str(a) for a in argv) if isinstance(argv, list) else (),
            returncode=code if isinstance(code, int) else None,
            stdout=str(data.get("stdout") or ""),
            stderr=str(data.get("stderr") or ""),
            seconds=float(seconds) if isinstance(seconds, int | float) else 0.0,
            fault=str(fault) if fault is not None else None,
        )


class Runner(Protocol):
    """What discovery needs from a tool runner; tests pass a fake that answers from captures."""

    def which(self, tool: str) -> str | None: ...

    def run(self, argv: Sequence[str]) -> ToolResult: ...

    def run_all(self, commands: Sequence[Sequence[str]]) -> list[ToolResult]: ...


class ToolRunner:
    """Runs host tools found on `path` (default: $PATH) with a per-call timeout."""

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, path: str | None = None) -> None:
        self.timeout = timeout
        self.path = path if path is not None else os.environ.get("PATH", "")

    def which(self, tool: str) -> str | None:
        return which(tool, self.path)

    def _present_but_not_executable(self, tool: str) -> str | None:
        for folder in self.path.split(os.pathsep):
            candidate = os.path.join(folder, tool)  # noqa: PTH118 - PATH entries are plain strings
            if folder and os.path.isfile(candidate) and not os.access(candidate, os.X_OK):  # noqa: PTH113
                return candidate
        return None

    def run(self, argv: Sequence[str]) -> ToolResult:
        start = time.monotonic()
        argv = tuple(argv)

        def result(code: int | None, out: str, err: str, fault: str | None) -> ToolResult:
            return ToolResult(
                argv=argv, returncode=code, stdout=out, stderr=err, seconds=time.monotonic() - start, fault=fault
            )

        exe = self.which(argv[0])
        if exe is None:
            present = self._present_but_not_executable(argv[0])
            if present:
                return result(None, "", "", f"{argv[0]} is not permitted to run: {present} is not executable")
            return result(None, "", "", f"{argv[0]} not found on PATH")
        import subprocess  # only when a tool is there to run: a check that runs none does without

        from accelenv.host import reaper

        marker = os.urandom(8).hex()
        env = {**os.environ, "PATH": self.path, "LC_ALL": "C", CHILD_MARKER: marker}
        with reaper.adopting():  # a descendant that clears its environment too is reparented here, and ended
            try:
                with reaper.spawning():
                    proc = subprocess.Popen(
                        [exe, *argv[1:]],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        env=env,
                        start_new_session=True,  # its own process group: a timeout ends the tool and its children
                    )
                    reaper.running(proc.pid)
            except PermissionError as error:
                return result(None, "", "", f"{argv[0]} is not permitted to run: {error.strerror}")
            except OSError as error:
                return result(None, "", "", f"{argv[0]} could not be started: {error.strerror or error}")
            since = reaper.start_time(proc.pid)
            try:
                captured = _capture(proc, self.timeout)
            finally:
                kill_marked(marker)  # daemons it left behind with setsid, also when accelenv is interrupted
                reaper.running(proc.pid, done=True)
                if since is not None:
                    reaper.end_adopted(since)
        out, err = _text(captured.stdout), _text(captured.stderr)
        if captured.overflow:
            return result(None, out, err, f"{argv[0]} printed more than {MAX_OUTPUT // 2**20} MiB; stopped it")
        if captured.timed_out:
            return result(None, out, err, f"{argv[0]} did not finish within {self.timeout:g} s")
        code = proc.returncode
        if code != 0:
            cause = cause_line(err) or cause_line(out)
            reason = f": {cause}" if cause else ""
            return result(code, out, err, f"{argv[0]} exited with status {code}{reason}")
        return result(0, out, err, None)

    def run_all(self, commands: Sequence[Sequence[str]]) -> list[ToolResult]:
        """Run several tools at once; the whole batch is bounded by the per-call timeout."""
        if sum(self.which(argv[0]) is not None for argv in commands) <= 1:  # a missing tool answers at once
            return [self.run(argv) for argv in commands]
        from concurrent.futures import ThreadPoolExecutor  # imported when there is more than one tool to wait for

        with ThreadPoolExecutor(max_workers=min(8, len(commands))) as pool:
            return list(pool.map(self.run, commands))


_TRACEBACK = "Traceback (most recent call last):"


def cause_line(text: str) -> str | None:
    """The line of a failing tool's output that says why: the first line with words in it (nvidia-smi prints the
    cause first, `Failed to initialize NVML: Driver/library version mismatch`, then `NVML library version: 580.126`),
    except after a Python traceback (amd-smi, tpu-info), whose cause is its last line. At most 200 characters."""
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if any(c.isalnum() for c in line)]
    if not lines:
        return None
    return (lines[-1] if _TRACEBACK in text else lines[0])[:200]


def _text(data: bytes) -> str:
    return data[:MAX_OUTPUT].decode("utf-8", errors="replace")


@frozen
class _Captured:
    stdout: bytes
    stderr: bytes
    timed_out: bool
    overflow: bool


def _capture(proc: subprocess.Popen[bytes], timeout: float) -> _Captured:
    """Read the tool's output as it comes, at most MAX_OUTPUT bytes a stream, until both streams close or
    `timeout` passes. A tool that runs out of time or prints too much is killed with its whole process group
    (children that hold the pipes too), and so are children still holding the pipes after the tool exited."""
    import selectors

    deadline = time.monotonic() + timeout
    buffers = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    timed_out = overflow = False
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for stream in buffers:
            if stream is not None:
                os.set_blocking(stream.fileno(), False)
                selector.register(stream, selectors.EVENT_READ)
        while selector.get_map() and not overflow:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _DRAIN:
                break  # the tool is gone; whatever still holds its pipes is left over
            for key, _ in selector.select(min(deadline - now, _POLL)):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer = buffers[key.fileobj]  # type: ignore[index]
                buffer += chunk
                overflow = overflow or len(buffer) > MAX_OUTPUT
        finished = not selector.get_map()
    if overflow or timed_out or not finished:
        _kill_group(proc)
    elif not _exits_by(proc, deadline):  # it closed its output but runs on
        _kill_group(proc)
        timed_out = True
    for stream in buffers:
        if stream is not None:
            stream.close()
    return _Captured(
        stdout=bytes(buffers[proc.stdout]), stderr=bytes(buffers[proc.stderr]), timed_out=timed_out, overflow=overflow
    )


def _exits_by(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    import subprocess

    try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the tool's process group (the tool and every child it started), then reap the tool."""
    import signal
    import subprocess

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)


def kill_marked(marker: str) -> list[int]:
    """End every process whose environment holds `ACCELENV_CHILD=<marker>` (descendants of one run, also those
    that left its process group with setsid). Returns their ids. A process caught between fork and exec shows no
    environment for a moment (and one may fork again while it is ended), so the scan is repeated, a few
    milliseconds apart, until one finds nothing more (at most `_SCANS` times)."""
    import time

    killed: list[int] = []
    for attempt in range(_SCANS):
        found = _kill_marked_once(marker)
        killed += found
        if not found and attempt:
            break
        time.sleep(0.005)
    return killed


_SCANS = 5


def _kill_marked_once(marker: str) -> list[int]:
    import signal

    needle = f"{CHILD_MARKER}={marker}".encode()
    killed: list[int] = []
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]  # noqa: PTH208 - names only
    except OSError:
        return killed
    for pid in pids:
        if pid == os.getpid():
            continue
        try:
            fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # gone, or another user's
            continue
        try:
            environ = os.read(fd, 1024 * 1024)
        except OSError:
            continue
        finally:
            os.close(fd)
        if needle in environ.split(b"\0"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
    return killed


def run_in_group(
    argv: Sequence[str], *, input_text: str, timeout: float, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run` for a child accelenv waits on (uv): in its own process group, ended as a group when it
    times out or when accelenv is stopped meanwhile (the exception is raised again). Raises FileNotFoundError
    and subprocess.TimeoutExpired like `subprocess.run`."""
    import subprocess

    marker = os.urandom(8).hex()
    environment = {**(os.environ if env is None else env), CHILD_MARKER: marker}
    with subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        start_new_session=True,
    ) as proc:  # leaving the block closes the pipes and reaps the child
        try:
            out, err = proc.communicate(input_text, timeout=timeout)
        except BaseException:  # a timeout, SIGTERM (raised as an exception by the CLI), Ctrl-C
            _kill_group(proc)  # type: ignore[arg-type]
            kill_marked(marker)
            raise
        kill_marked(marker)
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def run_attached(argv: Sequence[str], *, env: Mapping[str, str]) -> int:
    """A command of the user's own, its output passing through (`python -m accelenv.cluster.local -- CMD`): in
    a process group of its own, with the marker, waited on without a timeout (it is the user's), and ended as a
    group when accelenv is stopped meanwhile (the exception is raised again). Its exit status."""
    import subprocess

    marker = os.urandom(8).hex()
    with subprocess.Popen(list(argv), env={**env, CHILD_MARKER: marker}, start_new_session=True) as proc:
        try:
            return proc.wait()
        except BaseException:  # SIGTERM (raised as an exception by the CLI), Ctrl-C
            _kill_group(proc)
            raise
        finally:
            kill_marked(marker)


def which(tool: str, path: str) -> str | None:
    """`shutil.which(tool, path=path)` as it is on POSIX (the first executable regular file of that name in the
    folders of `path`, in order; a name with a slash is taken as it is), without importing `shutil` (with bz2 and
    lzma, 3 ms of the start-up of every check, which asks whether container tools are installed)."""

    def runnable(candidate: Path) -> bool:
        # os.path, not Path: a PATH folder this user cannot search (or a name too long) is passed over, as a
        # shell passes it over, where Path.exists raises
        return os.path.exists(candidate) and os.access(candidate, os.X_OK) and not os.path.isdir(candidate)  # noqa: PTH110, PTH112

    if "/" in tool:
        return tool if runnable(Path(tool)) else None
    if not path:
        return None
    seen: set[str] = set()
    for folder in path.split(os.pathsep):
        if folder in seen:
            continue
        seen.add(folder)
        candidate = Path(folder, tool)
        if runnable(candidate):
            return str(candidate)
    return None
