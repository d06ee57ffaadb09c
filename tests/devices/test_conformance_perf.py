"""Conformance, any family: dense matmul throughput at the SKU's main training precision, device memory
bandwidth, and all-reduce bus bandwidth with two or more members, each the median of timed runs after warm-up,
compared with the SKU's documented peak (matrix data). Below the environment's stated fraction of peak is a
warning, and a SKU without a documented peak says so; every figure goes into the run's result record. A one-member
group over the family's backend needs neither Ray nor a second device."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
from conformancekit import (
    backend_of,
    device_for,
    form,
    free_port_on,
    median,
    need_torch,
    need_torch_alone,
    ray_cluster,
    spawn,
    sync_for,
    timed,
)
from devicekit import Expected, need_devices, need_module
from perfkit import REPS, WARMUP, host_sku, report_figure, spread

from accelenv.plugins import BUILTIN_FAMILIES

if TYPE_CHECKING:
    from accelenv.matrix import Sku


@dataclass(frozen=True)
class _On:
    """The one device the single-process figures run on, and the product name the framework reports for it."""

    device: Any
    name: str | None = None

    @property
    def accelerator(self) -> bool:
        return bool(self.device.type != "cpu")

    def sync(self) -> None:
        sync_for(self.device)()


def _device(expected: Expected) -> _On:
    """The device of the family's backend, once the framework sees as many as the host has; a host without the
    family's devices is a skip only where missing hardware was allowed (before anything asks the framework)."""
    torch = need_torch_alone(expected)
    family = expected.env.family
    name = None
    if family != "cpu":
        need_devices(expected, expected.device_count)
    if family in ("nvidia", "amd"):
        need_devices(expected, torch.cuda.device_count())
        name = torch.cuda.get_device_name(0)
    elif family == "gaudi":
        # Intel's images load habana_frameworks with torch (eager mode, the default since Gaudi software 1.21)
        need_module(expected, "habana_frameworks.torch")
        need_devices(expected, torch.hpu.device_count())
        name = torch.hpu.get_device_name()
    elif family == "neuron":  # torch-neuronx's PJRT path: ops are traced, and run at the step mark (sync_for)
        need_module(expected, "torch_xla.core.xla_model")
    elif family not in BUILTIN_FAMILIES:  # a plugin's family: its adapter's device and wait (device_for, sync_for)
        name = None
    elif family != "cpu":
        pytest.fail(f"the performance tests do not yet know how to drive a {family} device from one process")
    return _On(device_for(backend_of(expected.matrix, expected.env)), name)


def _sku(request: pytest.FixtureRequest, expected: Expected, on: _On) -> Sku | None:
    """The SKU whose product names match the device's, else the one the run's host snapshot identified."""
    if on.name:
        found = next((s for s in expected.matrix.env_skus(expected.env) if s.matches_name(on.name)), None)
        if found is not None:
            return found
    return host_sku(request, expected)


def _dtype(sku: Sku | None) -> str:
    return sku.peak.precision if sku and sku.peak else "fp32"


def test_matmul_throughput(expected: Expected, request: pytest.FixtureRequest) -> None:
    torch = need_torch_alone(expected)
    on = _device(expected)
    sku = _sku(request, expected, on)
    dtype = _dtype(sku)
    n = 8192 if on.accelerator else 512
    kind = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    a = torch.randn(n, n, device=on.device, dtype=kind)
    b = torch.randn(n, n, device=on.device, dtype=kind)
    seconds = timed(lambda: a @ b, sync=on.sync, warmup=WARMUP, reps=REPS)
    tflops = 2 * n**3 / median(seconds) / 1e12
    figure = {"name": "matmul", "value": tflops, "unit": "TFLOP/s", "dtype": dtype, "devices": 1, "samples": REPS}
    figure["spread"] = spread([2 * n**3 / s / 1e12 for s in seconds])
    report_figure(request, expected, sku, figure)


def test_memory_bandwidth(expected: Expected, request: pytest.FixtureRequest) -> None:
    torch = need_torch_alone(expected)
    on = _device(expected)
    sku = _sku(request, expected, on)
    size = 2 * 2**30 if on.accelerator else 64 * 2**20  # bytes per buffer: far beyond any cache
    source = torch.empty(size // 4, dtype=torch.float32, device=on.device).fill_(1.0)
    target = torch.empty_like(source)
    seconds = timed(lambda: target.copy_(source), sync=on.sync, warmup=WARMUP, reps=REPS)
    gb_s = 2 * size / median(seconds) / 1e9  # a copy reads and writes every byte
    figure = {"name": "memory_bandwidth", "value": gb_s, "unit": "GB/s", "dtype": "fp32", "devices": 1, "samples": REPS}
    figure["spread"] = spread([2 * size / s / 1e9 for s in seconds])
    report_figure(request, expected, sku, figure)


def test_one_member_group(expected: Expected) -> None:
    """The family's backend forms a group of one in this process (no Ray) and all-reduces on the device."""
    torch = need_torch_alone(expected)
    device = _device(expected).device  # the family's backend is registered with it
    import torch.distributed as dist

    backend = backend_of(expected.matrix, expected.env)
    port = free_port_on("127.0.0.1")
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        tensor = torch.full((1 << 20,), 3.0, device=device)
        dist.all_reduce(tensor)
        assert torch.all(tensor == 3.0).item()
        assert dist.get_backend() == backend
    finally:
        dist.destroy_process_group()
    assert os.getpid() > 0


def test_all_reduce_bus_bandwidth(expected: Expected, request: pytest.FixtureRequest) -> None:
    _, ray = need_torch(expected)
    family = expected.env.family
    if family != "cpu":
        need_devices(expected, expected.device_count)
    with ray_cluster(family, expected.device_count) as cluster:
        if cluster.members < 2:
            pytest.skip(f"{cluster.members} device: no all-reduce bus bandwidth to measure")
        members = spawn(
            cluster,
            family,
            backend_of(expected.matrix, expected.env),
            resource=expected.matrix.families[family].ray_resource,
        )
        form(members)
        numel = (256 if family != "cpu" else 4) * 2**20 // 4
        per_member = ray.get([m.bus_bandwidth.remote(numel, WARMUP, REPS) for m in members], timeout=300)
        ray.get([m.leave.remote() for m in members])
        for member in members:
            ray.kill(member)
    value = min(median(v) for v in per_member)  # the slowest member bounds the collective
    figure = {
        "name": "allreduce_busbw",
        "value": value,
        "unit": "GB/s",
        "dtype": "fp32",
        "devices": cluster.members,
        "samples": REPS,
        "spread": spread([min(rep) for rep in zip(*per_member, strict=True)]),  # the slowest member, each time
    }
    report_figure(request, expected, None, figure)
