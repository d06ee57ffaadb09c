"""Conformance, any family: one member is killed in the middle of the training run; Ray restarts it, the group
re-forms from the last step every member finished, the run ends where a single process ends, and afterwards no
process of the run is left and none holds one of the family's devices."""

from __future__ import annotations

import os
import signal

import pytest
from conformancekit import (
    STEPS,
    backend_of,
    data,
    device_holders,
    form,
    need_torch,
    processes_gone,
    ray_cluster,
    reference,
    restarted,
    spawn,
)
from devicekit import Expected, need_devices

KILLED_AFTER = STEPS // 2


def test_a_killed_member_is_restarted_and_the_run_completes(expected: Expected) -> None:
    torch, ray = need_torch(expected)
    family = expected.env.family
    if family != "cpu":
        need_devices(expected, expected.device_count)
    backend = backend_of(expected.matrix, expected.env)
    with ray_cluster(family, expected.device_count) as cluster:
        if cluster.members < 2:
            pytest.skip(f"{cluster.members} device: no other member to survive the kill")
        members = spawn(cluster, family, backend, restarts=1, resource=expected.matrix.families[family].ray_resource)
        pids = ray.get([m.pid.remote() for m in members])
        form(members)
        weight, bias, _, _ = data()
        ray.get([m.load.remote([weight, bias]) for m in members])
        for _ in range(KILLED_AFTER):
            ray.get([m.step.remote() for m in members], timeout=120)
        checkpoint = ray.get(members[0].state.remote())
        victim = len(members) - 1
        os.kill(pids[victim], signal.SIGKILL)  # the actor's own process, started by this run
        new_pid = restarted(members[victim], pids[victim])
        assert new_pid != pids[victim]
        form(members)  # every member leaves the broken group and joins a new one
        ray.get([m.load.remote(checkpoint) for m in members])
        for _ in range(STEPS - KILLED_AFTER):
            ray.get([m.step.remote() for m in members], timeout=120)
        want = reference()
        for rank, state in enumerate(ray.get([m.state.remote() for m in members])):
            for got, ref in zip(state, want, strict=True):
                torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-5, msg=lambda m, r=rank: f"rank {r}: {m}")
        ray.get([m.leave.remote() for m in members])
        for member in members:
            ray.kill(member, no_restart=True)
        started = [*pids, new_pid]
        assert processes_gone(started) == [], f"processes of the run still alive: {processes_gone(started, 0)}"
    family_nodes = expected.matrix.families[family].device_nodes
    if family_nodes:
        assert device_holders(family_nodes, exclude=os.getpid()) == []
