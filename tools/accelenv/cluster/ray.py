"""`accelenv check ENV --ray [ADDRESS]`: the checker on every alive node of a Ray cluster, at once.

One task per node, pinned with node-affinity scheduling (so no node is missed or checked twice), runs the same
pure `check` against that node's own discovery. The driver aggregates: each node's verdict and failing checks,
how many nodes conform, which nodes differ from the majority, and Ray's own view of each node's accelerators
against what the node's driver shows. A node that dies or does not answer in time is reported unreachable, never
passing, and the run still finishes.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from accelenv.errors import UsageError

# What Ray calls each family's accelerators (ray/_private/accelerators): the resource counted per node.
RAY_RESOURCE = {"nvidia": "GPU", "amd": "GPU", "tpu": "TPU", "neuron": "neuron_cores", "gaudi": "HPU"}


@dataclass(frozen=True, kw_only=True)
class NodeResult:
    node_id: str
    address: str
    reachable: bool
    verdict: str  # pass, warn, fail, or unreachable
    failing: list[str] = field(default_factory=list)
    devices: int = 0
    driver: str | None = None
    skus: list[str] = field(default_factory=list)
    ray_count: float | None = None
    ray_types: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # Ray's view against the node's
    checks: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def signature(self) -> tuple[object, ...]:
        return (self.driver, self.devices, tuple(self.skus))

    def as_json(self) -> dict[str, Any]:
        return {**vars(self), "signature": list(self.signature)}


def _check_here(matrix_text: str, env_id: str, root: str, delay: float) -> dict[str, Any]:
    """Runs on the node: discovery through its root, then the pure check. Plain data goes back."""
    import ray

    from accelenv.check.checks import check
    from accelenv.check.verdict import verdict
    from accelenv.host.discover import discover
    from accelenv.host.root import Root
    from accelenv.host.run import ToolRunner
    from accelenv.matrix.load import model_from_text

    if delay:
        time.sleep(delay)
    start = time.monotonic()
    matrix = model_from_text(matrix_text)  # the driver validated it before sending it
    env = matrix.envs[env_id]
    report = discover(
        matrix, root=Root.from_option(root), runner=ToolRunner(), environ=os.environ, families=[env.family]
    )
    findings = check(matrix, env, report)
    acc = report.accelerator(env.family)
    return {
        "node_id": ray.get_runtime_context().get_node_id(),
        "verdict": str(verdict(findings)),
        "checks": [f.as_json() for f in findings],
        "devices": len(acc.devices) if acc else 0,
        "driver": acc.driver_version if acc else None,
        "skus": sorted({d.sku or d.name or "unknown" for d in acc.devices}) if acc else [],
        "seconds": time.monotonic() - start,
    }


def check_cluster(
    matrix_text: str,
    env_id: str,
    family: str,
    *,
    address: str | None,
    timeout: float = 120.0,
    roots: dict[str, str] | None = None,
    delays: dict[str, float] | None = None,
) -> list[NodeResult]:
    """Check every alive node. `roots` (node id -> host root) and `delays` let tests stand in for other hosts."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError as error:
        raise UsageError("--ray needs Ray: pip install 'accelenv[ray]' (or pip install ray)") from error
    if not ray.is_initialized():
        ray.init(
            address=address or os.environ.get("RAY_ADDRESS") or "auto", logging_level=logging.ERROR, log_to_driver=False
        )
    remote = ray.remote(num_cpus=0, max_retries=0)(_check_here)
    everything: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    nodes = [n for n in everything if n.get("Alive")]
    pending = {}
    for node in nodes:
        node_id = node["NodeID"]
        strategy = NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        root = (roots or {}).get(node_id, os.environ.get("ACCELENV_ROOT", "/"))
        ref = remote.options(scheduling_strategy=strategy).remote(
            matrix_text, env_id, root, (delays or {}).get(node_id, 0.0)
        )
        pending[ref] = node
    ready, not_ready = ray.wait(list(pending), num_returns=len(pending), timeout=timeout)
    results = []
    for ref in ready:
        node = pending[ref]
        try:
            data = ray.get(ref)
        except Exception as error:  # the node died, the worker crashed: unreachable, not passing
            results.append(_unreachable(node, f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"))
            continue
        results.append(_result(node, data, family))
    for ref in not_ready:
        ray.cancel(ref, force=True)
        results.append(_unreachable(pending[ref], f"no answer within {timeout:g} s"))
    return sorted(results, key=lambda r: r.address + r.node_id)


def _resources(node: dict[str, Any], family: str) -> tuple[float | None, list[str]]:
    resources = node.get("Resources") or {}
    name = RAY_RESOURCE.get(family)
    count = resources.get(name) if name else None
    types = sorted(k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:"))
    return count, types


def _result(node: dict[str, Any], data: dict[str, Any], family: str) -> NodeResult:
    ray_count, ray_types = _resources(node, family)
    problems = []
    resource = RAY_RESOURCE.get(family)
    if resource is not None:
        seen = data["devices"]
        if ray_count is None and seen:
            problems.append(f"the node has {seen} device(s) but Ray reports no {resource} resource")
        elif ray_count is not None and int(ray_count) != seen and family != "neuron":
            problems.append(f"Ray counts {ray_count:g} {resource}, the node's driver shows {seen} device(s)")
    failing = [c["id"] for c in data["checks"] if c["status"] == "fail"]
    verdict = "fail" if problems else data["verdict"]
    return NodeResult(
        node_id=node["NodeID"],
        address=str(node.get("NodeManagerAddress", "?")),
        reachable=True,
        verdict=verdict,
        failing=failing + (["ray.resources"] if problems else []),
        devices=data["devices"],
        driver=data["driver"],
        skus=list(data["skus"]),
        ray_count=ray_count,
        ray_types=ray_types,
        problems=problems,
        checks=list(data["checks"]),
        seconds=float(data["seconds"]),
    )


def _unreachable(node: dict[str, Any], reason: str) -> NodeResult:
    return NodeResult(
        node_id=node["NodeID"],
        address=str(node.get("NodeManagerAddress", "?")),
        reachable=False,
        verdict="unreachable",
        problems=[reason],
    )


def summary(results: list[NodeResult]) -> dict[str, Any]:
    """Cluster view: conforming nodes, and the nodes that differ from the majority (driver, count, SKUs)."""
    reachable = [r for r in results if r.reachable]
    majority = Counter(r.signature for r in reachable).most_common(1)
    usual = majority[0][0] if majority else None
    return {
        "nodes": len(results),
        "conforming": sum(1 for r in results if r.verdict in ("pass", "warn")),
        "unreachable": [r.node_id for r in results if not r.reachable],
        "majority": list(usual) if usual is not None else None,
        "differ_from_majority": [r.node_id for r in reachable if r.signature != usual],
    }
