"""nvidia: torch sees every visible GPU with an architecture the environment declares, computes on each, runs an
NCCL all-reduce across them, and Ray reports them with an accelerator type."""

from __future__ import annotations

import pytest
from devicekit import Expected, need_devices, need_module

FAMILY = "nvidia"


def test_devices_and_architectures(expected: Expected) -> None:
    torch = need_module(expected, "torch")
    assert torch.version.cuda, f"torch {torch.__version__} is not a CUDA build"
    need_devices(expected, torch.cuda.device_count())
    for index in range(torch.cuda.device_count()):
        major, minor = torch.cuda.get_device_capability(index)
        arch = f"sm_{major}{minor}"
        assert arch in expected.archs, f"GPU {index} is {arch}; {expected.env.id} declares {sorted(expected.archs)}"
        assert arch in expected.runtime_archs


def test_matmul_on_every_device(expected: Expected) -> None:
    torch = need_module(expected, "torch")
    need_devices(expected, torch.cuda.device_count())
    a = torch.randn(256, 256, dtype=torch.float32)
    b = torch.randn(256, 256, dtype=torch.float32)
    reference = a @ b
    for index in range(torch.cuda.device_count()):
        device = torch.device("cuda", index)
        result = (a.to(device) @ b.to(device)).cpu()
        torch.testing.assert_close(result, reference, rtol=1e-3, atol=1e-3)


def test_all_reduce_across_devices(expected: Expected) -> None:
    torch = need_module(expected, "torch")
    count = torch.cuda.device_count()
    need_devices(expected, count)
    if count < 2:
        pytest.skip("one GPU: no collective to run")
    from torch.cuda import nccl

    tensors = [torch.full((1024,), float(i + 1), device=torch.device("cuda", i)) for i in range(count)]
    nccl.all_reduce(tensors)
    total = count * (count + 1) / 2
    for tensor in tensors:
        assert torch.all(tensor == total).item()


def test_ray_reports_the_gpus(expected: Expected) -> None:
    ray = need_module(expected, "ray", from_lock=True)
    torch = need_module(expected, "torch")
    need_devices(expected, torch.cuda.device_count())
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        resources = ray.cluster_resources()
        assert resources.get("GPU") == expected.device_count
        assert [k for k in resources if k.startswith("accelerator_type:")], resources
    finally:
        ray.shutdown()
