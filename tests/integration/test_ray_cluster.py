"""accelenv check --ray on a real multi-node Ray cluster on one machine (ray.cluster_utils.Cluster).

Nodes declare fake GPU resources; each node's check reads its own captured host (a fake sysfs root) so the nodes
stand in for different machines. One node's Ray view disagrees with its driver, one node is killed mid-check.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
import time
from pathlib import Path

import pytest
import tomlkit
from hostkit import Pci, make_root
from reference import REFERENCE_MATRIX

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
NVRM = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Thu Feb 20 23:23:09 UTC 2025\n"


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
            "base_images": {"debian12": {"repository": "python", "tag": "3.11-slim-bookworm", "python": "3.11"}},
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
            "python": "3.11",
            "platforms": ["linux/amd64"],
            "skus": ["h100-sxm"],
            "requirements": {"packages": [f"packaging=={importlib.metadata.version('packaging')}"]},
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


def test_cluster_check(tmp_path: Path) -> None:
    try:
        import ray
        from ray.cluster_utils import Cluster
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("ray is missing (a dev dependency)")
        pytest.skip("ray is not installed")
    from accelenv.cluster.ray import check_cluster, summary

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 2})
    try:
        good = cluster.add_node(num_cpus=1, num_gpus=2)
        short = cluster.add_node(num_cpus=1, num_gpus=2)  # Ray counts 2 GPUs, the host shows 1
        doomed = cluster.add_node(num_cpus=1, num_gpus=2)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        head_id = ray.get_runtime_context().get_node_id()
        roots = {
            head_id: host(tmp_path / "head", 2),
            good.node_id: host(tmp_path / "good", 2),
            short.node_id: host(tmp_path / "short", 1),
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
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]

    by_node = {r.node_id: r for r in results}
    assert len(results) == 4  # one check per node, none missed or doubled
    assert by_node[head_id].verdict in ("pass", "warn"), by_node[head_id].checks
    assert by_node[good.node_id].verdict in ("pass", "warn")
    assert by_node[good.node_id].devices == 2
    assert by_node[short.node_id].verdict == "fail"
    assert by_node[short.node_id].problems == ["Ray counts 2 GPU, the node's driver shows 1 device(s)"]
    assert by_node[doomed.node_id].verdict == "unreachable"
    assert elapsed < 90
    view = summary(results)
    import jsonschema

    from accelenv.plan.schemas import cluster_schema

    document = {"env": "cluster-test", "cluster": view, "nodes": [r.as_json() for r in results]}
    jsonschema.Draft202012Validator(cluster_schema()).validate(document)
    assert view["nodes"] == 4
    assert view["conforming"] == 2
    assert view["unreachable"] == [doomed.node_id]
    assert view["differ_from_majority"] == [short.node_id]
