"""Local Ray clusters for tests, on loopback only.

Ray 2.60 reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER once, when it is imported: with it "0", every address Ray
picks for this machine is 127.0.0.1 (`ray._private.services.get_node_ip_address`); with it unset, `ray.init`
turns a 127.0.0.1 cluster address into the machine's own address, and a cluster bound to loopback is then never
reached (the driver retries its GCS connection for minutes). So the test folders' conftests call `before_ray()`
before any test imports Ray, and `loopback()` fails a test whose process imported Ray too early instead of
letting it hang.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

# RAY_worker_niceness: Ray starts its workers (every actor) at niceness 15, below the raylet and the driver. That
# suits a node that runs only Ray; here the tests around a cluster run at niceness 0 (QEMU's emulated builds, the
# image builds, Podman), and an actor at 15 beside them got a few percent of a core: a restart or a group took
# minutes and the bounds of the conformance suite failed. At 0 the actors share the machine like everything else.
ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled", "RAY_worker_niceness": "0"}


def before_ray() -> None:
    """Set Ray's loopback switches and its workers' niceness for this process (and its children) unless a cluster
    was named."""
    if os.environ.get("RAY_ADDRESS") or "ray" in sys.modules:
        return
    for key, value in ENV.items():
        os.environ.setdefault(key, value)


def ray_or_skip() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("ray is missing (a dev dependency)")
        pytest.skip("ray is not installed")


@contextlib.contextmanager
def loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """Ray on loopback with its own HOME (no token file or config of the machine's reaches it) and its own temp
    dir (Ray keeps the node address it picked in /tmp/ray, shared with other clusters). Yields the arguments
    every node of the test's cluster starts with; the temp dir (also $RAY_TMPDIR) is removed afterwards."""
    ray_or_skip()
    from ray._private import ray_constants

    if ray_constants.ENABLE_RAY_CLUSTER:
        pytest.fail("ray was imported before RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 was set: no node would be on loopback")
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    temp = tempfile.mkdtemp(prefix="ar-", dir="/tmp")  # short: Ray's unix socket paths must fit in 107 bytes
    # Ray's Cluster also writes the head's address to $RAY_TMPDIR/ray (else /tmp/ray, absent where Ray never ran)
    Path(temp, "ray").mkdir()
    monkeypatch.setenv("RAY_TMPDIR", temp)
    try:
        yield {"node_ip_address": "127.0.0.1", "temp_dir": temp}
    finally:
        shutil.rmtree(temp, ignore_errors=True)
