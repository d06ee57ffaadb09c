"""`accelenv metrics`: Prometheus' text format, read back with Prometheus' own parser (prometheus_client.parser):
the verdicts `check` returns, the devices and driver the report holds, and the newest record's figures."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostkit import FakeRunner, Pci, capture, make_root, reorder_query
from prometheus_client.parser import text_string_to_metric_families

from accelenv import records
from accelenv.check.checks import check
from accelenv.cli import main
from accelenv.host.discover import discover
from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.root import Root
from accelenv.matrix import load_matrix
from accelenv.plan.metrics import prometheus_text

if TYPE_CHECKING:
    from accelenv.host.report import HostReport

REPO = Path(__file__).resolve().parents[2]
H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def h100(tmp_path: Path) -> HostReport:
    matrix = load_matrix(REPO / "matrix.toml")
    pci = [Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")]
    root = make_root(tmp_path / "root", pci=pci, modules={}, files={"/proc/sys/kernel/arch": "x86_64\n"})
    outputs = {
        "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): reorder_query(
            capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS
        ),
        "nvidia-smi --version": capture("nvidia-smi--version__" + H100),
    }
    return discover(matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=["nvidia"])


def test_verdicts_devices_and_driver(tmp_path: Path) -> None:
    matrix = load_matrix(REPO / "matrix.toml")
    report = h100(tmp_path)
    env = matrix.envs["gpu-nvidia-cu132"]
    found = check(matrix, env, report)
    text = prometheus_text(report, {env.id: found}, family="nvidia", version="0.1.0")
    got = samples(text)
    current = {v for (name, labels), v in got.items() if name == "accelenv_env_verdict" and v == 1}
    assert current == {1.0}
    states = {dict(labels)["verdict"]: v for (name, labels), v in got.items() if name == "accelenv_env_verdict"}
    assert sum(states.values()) == 1
    assert got[("accelenv_devices", (("family", "nvidia"), ("sku", "h100-sxm")))] == 1
    info = [dict(labels) for (name, labels), _ in got.items() if name == "accelenv_accelerator_info"]
    assert info == [{"family": "nvidia", "driver": "590.48.01", "runtime": report.accelerators[0].runtime_version}]
    statuses = {dict(labels)["status"]: v for (name, labels), v in got.items() if name == "accelenv_env_checks"}
    assert sum(statuses.values()) == len(found)


def test_a_hostile_driver_string_stays_one_label_value(tmp_path: Path) -> None:
    report = h100(tmp_path)
    evil = 'x"} 1\nfake_metric{a="b'
    acc = records.replace(report.accelerators[0], driver_version=evil)
    report = records.replace(report, accelerators=(acc,))
    got = samples(prometheus_text(report, {}, family="nvidia"))
    assert not [name for name, _ in got if name.startswith("fake_metric")]
    assert [dict(labels)["driver"] for (name, labels), _ in got.items() if name == "accelenv_accelerator_info"] == [
        evil
    ]


def record(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": "accelenv-result/1",
        "id": "cpu-py311-20261101T100000Z-0a1b2c3d",
        "run_url": None,
        "env": {"id": "cpu-py311", "lock_sha256": "ab" * 32, "image": None, "frameworks": []},
        "host": {"family": "cpu", "sku": None, "device_count": 0, "driver": None, "nodes": 1},
        "check": {"verdict": "pass", "failed": []},
        "outcome": "passed",
        "tests": [{"id": "tests/devices/test_x.py::test_y", "outcome": "passed", "reason": None, "seconds": 0.5}],
        "perf": [
            {
                "name": "matmul",
                "value": 0.25,
                "unit": "TFLOP/s",
                "dtype": "fp32",
                "devices": 1,
                "samples": 10,
                "peak": None,
                "fraction": None,
                "min_fraction": None,
                "warning": None,
            },
        ],
        "started": "2026-11-01T10:00:00Z",
        "finished": "2026-11-01T10:05:00Z",
    }
    data.update(changes)
    return data


def test_metrics_command_with_the_newest_record(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    old = record()
    new = record(id="cpu-py311-20261102T100000Z-0a1b2c3e", started="2026-11-02T10:00:00Z",
                 finished="2026-11-02T10:05:00Z", check={"verdict": "warn", "failed": []})  # fmt: skip
    new["perf"][0]["value"] = 0.5
    (folder / "a.result.json").write_text(json.dumps(old), encoding="utf-8")
    (folder / "b.result.json").write_text(json.dumps(new), encoding="utf-8")
    (folder / "bad.result.json").write_text("{", encoding="utf-8")
    target = tmp_path / "accelenv.prom"
    out = io.StringIO()
    args = ["--matrix", str(REPO / "matrix.toml"), "metrics", "--env", "cpu-py311", "--records", str(folder)]
    assert main([*args, "-o", str(target)], out=out) == 0
    got = samples(target.read_text(encoding="utf-8"))
    figure = (("dtype", "fp32"), ("env", "cpu-py311"), ("name", "matmul"), ("sku", ""), ("unit", "TFLOP/s"))
    assert got[("accelenv_record_figure", figure)] == 0.5  # the newest record's
    assert got[("accelenv_record_verdict", (("env", "cpu-py311"), ("verdict", "warn")))] == 1
    import calendar

    finished = calendar.timegm((2026, 11, 2, 10, 5, 0))
    assert got[("accelenv_record_finished_timestamp_seconds", (("env", "cpu-py311"),))] == finished
    assert ("accelenv_env_verdict", (("env", "cpu-py311"), ("verdict", "pass"))) in got
