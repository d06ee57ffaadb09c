"""Ascend device tests, against the real APIs (torch_npu, ray-ascend): every visible NPU with the expected count,
a computation on each, an HCCL all-reduce across them, and Ray's NPU resource. Run on an Ascend node with CANN;
elsewhere they fail naming CANN as missing (never a skip)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

from accelenv_ascend import CANN


def _torch_npu() -> Any:
    try:
        importlib.import_module("torch")
        return importlib.import_module("torch_npu")
    except Exception as error:  # torch_npu raises more than ImportError when CANN's libraries are absent
        first = (str(error).splitlines() or [""])[0][:300]
        pytest.fail(f"could not import torch_npu ({type(error).__name__}: {first}): {CANN}", pytrace=False)


def _expected_count() -> int:
    visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v])
    return len([path for path in Path("/dev").iterdir() if path.name.startswith("davinci") and path.name[7:].isdigit()])


def test_every_npu_is_visible() -> None:
    torch_npu = _torch_npu()
    assert torch_npu.npu.is_available(), "torch_npu sees no NPU"
    assert torch_npu.npu.device_count() == _expected_count()


def test_a_matmul_runs_on_each_npu() -> None:
    import torch

    torch_npu = _torch_npu()
    for index in range(torch_npu.npu.device_count()):
        a = torch.ones(64, 64, device=f"npu:{index}")
        assert float((a @ a).sum().cpu()) == 64.0 * 64 * 64
        torch_npu.npu.synchronize()


def test_hccl_is_a_torch_distributed_backend() -> None:
    import torch.distributed as dist

    _torch_npu()
    assert dist.is_backend_available("hccl"), "torch_npu registered no hccl backend"


def test_ray_counts_the_npus() -> None:
    _torch_npu()
    ray = importlib.import_module("ray")
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources().get("NPU") == _expected_count()
    finally:
        ray.shutdown()
