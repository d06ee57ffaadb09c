"""The cluster view without a cluster: dead and drained nodes from what ray.nodes() reports, and the majority
comparison over every check (tests/integration/test_ray_cluster.py runs the same on a real local Ray cluster)."""

from __future__ import annotations

from typing import Any

import jsonschema

from accelenv.cluster.ray import NodeResult, _dead, summary
from accelenv.plan.schemas import cluster_schema


def node(name: str, *, pytest: str = "pass", driver: str = "570.124.06", devices: int = 2) -> NodeResult:
    checks = [
        {"id": "hardware.present", "status": "pass"},
        {"id": "requirements.pytest", "status": pytest},
    ]
    return NodeResult(
        node_id=name,
        address="10.0.0.1",
        reachable=True,
        verdict="fail" if pytest == "fail" else "pass",
        failing=["requirements.pytest"] if pytest == "fail" else [],
        devices=devices,
        driver=driver,
        skus=["h100-sxm"],
        checks=[{**c, "expected": "", "found": "", "message": "", "fix": ""} for c in checks],
    )


def ray_node(name: str, reason: int, message: str) -> dict[str, Any]:
    """A dead node as ray.nodes() lists it (Ray 2.60: DeathReason is NodeDeathInfo.Reason's number)."""
    return {
        "NodeID": name,
        "Alive": False,
        "NodeManagerAddress": "10.0.0.9",
        "DeathReason": reason,
        "DeathReasonMessage": message,
    }


def test_a_node_failing_another_check_differs_from_the_majority() -> None:
    results = [node("a"), node("b"), node("c", pytest="fail"), node("d", driver="580.65.06")]
    view = summary(results)
    assert view["differ_from_majority"] == ["c", "d"]
    assert view["differences"] == {
        "c": ["requirements.pytest: fail (majority: pass)"],
        "d": ["driver: 580.65.06 (majority: 570.124.06)"],
    }
    assert (view["nodes"], view["conforming"]) == (4, 3)


def test_dead_nodes_count_and_idle_drained_ones_do_not() -> None:
    crashed = _dead(ray_node("x", 2, "health check failed"))
    stopped = _dead(ray_node("y", 1, "received SIGTERM"), during="its result arrived, then Ray marked the node dead")
    idle = _dead(ray_node("z", 4, "idle for 60 s"))
    assert (crashed.verdict, stopped.verdict, idle.verdict) == ("dead", "dead", "drained")
    assert crashed.problems == ["Ray marks the node dead (unexpected termination: health check failed)"]
    assert stopped.problems[1] == "during the check: its result arrived, then Ray marked the node dead"
    results = [node("a"), node("b"), crashed, stopped, idle]
    view = summary(results)
    assert (view["nodes"], view["conforming"]) == (4, 2)
    assert (view["dead"], view["unreachable"], view["drained"]) == (["x", "y"], ["x", "y"], ["z"])
    assert view["differ_from_majority"] == []
    document = {"env": "e", "cluster": view, "nodes": [r.as_json() for r in results]}
    jsonschema.Draft202012Validator(cluster_schema()).validate(document)


def test_an_idle_node_that_died_during_the_check_is_dead_not_drained() -> None:
    assert _dead(ray_node("z", 4, ""), during="no answer within 120 s").verdict == "dead"


def test_an_unknown_death_reason_is_named_by_its_number() -> None:
    assert _dead(ray_node("q", 9, "")).problems == ["Ray marks the node dead (reason 9)"]


def test_the_text_verdict_names_dead_drained_and_what_differs() -> None:
    """The lines under `check --ray`'s node table carry what the JSON has: dead among the unreachable, drained
    nodes left out of the count, and each differing node's differences."""
    from accelenv.cli.host import cluster_lines

    results = [
        node("a"),
        node("b"),
        node("c", pytest="fail"),
        _dead(ray_node("x", 2, "health check failed")),
        _dead(ray_node("z", 4, "idle for 60 s")),
    ]
    text = cluster_lines(summary(results), "gpu-nvidia-cu132")
    assert text.splitlines() == [
        (
            "2 of 4 nodes conform to gpu-nvidia-cu132; 1 unreachable (1 dead); 1 differ from the majority; "
            "1 drained, not counted"
        ),
        "  c: requirements.pytest: fail (majority: pass)",
    ]
    assert cluster_lines(summary([node("a")]), "cpu") == (
        "1 of 1 nodes conform to cpu; 0 unreachable (0 dead); 0 differ from the majority\n"
    )
