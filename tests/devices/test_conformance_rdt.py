"""Conformance, any family: Ray Direct Transport (RDT) over each transport the environment declares
(`envs.<id>.transports`), between two Ray actors on one node and on two nodes.

- correctness: tensors of several sizes and dtypes, and a dict of tensors, arrive bit-identical;
- figures: throughput per transport, size and scope, beside the object store's for the same tensor, in the record;
- lifecycle: groups created and destroyed again and again leave no group, socket or process behind;
- failure and recovery: a receiver killed mid-transfer gives a clear error within a bound and the sender's
  buffers are released; a restarted member receives again in a re-formed group; a receiver not enabled for
  tensor transport is named as the cause within a bound.
Where Ray 2.60.0 itself fails, the test fails naming the upstream defect (`rdtkit.upstream_defect`).
"""

from __future__ import annotations

import os
import signal
import time
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest
from conformancekit import median, need_torch, processes_gone, ray_cluster
from devicekit import Expected, current_env, need_devices
from perfkit import host_sku, report_figure
from rdtkit import (
    BOUND,
    GROUP_BACKEND,
    RESTART_BOUND,
    SHAPES,
    WORK,
    actor,
    attempt,
    cleanup,
    destroy,
    end,
    first_line,
    pair,
    placement,
    register_kit,
    restarted,
    send,
    settled,
    upstream_defect,
)

from accelenv.results.plugin import current_run
from accelenv.results.transports import OBJECT_STORE, figure_name

if TYPE_CHECKING:
    from collections.abc import Iterator

    from conformancekit import Cluster

SIZES_MIB = {"node": (4, 64), "cluster": (4, 64, 256)}  # the figures' tensor sizes (float32)
WARMUP, REPS = 1, 3
CYCLES = 3  # groups created and destroyed in the lifecycle test
KILL_AFTER = 0.1  # seconds after the send of 256 MiB (GLOO moves them in about 0.3 s here; the digest follows)
SCOPES = ("node", "cluster")
ISSUE_NOT_ENABLED = "ray-project/ray#66264"
NOT_FILED = "ray-project/ray (not filed)"


NONE = "none-declared"
GROUPED = (
    "test_rdt_groups_created_and_destroyed_leave_nothing_behind",
    "test_rdt_restarted_member_receives_in_a_reformed_group",
)
ONE_SIDED = "one-sided"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per transport the environment declares (matrix data); the group tests for two-sided ones only."""
    if "transport" not in metafunc.fixturenames:
        return
    found = current_env()
    declared = list(found[1].transports) if found else []
    if metafunc.function.__name__ in GROUPED:
        declared = [t for t in declared if t in GROUP_BACKEND] or ([ONE_SIDED] if declared else [])
    metafunc.parametrize("transport", declared or [NONE])


def _declared(expected: Expected, transport: str) -> None:
    if transport == NONE:
        pytest.fail(
            f"{expected.env.id} declares no RDT transport (envs.{expected.env.id}.transports in matrix.toml), "
            "yet its tests include the RDT conformance test",
            pytrace=False,
        )
    if transport == ONE_SIDED:
        pytest.skip(f"{expected.env.id}'s transports are one-sided: no collective group to form")


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """One Ray cluster for the module's tests (two loopback nodes for the CPU family), ended after the last; the
    record says across how many nodes the tests ran."""
    from devicekit import load_expected

    expected = load_expected()
    need_torch(expected)  # a failure that says where torch and Ray should come from, before any cluster
    if expected.env.family != "cpu":
        need_devices(expected, expected.device_count)
    with ray_cluster(expected.env.family, expected.device_count) as started:
        if expected.env.family == "cpu":
            assert started.nodes >= 2, f"the CPU suite runs across two Ray nodes; the cluster has {started.nodes}"
        run = current_run(request.config)
        if run is not None:
            run.nodes = max(run.nodes, started.nodes)
        yield started


def _cluster(expected: Expected, transport: str) -> Any:
    _declared(expected, transport)
    _, ray = need_torch(expected)
    if expected.env.family != "cpu":
        need_devices(expected, expected.device_count)
    register_kit()
    return ray


@pytest.mark.parametrize("scope", SCOPES)
def test_rdt_tensors_arrive_bit_identical(expected: Expected, transport: str, scope: str, cluster: Any) -> None:
    ray = _cluster(expected, transport)
    ends = pair(expected.env.family, transport, scope)
    with cleanup(ends.sender, ends.receiver):
        cases = [("tensor", dtype, numel) for dtype, numel in SHAPES] + [("dict", "float32", 5000)]
        for seed, (kind, dtype, numel) in enumerate(cases):
            sent = ray.get(ends.sender.hold.remote(kind, dtype, numel, seed), timeout=WORK)
            got = ray.get(ends.receiver.received.remote(send(ends, transport)), timeout=WORK)
            assert got == sent, f"{transport} {scope}: {kind} of {numel} {dtype} arrived changed"
        destroy(ends.group)


@pytest.mark.parametrize("scope", SCOPES)
def test_rdt_throughput_beside_the_object_store(
    expected: Expected, request: pytest.FixtureRequest, transport: str, scope: str, cluster: Any
) -> None:
    """The median GB/s of a transfer, from the send's call to the receiver holding the tensor, as a user sees it,
    and the object store's for the same tensor between the same two actors."""
    ray = _cluster(expected, transport)
    sku = host_sku(request, expected)
    ends = pair(expected.env.family, transport, scope)
    with cleanup(ends.sender, ends.receiver):
        for mib in SIZES_MIB[scope]:
            size = mib * 2**20
            ray.get(ends.sender.hold.remote("ones", "float32", size // 4, mib), timeout=WORK)
            for via in (transport, None):
                seconds = []
                for rep in range(WARMUP + REPS):
                    start = time.perf_counter()
                    arrived = ray.get(ends.receiver.arrived.remote(send(ends, via)), timeout=WORK)
                    if rep >= WARMUP:
                        seconds.append(time.perf_counter() - start)
                    assert arrived == size
                figure = {
                    "name": figure_name(via or OBJECT_STORE, scope, size),
                    "value": size / median(seconds) / 1e9,
                    "unit": "GB/s",
                    "dtype": "fp32",
                    "devices": 2,
                    "samples": REPS,
                }
                report_figure(request, expected, sku, figure)
        destroy(ends.group)


def test_rdt_groups_created_and_destroyed_leave_nothing_behind(
    expected: Expected, transport: str, cluster: Any
) -> None:
    """A group formed and destroyed again and again on the same two actors carries a tensor each time, and leaves
    no group in Ray's registry, no more TCP sockets than one group holds, no communicator, and no process once the
    actors end."""
    ray = _cluster(expected, transport)
    from ray.experimental.collective import create_collective_group, destroy_collective_group

    ends = pair(expected.env.family, transport, "cluster")
    members = [ends.sender, ends.receiver]
    with cleanup(*members):
        destroy(ends.group)
        before = ray.get([e.sockets.remote() for e in members], timeout=WORK)
        for cycle in range(CYCLES):
            group = create_collective_group(members, backend=GROUP_BACKEND[transport])
            ray.get(ends.sender.hold.remote("tensor", "float32", 1 << 16, cycle), timeout=WORK)
            assert ray.get(ends.receiver.arrived.remote(send(ends, transport)), timeout=WORK) == 4 << 16
            destroy_collective_group(group)
            left = ray.get([e.groups.remote() for e in members], timeout=WORK)
            assert left == [[], []], f"{transport}: cycle {cycle}: groups left in Ray's registry: {left}"
        after = ray.get([e.sockets.remote() for e in members], timeout=WORK)
        grew = [a - b for a, b in zip(after, before, strict=True)]
        assert max(grew) <= 0, f"{transport}: {CYCLES} groups left {grew} more TCP sockets (before: {before})"
        communicators = ray.get([e.default_group.remote() for e in members], timeout=WORK)
        end(*members)
    assert processes_gone(list(ends.pids)) == [], f"actors still alive: {processes_gone(list(ends.pids), 0)}"
    if transport == "GLOO" and any(communicators):
        upstream_defect(NOT_FILED, leftover_default_group(transport))


def leftover_default_group(transport: str) -> str:
    return (
        f"Ray 2.60.0 {transport}: destroy_collective_group leaves torch.distributed's default process group (and its "
        "connections to every other member) in each member: TorchGLOOGroup initialises it once per process and "
        "destroys only the named subgroup"
    )


def test_rdt_receiver_killed_mid_transfer_fails_the_transfer_and_frees_the_sender(
    expected: Expected, transport: str, cluster: Any
) -> None:
    """The receiver dies while 256 MiB are on their way: the caller gets an error within the bound, not a hang; the
    sender's buffers are released (its RDT store empties, or Ray ends the sender with the failed transfer); new
    actors in a new group then carry a tensor."""
    ray = _cluster(expected, transport)
    ends = pair(expected.env.family, transport, "cluster")
    with cleanup(ends.sender, ends.receiver) as held:
        ray.get(ends.sender.hold.remote("ones", "float32", 64 * 2**20, 7), timeout=WORK)
        arriving = ends.receiver.received.remote(send(ends, transport))
        time.sleep(KILL_AFTER)  # the transfer has begun
        os.kill(ends.pids[1], signal.SIGKILL)  # the receiver's own process, started by this test
        outcome = attempt(partial(ray.get, arriving), BOUND)
        del arriving
        assert not outcome.timed_out, f"{transport}: the transfer hung past {BOUND:g}s after its receiver died"
        assert isinstance(outcome.error, ray.exceptions.RayError), f"{transport}: no error, got {outcome}"
        assert _released(ends.sender, ends.pids[0]), f"{transport}: the sender still holds the transfer's buffers"
        destroy(ends.group)
        again = pair(expected.env.family, transport, "cluster")
        held += [again.sender, again.receiver]
        sent = ray.get(again.sender.hold.remote("tensor", "int64", 4096, 8), timeout=WORK)
        assert ray.get(again.receiver.received.remote(send(again, transport)), timeout=WORK) == sent
        destroy(again.group)


def _released(sender: Any, pid: int) -> bool:
    """The sender's RDT store empties within the bound, or the sender is ended (Ray ends both actors of a failed
    two-sided transfer, maybe while this asks) and its process is gone."""
    import ray

    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        try:
            if ray.get(sender.rdt_objects.remote(), timeout=BOUND) == 0:
                return True
        except ray.exceptions.RayActorError:
            return processes_gone([pid], BOUND) == []
        except ray.exceptions.GetTimeoutError:
            return False
        time.sleep(0.5)
    return False


@pytest.mark.parametrize("peer", ["same-actors", "new-sender"])
def test_rdt_restarted_member_receives_in_a_reformed_group(
    expected: Expected, transport: str, peer: str, cluster: Any
) -> None:
    """A receiver killed between transfers is restarted by Ray; the group is destroyed and formed again (on the
    same two actors, or with a new sender) and a tensor arrives bit-identical."""
    ray = _cluster(expected, transport)
    from ray.experimental.collective import create_collective_group

    ends = pair(expected.env.family, transport, "cluster", restarts=1)
    with cleanup(ends.sender, ends.receiver) as held:
        sent = ray.get(ends.sender.hold.remote("tensor", "float32", 4096, 1), timeout=WORK)
        assert ray.get(ends.receiver.received.remote(send(ends, transport)), timeout=WORK) == sent
        settled(ends.sender, ends.receiver)  # Ray's own part of the transfer is over too (rdtkit.settled)
        os.kill(ends.pids[1], signal.SIGKILL)  # between transfers: nothing in flight
        if restarted(ends.receiver, ends.pids[1]) is None:
            pytest.fail(f"Ray did not restart the killed receiver within {RESTART_BOUND:g}s", pytrace=False)
        destroy(ends.group)
        sender = ends.sender
        if peer == "new-sender":  # a fresh process on the sender's node, in no group yet
            nodes, resources = placement("cluster", expected.env.family)
            sender = actor(expected.env.family, transport, nodes[0], resources)
            held.append(sender)
        # asked before re-forming (a stuck actor cannot answer); a new sender may still be starting
        stale = ray.get(sender.default_group.remote(), timeout=180)
        members = [ends.receiver, sender]  # the restarted member is rank 0: it publishes the rendezvous
        formed = attempt(partial(create_collective_group, members, backend=GROUP_BACKEND[transport]), BOUND)
        if formed.timed_out or formed.error is not None:
            found = f"no answer within {BOUND:g}s" if formed.timed_out else first_line(formed.error)
            if stale:
                upstream_defect(NOT_FILED, stale_group_defect(transport, found))
            pytest.fail(f"{transport}: re-forming the group ({peer}) failed: {found}", pytrace=False)
        sent = ray.get(sender.hold.remote("tensor", "bfloat16", 8192, 2), timeout=WORK)
        moving = ends.receiver.received.remote(sender.send.options(tensor_transport=transport.lower()).remote())
        moved = attempt(partial(ray.get, moving), BOUND)
        assert not moved.timed_out, f"{transport}: the re-formed group did not deliver within {BOUND:g}s"
        assert moved.error is None, f"{transport}: the re-formed group failed: {first_line(moved.error)}"
        assert moved.value == sent


def stale_group_defect(transport: str, found: str) -> str:
    return (
        f"Ray 2.60.0 {transport}: after Ray restarts a killed member, destroy_collective_group and "
        "create_collective_group on the same surviving actor fail: the survivor keeps its torch.distributed default "
        "process group (destroy_collective_group destroys only the subgroup), so it skips the rendezvous and builds "
        "the new group over the dead peer's connections ('Connection closed by peer', 'Broken pipe'), while the "
        f"restarted member waits for a rendezvous nobody publishes; here: {found}"
    )


def test_rdt_receiver_not_enabled_is_named_within_a_bound(expected: Expected, transport: str, cluster: Any) -> None:
    """An actor created without enable_tensor_transport receives an RDT object: the caller must learn, within the
    bound, that the receiver is not enabled (not a hang until Ray's 60 s fetch timeout that then kills both)."""
    ray = _cluster(expected, transport)
    ends = pair(expected.env.family, transport, "cluster", receiver_enabled=False)
    with cleanup(ends.sender, ends.receiver):
        ray.get(ends.sender.hold.remote("tensor", "float32", 1024, 3), timeout=WORK)
        arriving = ends.receiver.received.remote(send(ends, transport))
        outcome = attempt(partial(ray.get, arriving), BOUND)
        if outcome.timed_out:
            upstream_defect(
                ISSUE_NOT_ENABLED,
                f"Ray 2.60.0 {transport}: a receiver created without enable_tensor_transport never starts its "
                f"receive thread; the transfer gave no error within {BOUND:g}s (it hangs until Ray's fetch "
                "timeout, 60 s by default, and then Ray kills both actors)",
            )
        assert outcome.error is not None, f"{transport}: a receiver not enabled received the tensor"
        text = str(outcome.error)
        named = "enable_tensor_transport" in text or "tensor transport" in text
        assert named, f"{transport}: the error does not name the cause: {first_line(outcome.error)}"
