"""The cluster view's renderer without a browser: a node's answer is untrusted, so what it says is escaped and
bounded, nothing is fetched or run, and nodes without a domain still show (tests/integration/test_cluster_view.py
looks at it in Chromium)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.cluster.ray import NodeResult, summary
from accelenv.cluster.view import MAX_DEVICES, cluster_section, render_page

if TYPE_CHECKING:
    import pytest


def result(name: str, **changes: object) -> NodeResult:
    base: dict[str, object] = {"node_id": name, "address": "10.0.0.1", "reachable": True, "verdict": "pass",
                               "devices": 2, "driver": "590.48.01"}  # fmt: skip
    return NodeResult(**{**base, **changes})  # type: ignore[arg-type]


def test_what_a_node_says_is_escaped() -> None:
    evil = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'
    topology = {
        "devices": [{"id": evil}, {"id": "GPU1"}],
        "links": [{"a": evil, "b": "GPU1", "kind": evil}],
    }
    node = result("n1", driver=evil, topology=topology, labels={"accelenv.io/rack": evil})
    page = render_page("e", summary([node]), [node.as_json()])
    assert "<script" not in page
    assert "<img" not in page
    assert "&lt;script&gt;" in page
    assert "http" not in page.lower()  # nothing fetched


def test_bounds_and_nodes_without_a_domain() -> None:
    topology = {
        "devices": [{"id": f"d{i}"} for i in range(10000)],
        "links": [{"a": "d0", "b": "d1", "kind": "xgmi"}] * 10000,
    }
    node = result("big", devices=10000, topology=topology)
    section = cluster_section("e", summary([node, result("plain")]), [node.as_json(), result("plain").as_json()])
    assert section.count('class="device"') == MAX_DEVICES + 2  # the big node's first 256, the plain node's two
    assert "<h3>nodes</h3>" in section  # no domain kind at all: one box of every node
    assert section.count('data-verdict="pass"') == 2


def test_check_ray_format_html_writes_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    from pathlib import Path

    from accelenv.cli import main
    from accelenv.cluster import ray

    nodes = [
        result("a", labels={"accelenv.io/rack": "r1"}),
        result("b", verdict="fail", labels={"accelenv.io/rack": "r1"}),
    ]
    monkeypatch.setattr(ray, "check_cluster", lambda *args, **kwargs: nodes)
    matrix = str(Path(__file__).resolve().parents[2] / "matrix.toml")
    out = io.StringIO()
    code = main(["--matrix", matrix, "check", "cpu-py311", "--ray", "127.0.0.1:1", "--format", "html"], out=out)
    assert code == 1  # one node fails
    page = out.getvalue()
    assert page.startswith("<!DOCTYPE html>")
    assert "<h3>rack r1</h3>" in page
    assert "divided: verdicts" in page
    assert main(["--matrix", matrix, "check", "cpu-py311", "--format", "html"], out=io.StringIO()) == 2
