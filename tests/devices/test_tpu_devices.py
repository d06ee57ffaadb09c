"""tpu: JAX sees TPU devices of the environment's generation, computes on each, and psums across them; Ray reports
the chips."""

from __future__ import annotations

import pytest
from devicekit import NO_DEVICE, Expected, missing_hardware_allowed, need_module

FAMILY = "tpu"


def _tpus(expected: Expected) -> list[object]:
    jax = need_module(expected, "jax")
    try:
        return list(jax.devices("tpu"))
    except RuntimeError:  # jax raises when the backend has no TPU
        return []


def _need_tpus(expected: Expected, devices: list[object]) -> None:
    """JAX exposes one or two devices per chip (TensorCores); the host counts chips."""
    if not devices and expected.device_count == 0 and missing_hardware_allowed():
        pytest.skip(f"{NO_DEVICE}: the host has no TPU (allowed by --skip-missing-hardware)")
    assert devices, "JAX sees no TPU device"
    assert len(devices) >= expected.device_count, f"JAX sees {len(devices)} devices for {expected.device_count} chips"


def test_devices_and_generation(expected: Expected) -> None:
    devices = _tpus(expected)
    _need_tpus(expected, devices)
    kinds = {str(getattr(d, "device_kind", "")).lower().replace(" ", "") for d in devices}
    wanted = {arch.replace("tpu-", "") for arch in expected.archs}
    assert any(arch in kind for arch in wanted for kind in kinds), (
        f"JAX device kinds {sorted(kinds)}; {expected.env.id} declares {sorted(expected.archs)}"
    )


def test_compute_and_psum(expected: Expected) -> None:
    devices = _tpus(expected)
    _need_tpus(expected, devices)
    import jax
    import jax.numpy as jnp

    count = len(devices)
    result = jax.pmap(lambda x: jax.lax.psum(x, "i"), axis_name="i")(jnp.ones((count, 4)))
    assert float(result[0][0]) == count


def test_ray_reports_tpus(expected: Expected) -> None:
    ray = need_module(expected, "ray", from_lock=True)
    _need_tpus(expected, _tpus(expected))
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources().get("TPU") == expected.device_count
    finally:
        ray.shutdown()
