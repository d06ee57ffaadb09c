"""neuron: torch-neuronx sees NeuronCores and computes on one; Ray reports neuron_cores."""

from __future__ import annotations

from devicekit import Expected, need_devices, need_module

FAMILY = "neuron"


def test_compute_on_a_neuron_core(expected: Expected) -> None:
    need_module(expected, "torch_neuronx")
    torch = need_module(expected, "torch")
    xm = need_module(expected, "torch_xla.core.xla_model")
    need_devices(expected, expected.device_count)  # neuron-ls devices; cores are counted by Ray below
    device = xm.xla_device()
    a = torch.ones(64, 64)
    result = (a.to(device) @ a.to(device)).cpu()
    assert torch.all(result == 64).item()


def test_ray_reports_neuron_cores(expected: Expected) -> None:
    ray = need_module(expected, "ray", from_lock=True)
    need_module(expected, "torch_neuronx")
    need_devices(expected, expected.device_count)
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources().get("neuron_cores", 0) >= expected.device_count
    finally:
        ray.shutdown()
