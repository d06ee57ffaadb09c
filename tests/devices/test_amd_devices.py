"""amd: torch (a ROCm build) sees every visible GPU with a gfx target the environment declares, computes on each,
runs an RCCL all-reduce across them, and Ray reports them."""

from __future__ import annotations

import pytest
from devicekit import Expected, need_devices, need_module

FAMILY = "amd"


def test_devices_and_architectures(expected: Expected) -> None:
    torch = need_module(expected, "torch")
    assert torch.version.hip, f"torch {torch.__version__} is not a ROCm build"
    need_devices(expected, torch.cuda.device_count())
    for index in range(torch.cuda.device_count()):
        arch = torch.cuda.get_device_properties(index).gcnArchName.split(":")[0]
        assert arch in expected.archs, f"GPU {index} is {arch}; {expected.env.id} declares {sorted(expected.archs)}"


def test_matmul_on_every_device(expected: Expected) -> None:
    torch = need_module(expected, "torch")
    need_devices(expected, torch.cuda.device_count())
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    for index in range(torch.cuda.device_count()):
        device = torch.device("cuda", index)
        torch.testing.assert_close((a.to(device) @ b.to(device)).cpu(), a @ b, rtol=1e-3, atol=1e-3)


def test_all_reduce_across_devices(expected: Expected) -> None:
    torch = need_module(expected, "torch")
    count = torch.cuda.device_count()
    need_devices(expected, count)
    if count < 2:
        pytest.skip("one GPU: no collective to run")
    from torch.cuda import nccl  # RCCL on ROCm builds

    tensors = [torch.ones(1024, device=torch.device("cuda", i)) for i in range(count)]
    nccl.all_reduce(tensors)
    assert all(torch.all(t == count).item() for t in tensors)


def test_ray_reports_the_gpus(expected: Expected) -> None:
    ray = need_module(expected, "ray", from_lock=True)
    torch = need_module(expected, "torch")
    need_devices(expected, torch.cuda.device_count())
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources().get("GPU") == expected.device_count
    finally:
        ray.shutdown()
