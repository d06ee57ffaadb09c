"""Conformance, any family: dense matmul throughput at the SKU's main training precision, device memory
bandwidth, and all-reduce bus bandwidth with two or more members, each the median of timed runs after warm-up,
compared with the SKU's documented peak (matrix data). Below the environment's stated fraction of peak is a
warning, and a SKU without a documented peak says so; every figure goes into the run's result record. A one-member
group over the family's backend needs neither Ray nor a second device."""

from __future__ import annotations

import os
import platform
import warnings
from typing import TYPE_CHECKING, Any

import pytest
from conformancekit import (
    backend_of,
    form,
    free_port_on,
    median,
    need_torch,
    need_torch_alone,
    ray_cluster,
    spawn,
    timed,
)
from devicekit import Expected, need_devices

from accelenv.results.plugin import current_run
from accelenv.results.record import Figure

if TYPE_CHECKING:
    from accelenv.matrix import Sku

WARMUP, REPS = 3, 10


class PerformanceWarning(UserWarning):
    """A conformance figure below the environment's stated fraction of the SKU's peak, or without a peak."""


def _device(expected: Expected) -> Any:
    """The one device the single-process figures run on; a host without the family's devices is a skip only
    where missing hardware was allowed (before anything asks the framework about devices)."""
    torch = need_torch_alone(expected)
    family = expected.env.family
    if family != "cpu":
        need_devices(expected, expected.device_count)
    if family == "cpu":
        return torch.device("cpu")
    if family in ("nvidia", "amd"):
        return torch.device("cuda", 0)
    pytest.fail(f"the performance tests do not yet know how to drive a {family} device from one process")


def _sync(device: Any) -> Any:
    import torch

    return torch.cuda.synchronize if device.type == "cuda" else (lambda: None)


def _sku(expected: Expected, device: Any) -> Sku | None:
    import torch

    skus = expected.matrix.env_skus(expected.env)
    if device.type == "cpu":
        return next((s for s in skus if s.arch == platform.machine().lower()), None)
    name = torch.cuda.get_device_name(device)
    return next((s for s in skus if s.matches_name(name)), None)


def _dtype(sku: Sku | None) -> str:
    return sku.peak.precision if sku and sku.peak else "fp32"


def _report(request: pytest.FixtureRequest, expected: Expected, sku: Sku | None, figure: dict[str, Any]) -> Figure:
    """The figure judged against the peak, handed to the result record; a warning when it is low or unjudged."""
    peak_of = {"matmul": "matmul_tflops", "memory_bandwidth": "memory_gb_s"}.get(figure["name"])
    peak = getattr(sku.peak, peak_of) if sku and sku.peak and peak_of else None
    minimum = expected.env.perf_min_fraction
    fraction = figure["value"] / peak if peak else None
    warning = None
    if peak_of and peak is None:
        warning = f"{sku.id if sku else 'this device'} has no documented {figure['name']} peak in the matrix"
    elif fraction is not None and minimum is not None and fraction < minimum:
        warning = f"{figure['value']:.1f} {figure['unit']} is {fraction:.0%} of the {peak:g} peak, below {minimum:.0%}"
    result = Figure(**figure, peak=peak, fraction=fraction, min_fraction=minimum, warning=warning)
    run = current_run(request.config)
    if run is not None:
        run.figures.append(result)
    print(f"{result.name}: {result.value:.3f} {result.unit}" + (f" ({fraction:.0%} of peak)" if fraction else ""))
    if warning and (peak is not None or expected.env.family != "cpu"):
        warnings.warn(PerformanceWarning(f"{result.name}: {warning}"), stacklevel=2)
    assert result.value > 0
    return result


def test_matmul_throughput(expected: Expected, request: pytest.FixtureRequest) -> None:
    torch = need_torch_alone(expected)
    device = _device(expected)
    if device.type != "cpu":
        need_devices(expected, torch.cuda.device_count())
    sku = _sku(expected, device)
    dtype = _dtype(sku)
    n = 8192 if device.type == "cuda" else 512
    kind = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    a = torch.randn(n, n, device=device, dtype=kind)
    b = torch.randn(n, n, device=device, dtype=kind)
    seconds = timed(lambda: a @ b, sync=_sync(device), warmup=WARMUP, reps=REPS)
    tflops = 2 * n**3 / median(seconds) / 1e12
    figure = {"name": "matmul", "value": tflops, "unit": "TFLOP/s", "dtype": dtype, "devices": 1, "samples": REPS}
    _report(request, expected, sku, figure)


def test_memory_bandwidth(expected: Expected, request: pytest.FixtureRequest) -> None:
    torch = need_torch_alone(expected)
    device = _device(expected)
    if device.type != "cpu":
        need_devices(expected, torch.cuda.device_count())
    sku = _sku(expected, device)
    size = 2 * 2**30 if device.type == "cuda" else 64 * 2**20  # bytes per buffer: far beyond any cache
    source = torch.empty(size // 4, dtype=torch.float32, device=device).fill_(1.0)
    target = torch.empty_like(source)
    seconds = timed(lambda: target.copy_(source), sync=_sync(device), warmup=WARMUP, reps=REPS)
    gb_s = 2 * size / median(seconds) / 1e9  # a copy reads and writes every byte
    figure = {"name": "memory_bandwidth", "value": gb_s, "unit": "GB/s", "dtype": "fp32", "devices": 1, "samples": REPS}
    _report(request, expected, sku, figure)


def test_one_member_group(expected: Expected) -> None:
    """The family's backend forms a group of one in this process (no Ray) and all-reduces on the device."""
    torch = need_torch_alone(expected)
    device = _device(expected)
    import torch.distributed as dist

    if device.type != "cpu":
        need_devices(expected, torch.cuda.device_count())
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
        members = spawn(cluster, family, backend_of(expected.matrix, expected.env))
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
    }
    _report(request, expected, None, figure)
