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


def _register_transport() -> None:
    """The plugin adapter's RDT transport, registered the way it says (module:function)."""
    from accelenv_ascend import PLUGIN

    module, _, function = str(PLUGIN.conformance.rdt_register).partition(":")
    getattr(importlib.import_module(module), function)()


class _Holder:
    """A Ray actor on one NPU, with the transport registered in its process."""

    def __init__(self) -> None:
        _register_transport()

    def ones(self) -> Any:
        import torch

        return torch.ones(1024, device="npu")

    def total(self, tensor: Any) -> float:
        return float(tensor.sum().item())


def test_ray_ascend_registers_its_hccl_transport() -> None:
    _torch_npu()
    _register_transport()  # ray-ascend, Ray >= 2.56: the HCCL collective and tensor transport


def test_an_npu_tensor_moves_between_actors_over_hccl() -> None:
    """Ray Direct Transport: an actor returns an NPU tensor over the adapter's transport (HCCL), another sums it."""
    _torch_npu()
    assert _expected_count() >= 2, f"the HCCL transport needs two NPUs; this host has {_expected_count()}"
    from accelenv_ascend import PLUGIN

    ray = importlib.import_module("ray")
    collective = importlib.import_module("ray.util.collective")
    transport = str(PLUGIN.conformance.rdt_transport)
    _register_transport()

    # the method that returns the tensor goes over the transport (what @ray.method(tensor_transport=...) does)
    holder = type("Holder", (_Holder,), {"ones": ray.method(tensor_transport=transport)(_Holder.ones)})
    actor: Any = ray.remote(resources={"NPU": 1})(holder)

    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        sender, receiver = actor.remote(), actor.remote()
        collective.create_collective_group([sender, receiver], backend=transport)
        assert ray.get(receiver.total.remote(sender.ones.remote()), timeout=300) == 1024.0
    finally:
        ray.shutdown()


def test_ray_counts_the_npus() -> None:
    _torch_npu()
    ray = importlib.import_module("ray")
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources().get("NPU") == _expected_count()
    finally:
        ray.shutdown()
