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


def test_two_nodes_that_disagree_one_to_one_have_no_majority() -> None:
    """Neither is "the one that differs": the view says what splits them instead."""
    from accelenv.cli.host import cluster_lines

    for results in (
        [node("a"), node("b", pytest="fail")],
        [node("a"), node("b"), node("c", pytest="fail"), node("d", pytest="fail")],  # 2:2
        [node("a"), node("b", driver="580.65.06"), node("c", devices=4)],  # 1:1:1
    ):
        view = summary(results)
        assert view["majority"] is None
        assert view["differ_from_majority"] == []
        assert view["differences"] == {}
        document = {"env": "e", "cluster": view, "nodes": [r.as_json() for r in results]}
        jsonschema.Draft202012Validator(cluster_schema()).validate(document)
    view = summary([node("a"), node("b", pytest="fail")])
    assert view["disagreements"] == {"requirements.pytest": {"a": "pass", "b": "fail"}}
    assert cluster_lines(view, "e").splitlines() == [
        "1 of 2 nodes conform to e; 0 unreachable (0 dead); no majority: the nodes disagree",
        "  requirements.pytest: pass (a), fail (b)",
    ]


def member(name: str, labels: dict[str, str], *, verdict: str = "pass", driver: str = "570.124.06", devices: int = 4):  # type: ignore[no-untyped-def]
    from accelenv.cluster.domains import Member

    return Member(node_id=name, verdict=verdict, driver=driver, devices=devices, labels=labels)


def test_an_nvl72_rack_with_17_of_18_trays_is_incomplete() -> None:
    from accelenv.cluster.domains import domains

    size = {"accelenv.io/nvlink-domain-size": "18"}
    rack = [member(f"n{i:02d}", {"ray.io/gpu-domain": "u.1", **size}) for i in range(17)]
    (found,) = domains(rack)
    assert (found["kind"], found["name"], found["expected"], found["complete"]) == ("nvlink", "u.1", 18, False)
    assert found["problems"] == ["incomplete: 17 of 18 nodes answer (accelenv.io/nvlink-domain-size)"]
    # without a declared size, a full peer domain says what one should hold
    peers = [member(f"m{i:02d}", {"ray.io/gpu-domain": "u.2"}) for i in range(18)]
    short = [member(f"n{i:02d}", {"ray.io/gpu-domain": "u.1"}) for i in range(17)]
    by_name = {d["name"]: d for d in domains(peers + short)}
    assert by_name["u.1"]["problems"] == [
        "incomplete: 17 of 18 nodes answer (the largest nvlink domain in the cluster)"
    ]
    assert by_name["u.2"]["complete"] is True


def test_a_dead_tray_is_missing_from_its_domain() -> None:
    from accelenv.cluster.domains import domains

    labels = {"ray.io/gpu-domain": "u.1", "accelenv.io/nvlink-domain-size": "3"}
    found = domains([member("a", labels), member("b", labels), member("c", labels, verdict="dead")])
    assert found[0]["problems"] == [
        "incomplete: 2 of 3 nodes answer (accelenv.io/nvlink-domain-size); not answering: c"
    ]


def test_a_tpu_slice_missing_a_worker() -> None:
    from accelenv.cluster.domains import domains

    labels = {"accelenv.io/tpu-slice": "my-slice", "accelenv.io/tpu-topology": "4x4"}
    found = domains([member(f"w{i}", labels) for i in range(3)])  # 16 chips, 4 a host: 4 workers
    assert found[0]["expected"] == 4
    assert found[0]["problems"] == ["incomplete: 3 of 4 nodes answer (the slice shape 4x4 over 4 chips a host)"]
    assert domains([member(f"w{i}", labels) for i in range(4)])[0]["problems"] == []


def test_a_domain_whose_nodes_disagree_is_divided() -> None:
    from accelenv.cluster.domains import domains

    rack = {"accelenv.io/rack": "r7"}
    found = domains([member("a", rack), member("b", rack), member("c", rack, driver="580.65.06", verdict="fail")])
    assert found[0]["problems"] == [
        "divided: drivers 570.124.06 (2 nodes), 580.65.06 (1 node: c)",
        "divided: verdicts pass (2 nodes), fail (1 node: c)",
    ]


def test_nodes_group_by_every_domain_kind_and_the_text_says_so() -> None:
    from accelenv.cli.host import cluster_lines

    a = dataclasses_replace(
        node("a"), labels={"accelenv.io/rack": "r1", "accelenv.io/zone": "z", "ray.io/gpu-domain": "u.1"}
    )
    b = dataclasses_replace(
        node("b"), labels={"accelenv.io/rack": "r2", "accelenv.io/zone": "z", "ray.io/gpu-domain": "u.1"}
    )
    view = summary([a, b])
    assert [(d["kind"], d["name"], d["nodes"]) for d in view["domains"]] == [
        ("nvlink", "u.1", ["a", "b"]),
        ("rack", "r1", ["a"]),
        ("rack", "r2", ["b"]),
        ("zone", "z", ["a", "b"]),
    ]
    assert cluster_lines(view, "e").splitlines()[1:] == [
        "nvlink u.1: 2 node(s); complete, agreeing",
        "rack r1: 1 node(s); complete, agreeing",
        "rack r2: 1 node(s); complete, agreeing",
        "zone z: 2 node(s); complete, agreeing",
    ]


def dataclasses_replace(result: NodeResult, **changes: Any) -> NodeResult:
    from accelenv import records

    return records.replace(result, **changes)
