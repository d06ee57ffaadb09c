"""`accelenv check ENV --ray [ADDRESS]`: the checker on every alive node of a Ray cluster, at once.

One task per node, pinned with node-affinity scheduling (so no node is missed or checked twice), runs the same
pure `check` against that node's own discovery. The driver aggregates: each node's verdict and failing checks,
how many nodes conform, which nodes differ from the majority (in any check, not only driver, devices and SKUs),
and Ray's own view of each node's accelerators against what the node's driver shows.

A node is never counted as conforming on the word of a node that is gone: one that does not answer in time is
unreachable; one Ray marks dead, before the check or by the time the answers are in (its result came from a node
that then died), is dead. Nodes Ray knows as dead from earlier stay listed as dead, except those the autoscaler
removed because they were idle, which are listed as drained and counted nowhere. The run always finishes.

Repeated checks are cheap: the task is registered with Ray once per process, and a worker parses a matrix text
once, so a warm check of N nodes costs about one node's check plus the round trip.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from accelenv.errors import UsageError
from accelenv.excerpts import clip
from accelenv.records import field, frozen

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Matrix

from accelenv.cluster.node_answer import answer_problem, answer_verdict, node_labels_of, ray_findings

# Why a node died, as ray.nodes() reports it (DeathReason: NodeDeathInfo.Reason in Ray's common.proto).
DEATH_REASONS = {
    0: "unspecified",
    1: "expected termination",
    2: "unexpected termination",
    3: "preempted (autoscaler drain)",
    4: "idle (autoscaler drain)",
}
IDLE_DRAIN = 4  # AUTOSCALER_DRAIN_IDLE: removed by the autoscaler because it was idle, by design
# verdicts that count as conforming; dead, drained and unreachable nodes never do
CONFORMING = ("pass", "warn")


@frozen
class NodeResult:
    node_id: str
    address: str
    reachable: bool
    verdict: str  # pass, warn, fail, unreachable, dead (Ray marks it dead), drained (removed by the autoscaler)
    failing: list[str] = field(default_factory=list)
    devices: int = 0
    driver: str | None = None
    skus: list[str] = field(default_factory=list)
    ray_count: float | None = None
    ray_types: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # Ray's view against the node's
    checks: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)  # the node's domain labels in Ray (cluster/domains.py)
    topology: dict[str, Any] = field(default_factory=dict)  # the node's devices and links (host/links.py)

    @property
    def signature(self) -> tuple[object, ...]:
        """What the majority is of: driver, device count, SKUs, and every check's status (Ray's view included),
        so a node that fails `requirements.pytest` where the others pass differs from them."""
        statuses = {c["id"]: c["status"] for c in self.checks}
        if self.problems and self.reachable:
            statuses["ray.resources"] = "fail"
        return (self.driver, self.devices, tuple(self.skus), tuple(sorted(statuses.items())))

    def as_json(self) -> dict[str, Any]:
        return {**vars(self), "signature": list(self.signature)}


@functools.lru_cache(maxsize=4)
def _model(matrix_text: str) -> Matrix:
    """The model of a matrix text, parsed once per worker process for each text (the driver validated it before
    sending it). Models are frozen, so a cached one is safe to share between checks."""
    from accelenv.matrix.load import model_from_text

    return model_from_text(matrix_text)


def _check_here(matrix_text: str, env_id: str, root: str, delay: float) -> dict[str, Any]:
    """Runs on the node: discovery through its root, then the pure check. Plain data goes back."""
    import ray

    from accelenv.check.checks import check
    from accelenv.check.verdict import verdict
    from accelenv.host.discover import discover
    from accelenv.host.root import Root
    from accelenv.host.run import ToolRunner

    if delay:
        time.sleep(delay)
    start = time.monotonic()
    matrix = _model(matrix_text)
    env = matrix.envs[env_id]
    report = discover(
        matrix,
        root=Root.from_option(root),
        runner=ToolRunner(),
        environ=os.environ,
        families=[env.family],
        topology=True,  # the devices and their links, for the cluster view (sysfs reads; the tools ran anyway)
    )
    findings = check(matrix, env, report)
    acc = report.accelerator(env.family)
    from accelenv.check.node_labels import labels_for
    from accelenv.cluster.accelerator_types import expected_ray

    labels, _ = labels_for(matrix, report, [env], fabric=False)  # what the node's labels should say now
    return {
        "labels": labels.labels,
        "ray_expected": expected_ray(matrix, acc).as_json() if acc else None,
        "node_id": ray.get_runtime_context().get_node_id(),
        "verdict": str(verdict(findings)),
        "checks": [f.as_json() for f in findings],
        "devices": len(acc.devices) if acc else 0,
        "topology": (report.topology.get("devices") or {}).get(env.family) or {},
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
    connected_here = not ray.is_initialized()
    _connect(ray, address or os.environ.get("RAY_ADDRESS") or "auto", timeout)
    try:
        return _check_nodes(
            ray,
            NodeAffinitySchedulingStrategy,
            matrix_text,
            env_id,
            family,
            timeout=timeout,
            roots=roots,
            delays=delays,
        )
    finally:
        if connected_here:  # leave Ray as found; a driver that leaves it to Ray's exit hook waits ~0.5 s longer
            ray.shutdown()


def _check_nodes(
    ray: Any,
    NodeAffinitySchedulingStrategy: Any,  # the class, passed in with the `ray` module that has it
    matrix_text: str,
    env_id: str,
    family: str,
    *,
    timeout: float,
    roots: dict[str, str] | None,
    delays: dict[str, float] | None,
) -> list[NodeResult]:
    """One pinned task per alive node, then who is alive once the answers are in, then the nodes already dead."""
    remote = _remote_check()
    resource = _model(matrix_text).families[family].ray_resource
    everything: list[dict[str, Any]] = ray.nodes()
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
    for ref in not_ready:
        ray.cancel(ref, force=True)
    # who is alive now: a result from a node that died after sending it, or whose raylet died, does not count
    now: dict[str, dict[str, Any]] = {n["NodeID"]: n for n in ray.nodes()}
    results = []
    for ref in ready:
        node = pending[ref]
        latest = now.get(node["NodeID"]) or {**node, "Alive": False, "DeathReason": None}
        try:
            data = ray.get(ref)
        except Exception as error:  # the node died, the worker crashed: unreachable or dead, not passing
            reason = f"{type(error).__name__}: {clip((str(error).splitlines() or [''])[0], 200)}"
            results.append(_dead(latest, during=reason) if not latest.get("Alive") else _unreachable(node, reason))
            continue
        if not latest.get("Alive"):
            results.append(_dead(latest, during="its result arrived, then Ray marked the node dead; it is not counted"))
        elif (problem := answer_problem(data)) is not None:  # another accelenv version: that node, not the run
            results.append(_unreachable(node, f"the node's answer is unreadable ({problem}); same accelenv there?"))
        elif data.get("node_id") != node["NodeID"]:
            results.append(_unreachable(node, f"the check ran on node {data.get('node_id')}, not on this one"))
        else:
            results.append(_result(node, data, family, resource))
    for ref in not_ready:
        node = pending[ref]
        latest = now.get(node["NodeID"]) or {**node, "Alive": False, "DeathReason": None}
        answer = f"no answer within {timeout:g} s"
        results.append(_dead(latest, during=answer) if not latest.get("Alive") else _unreachable(node, answer))
    results += [_dead(node) for node in everything if not node.get("Alive")]
    return sorted(results, key=lambda r: (r.verdict == "drained", r.address, r.node_id))


def _connect(ray: Any, address: str, timeout: float) -> None:
    """`ray.init`, within `timeout`. Ray retries an unreachable cluster for minutes inside C++ code that neither
    times out nor lets Ctrl-C or SIGTERM through, so it runs in a helper thread while this one only waits: a
    timeout is a usage error, and a signal ends the wait at once."""
    if ray.is_initialized():
        return
    _refuse_unreachable(address, timeout)
    done = threading.Event()
    failures: list[BaseException] = []

    def connect() -> None:
        try:
            ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
        except BaseException as error:  # handed to the waiting thread, which reports it
            failures.append(error)
        finally:
            done.set()

    with _quiet("ray._private.worker"):  # "SIGTERM handler is not set ... not the main thread": as intended
        threading.Thread(target=connect, name="accelenv-ray-connect", daemon=True).start()
        try:
            connected = _wait(done, timeout)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM while Ray is still connecting: nothing of Ray's was made that needs shutting
            # down, and Ray's exit hook (ray.shutdown, which imports its DAG machinery first) would hold the
            # exit for seconds behind the connect thread
            import atexit

            atexit.unregister(ray.shutdown)
            raise
    if not connected:
        raise UsageError(
            f"cannot connect to the Ray cluster at {address} within {timeout:g} s: check the address "
            "(`ray status` on the head node) or give more time with --ray-timeout"
        )
    if failures:
        first = clip((str(failures[0]).strip().splitlines() or [type(failures[0]).__name__])[0], 300)
        raise UsageError(f"cannot connect to the Ray cluster at {address}: {first}")


def _wait(done: threading.Event, timeout: float) -> bool:
    """`done.wait(timeout)` in short waits. A signal is delivered to any thread that does not block it, and Ray's
    connect starts threads of its own: when one of them takes the SIGINT or SIGTERM, a single long wait of this
    thread is not interrupted, and the handler (which runs only here) would wait for the timeout. Each short wait
    ends back in the interpreter, which runs the handler."""
    deadline = time.monotonic() + timeout
    while not done.wait(min(0.2, max(deadline - time.monotonic(), 0.0))):
        if time.monotonic() >= deadline:
            return False
    return True


def _refuse_unreachable(address: str, timeout: float) -> None:
    """A `host:port` (or `ray://host:port`) nobody listens on fails in milliseconds instead of Ray's retries."""
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not port.isdigit() or not host:
        return  # "auto", "local", or a form Ray resolves itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=min(timeout, 5.0)):
            pass
    except OSError as error:
        raise UsageError(f"cannot reach the Ray cluster at {address}: {error.strerror or error}") from error


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@functools.cache
def _remote_check() -> Any:
    """The node task, registered with Ray once per process (Ray exports it again for a new cluster or job)."""
    import ray

    return ray.remote(num_cpus=0, max_retries=0)(_check_here)


def _resources(node: dict[str, Any], name: str | None) -> tuple[float | None, list[str]]:
    resources = node.get("Resources") or {}
    count = resources.get(name) if name else None
    types = sorted(k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:"))
    return count, types


def _result(node: dict[str, Any], data: dict[str, Any], family: str, resource: str | None) -> NodeResult:
    """`resource`: what Ray counts for the family's devices (`families.<id>.ray_resource`)."""
    ray_count, ray_types = _resources(node, resource)
    problems = []
    if resource is not None:
        seen = data["devices"]
        if ray_count is None and seen:
            problems.append(f"the node has {seen} device(s) but Ray reports no {resource} resource")
        elif ray_count is not None and int(ray_count) != seen and family != "neuron":
            problems.append(f"Ray counts {ray_count:g} {resource}, the node's driver shows {seen} device(s)")
    ray_checks = ray_findings(data, ray_types, node_labels_of(node))
    checks = list(data["checks"]) + ray_checks
    failing = [c["id"] for c in checks if c["status"] == "fail"]
    verdict = "fail" if problems else answer_verdict(data["verdict"], checks)  # never the node's word alone
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
        checks=checks,
        seconds=float(data["seconds"]),
        labels=_domain_labels(node),
        topology=dict(data["topology"]) if isinstance(data.get("topology"), dict) else {},
    )


def _dead(node: dict[str, Any], *, during: str | None = None) -> NodeResult:
    """A node Ray reports dead: before the check (from an earlier death) or `during` it. One the autoscaler
    removed for being idle is drained: listed, not a failure."""
    code = node.get("DeathReason")
    reason = DEATH_REASONS.get(code, f"reason {code}") if isinstance(code, int) else "no reason given"
    detail = str(node.get("DeathReasonMessage") or "").strip()
    said = f"Ray marks the node dead ({reason}{': ' + clip(detail, 200) if detail else ''})"
    drained = code == IDLE_DRAIN and during is None
    return NodeResult(
        node_id=str(node.get("NodeID", "?")),
        address=str(node.get("NodeManagerAddress", "?")),
        reachable=False,
        verdict="drained" if drained else "dead",
        problems=[said] + ([f"during the check: {during}"] if during else []),
        labels=_domain_labels(node),  # a dead node still belongs to its domain, which misses it
    )


def _unreachable(node: dict[str, Any], reason: str) -> NodeResult:
    return NodeResult(
        node_id=node["NodeID"],
        address=str(node.get("NodeManagerAddress", "?")),
        reachable=False,
        verdict="unreachable",
        problems=[reason],
        labels=_domain_labels(node),
    )


def _domain_labels(node: dict[str, Any]) -> dict[str, str]:
    """The labels that place a node in a domain (and say a domain's size or a slice's shape)."""
    from accelenv.cluster.domains import DOMAIN_KEYS

    wanted = {key for keys in DOMAIN_KEYS.values() for key in keys}
    return {
        k: v
        for k, v in node_labels_of(node).items()
        if k in wanted or (k.endswith("-size") and k.startswith("accelenv.io/")) or k == "accelenv.io/tpu-topology"
    }


def summary(results: list[NodeResult]) -> dict[str, Any]:
    """Cluster view: nodes (drained ones are not counted), conforming nodes, unreachable and dead ones, the nodes
    that differ from the majority (in driver, device count, SKUs or any check, with what differs), and the domains
    the nodes form (cluster/domains.py). The majority is the signature more nodes share than any other, and at least
    two: where there is none (two nodes disagreeing one to one, a tie), no node is named as differing, and
    `disagreements` says what splits them."""
    from accelenv.cluster.domains import domains, members_of

    counted = [r for r in results if r.verdict != "drained"]
    reachable = [r for r in counted if r.reachable]
    top = Counter(r.signature for r in reachable).most_common(2)
    ahead = len(top) == 1 or (len(top) == 2 and top[0][1] > top[1][1])
    usual = top[0][0] if top and ahead and (top[0][1] >= 2 or len(reachable) == 1) else None
    differing = [r for r in reachable if r.signature != usual] if usual is not None else []
    return {
        "nodes": len(counted),
        "conforming": sum(1 for r in counted if r.verdict in CONFORMING),
        "unreachable": [r.node_id for r in counted if not r.reachable],  # no answer to trust: dead ones included
        "dead": [r.node_id for r in counted if r.verdict == "dead"],
        "drained": [r.node_id for r in results if r.verdict == "drained"],
        "majority": _plain(usual) if usual is not None else None,
        "differ_from_majority": [r.node_id for r in differing],
        "differences": {r.node_id: _differences(r.signature, usual) for r in differing if usual is not None},
        "disagreements": _disagreements(reachable) if usual is None else {},
        "domains": domains(members_of(results, {r.node_id: r.labels for r in results})),
    }


def _disagreements(nodes: list[NodeResult]) -> dict[str, dict[str, str]]:
    """With no majority: each fact or check on which the nodes do not all agree -> node id -> its value."""
    values: dict[str, dict[str, str]] = {}
    for r in nodes:
        facts = {"driver": str(r.driver), "devices": str(r.devices), "skus": ", ".join(r.skus)}
        facts.update({str(k): str(v) for k, v in r.signature[3]})  # type: ignore[attr-defined]
        for label, value in facts.items():
            values.setdefault(label, {})[r.node_id] = value
    return {
        label: said for label, said in sorted(values.items()) if len(set(said.values())) > 1 or len(said) != len(nodes)
    }


def _plain(value: object) -> object:
    """Tuples as lists, all the way down: the JSON shape of a signature."""
    return [_plain(v) for v in value] if isinstance(value, tuple | list) else value


def _differences(mine: tuple[object, ...], usual: tuple[object, ...]) -> list[str]:
    """What sets a node apart from the majority, one line per difference: `requirements.pytest: fail (majority:
    pass)`."""
    out = [
        f"{label}: {theirs} (majority: {common})"
        for label, theirs, common in zip(("driver", "devices", "skus"), mine[:3], usual[:3], strict=True)
        if theirs != common
    ]
    checks: dict[str, str] = dict(mine[3])  # type: ignore[call-overload]
    common_checks: dict[str, str] = dict(usual[3])  # type: ignore[call-overload]
    for check_id in sorted(checks.keys() | common_checks.keys()):
        if checks.get(check_id) != common_checks.get(check_id):
            theirs = checks.get(check_id, "absent")
            out.append(f"{check_id}: {theirs} (majority: {common_checks.get(check_id, 'absent')})")
    return out
