"""gaudi: the Habana PyTorch bridge sees every visible HPU, computes on each, and Ray reports HPUs."""

from __future__ import annotations

from devicekit import Expected, need_devices, need_module

FAMILY = "gaudi"


def test_devices_and_matmul(expected: Expected) -> None:
    hthpu = need_module(expected, "habana_frameworks.torch.hpu")
    torch = need_module(expected, "torch")
    count = hthpu.device_count()
    need_devices(expected, count)
    a = torch.randn(128, 128)
    for index in range(count):
        device = torch.device("hpu", index)
        torch.testing.assert_close((a.to(device) @ a.to(device)).cpu(), a @ a, rtol=1e-2, atol=1e-2)


def test_ray_reports_hpus(expected: Expected) -> None:
    ray = need_module(expected, "ray", from_lock=True)
    hthpu = need_module(expected, "habana_frameworks.torch.hpu")
    need_devices(expected, hthpu.device_count())
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources().get("HPU") == expected.device_count
    finally:
        ray.shutdown()
