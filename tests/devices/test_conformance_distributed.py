"""Conformance, any family: one Ray actor per device forms a torch.distributed group over the family's backend
(matrix data), runs an all-reduce and a few steps of data-parallel training, and ends where a single process
training on the whole batch ends. Across every node of the cluster (two loopback nodes for the CPU family)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conformancekit import STEPS, backend_of, data, form, need_torch, ray_cluster, reference, spawn
from devicekit import need_devices

from accelenv.results.plugin import current_run

if TYPE_CHECKING:
    import pytest
    from devicekit import Expected


def test_all_reduce_and_training_match_a_single_process(expected: Expected, request: pytest.FixtureRequest) -> None:
    torch, ray = need_torch(expected)
    family = expected.env.family
    if family != "cpu":
        need_devices(expected, expected.device_count)
    backend = backend_of(expected.matrix, expected.env)
    with ray_cluster(family, expected.device_count) as cluster:
        if family == "cpu":
            assert cluster.nodes >= 2, f"the CPU suite runs across two Ray nodes; the cluster has {cluster.nodes}"
        assert cluster.members >= 1
        run = current_run(request.config)
        if run is not None:
            run.nodes = max(run.nodes, cluster.nodes)
        members = spawn(cluster, family, backend, resource=expected.matrix.families[family].ray_resource)
        form(members)
        world = cluster.members
        assert ray.get([m.all_reduce.remote() for m in members]) == [world * (world + 1) / 2] * world
        if cluster.nodes >= 2:
            nodes = set(ray.get([m.node.remote() for m in members]))
            assert len(nodes) >= 2, f"{world} members all ran on one node of {cluster.nodes}"
        weight, bias, _, _ = data()
        ray.get([m.load.remote([weight, bias]) for m in members])
        for _ in range(STEPS):
            ray.get([m.step.remote() for m in members], timeout=120)
        expected_params = reference()
        for rank, state in enumerate(ray.get([m.state.remote() for m in members])):
            for got, want in zip(state, expected_params, strict=True):
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5, msg=lambda m, r=rank: f"rank {r}: {m}")
        ray.get([m.leave.remote() for m in members])
        for member in members:
            ray.kill(member)
