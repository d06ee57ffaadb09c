"""Result records are input: truncated, hostile or mismatched records are refused with the file named, and what a
record says can never change the page's (or the Markdown report's) markup."""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from accelenv.matrix import load_matrix
from accelenv.plan.evidence import DECLARED, FAILED, PROVEN, html_section, markdown_section, view
from accelenv.plan.page import html_page
from accelenv.results.record import Refused, read_record, read_records

if TYPE_CHECKING:
    from accelenv.matrix.model import Matrix

REPO = Path(__file__).resolve().parents[2]
NOW = 1_800_000_000  # 2027-01-15


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")


def record(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "format": "accelenv-result/1",
        "id": "gpu-nvidia-cu132-20270110T100000Z-0a1b2c3d",
        "run_url": None,
        "env": {"id": "gpu-nvidia-cu132", "lock_sha256": "ab" * 32, "image": None, "frameworks": []},
        "host": {"family": "nvidia", "sku": "h200", "device_count": 1, "driver": "595.80", "nodes": 1},
        "check": {"verdict": "pass", "failed": []},
        "outcome": "passed",
        "tests": [
            {
                "id": f"tests/devices/test_conformance_{kind}.py::test_y",
                "outcome": "passed",
                "reason": None,
                "seconds": 1,
            }
            for kind in ("distributed", "recovery", "perf")
        ],
        "perf": [
            {
                "name": "matmul",
                "value": 700.0,
                "unit": "TFLOP/s",
                "dtype": "bf16",
                "devices": 1,
                "samples": 10,
                "peak": 989.5,
                "fraction": 700 / 989.5,
                "min_fraction": 0.5,
                "warning": None,
            }
        ],
        "started": "2027-01-10T10:00:00Z",
        "finished": "2027-01-10T10:05:00Z",
    }
    for path, value in changes.items():
        target = data
        keys = path.split("__")
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return data


def write(folder: Path, name: str, data: object) -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def test_a_good_record_is_read(matrix: Matrix, tmp_path: Path) -> None:
    got = read_record(write(tmp_path, "a.result.json", record()), matrix, now=NOW)
    assert not isinstance(got, Refused), got
    assert (got.env, got.sku, got.driver, got.outcome) == ("gpu-nvidia-cu132", "h200", "595.80", "passed")


CASES = [
    ("truncated", json.dumps(record())[:200], "not JSON (truncated?)"),
    ("not an object", "[1, 2]", "not a JSON object"),
    ("other format", record(format="junit/1"), "not an accelenv result record"),
    ("extra key", {**record(), "admin": True}, "Additional properties are not allowed"),
    (
        "unknown env",
        record(env__id="gpu-nvidia-cu999", id="gpu-nvidia-cu999-20270110T100000Z-0a1b2c3d"),
        "env.id 'gpu-nvidia-cu999' is not an environment of the matrix",
    ),
    ("sku of another family", record(host__sku="mi300x"), "host.sku 'mi300x' is a amd SKU, not nvidia"),
    ("unknown sku", record(host__sku="h900"), "host.sku 'h900' is not a SKU of the matrix"),
    ("future", record(finished="2099-01-01T00:00:00Z"), "finished 2099-01-01T00:00:00Z is in the future"),
    ("ends before it starts", record(finished="2027-01-10T09:00:00Z"), "is before started"),
    ("impossible date", record(started="2027-02-30T10:00:00Z"), "started/finished is not a valid time"),
    ("markup in the env id", record(env__id="<b>x</b>"), "does not match schema/result.schema.json: env.id"),
    ("javascript link", record(run_url="javascript:alert(1)"), "does not match schema/result.schema.json: run_url"),
    ("control characters", record(host__driver="595\x1b[31m"), "host.driver"),
    ("nan figure", json.dumps(record()).replace("700.0", "NaN"), "NaN is no number JSON allows"),
    ("negative count", record(host__device_count=-1), "host.device_count"),
    ("id of another env", record(id="cpu-py311-20270110T100000Z-0a1b2c3d"), "does not start with its environment"),
]


@pytest.mark.parametrize(("data", "reason"), [(d, r) for _, d, r in CASES], ids=[c[0] for c in CASES])
def test_bad_records_are_refused_with_the_file_named(matrix: Matrix, tmp_path: Path, data: object, reason: str) -> None:
    path = write(tmp_path, "bad.result.json", data)
    got = read_record(path, matrix, now=NOW)
    assert isinstance(got, Refused), got
    assert got.path == str(path)
    assert reason in got.reason


def test_a_fifo_a_huge_file_and_binary_are_refused_without_blocking(matrix: Matrix, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.result.json"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.result.json"
    with huge.open("wb") as out:
        out.truncate(5 * 2**20)
    binary = tmp_path / "bin.result.json"
    binary.write_bytes(b"\xff\xfe{}")
    records, refused = read_records([tmp_path], matrix, now=NOW)
    assert records == []
    reasons = {Path(r.path).name: r.reason for r in refused}
    assert "FIFO" in reasons["pipe.result.json"]
    assert "larger than" in reasons["huge.result.json"]
    assert "not UTF-8" in reasons["bin.result.json"]


def test_the_same_id_with_other_content_is_refused(matrix: Matrix, tmp_path: Path) -> None:
    write(tmp_path, "a.result.json", record())
    write(tmp_path, "b.result.json", record(host__driver="600.10"))
    write(tmp_path, "c.result.json", record())  # a copy (CI artifacts downloaded twice) merges
    records, refused = read_records([tmp_path], matrix, now=NOW)
    assert len(records) == 1
    assert [Path(r.path).name for r in refused] == ["b.result.json"]
    assert "with other content" in refused[0].reason


HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>|](javascript:x)"


def test_markup_in_a_record_never_reaches_the_page_as_markup(matrix: Matrix, tmp_path: Path) -> None:
    hostile = record(host__driver="595.80" + HOSTILE[:60], run_url='https://ci.example/run/1"><script>x</script>')
    hostile["tests"][0]["reason"] = HOSTILE
    hostile["perf"][0]["warning"] = HOSTILE
    path = write(tmp_path, "h.result.json", hostile)
    bad = write(tmp_path, f"{HOSTILE[:20].replace('/', '_')}.result.json", "{")
    records, refused = read_records([path, bad], matrix, now=NOW)
    section = "\n".join(html_section(matrix, records, refused))
    assert "<script>" not in section
    assert "<img" not in section
    assert "&lt;script&gt;" in section  # shown, as text
    page = html_page(matrix, evidence=html_section(matrix, records, refused))
    assert page.count("<script") == html_page(matrix).count("<script")
    md = markdown_section(matrix, records, refused)
    assert "<script>" not in md
    assert "](javascript" not in md


def test_evidence_tells_proven_declared_and_failed_apart(matrix: Matrix) -> None:
    from accelenv.results.record import record_of

    proven = record_of(record(), "p", matrix)
    failed = record_of(
        record(
            id="gpu-nvidia-cu132-20270111T100000Z-0a1b2c3e",
            host__sku="h100-sxm",
            outcome="failed",
            started="2027-01-11T10:00:00Z",
            finished="2027-01-11T10:05:00Z",
        ),
        "f",
        matrix,
    )
    locks: dict[str, str | None] = {"gpu-nvidia-cu132": "ab" * 32}
    got = {(e.sku, e.env): e.status for e in view(matrix, [proven, failed], locks=locks, now=NOW).pairs}
    assert got[("h200", "gpu-nvidia-cu132")] == PROVEN
    assert got[("h100-sxm", "gpu-nvidia-cu132")] == FAILED
    assert got[("l4", "gpu-nvidia-cu132")] == DECLARED
    section = "\n".join(html_section(matrix, [proven, failed], [], locks=locks, now=NOW))
    assert 'class="ev ev-proven"' in section
    assert 'class="ev ev-declared"' in section
    assert "71% of peak" in section  # 700 of 989.5


def test_unmodified_record_is_not_mutated_by_reading(matrix: Matrix, tmp_path: Path) -> None:
    data = record()
    before = copy.deepcopy(data)
    read_record(write(tmp_path, "a.result.json", data), matrix, now=NOW)
    assert data == before
    assert time.time() > 0
