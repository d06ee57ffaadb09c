"""Unit tests run no vendor tool, no docker and no network: any attempt fails loudly."""

from __future__ import annotations

import socket
import subprocess
from typing import TYPE_CHECKING, NoReturn

import pytest
from hostkit import make_root

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _forbidden(what: str) -> NoReturn:
    raise AssertionError(f"unit tests must not {what}; use a fake (see tests/unit/conftest.py)")


@pytest.fixture(autouse=True)
def _no_outside_world(monkeypatch: pytest.MonkeyPatch) -> None:
    def popen(*args: object, **kwargs: object) -> NoReturn:
        _forbidden(f"start a process ({args[0] if args else '?'})")

    def connect(self: socket.socket, address: object) -> NoReturn:
        _forbidden(f"open a network connection ({address})")

    monkeypatch.setattr(subprocess, "Popen", popen)
    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture(autouse=True)
def _no_asked_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """No $COLUMNS from the test run: the tables of a command fit it even under a pipe, so an inherited one (an
    xdist worker has COLUMNS=80) wraps the lines a test looks for. A test of the fitting sets its own."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def fake_root(tmp_path: Path) -> Callable[..., Path]:
    """Build a host tree under a temporary folder: `fake_root(pci=[Pci(...)], modules={...}, files={...})`."""
    return lambda **kwargs: make_root(tmp_path / "host", **kwargs)
