"""The matrix's CI facts where people look: an environment's `ci_unschedulable` reason and the owners the matrix
names appear on the page and in `accelenv results` (text and --json) beside the environment or failure they
concern, and the page draws a Ray cluster from what `check --ray --json` wrote (`report --cluster FILE`)."""

from __future__ import annotations

import html
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from accelenv.cli import main

REPO = Path(__file__).resolve().parents[2]
TEXT = (REPO / "matrix.toml").read_text(encoding="utf-8")
NVIDIA = 'ci_queue = "gpu-nvidia"\n'
H200 = "[skus.h200]\n"
NOW = time.time()


@pytest.fixture(autouse=True)
def _no_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's stamp asks git about the matrix; here, as outside a checkout, nobody answers."""
    from accelenv.plan import start

    monkeypatch.setattr(start, "_git", lambda folder, *args: None)


def owned_matrix(tmp_path: Path) -> Path:
    """The shipped matrix with owners on the NVIDIA family and on the H200: owners are in no shipped family yet."""
    text = TEXT.replace(NVIDIA, f'{NVIDIA}owners = ["@acme/nvidia-ci"]\n', 1)
    text = text.replace(H200, f'{H200}owners = ["@hopper-lab"]\n', 1)
    assert text.count("owners = ") == 2
    path = tmp_path / "matrix.toml"
    path.write_text(text, encoding="utf-8")
    return path


def record(serial: int, *, outcome: str = "passed", sku: str = "h200", env: str = "gpu-nvidia-cu132") -> dict[str, Any]:
    started = NOW - 86400
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    kinds = ("distributed", "recovery", "perf")
    tests = [
        {
            "id": f"tests/devices/test_conformance_{k}.py::test_x",
            "outcome": "failed" if outcome == "failed" and k == "perf" else "passed",
            "reason": None,
            "seconds": 1,
        }
        for k in kinds
    ]
    return {
        "format": "accelenv-result/1",
        "id": f"{env}-{stamp}-{serial:08x}",
        "run_url": None,
        "runner": "node-a",
        "note": None if outcome == "passed" else "perf failed",
        "env": {"id": env, "lock_sha256": None, "image": None, "frameworks": []},
        "host": {"family": "nvidia", "sku": sku, "device_count": 8, "driver": "580.95.05", "nodes": 1},
        "check": {"verdict": "pass", "failed": []},
        "outcome": outcome,
        "tests": tests,
        "perf": [],
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started + serial)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started + serial + 600)),
    }


def write_records(folder: Path, records: list[dict[str, Any]]) -> Path:
    folder.mkdir()
    for data in records:
        (folder / f"{data['id']}.result.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def run(matrix: Path, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["--matrix", str(matrix), *args], out=out)
    return code, out.getvalue()


# ---------------------------------------------------------------------------------------------------- owners


def test_failures_name_their_owners_in_results_text_and_json(tmp_path: Path) -> None:
    matrix = owned_matrix(tmp_path)
    folder = write_records(
        tmp_path / "records",
        [record(1, outcome="failed"), record(2, sku="b200", outcome="failed"), record(3, sku="h100-sxm")],
    )
    code, text = run(matrix, "results", str(folder), "--json")
    assert code == 1
    by_sku = {r["sku"]: r for r in json.loads(text)["records"]}
    assert by_sku["h200"]["owners"] == ["@acme/nvidia-ci", "@hopper-lab"]  # the family's, and the SKU's own
    assert by_sku["b200"]["owners"] == ["@acme/nvidia-ci"]
    assert by_sku["h100-sxm"]["owners"] == ["@acme/nvidia-ci"]  # listed for every record, for a script to route

    code, text = run(matrix, "results", str(folder))
    failing = [line for line in text.splitlines() if ": owners: " in line]
    assert len(failing) == 2  # beside each failure, not beside the passing run
    assert any(line.endswith("failed: owners: @acme/nvidia-ci, @hopper-lab") for line in failing)


def test_without_owners_the_output_says_where_they_would_be_named(tmp_path: Path) -> None:
    folder = write_records(tmp_path / "records", [record(1, outcome="failed")])
    code, text = run(REPO / "matrix.toml", "results", str(folder))
    assert code == 1
    assert "failed: owners: no owners in matrix.toml (families.nvidia.owners)" in text
    _, text = run(REPO / "matrix.toml", "results", str(folder), "--json")
    assert json.loads(text)["records"][0]["owners"] == []  # nobody is made up


def test_the_page_names_owners_beside_a_failure_and_on_each_environment(tmp_path: Path) -> None:
    matrix = owned_matrix(tmp_path)
    from accelenv.matrix import load_matrix
    from accelenv.plan.evidence import html_section
    from accelenv.plan.page import html_page
    from accelenv.results.record import read_records

    folder = write_records(tmp_path / "records", [record(1, outcome="failed"), record(2, sku="h100-sxm")])
    loaded = load_matrix(matrix)  # outside a git tree: the page is built as `report --format html` builds it
    records, refused = read_records([folder], loaded, now=NOW)
    assert len(records) == 2
    assert not refused
    page = html_page(loaded, evidence=html_section(loaded, records, refused, now=NOW))
    evidence = page[page.index('id="evidence"') : page.index("</section>", page.index('id="evidence"'))]
    names = {s.id: html.escape(s.name) for s in loaded.skus.values()}
    rows = [row for row in evidence.split('<tr><th scope="row">')[1:] if "<code>gpu-nvidia-cu132</code>" in row]
    h200 = next(row for row in rows if row.startswith(names["h200"] + "</th>"))
    assert "owners: @acme/nvidia-ci, @hopper-lab" in h200
    h100 = next(row for row in rows if row.startswith(names["h100-sxm"] + "</th>"))
    assert "owners:" not in h100  # not a failure
    card = page[page.index('id="env-gpu-nvidia-cu132"') :].split("</article>")[0]
    assert "<dt>Owners</dt>" in card
    assert "@acme/nvidia-ci" in card


# ---------------------------------------------------------------------------------------------------- ci_unschedulable


def test_the_page_says_why_an_environment_is_not_scheduled_in_ci(tmp_path: Path) -> None:
    from accelenv.matrix import load_matrix

    shipped = load_matrix(REPO / "matrix.toml")
    reasons = {e.id: e.ci_unschedulable for e in shipped.envs.values() if e.ci_unschedulable}
    assert reasons  # the shipped matrix records one (gaudi-1-24)
    folder = write_records(tmp_path / "records", [record(1)])
    code, page = run(REPO / "matrix.toml", "report", "--format", "html", "--results", str(folder))
    assert code == 0
    for env, reason in reasons.items():
        card = page[page.index(f'id="env-{env}"') :].split("</article>")[0]
        assert f"not scheduled in CI: {html.escape(reason)}" in card
        evidence = page[page.index('id="evidence"') :].split("</section>")[0]
        declared = [row for row in evidence.split("<tr>") if f"<code>{env}</code>" in row]
        assert declared  # its pairs, declared only: the reason says why no record shows them
        assert all(f"not scheduled in CI: {html.escape(reason)}" in row for row in declared)
    others = [e for e in shipped.envs if e not in reasons]
    card = page[page.index(f'id="env-{others[0]}"') :].split("</article>")[0]
    assert "not scheduled in CI" not in card


# ---------------------------------------------------------------------------------------------------- cluster


def test_report_draws_the_cluster_that_check_ray_json_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from accelenv.cluster import ray
    from accelenv.cluster.ray import NodeResult

    def node(name: str, verdict: str) -> NodeResult:
        return NodeResult(
            node_id=name,
            address="10.0.0.1",
            reachable=True,
            verdict=verdict,
            devices=2,
            driver="590.48.01",
            labels={"accelenv.io/rack": "r1"},
        )

    monkeypatch.setattr(ray, "check_cluster", lambda *args, **kwargs: [node("a", "pass"), node("b", "fail")])
    matrix = REPO / "matrix.toml"
    code, answer = run(matrix, "check", "cpu-py311", "--ray", "127.0.0.1:1", "--json")
    assert code == 1
    (tmp_path / "ray.json").write_text(answer, encoding="utf-8")
    code, page = run(matrix, "report", "--format", "html", "--cluster", str(tmp_path / "ray.json"))
    assert code == 0
    drawn = page[page.index('<div id="cluster-0"') :]
    assert '<section class="accelenv-cluster" data-env="cpu-py311">' in drawn
    assert "<h3>rack r1</h3>" in drawn
    assert 'data-verdict="pass"' in drawn
    assert 'data-verdict="fail"' in drawn
    assert "1 of 2 nodes conform to cpu-py311" in drawn
    assert page.rstrip().endswith("</html>")


HOSTILE = [
    ("not json", "{", "not JSON"),
    ("a list", "[]", "expected an object"),
    ("unknown env", json.dumps({"env": "nope", "cluster": {}, "nodes": []}), "env: 'nope'"),
    ("cluster not an object", json.dumps({"env": "cpu-py311", "cluster": [], "nodes": []}), "cluster: expected"),
    ("a node not an object", json.dumps({"env": "cpu-py311", "cluster": {}, "nodes": [{}, 3]}), "nodes[1]:"),
]


@pytest.mark.parametrize(("text", "said"), [(t, s) for _, t, s in HOSTILE], ids=[i for i, _, _ in HOSTILE])
def test_a_bad_cluster_file_is_named_not_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    path = tmp_path / "ray.json"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "page.html"
    code, _ = run(REPO / "matrix.toml", "report", "--format", "html", "--cluster", str(path), "-o", str(out))
    err = capsys.readouterr().err
    assert code == 2
    assert str(path) in err
    assert said in err
    assert "Traceback" not in err
    assert not out.exists()  # nothing half-written


def test_hostile_values_in_a_cluster_file_stay_text(tmp_path: Path) -> None:
    evil = "<script>alert(1)</script>"
    answer = {
        "env": "cpu-py311",
        "cluster": {"conforming": evil, "nodes": evil, "unreachable": 7, "domains": 5},
        "nodes": [{"node_id": evil, "verdict": evil, "devices": evil, "topology": {"devices": 3, "links": "x"}}],
    }
    path = tmp_path / "ray.json"
    path.write_text(json.dumps(answer), encoding="utf-8")
    code, page = run(REPO / "matrix.toml", "report", "--format", "html", "--cluster", str(path))
    assert code == 0
    drawn = page[page.index('<div id="cluster-0"') :]
    assert "<script>alert" not in drawn
    assert "0 of 0 nodes conform" in drawn


def test_cluster_is_for_the_html_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(REPO / "matrix.toml", "report", "--format", "md", "--cluster", str(tmp_path / "ray.json"))
    assert code == 2
    assert "--format html" in capsys.readouterr().err
