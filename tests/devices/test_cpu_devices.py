"""cpu: Ray starts, schedules tasks on every CPU it reports, and reports no accelerator."""

from __future__ import annotations

import os

from devicekit import Expected, need_module

FAMILY = "cpu"


def test_ray_runs_tasks_on_cpu(expected: Expected) -> None:
    ray = need_module(expected, "ray", from_lock=True)
    cpus = min(2, os.cpu_count() or 1)
    ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:

        def square(x: int) -> int:
            return x * x

        remote_square = ray.remote(square)
        assert ray.get([remote_square.remote(i) for i in range(32)]) == [i * i for i in range(32)]
        resources = ray.cluster_resources()
        assert resources.get("CPU") == cpus
        assert "GPU" not in resources
        assert not [k for k in resources if k.startswith("accelerator_type:")]
    finally:
        ray.shutdown()
