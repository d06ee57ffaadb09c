"""Conformance through JAX, for environments whose framework is JAX (TPU; on the CPU in CI): a multi-controller
JAX group of one Ray actor per process forms over XLA's collectives, all-reduces, trains a few data-parallel steps
and ends where a single process ends; a member killed mid-run is restarted and the run completes; and the
single-device figures (matmul throughput at the SKU's main training precision, memory bandwidth) and the all-reduce
bus bandwidth are judged against the SKU's documented peak.

The group's tests come first: JAX on TPU gives a chip to one process, so this process measures nothing itself
(the single-device figures are taken in a child process) and fails clearly if something before it took the TPU.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

import jaxkit
import pytest
from conformancekit import STEPS, device_holders, median, processes_gone, ray_cluster, restarted
from devicekit import NO_DEVICE, missing_hardware_allowed, need_module
from perfkit import REPS, WARMUP, host_sku, report_figure, spread

from accelenv.results.plugin import current_run

if TYPE_CHECKING:
    from devicekit import Expected

KILLED_AFTER = STEPS // 2


def _need_jax(expected: Expected) -> tuple[str, Any]:
    """JAX's platform for the family and ray, or a failure naming where they should have come from; a host without
    the family's devices is a skip only where missing hardware was allowed."""
    platform = jaxkit.platform_of(expected.env.family)
    need_module(expected, "jax")
    ray = need_module(expected, "ray", from_lock=True)
    if platform != "cpu":
        if expected.device_count == 0 and missing_hardware_allowed():
            pytest.skip(
                f"{NO_DEVICE}: the host has no {expected.env.family} device (allowed by --skip-missing-hardware)"
            )
        assert expected.device_count > 0, f"the host has no {expected.env.family} device"
        from jax._src import xla_bridge

        held = getattr(xla_bridge, "backends_are_initialized", lambda: False)()
        assert not held, (
            "JAX was initialised in the pytest process before the group formed, so it holds the TPU its members "
            "need: list tests/devices/test_conformance_jax.py before the tests that compute in-process"
        )
    return platform, ray


def _formed(ray: Any, members: list[Any], platform: str, cluster_nodes: int, request: pytest.FixtureRequest) -> int:
    """Form the group and check what every member sees; the group's device count."""
    seen = jaxkit.form(members)
    world = len(members)
    assert {s["platform"] for s in seen} == {platform}, f"the members' JAX runs on {seen}, not {platform}"
    assert {s["processes"] for s in seen} == {world}, seen
    devices = seen[0]["devices"]
    assert {s["devices"] for s in seen} == {devices}, seen
    assert sum(s["local_devices"] for s in seen) == devices, seen
    run = current_run(request.config)
    if run is not None:
        run.nodes = max(run.nodes, cluster_nodes)
    if cluster_nodes >= 2 and world >= 2:
        nodes = set(ray.get([m.node.remote() for m in members]))
        assert len(nodes) >= 2, f"{world} members all ran on one node of {cluster_nodes}"
    return int(devices)


def test_jax_all_reduce_and_training_match_a_single_process(expected: Expected, request: pytest.FixtureRequest) -> None:
    platform, ray = _need_jax(expected)
    family = expected.env.family
    with ray_cluster(family, expected.device_count) as cluster:
        if family == "cpu":
            assert cluster.nodes >= 2, f"the CPU suite runs across two Ray nodes; the cluster has {cluster.nodes}"
        members = jaxkit.spawn(cluster, family)
        devices = _formed(ray, members, platform, cluster.nodes, request)
        assert ray.get([m.all_reduce.remote() for m in members]) == [devices * (devices + 1) / 2] * len(members)
        weight, bias, _, _ = jaxkit.data()
        ray.get([m.load.remote([weight, bias]) for m in members])
        for _ in range(STEPS):
            ray.get([m.step.remote() for m in members], timeout=300)
        jaxkit.assert_matches_reference(ray.get([m.state.remote() for m in members]))
        ray.get([m.leave.remote() for m in members], timeout=360)
        for member in members:
            ray.kill(member)


def test_jax_killed_member_is_restarted_and_the_run_completes(
    expected: Expected, request: pytest.FixtureRequest
) -> None:
    platform, ray = _need_jax(expected)
    family = expected.env.family
    with ray_cluster(family, expected.device_count) as cluster:
        # restarts=2: a survivor whose coordinator saw the victim go may end itself before it is restarted
        members = jaxkit.spawn(cluster, family, restarts=2)
        if len(members) < 2:
            pytest.skip(f"{len(members)} JAX process: no other member to survive the kill")
        pids = ray.get([m.pid.remote() for m in members])
        _formed(ray, members, platform, cluster.nodes, request)
        weight, bias, _, _ = jaxkit.data()
        ray.get([m.load.remote([weight, bias]) for m in members])
        for _ in range(KILLED_AFTER):
            ray.get([m.step.remote() for m in members], timeout=300)
        checkpoint = ray.get(members[0].state.remote())
        victim = len(members) - 1
        os.kill(pids[victim], signal.SIGKILL)  # the actor's own process, started by this run
        for member in members[:victim]:  # a JAX process cannot join a new group: the survivors start afresh too
            ray.kill(member, no_restart=False)
        new_pids = [restarted(member, pid) for member, pid in zip(members, pids, strict=True)]
        _formed(ray, members, platform, cluster.nodes, request)
        ray.get([m.load.remote(checkpoint) for m in members])
        for _ in range(STEPS - KILLED_AFTER):
            ray.get([m.step.remote() for m in members], timeout=300)
        jaxkit.assert_matches_reference(ray.get([m.state.remote() for m in members]))
        ray.get([m.leave.remote() for m in members], timeout=360)
        for member in members:
            ray.kill(member, no_restart=True)
        started = [*pids, *new_pids]
        assert processes_gone(started) == [], f"processes of the run still alive: {processes_gone(started, 0)}"
    family_nodes = expected.matrix.families[family].device_nodes
    if family_nodes:
        assert device_holders(family_nodes, exclude=os.getpid()) == []


def test_jax_all_reduce_bus_bandwidth(expected: Expected, request: pytest.FixtureRequest) -> None:
    platform, ray = _need_jax(expected)
    family = expected.env.family
    with ray_cluster(family, expected.device_count) as cluster:
        members = jaxkit.spawn(cluster, family)
        devices = _formed(ray, members, platform, cluster.nodes, request)
        if devices < 2:
            ray.get([m.leave.remote() for m in members], timeout=360)
            pytest.skip(f"{devices} device: no all-reduce bus bandwidth to measure")
        numel = (256 if family != "cpu" else 4) * 2**20 // 4
        per_member = ray.get([m.bus_bandwidth.remote(numel, WARMUP, REPS) for m in members], timeout=600)
        ray.get([m.leave.remote() for m in members], timeout=360)
        for member in members:
            ray.kill(member)
    value = min(median(v) for v in per_member)  # the slowest member bounds the collective
    figure = {"name": "allreduce_busbw", "value": value, "unit": "GB/s", "dtype": "fp32", "devices": devices}
    figure["spread"] = spread([min(rep) for rep in zip(*per_member, strict=True)])  # the slowest member, each time
    report_figure(request, expected, None, {**figure, "samples": REPS})


@pytest.mark.parametrize(("kind", "unit"), [("matmul", "TFLOP/s"), ("memory_bandwidth", "GB/s")])
def test_jax_single_device_figure(expected: Expected, request: pytest.FixtureRequest, kind: str, unit: str) -> None:
    platform, _ = _need_jax(expected)
    sku = host_sku(request, expected)
    dtype = sku.peak.precision if kind == "matmul" and sku and sku.peak else "fp32"
    measured = jaxkit.measure_in_child(kind, platform, dtype, warmup=WARMUP, reps=REPS)
    share = 1.0
    chips, devices = expected.device_count, int(measured["local_devices"])
    if platform != "cpu" and devices > chips > 0:
        share = chips / devices  # a chip shown as several JAX devices (TPU7x: two): one device holds its part
    figure = {"name": kind, "value": measured["value"], "unit": unit, "dtype": dtype, "devices": 1, "samples": REPS}
    report_figure(request, expected, sku, figure, share=share)
