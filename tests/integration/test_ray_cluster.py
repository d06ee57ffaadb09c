"""accelenv check --ray on a real multi-node Ray cluster on one machine (ray.cluster_utils.Cluster), every node on
loopback (the `ray_loopback` fixture).

Nodes declare fake GPU resources; each node's check reads its own captured host (a fake sysfs root) so the nodes
stand in for different machines. One node's Ray view disagrees with its driver, one has another pytest on its path,
one is killed mid-check (and is listed as dead by the next check), one dies just after its result arrived.
"""

from __future__ import annotations

import importlib.metadata
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import tomlkit
from hostkit import Pci, make_root
from reference import REFERENCE_MATRIX

if TYPE_CHECKING:
    from accelenv.cluster.ray import NodeResult

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
NVRM = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Thu Feb 20 23:23:09 UTC 2025\n"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def matrix_text() -> str:
    doc = tomlkit.parse(REFERENCE_MATRIX.read_text(encoding="utf-8"))
    runtime = tomlkit.table()
    runtime.update(
        {
            "family": "nvidia",
            "name": "CUDA 12.8 (cluster test)",
            "version": "12.8.1",
            "wheel_tag": "cu128",
            "architectures": ["sm_90"],
            "driver": {"min": "570.124.06", "compat_min": "525.60.13"},
            "base_images": {"debian12": {"repository": "python", "tag": f"{PY}-slim-bookworm", "python": PY}},
        }
    )
    doc["runtimes"]["cuda-cluster-test"] = runtime
    env = tomlkit.table()
    env.update(
        {
            "family": "nvidia",
            "runtime": "cuda-cluster-test",
            "description": "cluster test",
            "os": "debian12",
            "python": PY,  # the Python the cluster's nodes run: this one
            "platforms": ["linux/amd64"],
            "skus": ["h100-sxm"],
            "requirements": {
                "packages": [
                    f"packaging=={importlib.metadata.version('packaging')}",
                    f"pytest=={importlib.metadata.version('pytest')}",
                ]
            },
            "tests": ["tests/devices/test_nvidia_devices.py"],
            "ci_tier": "nightly",
        }
    )
    doc["envs"]["cluster-test"] = env
    return tomlkit.dumps(doc)


def host(folder: Path, gpus: int) -> str:
    pci = [Pci(f"0000:{0x10 + i:02x}:00.0", "0x10de", "0x2330", driver="nvidia") for i in range(gpus)]
    limits = "Max locked memory         unlimited            unlimited            bytes\n"
    files = {"/proc/driver/nvidia/version": NVRM, "/proc/self/limits": limits}
    return str(make_root(folder, pci=pci, modules={"nvidia": "570.124.06"}, files=files))


def other_pytest(folder: Path) -> str:
    """A folder holding another pytest's metadata: on a node's PYTHONPATH, a second pytest is installed there."""
    info = folder / "pytest-0.0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pytest\nVersion: 0.0.1\n")
    return str(folder)


def validate(view: dict[str, object], results: list[NodeResult]) -> None:
    import jsonschema

    from accelenv.plan.schemas import cluster_schema

    document = {"env": "cluster-test", "cluster": view, "nodes": [r.as_json() for r in results]}
    jsonschema.Draft202012Validator(cluster_schema()).validate(document)


def test_cluster_check(tmp_path: Path, ray_loopback: dict[str, Any]) -> None:
    import ray
    from ray.cluster_utils import Cluster

    from accelenv.cluster.ray import check_cluster, summary

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 2, **ray_loopback})
    try:
        good = cluster.add_node(num_cpus=1, num_gpus=2, **ray_loopback)
        short = cluster.add_node(num_cpus=1, num_gpus=2, **ray_loopback)  # Ray counts 2 GPUs, the host shows 1
        odd = cluster.add_node(
            num_cpus=1, num_gpus=2, **ray_loopback, env_vars={"PYTHONPATH": other_pytest(tmp_path / "site")}
        )
        doomed = cluster.add_node(num_cpus=1, num_gpus=2, **ray_loopback)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
        head_id = ray.get_runtime_context().get_node_id()
        roots = {
            head_id: host(tmp_path / "head", 2),
            good.node_id: host(tmp_path / "good", 2),
            short.node_id: host(tmp_path / "short", 1),
            odd.node_id: host(tmp_path / "odd", 2),
            doomed.node_id: host(tmp_path / "doomed", 2),
        }
        killer = threading.Timer(8.0, cluster.remove_node, args=(doomed,))
        killer.start()
        start = time.monotonic()
        results = check_cluster(
            matrix_text(), "cluster-test", "nvidia", address=cluster.address, timeout=90,
            roots=roots, delays={doomed.node_id: 60.0},
        )  # fmt: skip
        elapsed = time.monotonic() - start
        killer.join()
        again = check_cluster(matrix_text(), "cluster-test", "nvidia", address=cluster.address, timeout=90, roots=roots)
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]

    by_node = {r.node_id: r for r in results}
    assert len(results) == 5  # one check per node, none missed or doubled
    assert by_node[head_id].verdict in ("pass", "warn"), by_node[head_id].checks
    assert by_node[good.node_id].verdict in ("pass", "warn")
    assert by_node[good.node_id].devices == 2
    assert by_node[short.node_id].verdict == "fail"
    assert by_node[short.node_id].problems == ["Ray counts 2 GPU, the node's driver shows 1 device(s)"]
    assert by_node[odd.node_id].verdict == "fail"
    assert by_node[odd.node_id].failing == ["requirements.pytest"]
    assert by_node[doomed.node_id].verdict == "dead"  # killed mid-check: never passing
    assert by_node[doomed.node_id].problems[0].startswith("Ray marks the node dead (")
    assert elapsed < 90
    view = summary(results)
    validate(view, results)
    assert view["nodes"] == 5
    assert view["conforming"] == 2
    assert view["unreachable"] == [doomed.node_id]
    assert view["dead"] == [doomed.node_id]
    assert sorted(view["differ_from_majority"]) == sorted([short.node_id, odd.node_id])
    assert view["differences"][odd.node_id] == ["requirements.pytest: fail (majority: pass)"]
    assert view["differences"][short.node_id] == [
        "devices: 1 (majority: 2)",
        "ray.resources: fail (majority: absent)",
    ]

    # the next check still lists the dead node as dead, and does not count it as conforming
    later = summary(again)
    validate(later, again)
    assert (later["nodes"], later["conforming"], later["dead"]) == (5, 2, [doomed.node_id])
    assert {r.node_id: r.verdict for r in again}[doomed.node_id] == "dead"


def test_a_result_from_a_node_that_then_dies_does_not_count(tmp_path: Path, ray_loopback: dict[str, Any]) -> None:
    import ray
    from ray.cluster_utils import Cluster

    from accelenv.cluster.ray import check_cluster, summary

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 2, **ray_loopback})
    try:
        brief = cluster.add_node(num_cpus=1, num_gpus=2, **ray_loopback)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
        head_id = ray.get_runtime_context().get_node_id()
        roots = {head_id: host(tmp_path / "head", 2), brief.node_id: host(tmp_path / "brief", 2)}
        warm = check_cluster(matrix_text(), "cluster-test", "nvidia", address=cluster.address, timeout=60, roots=roots)
        assert all(r.verdict in ("pass", "warn") for r in warm), [r.checks for r in warm]
        # the brief node answers at once (its worker is warm); it is gone before the slow head answers
        killer = threading.Timer(4.0, cluster.remove_node, args=(brief,))
        killer.start()
        results = check_cluster(
            matrix_text(), "cluster-test", "nvidia", address=cluster.address, timeout=60,
            roots=roots, delays={head_id: 10.0},
        )  # fmt: skip
        killer.join()
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]

    by_node = {r.node_id: r for r in results}
    assert by_node[head_id].verdict in ("pass", "warn")
    assert by_node[brief.node_id].verdict == "dead"
    assert by_node[brief.node_id].problems[1] == (
        "during the check: its result arrived, then Ray marked the node dead; it is not counted"
    )
    view = summary(results)
    validate(view, results)
    assert (view["nodes"], view["conforming"], view["dead"]) == (2, 1, [brief.node_id])
