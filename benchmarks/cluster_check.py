"""Checking an N-node local Ray cluster against checking one host, cold and warm, as ratios.

- cold: `accelenv check ENV --ray ADDRESS` as a fresh process against a running cluster, as users run it. Ray
  starts workers per job, so every such run starts a worker on every node: this is the first-run cost on any
  cluster. The fresh process pays `import ray` too (measured alone as well).
- warm: the same check again from one driver process (a service or notebook that checks repeatedly): the workers
  are up, the task is registered, each worker has parsed the matrix.
- Ray's floor: a no-op task per node, scheduled the same way (node affinity, two node listings), so what is
  accelenv's share of a warm check and what is Ray's shows.

The goal: an N-node check costs about one node's check plus the round trip, not the sum of N. All nodes share
this machine's cores here (a 2-core machine runs 4 nodes' raylets and workers two at a time), so N-node ratios
also measure contention that a real cluster, one node per machine, does not have; the floor shows how much.

    python benchmarks/cluster_check.py [--nodes 4] [--repeat 5] [--env cpu-py311]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from accelenv.cluster.ray import check_cluster

# Every node on loopback: Ray reads this when it is imported (below, in on_cluster), and so do the CLI processes
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
LOOPBACK: dict[str, Any] = {"node_ip_address": "127.0.0.1"}
REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "import sys; from accelenv.cli import main; sys.exit(main())"]


def fresh_process(argv: list[str], repeat: int) -> float:
    """Median seconds of `argv` as a new process (as a user runs it), after one run to warm the file cache."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "tools")}
    times = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False, cwd=REPO, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def _noop(matrix_text: str) -> int:
    return len(matrix_text)


def on_cluster(nodes: int, matrix_text: str, env_id: str, family: str, repeat: int) -> dict[str, Any]:
    """Seconds on a fresh cluster of `nodes` nodes: `cold` (a fresh CLI process), `warm` and `floor` (medians in
    this process), and the node count checked."""
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, **LOOPBACK})
    try:
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=1, **LOOPBACK)
        cluster.wait_for_nodes()
        cold = fresh_process([*CLI, "check", env_id, "--ray", cluster.address, "--json"], repeat)
        ray.init(
            address=cluster.address, _node_ip_address="127.0.0.1", logging_level=logging.ERROR, log_to_driver=False
        )
        noop = ray.remote(num_cpus=0, max_retries=0)(_noop)

        def floor() -> None:
            alive = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
            refs = [
                noop.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n["NodeID"], soft=False)
                ).remote(matrix_text)
                for n in alive
            ]
            ray.wait(refs, num_returns=len(refs))
            ray.nodes()  # type: ignore[no-untyped-call]
            ray.get(refs)

        def check() -> int:
            results = check_cluster(matrix_text, env_id, family, address=cluster.address, timeout=120)
            if any(not r.reachable for r in results):
                raise SystemExit(f"a node did not answer: {[r.problems for r in results if not r.reachable]}")
            return len(results)

        checked = check()
        floor()
        warm, base = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            check()
            warm.append(time.perf_counter() - start)
            start = time.perf_counter()
            floor()
            base.append(time.perf_counter() - start)
        return {"cold": cold, "warm": statistics.median(warm), "floor": statistics.median(base), "nodes": checked}
    finally:
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--env", default="cpu-py311", help="environment to check (default: %(default)s)")
    args = parser.parse_args()
    from accelenv.matrix.load import model_from_text

    matrix_text = (REPO / "matrix.toml").read_text(encoding="utf-8")
    family = model_from_text(matrix_text).envs[args.env].family
    local = fresh_process([*CLI, "check", args.env], args.repeat)
    ray_import = fresh_process([sys.executable, "-c", "import ray"], args.repeat)
    bare = fresh_process([sys.executable, "-c", "pass"], args.repeat)
    one = on_cluster(1, matrix_text, args.env, family, args.repeat)
    many = on_cluster(args.nodes, matrix_text, args.env, family, args.repeat)
    n = many["nodes"]

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:6.0f} ms"

    print(f"medians of {args.repeat}, {os.cpu_count()} CPUs")
    print(f"local `accelenv check {args.env}` (fresh process)   {ms(local)}")
    print(f"`import ray` (fresh process, less a bare python)    {ms(ray_import - bare)}")
    print(f"{'':<36}{'1 node':>10}{f'{n} nodes':>10}{'ratio':>8}")
    for label, key in (("cold: `check --ray` (fresh process)", "cold"), ("warm: check again", "warm")):
        print(f"{label:<36}{ms(one[key]):>10}{ms(many[key]):>10}{many[key] / one[key]:>7.2f}x")
    print(f"{'Ray floor: a no-op task per node':<36}{ms(one['floor']):>10}{ms(many['floor']):>10}", end="")
    print(f"{many['floor'] / one['floor']:>7.2f}x")
    print(f"a sum of the nodes would be {n}.00x; cold {n}-node check / local check: {many['cold'] / local:.1f}x")
    print(f"warm {n}-node check / Ray's {n}-node floor: {many['warm'] / many['floor']:.2f}x (accelenv's share)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
