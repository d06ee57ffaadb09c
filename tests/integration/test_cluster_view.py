"""`check --ray --format html` in a real headless Chromium (Debian's chromium, through the DevTools protocol): the
cluster's domains as boxes, an incomplete one marked, nodes coloured by verdict with their devices and links drawn
from real topology captures (an 8x H20 NVLink host, an AMD host with two xGMI hives), and a screenshot the test
decodes: the failing node's drawing is painted in the fail colour, the passing node's in the pass colour.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from png import decode

from accelenv import records
from accelenv.cluster.ray import NodeResult, summary
from accelenv.cluster.view import COLOURS, render_page
from accelenv.host.links import from_nvidia, parse_rocm_showtopo
from accelenv.host.topology import parse_nvidia_topo

if TYPE_CHECKING:
    from cdp import Browser

pytestmark = pytest.mark.integration
DATA = Path(__file__).resolve().parents[1] / "unit/data"
H20 = from_nvidia(parse_nvidia_topo((DATA / "topo/h20-nv18-8nic.txt").read_text())).as_json()
AMD = parse_rocm_showtopo(
    (DATA / "topology/rocm-smi-showtopo__findstring-58579790270__8x-gpu280-two-xgmi-hives.txt").read_text()
).as_json()


def node(name: str, verdict: str, domain: str, topology: dict[str, Any], **labels: str) -> NodeResult:
    return NodeResult(
        node_id=name,
        address="127.0.0.1",
        reachable=verdict in ("pass", "warn", "fail"),
        verdict=verdict,
        devices=len(topology.get("devices", [])),
        driver="590.48.01",
        labels={"ray.io/gpu-domain": domain, "accelenv.io/nvlink-domain-size": "3", **labels},
        topology=topology,
    )


def js(browser: Browser, expression: str) -> Any:
    return browser.evaluate(f"(() => {{ {expression} }})()")


def test_the_cluster_is_drawn(browser: Browser, tmp_path: Path) -> None:
    results = [
        node("aaaa-good", "pass", "u.1", H20),
        node("bbbb-fail", "fail", "u.1", H20),
        node("cccc-good", "pass", "u.2", H20),
        node("dddd-good", "pass", "u.2", H20),
        node("eeee-good", "pass", "u.2", H20),
        records.replace(node("ffff-dead", "dead", "u.1", {}), reachable=False),
        node("gggg-amd", "warn", "u.3", AMD, **{"accelenv.io/nvlink-domain-size": "1"}),
    ]
    view = summary(results)
    page = tmp_path / "cluster.html"
    page.write_text(render_page("gpu-nvidia-cu132", view, [r.as_json() for r in results]), encoding="utf-8")
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text  # offline, one file
    assert "http" not in text

    browser.open("about:blank")
    browser.open(page.as_uri(), width=1400, height=1000)
    domains = js(
        browser,
        "return [...document.querySelectorAll('.domain')]"
        ".map(d => [d.querySelector('h3').textContent, d.dataset.state]);",
    )
    assert domains == [["nvlink u.1", "problem"], ["nvlink u.2", "ok"], ["nvlink u.3", "ok"]]  # u.1: 2 of 3 answer
    problems = js(browser, "return [...document.querySelectorAll('.domain .problem')].map(p => p.textContent);")
    assert problems[0].startswith("incomplete: 2 of 3 nodes answer")
    assert "divided: verdicts" in " ".join(problems)
    verdicts = js(browser, "return [...document.querySelectorAll('.node')].map(n => n.dataset.verdict);")
    assert verdicts == ["pass", "fail", "dead", "pass", "pass", "pass", "warn"]
    links = js(
        browser, "return [...document.querySelectorAll('.node')].map(n => n.querySelectorAll('line.link').length);"
    )
    assert links[:2] == [28, 28]  # 8 GPUs, every pair on NVLink
    assert links[-1] == 28  # 12 xGMI and 16 PCIe paths
    kinds = js(
        browser,
        "return [...document.querySelectorAll('.node')].at(-1).querySelectorAll('line[data-kind=xgmi]').length;",
    )
    assert kinds == 12

    def box(index: int) -> dict[str, float]:
        found: dict[str, float] = js(
            browser,
            f"const r = document.querySelectorAll('.node svg')[{index}].getBoundingClientRect();"
            "return {x: r.x, y: r.y, w: r.width, h: r.height};",
        )
        return found

    good, bad = box(0), box(1)
    shot = browser.screenshot()
    (tmp_path / "cluster.png").write_bytes(shot)
    if os.environ.get("ACCELENV_SCREENSHOTS"):
        (Path(os.environ["ACCELENV_SCREENSHOTS"]) / "cluster.png").write_bytes(shot)
    image = decode(shot)
    assert len(image.colours()) > 20  # not a blank page

    def share(area: dict[str, float], colour: str) -> float:
        rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        pixels = image.region(int(area["x"]), int(area["y"]), int(area["w"]), int(area["h"]))
        return sum(all(abs(p[i] - rgb[i]) <= 24 for i in range(3)) for p in pixels) / len(pixels)

    assert share(good, COLOURS["pass"]) > 0.05
    assert share(good, COLOURS["fail"]) == 0
    assert share(bad, COLOURS["fail"]) > 0.05
    assert share(bad, COLOURS["pass"]) == 0


def test_the_compatibility_page_draws_the_cluster_in_its_colours(browser: Browser, tmp_path: Path) -> None:
    """`report --format html --cluster FILE` puts the same drawing on the page: its style and script leave the
    domains, nodes and verdict colours as they are, and the screenshot shows them."""
    from accelenv.cluster.view import cluster_section
    from accelenv.matrix import load_matrix
    from accelenv.plan.page import html_page

    results = [node("aaaa-good", "pass", "u.1", H20), node("bbbb-fail", "fail", "u.1", H20)]
    drawn = cluster_section("gpu-nvidia-cu132", summary(results), [r.as_json() for r in results])
    matrix = load_matrix(Path(__file__).resolve().parents[2] / "matrix.toml")
    page = tmp_path / "page.html"
    page.write_text(
        html_page(matrix, clusters=[f'<div id="cluster-0" class="cluster">{drawn}</div>']), encoding="utf-8"
    )

    browser.open("about:blank")
    browser.open(page.as_uri(), width=1400, height=1000)
    js(browser, "document.getElementById('cluster-0').scrollIntoView(); return true;")
    verdicts = js(browser, "return [...document.querySelectorAll('#cluster-0 .node')].map(n => n.dataset.verdict);")
    assert verdicts == ["pass", "fail"]

    def box(index: int) -> dict[str, float]:
        found: dict[str, float] = js(
            browser,
            f"const r = document.querySelectorAll('#cluster-0 .node svg')[{index}].getBoundingClientRect();"
            "return {x: r.x, y: r.y, w: r.width, h: r.height};",
        )
        return found

    good, bad = box(0), box(1)
    assert good["w"] > 50
    assert 0 <= good["y"] < 1000 - good["h"]  # in view, where the screenshot sees it
    image = decode(browser.screenshot())

    def share(area: dict[str, float], colour: str) -> float:
        rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        pixels = image.region(int(area["x"]), int(area["y"]), int(area["w"]), int(area["h"]))
        return sum(all(abs(p[i] - rgb[i]) <= 24 for i in range(3)) for p in pixels) / len(pixels)

    assert share(good, COLOURS["pass"]) > 0.05
    assert share(good, COLOURS["fail"]) == 0
    assert share(bad, COLOURS["fail"]) > 0.05
    assert share(bad, COLOURS["pass"]) == 0
