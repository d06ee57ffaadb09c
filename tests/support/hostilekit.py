"""Helpers for the hostile tests (tests/hostile): device nodes, misbehaving tools, the command line in a process of
its own, and what a clean error looks like."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[2]


def needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("creating a device node (os.mknod) needs root")


def char_device(path: Path, major: int, minor: int) -> Path:
    """A character device node of our own under tmp (1,3 behaves as /dev/null, 1,5 as /dev/zero, 1,7 as
    /dev/full); root only."""
    needs_root()
    os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(major, minor))
    return path


def tool(folder: Path, name: str, body: str) -> Path:
    """An executable shell script `name` in `folder` (a vendor tool that misbehaves)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def accelenv(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    preexec_fn: Callable[[], None] | None = None,
    stdout: int | None = subprocess.PIPE,
) -> subprocess.CompletedProcess[str]:
    """The real command line in a process of its own (for signals, resource limits and redirected streams)."""
    environment = {**os.environ, "PYTHONPATH": str(REPO / "tools"), "ACCELENV_NO_CACHE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "accelenv", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        timeout=timeout,
        check=False,
        preexec_fn=preexec_fn,  # resource limits for the child only
    )


def accelenv_here(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line called in this process (`accelenv.cli.main`), answering as `accelenv` does: the exit status,
    standard output and standard error of the same words, under the same environment. For a test whose point is the
    command's answer, not its process (signals, resource limits, streams, start-up, a hang the process timeout
    ends): a process costs 0.3 s of Python start-up and imports, the call a tenth of that."""
    import contextlib
    import io
    from unittest import mock

    from accelenv.cli import main

    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.dict(os.environ, {"ACCELENV_NO_CACHE": "1", **(env or {})}),  # the environment as it was, after
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main(list(args), out=out)
        except SystemExit as exit_:  # argparse's refusals and --help, as the interpreter turns them into a status
            if exit_.code is None or isinstance(exit_.code, int):
                code = exit_.code or 0
            else:
                print(exit_.code, file=sys.stderr)
                code = 1
    return subprocess.CompletedProcess(["accelenv", *args], code, out.getvalue(), err.getvalue())


def assert_clean_error(result: subprocess.CompletedProcess[str], *, code: int, says: str) -> None:
    """Exit status `code` (1 or 2), a one-line-per-problem message containing `says`, no traceback, no bug."""
    assert result.returncode == code, (result.returncode, result.stderr)
    assert says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert "internal error" not in result.stderr
