"""Hostile values a host or a snapshot carries: a 5000-digit or billion-wide CUDA_VISIBLE_DEVICES, snapshots
with wrong types. Each is a finding or a clean error, never a crash and never a memory blow-up."""

from __future__ import annotations

import json
import time
import tracemalloc
from typing import TYPE_CHECKING

import pytest
from hostilekit import accelenv_here, assert_clean_error
from hostkit import FakeRunner, Pci, make_root
from reference import REFERENCE_MATRIX

from accelenv.check.checks import check
from accelenv.host.discover import discover
from accelenv.host.root import Root
from accelenv.matrix.load import load_matrix

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    "value",
    ["1" * 5000, "-" + "7" * 5000, "0-99999999999", "0-999999", "0-" + "9" * 5000, ",".join(["0", "1"] * 50_000)],
    ids=["5000-digits", "negative-5000-digits", "billion-range", "million-range", "5000-digit-range", "100k-entries"],
)
def test_visible_devices_values_are_findings(tmp_path: Path, value: str) -> None:
    matrix = load_matrix(REFERENCE_MATRIX)
    root = make_root(tmp_path, pci=[Pci("0000:17:00.0", "0x10de", "0x2330", driver="nvidia")],
                     modules={"nvidia": "570.124.06"})  # fmt: skip
    report = discover(
        matrix, root=Root(root), runner=FakeRunner({}), environ={"CUDA_VISIBLE_DEVICES": value}, families=["nvidia"]
    )
    tracemalloc.start()
    start = time.monotonic()
    found = check(matrix, matrix.envs["gpu-nvidia-cu128"], report)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert time.monotonic() - start < 10
    assert peak < 256 * 2**20
    visible = next(f for f in found if f.id == "devices.visible")
    assert visible.status.value == "fail"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda r: r["accelerators"].append({"family": "nvidia", "driver_version": 590}), "driver_version"),
        (lambda r: r.__setitem__("python", {**r["python"], "distributions": {"torch": "2.9.1"}}), "torch"),
        (lambda r: r.__setitem__("environment", {"CUDA_VISIBLE_DEVICES": ["0"]}), "CUDA_VISIBLE_DEVICES"),
        (lambda r: r.__setitem__("accelerators", "boom"), "accelerators"),
    ],
    ids=["number-for-a-version", "string-for-a-list", "list-for-a-string", "string-for-accelerators"],
)
def test_snapshots_with_wrong_types_are_usage_errors(matrix: Path, tmp_path: Path, change: object, says: str) -> None:
    snapshot = tmp_path / "snap.json"
    root = make_root(tmp_path / "root")
    made = accelenv_here("--matrix", str(matrix), "snapshot", "--root", str(root), "-o", str(snapshot))
    assert made.returncode == 0, made.stderr
    data = json.loads(snapshot.read_text())
    change(data["report"])  # type: ignore[operator]
    snapshot.write_text(json.dumps(data))
    result = accelenv_here("--matrix", str(matrix), "check", "gpu-nvidia-cu128", "--snapshot", str(snapshot))
    assert_clean_error(result, code=2, says=says)
