"""Ascend device tests, against the real APIs (torch_npu, ray-ascend): every visible NPU with the expected count,
a computation on each, torch_npu's hccl backend and ray-ascend's HCCL tensor transport registered, and Ray's NPU
resource. The collective across devices is the conformance suite's (tests/devices/test_conformance_*.py, through
the plugin's adapter). Run on an Ascend node with CANN; elsewhere they fail naming what is missing (torch_npu
and CANN), never a skip."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

from accelenv_ascend.cann import TorchNpuUnavailable, import_torch_npu


def _torch_npu() -> Any:
    """torch_npu, or a failure naming what is missing (torch, torch_npu, or CANN): never a skip."""
    try:
        return import_torch_npu()
    except TorchNpuUnavailable as error:
        pytest.fail(str(error), pytrace=False)


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


def test_ray_ascend_registers_its_hccl_transport() -> None:
    _torch_npu()
    ray_ascend = importlib.import_module("ray_ascend")
    ray_ascend.register_hccl_tensor_transport()  # Ray >= 2.56: the HCCL collective and tensor transport


def test_ray_counts_the_npus() -> None:
    _torch_npu()
    ray = importlib.import_module("ray")
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources().get("NPU") == _expected_count()
    finally:
        ray.shutdown()
