"""Record sets like real ones, judged by `accelenv results --json` and the page: unlike device and node counts,
driver-branch changes, vanished figures, spread, a pinned baseline, dead and cancelled runs, smoke-only runs,
regressed runs, another lock, records that contradict themselves, earned maturity and silent nodes."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from accelenv.cli import main
from accelenv.matrix import load_matrix
from accelenv.plan.evidence import html_section, view
from accelenv.plan.lock import lock_digests
from accelenv.results.record import Refused, read_record, record_of

REPO = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(REPO / "matrix.toml")
LOCKS = lock_digests(REPO, MATRIX)
NOW = time.time()
DAY = 86400
CONFORMANCE = ("distributed", "recovery", "perf")
_serial = iter(range(10**6))


def rec(
    *,
    env: str = "gpu-nvidia-cu132",
    sku: str | None = "h200",
    devices: int = 8,
    nodes: int = 1,
    driver: str | None = "580.95.05",
    outcome: str = "passed",
    kinds: tuple[str, ...] = CONFORMANCE,
    busbw: float | None = 300.0,
    matmul: float | None = 700.0,
    spread: float | None = None,
    days_ago: float = 1,
    runner: str | None = "node-a",
    torch: str = "2.13.0",
    lock: str | None = "today",
    verdict: str = "pass",
    **extra: Any,
) -> dict[str, Any]:
    started = NOW - days_ago * DAY
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    perf = []
    for name, value, unit in (("allreduce_busbw", busbw, "GB/s"), ("matmul", matmul, "TFLOP/s")):
        if value is not None:
            perf.append(
                {
                    "name": name,
                    "value": value,
                    "unit": unit,
                    "dtype": "bf16",
                    "devices": devices * nodes if name == "allreduce_busbw" else 1,
                    "samples": 10,
                    "peak": None,
                    "fraction": None,
                    "min_fraction": None,
                    "warning": None,
                    "spread": spread,
                }
            )
    tests = [
        {"id": f"tests/devices/test_conformance_{k}.py::test_x", "outcome": "passed", "reason": None, "seconds": 1}
        for k in kinds
    ] or [{"id": "tests/devices/test_cpu_devices.py::test_ray_runs_tasks_on_cpu", "outcome": "passed",
           "reason": None, "seconds": 1}]  # fmt: skip
    data: dict[str, Any] = {
        "format": "accelenv-result/1",
        "id": f"{env}-{stamp}-{next(_serial):08x}",
        "run_url": None,
        "runner": runner,
        "note": None,
        "env": {
            "id": env,
            "lock_sha256": LOCKS.get(env) if lock == "today" else lock,
            "image": None,
            "frameworks": [{"name": "torch", "version": torch, "pinned": None, "matches_pin": False}],
        },
        "host": {
            "family": MATRIX.envs[env].family,
            "sku": sku,
            "device_count": devices,
            "driver": driver,
            "nodes": nodes,
        },
        "check": {"verdict": verdict, "failed": []},
        "outcome": outcome,
        "tests": tests,
        "perf": perf,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started + 600)),
    }
    for path, value in extra.items():
        target = data
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return data


def judge(tmp_path: Path, records: list[dict[str, Any]], *args: str) -> tuple[int, dict[str, Any]]:
    folder = tmp_path / "records"
    folder.mkdir(exist_ok=True)
    for data in records:
        (folder / f"{data['id']}.result.json").write_text(json.dumps(data))
    out = io.StringIO()
    from contextlib import redirect_stdout

    with redirect_stdout(out):
        code = main(["--matrix", str(REPO / "matrix.toml"), "results", str(folder), "--json", *args])
    return code, json.loads(out.getvalue())


def drops(judged: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(g["kind"], g["against"], g["figure"]) for g in judged["regressions"]]


# (name, records oldest first, expected regressions (kind, against, figure), exit status)
SETS: list[tuple[str, list[dict[str, Any]], list[tuple[str, str, str]], int]] = [
    (
        "a 2-device run is not compared with 8-device runs",
        [rec(days_ago=3), rec(days_ago=2), rec(devices=2, busbw=130.0, days_ago=1)],
        [],
        0,
    ),
    (
        "a 2-node run is not compared with 1-node runs",
        [rec(days_ago=3), rec(days_ago=2), rec(nodes=2, busbw=100.0, days_ago=1)],
        [],
        0,
    ),
    (
        "a drop among like runs is a regression",
        [rec(days_ago=3), rec(days_ago=2), rec(busbw=200.0, days_ago=1)],
        [("drop", "rolling median", "allreduce_busbw")],
        1,
    ),
    (
        "a drop within the figures' spread is noise",
        [rec(days_ago=3, spread=0.5), rec(days_ago=2, spread=0.5), rec(busbw=240.0, days_ago=1, spread=0.5)],
        [],
        0,
    ),
    (
        "a figure that vanished is a finding",
        [rec(days_ago=3), rec(days_ago=2), rec(busbw=None, days_ago=1)],
        [("vanished", "rolling median", "allreduce_busbw")],
        1,
    ),
    (
        "a dead run is incomplete and fails the set",
        [rec(days_ago=2), rec(outcome="incomplete", days_ago=1, note="the run began and never completed")],
        [],
        1,
    ),
    (
        "a failed run older than the group's newest pass does not fail the set",
        [rec(outcome="failed", verdict="fail", days_ago=2), rec(days_ago=1)],
        [],
        0,
    ),
    (
        "hardware absent, skipped as asked: not proven, the set does not fail",
        [rec(sku=None, devices=0, outcome="not_proven", kinds=(), busbw=None, matmul=None, verdict="fail")],
        [],
        0,
    ),
]


@pytest.mark.parametrize(("records", "found", "status"), [s[1:] for s in SETS], ids=[s[0] for s in SETS])
def test_record_sets_are_judged_like_with_like(
    tmp_path: Path, records: list[dict[str, Any]], found: list[tuple[str, str, str]], status: int
) -> None:
    code, judged = judge(tmp_path, records)
    assert judged["refused"] == []
    assert drops(judged) == found
    assert code == status


def test_a_driver_branch_change_is_named_beside_the_drop(tmp_path: Path) -> None:
    records = [rec(days_ago=3), rec(days_ago=2), rec(busbw=150.0, driver="590.10.01", torch="2.14.0", days_ago=1)]
    _, judged = judge(tmp_path, records)
    (g,) = judged["regressions"]
    assert g["changes"] == ["driver branch 580 -> 590 (590.10.01)", "torch 2.13.0 -> 2.14.0"]
    assert g["drop"] == pytest.approx(0.5)
    assert (g["devices"], g["nodes"]) == (8, 1)


def test_a_pinned_baseline_finds_a_drop_the_rolling_median_has_absorbed(tmp_path: Path) -> None:
    slide = [rec(busbw=200.0, days_ago=2), rec(busbw=195.0, days_ago=1)]  # the drop came before these runs
    release = tmp_path / "release"
    release.mkdir()
    base = rec(busbw=300.0, days_ago=60)
    (release / f"{base['id']}.result.json").write_text(json.dumps(base))
    code, judged = judge(tmp_path, slide)
    assert drops(judged) == []
    assert code == 0
    code, judged = judge(tmp_path, slide, "--baseline", str(release))
    assert drops(judged) == [("drop", "pinned baseline", "allreduce_busbw")]
    assert code == 1


# (name, changes to a good record, the reason it is refused)
CONTRADICTIONS = [
    ("passed with a failed test", {"tests": [{"id": "t::a", "outcome": "failed", "reason": "x", "seconds": 1}]},
     "outcome passed, but test t::a did not pass"),
    ("passed with nothing passed", {"tests": [{"id": "t::a", "outcome": "skipped", "reason": "x", "seconds": 0}]},
     "outcome passed, but no test passed"),
    ("passed with a failing check", {"check__verdict": "fail"}, "outcome passed, but the check verdict is fail"),
    ("passed with no device", {"host__device_count": 0}, "host.device_count is 0"),
    ("passed with no SKU", {"host__sku": None}, "host.sku is null"),
    ("not proven with devices there", {"outcome": "not_proven"}, "outcome not_proven, but host.device_count is 8"),
    ("failed with nothing failing", {"outcome": "failed"}, "outcome failed, but no test failed"),
    ("a figure on more devices than the host", {"host__device_count": 4, "perf__0__devices": 8},
     "figure allreduce_busbw ran on 8 device(s), more than the 4 x 1 node(s)"),
    ("a peak that is not the matrix's", {"perf__1__peak": 5000.0}, "peak 5000 is not h200's"),
    ("a defect on a passing test",
     {"tests": [{"id": "t::a", "outcome": "passed", "reason": None, "seconds": 1,
                 "defect": {"url": None, "description": "x"}}]},
     "names a known defect but passed"),
    ("an interrupted test in a passed run",
     {"tests": [{"id": "t::a", "outcome": "incomplete", "reason": None, "seconds": 1}]}, "did not pass"),
]  # fmt: skip


def _set(data: dict[str, Any], path: str, value: object) -> None:
    keys = path.split("__")
    target: Any = data
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[keys[-1]] = value


@pytest.mark.parametrize(
    ("changes", "reason"), [(c, r) for _, c, r in CONTRADICTIONS], ids=[c[0] for c in CONTRADICTIONS]
)
def test_a_record_that_contradicts_itself_is_refused_and_named(
    tmp_path: Path, changes: dict[str, Any], reason: str
) -> None:
    data = rec()
    for key, value in changes.items():
        _set(data, key, value)
    path = tmp_path / "x.result.json"
    path.write_text(json.dumps(data))
    got = read_record(path, MATRIX, now=NOW)
    assert isinstance(got, Refused), got
    assert reason in got.reason
    code, judged = judge(tmp_path, [data])
    assert code == 1
    assert [r["reason"] for r in judged["refused"]] == [got.reason]


def test_the_fraction_of_peak_is_the_matrix_s_never_the_record_s() -> None:
    data = rec()
    data["perf"][1] |= {"fraction": 0.99, "warning": None}  # a record that flatters itself
    figure = record_of(data, "x", MATRIX).perf[1]
    peak = MATRIX.skus["h200"].peak
    assert peak is not None
    assert peak.matmul_tflops is not None
    assert figure.fraction == pytest.approx(700.0 / peak.matmul_tflops)


# (name, records, the word the page and `results` give the h200 x gpu-nvidia-cu132 pair)
WORDS = [
    ("full conformance, today's lock, recent", [rec()], "proven"),
    ("smoke only", [rec(kinds=())], "smoke only"),
    ("no recovery test", [rec(kinds=("distributed", "perf"))], "smoke only"),
    ("another lock", [rec(lock="cd" * 32)], "other lock"),
    ("old", [rec(days_ago=40)], "stale"),
    ("regressed", [rec(days_ago=3), rec(days_ago=2), rec(busbw=213.0, days_ago=1)], "regressed"),
    ("newest failed", [rec(days_ago=2), rec(outcome="failed", verdict="fail", days_ago=1)], "failed"),
    ("newest incomplete", [rec(days_ago=2), rec(outcome="incomplete", days_ago=1)], "incomplete"),
]


@pytest.mark.parametrize(("records", "word"), [w[1:] for w in WORDS], ids=[w[0] for w in WORDS])
def test_words_match_what_ran(tmp_path: Path, records: list[dict[str, Any]], word: str) -> None:
    _, judged = judge(tmp_path, records)
    pairs = {(p["sku"], p["env"]): p["word"] for p in judged["proof"]}
    assert pairs[("h200", "gpu-nvidia-cu132")] == word
    read = [record_of(r, "x", MATRIX) for r in records]
    regressed = frozenset(g["record"] for g in judged["regressions"])
    shown = {(e.sku, e.env): e.status for e in view(MATRIX, read, locks=LOCKS, now=NOW, regressed=regressed).pairs}
    assert shown[("h200", "gpu-nvidia-cu132")] == word
    section = "\n".join(html_section(MATRIX, read, [], locks=LOCKS, now=NOW, regressed=regressed))
    assert ('class="ev ev-proven"' in section) is (word == "proven")


def _tiers(judged: dict[str, Any]) -> dict[str, str]:
    return {t["family"]: t["tier"] for t in judged["maturity"]}


def test_maturity_is_earned_from_records(tmp_path: Path) -> None:
    _, judged = judge(tmp_path, [rec(env="cpu-py311", sku="cpu-x86-64", devices=0, busbw=None, matmul=None)])
    tiers = _tiers(judged)
    assert tiers["nvidia"] == "declared"  # claimed stable in matrix.toml, no record
    assert tiers["cpu"] in ("beta", "stable")

    (tmp_path / "a").mkdir()
    _, judged = judge(tmp_path / "a", [rec(kinds=())])
    assert _tiers(judged)["nvidia"] == "experimental"  # a smoke-only record proves no pair

    (tmp_path / "b").mkdir()
    _, judged = judge(tmp_path / "b", [rec()])
    nvidia = next(t for t in judged["maturity"] if t["family"] == "nvidia")
    assert nvidia["tier"] == "beta"
    assert nvidia["claimed"] == "stable"
    assert len(nvidia["records"]) == 1
    assert "not proven within 7 days" in nvidia["why"]


def test_nodes_show_their_last_job_and_silent_ones_are_named(tmp_path: Path) -> None:
    records = [
        rec(runner="node-a", days_ago=1),
        rec(runner="node-b", days_ago=9, outcome="failed", verdict="fail"),
        rec(runner="node-b", days_ago=10),
    ]
    code, judged = judge(tmp_path, records, "--stale-after", "7d")
    by = {n["name"]: n for n in judged["nodes"]}
    assert by["node-a"]["silent"] is False
    assert by["node-b"]["silent"] is True
    assert by["node-b"]["last_job_state"] == "failed"
    assert by["node-b"]["last_pass"] == records[2]["id"]
    assert by["node-b"]["verdicts"] == {"gpu-nvidia-cu132": "fail"}
    assert code == 1


def test_a_smoke_only_or_partial_record_keeps_no_pair_fresh(tmp_path: Path) -> None:
    """--stale-after counts a pair fresh only by a passing record that ran every declared conformance kind."""
    for name, kinds, fresh in (
        ("smoke", (), False),
        ("partial", ("distributed", "perf"), False),
        ("full", CONFORMANCE, True),
    ):
        (tmp_path / name).mkdir()
        _, judged = judge(tmp_path / name, [rec(kinds=kinds, days_ago=1)], "--stale-after", "7d")
        pairs = {(s["env"], s["sku"]): s for s in judged["stale"]}
        assert (("gpu-nvidia-cu132", "h200") not in pairs) is fresh, name
        if not fresh:
            assert pairs[("gpu-nvidia-cu132", "h200")]["record"] is None  # no record counts as its last pass


RUNNERS = [
    ({"RUNNER_NAME": "gpu-node-07", "BUILDKITE_AGENT_NAME": "bk-1"}, "gpu-node-07"),
    ({"BUILDKITE_AGENT_NAME": "bk-agent-3"}, "bk-agent-3"),
    ({"RUNNER_NAME": "runner ghp_" + "a" * 36}, "runner <redacted>"),
    ({"RUNNER_NAME": "node\x1b[31m-red"}, "node[31m-red"),
]


@pytest.mark.parametrize(("environ", "name"), RUNNERS, ids=["github", "buildkite", "token", "control"])
def test_the_runner_is_named_and_redacted(environ: dict[str, str], name: str) -> None:
    from accelenv.results.plugin import runner_name

    assert runner_name(environ) == name
    assert runner_name({}) is not None  # the host name


def test_both_validators_refuse_what_the_schema_refuses(tmp_path: Path) -> None:
    """fastjsonschema's compiled check and jsonschema read the schema alike, booleans as numbers included."""
    from jsonschema import Draft202012Validator

    from accelenv.results.record import _schema_problem
    from accelenv.results.schema import result_schema

    full = Draft202012Validator(result_schema())
    for change in (
        {"host__device_count": True},
        {"perf__0__value": False},
        {"runner": "a\nb"},
        {"tests__0__defect": {"url": "http://x", "description": "d"}},
        {"perf__0__spread": -1},
        {"outcome": "proven"},
        {"note": 3},
    ):
        data = rec()
        for key, value in change.items():
            _set(data, key, value)
        assert not full.is_valid(data), change
        assert _schema_problem(data) is not None, change
    assert _schema_problem(rec()) is None


def test_the_page_shows_earned_maturity_nodes_and_the_lock_of_each_proof(tmp_path: Path) -> None:
    from accelenv.plan.page import html_page

    read = [record_of(rec(runner="node-a"), "x", MATRIX), record_of(rec(runner="node-b", days_ago=3), "y", MATRIX)]
    section = "\n".join(html_section(MATRIX, read, [], locks=LOCKS, now=NOW))
    assert "<b>NVIDIA GPU</b>: beta" in section
    assert "<b>AMD Instinct GPU</b>: declared" in section
    assert '<th scope="row">node-a</th>' in section
    assert '<th scope="row">node-b</th>' in section
    assert f"lock {str(LOCKS['gpu-nvidia-cu132'])[:12]}" in section
    page = html_page(MATRIX, evidence=section.splitlines(), tiers={"nvidia": "beta"})
    assert 'class="badge maturity-beta"' in page
    assert 'class="badge maturity-declared"' in page  # every family without records
    assert 'class="badge maturity-stable"' not in page  # what matrix.toml claims is not shown as earned
