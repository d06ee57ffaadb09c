"""Running vendor tools: found on PATH, always with a timeout, never raising. A fault is a result.

A tool that is missing, hangs past its timeout, exits non-zero, is not permitted to run, or prints something
other than text comes back as a `ToolResult` whose `fault` says what happened, so the checker reports it as
a failed or skipped check instead of crashing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

DEFAULT_TIMEOUT = 10.0
MAX_OUTPUT = 8 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
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
        return shutil.which(tool, path=self.path)

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
        env = {**os.environ, "PATH": self.path, "LC_ALL": "C"}
        try:
            proc = subprocess.run(
                [exe, *argv[1:]],
                capture_output=True,
                timeout=self.timeout,
                check=False,
                env=env,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as error:
            out = _text(error.stdout)
            return result(None, out, _text(error.stderr), f"{argv[0]} did not finish within {self.timeout:g} s")
        except PermissionError as error:
            return result(None, "", "", f"{argv[0]} is not permitted to run: {error.strerror}")
        except OSError as error:
            return result(None, "", "", f"{argv[0]} could not be started: {error.strerror or error}")
        out, err = _text(proc.stdout), _text(proc.stderr)
        if proc.returncode != 0:
            detail = (err or out).strip().splitlines()
            reason = f": {detail[-1][:200]}" if detail else ""
            return result(proc.returncode, out, err, f"{argv[0]} exited with status {proc.returncode}{reason}")
        return result(0, out, err, None)

    def run_all(self, commands: Sequence[Sequence[str]]) -> list[ToolResult]:
        """Run several tools at once; the whole batch is bounded by the per-call timeout."""
        if not commands:
            return []
        if len(commands) == 1:
            return [self.run(commands[0])]
        from concurrent.futures import ThreadPoolExecutor  # imported when there is more than one tool to run

        with ThreadPoolExecutor(max_workers=min(8, len(commands))) as pool:
            return list(pool.map(self.run, commands))


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        return data[:MAX_OUTPUT]
    return data[:MAX_OUTPUT].decode("utf-8", errors="replace")
