"""The domains Ray packs by, on a real local Ray cluster on loopback: every node starts with the labels file
`accelenv labels` wrote for it (Ray's own `--labels-file` parser reads it), and a placement group with Ray 2.60's
`topology_strategy` lands inside one domain: `{"ray.io/gpu-domain": "STRICT_PACK"}` inside one NVLink domain
(written by accelenv only from a verified fabric), `{"accelenv.io/rack": "STRICT_PACK"}` inside one rack (the
operator's fact). A group larger than any domain is not placed at all.

Four nodes of two CPUs: NVLink domains {head, a} and {b, c} (cliques 1 and 2 of the GB200 fabric capture in
tests/unit/data/fabric), racks {head, b} and {a, c}, so the two packings disagree and each test shows its own key.
"""

from __future__ import annotations

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
CLUSTER = "7c3e9a4b-51d2-4f08-b6e1-2a9d0c5f8e13"
NODES = {"head": ("1", "r1"), "a": ("1", "r2"), "b": ("2", "r1"), "c": ("2", "r2")}  # name -> (clique, rack)


def labels_file(folder: Path, *, clique: str, rack: str, change: str = "") -> Path:
    """The Ray labels file `accelenv labels` writes from a snapshot of a captured H100 host in NVLink clique
    `clique`, whose operator facts say rack `rack`."""
    from accelenv import records
    from accelenv.host.discover import discover
    from accelenv.host.platform import checked, platform_json
    from accelenv.host.probes.nvidia import QUERY_FIELDS
    from accelenv.host.root import Root
    from accelenv.host.run import ToolResult
    from accelenv.host.snapshot import save_snapshot
    from accelenv.matrix import load_matrix

    folder.mkdir(parents=True)
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
    fabric = FABRIC.read_text(encoding="utf-8").replace(": 32766\n", f": {clique}\n")
    if change:  # one GPU's registration still in progress
        fabric = fabric.replace(change, "In Progress", 1)
    raw = ToolResult(argv=("nvidia-smi", "-q"), returncode=0, stdout=fabric, stderr="", seconds=0.1, fault=None)
    facts = {"rack": rack, **({"rack-size": "3"} if rack == "r1" else {})}  # rack r1 should hold three trays
    platform = platform_json(None, "captured", [checked("operator", facts)])
    report = records.replace(report, raw={**report.raw, "nvidia-smi-q": raw}, platform=platform)
    snap = folder / "node.json"
    save_snapshot(report, snap)
    target = folder / "labels.yaml"
    env = {**os.environ, "PYTHONPATH": str(REPO / "tools")}
    done = subprocess.run(
        [sys.executable, "-m", "accelenv", "--matrix", str(REPO / "matrix.toml"), "labels", "--env", "cpu-py311",
         "--snapshot", str(snap), "--format", "ray", "-o", str(target)],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return target


def test_placement_groups_pack_inside_accelenvs_domains(tmp_path: Path, ray_loopback: dict[str, Any]) -> None:
    import ray
    from ray._private.label_utils import parse_node_labels_from_yaml_file
    from ray.cluster_utils import Cluster
    from ray.util.placement_group import placement_group, placement_group_table, remove_placement_group

    labels = {
        name: parse_node_labels_from_yaml_file(str(labels_file(tmp_path / name, clique=clique, rack=rack)))
        for name, (clique, rack) in NODES.items()
    }
    assert labels["a"]["ray.io/gpu-domain"] == f"{CLUSTER}.1"
    assert labels["c"]["ray.io/gpu-domain"] == f"{CLUSTER}.2"
    assert labels["c"]["accelenv.io/rack"] == "r2"

    args: dict[str, Any] = {"num_cpus": 2, **ray_loopback}
    cluster = Cluster(initialize_head=True, head_node_args={**args, "labels": labels["head"]})
    try:
        nodes = {name: cluster.add_node(**args, labels=labels[name]) for name in ("a", "b", "c")}
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
        ids = {name: node.node_id for name, node in nodes.items()}
        ids["head"] = ray.get_runtime_context().get_node_id()
        seen = {n["NodeID"]: n["Labels"] for n in ray.nodes()}  # type: ignore[no-untyped-call]
        assert {seen[ids[name]]["ray.io/gpu-domain"] for name in NODES} == {f"{CLUSTER}.1", f"{CLUSTER}.2"}

        def placed(key: str) -> set[str]:
            # three one-CPU bundles fit on no single node (two CPUs each): two nodes of one domain
            group = placement_group([{"CPU": 1}] * 3, topology_strategy={key: "STRICT_PACK"})
            ray.get(group.ready(), timeout=120)
            found = set(placement_group_table(group)["bundles_to_node_id"].values())
            remove_placement_group(group)
            return found

        for key in ("ray.io/gpu-domain", "accelenv.io/rack"):
            where = placed(key)
            assert len(where) == 2
            assert len({seen[node][key] for node in where}) == 1, (key, [seen[n][key] for n in where])

        too_big = placement_group([{"CPU": 1}] * 5, topology_strategy={"ray.io/gpu-domain": "STRICT_PACK"})
        ready, _ = ray.wait([too_big.ready()], timeout=5)
        assert ready == []  # five CPUs: no NVLink domain has them, so Ray does not spread the group across two
        assert placement_group_table(too_big)["state"] != "CREATED"
        remove_placement_group(too_big)

        # check --ray groups the nodes by the same domains, and says rack r1 misses a tray
        from accelenv.cluster.ray import check_cluster, summary

        text = (REPO / "matrix.toml").read_text(encoding="utf-8")
        view = summary(check_cluster(text, "cpu-py311", "cpu", address=cluster.address, timeout=90))
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]
    found = {(d["kind"], d["name"]): d for d in view["domains"]}
    assert sorted(found) == [("nvlink", f"{CLUSTER}.1"), ("nvlink", f"{CLUSTER}.2"), ("rack", "r1"), ("rack", "r2")]
    assert sorted(found[("nvlink", f"{CLUSTER}.1")]["nodes"]) == sorted([ids["head"], ids["a"]])
    assert found[("rack", "r1")]["problems"][0].startswith("incomplete: 2 of 3 nodes answer (accelenv.io/rack-size)")
    assert found[("rack", "r2")]["complete"] is True


def test_no_gpu_domain_without_a_verified_fabric(tmp_path: Path) -> None:
    from ray._private.label_utils import parse_node_labels_from_yaml_file

    found = parse_node_labels_from_yaml_file(
        str(labels_file(tmp_path / "n", clique="1", rack="r1", change="Completed"))
    )
    assert "ray.io/gpu-domain" not in found  # one GPU not registered: no domain is claimed
    assert "accelenv.io/nvlink-domain" not in found
    assert found["accelenv.io/rack"] == "r1"
