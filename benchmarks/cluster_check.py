"""Checking a 4-node local Ray cluster against checking one node: the goal is about one node's check plus the
round trip, not the sum of four.

Starts ray.cluster_utils.Cluster (one node, then three more), runs accelenv's cluster check of the cpu default
environment on it several times each, and prints the medians and their ratio.

    python benchmarks/cluster_check.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from accelenv.cluster.ray import check_cluster

REPO = Path(__file__).resolve().parents[1]


def timed(matrix_text: str, address: str, repeat: int) -> tuple[float, int]:
    times, nodes = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        results = check_cluster(matrix_text, "cpu-py311", "cpu", address=address, timeout=120)
        times.append(time.perf_counter() - start)
        nodes = len(results)
    return statistics.median(times), nodes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    import ray
    from ray.cluster_utils import Cluster

    matrix_text = (REPO / "matrix.toml").read_text(encoding="utf-8")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        timed(matrix_text, cluster.address, 1)  # warm the workers once
        one, n1 = timed(matrix_text, cluster.address, args.repeat)
        for _ in range(3):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        timed(matrix_text, cluster.address, 1)
        four, n4 = timed(matrix_text, cluster.address, args.repeat)
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]
    print(f"{n1} node : {one * 1000:7.0f} ms (median of {args.repeat})")
    print(f"{n4} nodes: {four * 1000:7.0f} ms (median of {args.repeat})")
    print(f"ratio {n4}-node / {n1}-node: {four / one:.2f} (the sum of the nodes would be {n4 / n1:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
