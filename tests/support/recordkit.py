"""A result record `results` accepts against the shipped matrix, for tests that change one thing in it."""

from __future__ import annotations

from typing import Any

from hostilekit import REPO

SHIPPED_MATRIX = REPO / "matrix.toml"


def good_record(run: str, **changes: Any) -> dict[str, Any]:
    """A record `results` accepts against the shipped matrix (as tests/hostile/test_result_records.py's)."""
    data: dict[str, Any] = {
        "format": "accelenv-result/1",
        "id": f"gpu-nvidia-cu132-20261110T100000Z-{run}",
        "run_url": None,
        "env": {"id": "gpu-nvidia-cu132", "lock_sha256": "ab" * 32, "image": None, "frameworks": []},
        "host": {"family": "nvidia", "sku": "h200", "device_count": 1, "driver": "595.80", "nodes": 1},
        "check": {"verdict": "pass", "failed": []},
        "outcome": "passed",
        "tests": [{"id": "tests/devices/test_x.py::test_y", "outcome": "passed", "reason": None, "seconds": 0.5}],
        "perf": [],
        "started": "2026-11-10T10:00:00Z",
        "finished": "2026-11-10T10:05:00Z",
    }
    data.update(changes)
    return data
