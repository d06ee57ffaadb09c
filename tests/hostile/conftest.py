"""Hostile input: files, tools, matrices, snapshots and registries that try to make accelenv escape its folders,
leak a secret, hang, eat memory or lose an edit. Each test is a case from issue 14 (or 15, for the root).

These tests build everything they attack in a temporary folder: FIFOs with os.mkfifo, character devices with
os.mknod (as root only; otherwise the test skips), tools as shell scripts, registries on loopback. They never
write to a system device and never reach beyond 127.0.0.1: an autouse fixture refuses any other connection.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
from typing import TYPE_CHECKING, NoReturn

import pytest
from nestedpytest import _inner_pytest_temp  # noqa: F401 - an autouse fixture, found by its name here
from reference import REFERENCE_MATRIX

if TYPE_CHECKING:
    from pathlib import Path

LOOPBACK = ("127.0.0.1", "::1", "localhost")


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else None
        in_tmp = isinstance(address, str) and address.startswith(tempfile.gettempdir() + "/")  # a Unix socket of ours
        if host not in LOOPBACK and not in_tmp:
            _forbidden(f"connect to {address}")
        real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture(autouse=True)
def _no_asked_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """No $COLUMNS from the test run (an xdist worker has COLUMNS=80): the commands here, and the processes they
    start, write the whole lines a pipe gets, as they do in a serial run."""
    monkeypatch.delenv("COLUMNS", raising=False)


def _forbidden(what: str) -> NoReturn:
    raise AssertionError(f"hostile tests must not {what}: build the hostile thing on loopback or in tmp_path")


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    """A private copy of the reference matrix, in a folder of its own (the repository of generated files)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    path = repo / "matrix.toml"
    shutil.copy(REFERENCE_MATRIX, path)
    return path
