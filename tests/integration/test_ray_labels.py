"""accelenv's node labels on a real local Ray cluster, on loopback only: every node starts with the labels file
`accelenv labels` wrote for it (read by Ray's own `--labels-file` parser, unchanged); tasks that select
`accelenv.io/env.cpu-py311=pass` land only on conforming nodes, a placement group packs on accelenv's NVLink domain
label, and `check --ray` flags a node whose Ray accelerator type disagrees with its SKU and one whose labels no
longer say what it is.

Each node's labels come from a snapshot of a captured H100 host (nvidia-smi outputs from ../shared/fixtures) with a
Fabric section from tests/unit/data/fabric (two cliques: two NVLink domains); one node's snapshot has another
Python, so it fails cpu-py311. The cluster runs with its own HOME, temp dir, RAY_AUTH_MODE=disabled and
RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, every node on 127.0.0.1 (the `ray_loopback` fixture); it is shut down by
Ray's own calls (which end the processes it started, by pid).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hostkit import FakeRunner, Pci, capture, make_root, reorder_query

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
FABRIC = REPO / "tests/unit/data/fabric/nvidia-smi-q__accelenv-derived__4x-GB200-NVL72-clique__590.48.01.txt"
H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"
CLIQUE = "32766"
DOMAIN_KEY = "accelenv.io/nvlink-domain"
SELECT = {"accelenv.io/env.cpu-py311": "pass"}
NVRM = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  {}  Thu Feb 20 23:23:09 UTC 2025\n"


def snapshot(folder: Path, *, clique: str, unreadable: bool = False) -> Path:
    """A snapshot of a captured one-GPU H100 host whose `nvidia-smi -q` puts it in NVLink clique `clique`;
    `unreadable`: one of its host files could not be read (check's host.readable fails, on the host alone: the
    labels of a snapshot do not judge the Python that took it)."""
    from accelenv.host.discover import discover
    from accelenv.host.probes.nvidia import QUERY_FIELDS
    from accelenv.host.root import Root
    from accelenv.host.run import ToolResult
    from accelenv.host.snapshot import save_snapshot
    from accelenv.matrix import load_matrix

    matrix = load_matrix(REPO / "matrix.toml")
    pci = [Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")]
    root = make_root(folder / "root", pci=pci, modules={}, files={"/proc/sys/kernel/arch": "x86_64\n"})
    outputs = {
        "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): reorder_query(
            capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS
        ),
        "nvidia-smi --version": capture("nvidia-smi--version__" + H100),
    }
    report = discover(matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=["nvidia"])
    fabric = FABRIC.read_text(encoding="utf-8").replace(f": {CLIQUE}\n", f": {clique}\n")
    raw = ToolResult(argv=("nvidia-smi", "-q"), returncode=0, stdout=fabric, stderr="", seconds=0.1, fault=None)
    report = dataclasses.replace(report, raw={**report.raw, "nvidia-smi-q": raw})
    if unreadable:
        report = dataclasses.replace(report, unreadable={"/proc/self/limits": "permission denied"})
    path = folder / "node.json"
    save_snapshot(report, path)
    return path


def accelenv(*args: str) -> str:
    """The real command line, as a node's start-up script runs it."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "tools")}
    done = subprocess.run(
        [sys.executable, "-m", "accelenv", "--matrix", str(REPO / "matrix.toml"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def labels_file(folder: Path, *, clique: str, unreadable: bool = False) -> Path:
    folder.mkdir(parents=True)
    target = folder / "labels.yaml"
    accelenv("labels", "--env", "cpu-py311", "--snapshot", str(snapshot(folder, clique=clique, unreadable=unreadable)),
             "--format", "ray", "-o", str(target))  # fmt: skip
    return target


def test_nodes_started_with_accelenvs_labels(tmp_path: Path, ray_loopback: dict[str, Any]) -> None:
    import ray
    from ray._private.label_utils import parse_node_labels_from_yaml_file
    from ray.cluster_utils import Cluster
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

    files = {
        "head": labels_file(tmp_path / "head", clique="1"),
        "a": labels_file(tmp_path / "a", clique="1"),
        "b": labels_file(tmp_path / "b", clique="2"),
        "odd": labels_file(tmp_path / "odd", clique="2", unreadable=True),  # a host file it could not read
    }
    labels = {name: parse_node_labels_from_yaml_file(str(path)) for name, path in files.items()}  # Ray's parser
    assert {name: found["accelenv.io/env.cpu-py311"] for name, found in labels.items()} == {
        "head": "pass", "a": "pass", "b": "pass", "odd": "fail",
    }  # fmt: skip
    assert labels["a"][DOMAIN_KEY] == "7c3e9a4b-51d2-4f08-b6e1-2a9d0c5f8e13.1"
    assert labels["b"][DOMAIN_KEY] == "7c3e9a4b-51d2-4f08-b6e1-2a9d0c5f8e13.2"

    args: dict[str, Any] = {"num_cpus": 2, **ray_loopback}
    cluster = Cluster(initialize_head=True, head_node_args={**args, "labels": labels["head"]})
    try:
        nodes = {name: cluster.add_node(**args, labels=labels[name]) for name in ("a", "b", "odd")}
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
        ids = {name: node.node_id for name, node in nodes.items()}
        ids["head"] = ray.get_runtime_context().get_node_id()
        everything: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
        assert all(n["NodeManagerAddress"] == "127.0.0.1" for n in everything)
        seen = {n["NodeID"]: n["Labels"] for n in everything}
        for name, node_id in ids.items():  # Ray keeps the labels as written
            ours = ("accelenv.io/", "ray.io/gpu-domain")  # the one ray.io/ key accelenv writes (check/labels.py)
            assert {k: v for k, v in seen[node_id].items() if k.startswith(ours)} == labels[name]

        @ray.remote(num_cpus=1)
        def where() -> str:
            import time

            time.sleep(0.3)
            return str(ray.get_runtime_context().get_node_id())

        spread = where.options(label_selector=SELECT, scheduling_strategy="SPREAD")
        landed = set(ray.get([spread.remote() for _ in range(12)], timeout=120))
        assert ids["odd"] not in landed
        assert landed <= {ids["head"], ids["a"], ids["b"]}
        # the odd node does take work when asked without the selector: the selector kept the tasks off it
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        pinned = where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(ids["odd"], soft=False))
        assert ray.get(pinned.remote(), timeout=120) == ids["odd"]

        # three one-CPU bundles fit on no single node (two CPUs each): packed on one NVLink domain, two nodes
        group = placement_group([{"CPU": 1}] * 3, topology_strategy={DOMAIN_KEY: "STRICT_PACK"})
        ray.get(group.ready(), timeout=120)
        placed = set(placement_group_table(group)["bundles_to_node_id"].values())
        remove_placement_group(group)
        domains = {seen[node_id][DOMAIN_KEY] for node_id in placed}
        assert len(placed) == 2
        assert len(domains) == 1
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]


def host_root(folder: Path, driver: str) -> str:
    """A PCI-only H100 host (no nvidia-smi on the node): the check reads the driver from the kernel module."""
    pci = [Pci(f"0000:{0x10 + i:02x}:00.0", "0x10de", "0x2330", driver="nvidia") for i in range(2)]
    files = {"/proc/driver/nvidia/version": NVRM.format(driver), "/proc/sys/kernel/arch": "x86_64\n"}
    return str(make_root(folder, pci=pci, modules={"nvidia": driver}, files=files))


def test_check_ray_flags_a_wrong_accelerator_type_and_drifted_labels(
    tmp_path: Path, ray_loopback: dict[str, Any]
) -> None:
    import ray
    from ray._private.label_utils import parse_node_labels_from_yaml_file
    from ray.cluster_utils import Cluster

    from accelenv.cluster.ray import check_cluster

    old, new = host_root(tmp_path / "old", "570.124.06"), host_root(tmp_path / "new", "580.95.05")
    started = tmp_path / "started.yaml"  # labels written on the node at start, when it ran 570.124.06
    accelenv("labels", "--env", "gpu-nvidia-cu132", "--root", old, "--format", "ray", "-o", str(started))
    labels = parse_node_labels_from_yaml_file(str(started))
    assert labels["accelenv.io/driver"] == "570.124.06"

    args: dict[str, Any] = {"num_cpus": 1, "num_gpus": 2, **ray_loopback}
    cluster = Cluster(initialize_head=True, head_node_args={**args, "resources": {"accelerator_type:H100": 1}})
    try:
        wrong = cluster.add_node(**args, resources={"accelerator_type:A100": 1})
        upgraded = cluster.add_node(**args, resources={"accelerator_type:H100": 1}, labels=labels)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
        head = ray.get_runtime_context().get_node_id()
        roots = {head: old, wrong.node_id: old, upgraded.node_id: new}  # the driver was upgraded under `upgraded`
        text = (REPO / "matrix.toml").read_text(encoding="utf-8")
        results = check_cluster(text, "gpu-nvidia-cu132", "nvidia", address=cluster.address, timeout=90, roots=roots)
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]

    checks = {r.node_id: {c["id"]: c for c in r.checks} for r in results}
    assert checks[head]["ray.accelerator_type"]["status"] == "pass"
    assert "ray.labels" not in checks[head]  # started without accelenv labels: nothing to drift from
    bad = checks[wrong.node_id]["ray.accelerator_type"]
    assert (bad["status"], bad["expected"], bad["found"]) == ("fail", "H100", "A100")
    assert bad["message"] == "Ray reports accelerator_type A100; the node's SKU h100-sxm is H100 to Ray"
    assert "ray.accelerator_type" in {r.node_id: r for r in results}[wrong.node_id].failing
    drift = checks[upgraded.node_id]["ray.labels"]
    assert drift["status"] == "fail"
    assert "accelenv.io/driver='570.124.06' at start, '580.95.05' now" in drift["found"]
    assert "ray start --labels-file" in drift["fix"]
    assert checks[upgraded.node_id]["ray.accelerator_type"]["status"] == "pass"
