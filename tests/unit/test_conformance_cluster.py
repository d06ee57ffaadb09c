"""The CPU conformance cluster's set-up, without Ray: it is started once per run with only the processes the suite
uses, a stage that fails names itself and what came before it, what started is ended, and a dead cluster is
replaced (benchmarks/cluster_startup.py measures the real one)."""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path
from typing import Any

import conformancekit
import pytest
from conformancekit import LocalCluster, shared_cpu_cluster, stage, start_cpu_cluster, stop_shared_cluster


class FakeRayCluster:
    """Ray's Cluster as the kit uses it; `fail_at` makes that add_node call raise as Ray does when the GCS is slow."""

    fail_at: int | None = None
    made: list[FakeRayCluster] = []  # noqa: RUF012

    def __init__(self) -> None:
        self.added: list[dict[str, Any]] = []
        self.environ: list[dict[str, str]] = []
        self.ended = False
        self.address = "127.0.0.1:1"
        FakeRayCluster.made.append(self)

    def add_node(self, **args: Any) -> None:
        self.environ.append({k: os.environ.get(k, "") for k in ("RAY_TMPDIR", "HOME", "RAY_USAGE_STATS_ENABLED")})
        if len(self.added) == self.fail_at:
            raise Exception("Timed out while waiting for GCS to become available.")
        self.added.append(args)

    def wait_for_nodes(self, timeout: float = 30) -> None:
        assert timeout > 0

    def list_all_nodes(self) -> list[Any]:
        node = types.SimpleNamespace(remaining_processes_alive=lambda: not self.ended)
        return [node] * len(self.added)

    def shutdown(self) -> None:
        self.ended = True


@pytest.fixture
def fake_ray(monkeypatch: pytest.MonkeyPatch) -> type[FakeRayCluster]:
    FakeRayCluster.fail_at = None
    FakeRayCluster.made = []
    ray = types.ModuleType("ray")
    utils = types.ModuleType("ray.cluster_utils")
    utils.Cluster = FakeRayCluster  # type: ignore[attr-defined]
    ray.cluster_utils = utils  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray.cluster_utils", utils)
    monkeypatch.setattr(conformancekit, "SHARED", [])
    for key in ("RAY_TMPDIR", "RAY_USAGE_STATS_ENABLED"):
        monkeypatch.delenv(key, raising=False)
    return FakeRayCluster


def test_a_failed_stage_names_itself_the_stages_before_it_and_the_error() -> None:
    timings = {"head node (GCS, raylet)": 41.5}

    def slow() -> None:
        raise TimeoutError("Timed out while waiting for nodes to join.")

    with pytest.raises(pytest.fail.Exception) as failure:
        stage("nodes registered", timings, slow)
    message = str(failure.value)
    assert "nodes registered failed after" in message
    assert "head node (GCS, raylet) 41.5 s" in message
    assert "TimeoutError: Timed out while waiting for nodes to join." in message
    assert "load average" in message
    assert "Traceback" not in message
    assert set(timings) == {"head node (GCS, raylet)", "nodes registered"}
    assert stage("driver connect", timings, lambda: 7) == 7
    assert "driver connect" in timings


def test_the_cluster_starts_only_what_the_suite_uses(fake_ray: type[FakeRayCluster]) -> None:
    home_before = os.environ.get("HOME")
    local = start_cpu_cluster()
    (handle,) = fake_ray.made
    head, second = handle.added
    assert head["no_monitor"] is True
    assert head["include_dashboard"] is False
    for node in (head, second):
        assert node["include_log_monitor"] is False
        assert node["num_cpus"] == 1
        assert node["node_ip_address"] == "127.0.0.1"
        assert node["temp_dir"] == local.temp
    assert "no_monitor" not in second
    # the nodes start in the cluster's own folders, with no usage stats; the caller's environment is left as it was
    assert handle.environ[0] == {"RAY_TMPDIR": local.temp, "HOME": local.home, "RAY_USAGE_STATS_ENABLED": "0"}
    assert "RAY_TMPDIR" not in os.environ
    assert os.environ.get("HOME") == home_before
    assert list(local.startup) == ["head node (GCS, raylet)", "second node (raylet)", "nodes registered"]
    local.stop()
    assert handle.ended
    assert not Path(local.temp).exists()
    assert not Path(local.home).exists()


@pytest.mark.parametrize(("fail_at", "stage_name"), [(0, "head node (GCS, raylet)"), (1, "second node (raylet)")])
def test_a_start_that_fails_ends_what_it_started_and_says_where(
    fake_ray: type[FakeRayCluster], fail_at: int, stage_name: str
) -> None:
    fake_ray.fail_at = fail_at
    with pytest.raises(pytest.fail.Exception, match=rf"{re.escape(stage_name)} failed after .*waiting for GCS"):
        start_cpu_cluster()
    (handle,) = fake_ray.made
    assert handle.ended
    assert "RAY_TMPDIR" not in os.environ
    assert not conformancekit.SHARED


def test_one_cluster_serves_every_test_and_a_dead_one_is_replaced(
    fake_ray: type[FakeRayCluster], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, started = shared_cpu_cluster()
    assert started
    again, started = shared_cpu_cluster()
    assert again is first
    assert not started
    monkeypatch.setattr(LocalCluster, "alive", lambda self: self is not first)
    replaced, started = shared_cpu_cluster()
    assert started
    assert replaced is not first
    assert [c.ended for c in fake_ray.made] == [True, False]
    stop_shared_cluster()
    assert [c.ended for c in fake_ray.made] == [True, True]
    assert not conformancekit.SHARED
