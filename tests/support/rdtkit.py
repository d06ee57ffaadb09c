"""Ray Direct Transport (RDT) conformance's shared parts: two actors placed on one node or on two, enabled for
tensor transport (or, to prove the failure is named, not), a collective group where the transport needs one
(GLOO, NCCL), payloads built the same way on both sides and compared by digest, and every wait bounded.

The transports an environment is proven for are matrix data (`envs.<id>.transports`); Ray 2.60.0 registers NIXL,
GLOO, NCCL and CUDA_IPC (ray/experimental/rdt/util.py). A failure that a known Ray defect causes is reported with
`upstream_defect`, so that the record names the cause and a fixed release passes by itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from conformancekit import RayMember

from accelenv.results.transports import defect_message

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

# the collective backend of ray.experimental.collective each two-sided transport needs; one-sided ones need none
GROUP_BACKEND = {"GLOO": "torch_gloo", "NCCL": "nccl"}
DEVICE = {"GLOO": "cpu", "NCCL": "cuda", "NIXL": None, "CUDA_IPC": "cuda"}  # None: the family's device
WORK = 120.0  # seconds for ordinary work (starting actors, moving a tensor) on a loaded machine
BOUND = 15.0  # seconds within which a transfer or a failure must show (Ray's fetch timeout is 60)
# seconds within which Ray must bring a killed actor back: a new worker process that imports torch, which on a busy
# 2-core machine has taken over 45 s; the conformance suite's own restarts are bounded the same (conformancekit)
RESTART_BOUND = 120.0
# correctness payloads: (dtype, elements), odd sizes included; and a dict of tensors
SHAPES = (("float32", 1), ("bfloat16", 4099), ("int64", 1 << 16), ("uint8", 3 * 2**20 + 1), ("float16", 2**20))


def upstream_defect(reference: str, description: str) -> None:
    """Fail the test, naming the upstream defect that makes it fail (the result record's reason line)."""
    pytest.fail(defect_message(reference, description), pytrace=False)


def payload(kind: str, dtype: str, numel: int, seed: int) -> Any:
    """A tensor of `numel` elements, random bytes the same for the same arguments (kind 'ones': all ones, for
    the figures), or for kind 'dict' a dict of three tensors."""
    import torch

    kind_of = getattr(torch, dtype)
    if kind == "ones":
        return torch.ones(numel, dtype=kind_of)
    generator = torch.Generator().manual_seed(seed)
    width = torch.empty((), dtype=kind_of).element_size()
    tensor = torch.randint(0, 256, (numel * width,), dtype=torch.uint8, generator=generator).view(kind_of)
    if kind == "dict":
        return {"weight": tensor, "bias": tensor[: max(numel // 7, 1)].clone(), "step": torch.tensor([seed])}
    return tensor


def digest(value: Any) -> str:
    """sha256 over every tensor's dtype, shape and bytes (a dict's by sorted key): equal only when bit-identical."""
    import torch

    hasher = hashlib.sha256()
    items = sorted(value.items()) if isinstance(value, dict) else [("", value)]
    for key, tensor in items:
        cpu = tensor.detach().contiguous().cpu()
        hasher.update(f"{key}|{cpu.dtype}|{tuple(cpu.shape)}|".encode())
        hasher.update(cpu.view(torch.uint8).numpy().tobytes() if cpu.numel() else b"")
    return hasher.hexdigest()


class Peer(RayMember):
    """One end of a transfer: holds a payload on its device, sends it, receives one and says what arrived."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.held: Any = None

    def hold(self, kind: str, dtype: str, numel: int, seed: int) -> str:
        value = payload(kind, dtype, numel, seed)
        self.held = (
            {k: v.to(self.device) for k, v in value.items()} if isinstance(value, dict) else value.to(self.device)
        )
        return digest(self.held)

    def send(self) -> Any:
        return self.held

    def received(self, value: Any) -> str:
        return digest(value)

    def arrived(self, value: Any) -> int:
        """Touch what arrived (its first and last byte) and say how many bytes it holds."""
        tensors = list(value.values()) if isinstance(value, dict) else [value]
        return sum(t.numel() * t.element_size() for t in tensors)

    def rdt_objects(self) -> int:
        """Objects this process holds in its RDT store (a sender's buffers kept for receivers)."""
        import ray

        return int(ray._private.worker.global_worker.rdt_manager.rdt_store.get_num_objects())

    def groups(self) -> list[str]:
        """The collective groups Ray's registry holds in this process."""
        from ray.util.collective import collective

        return sorted(collective._group_mgr._name_group_map)

    def default_group(self) -> bool:
        """Whether torch.distributed's default process group is initialised in this process."""
        import torch.distributed as dist

        return bool(dist.is_available() and dist.is_initialized())

    def sockets(self) -> int:
        """Open TCP sockets of this process (its socket fds found in /proc/self/net/tcp*: open or listening)."""
        inodes = set()
        for fd in Path("/proc/self/fd").iterdir():
            with contextlib.suppress(OSError):
                target = str(fd.readlink())
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        count = 0
        for table in (Path("/proc/self/net/tcp"), Path("/proc/self/net/tcp6")):
            with contextlib.suppress(OSError):
                rows = table.read_text(encoding="ascii").splitlines()[1:]
                count += sum(1 for row in rows if row.split()[9] in inodes)
        return count


@dataclass(frozen=True)
class Pair:
    sender: Any
    receiver: Any
    group: Any  # the communicator handle, or None for a one-sided transport
    pids: tuple[int, int]


def register_kit() -> None:
    ray: Any = importlib.import_module("ray")

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


def placement(scope: str, family: str) -> tuple[list[str], dict[str, Any]]:
    """The node ids of the two ends (one node twice, or two nodes) and the resources each asks for; a skip
    when the cluster has no second node (scope 'cluster') or no second device on a node."""
    ray: Any = importlib.import_module("ray")

    alive = [n for n in ray.nodes() if n["Alive"]]
    if scope == "cluster":
        if len(alive) < 2:
            pytest.skip("one Ray node: no transfer across nodes to measure (join a cluster with RAY_ADDRESS)")
        nodes = [alive[0]["NodeID"], alive[1]["NodeID"]]
    else:
        nodes = [alive[0]["NodeID"]] * 2
    if family == "cpu":  # a tenth of a CPU: room for the actors a test adds, and for one ending while it starts
        return nodes, {"num_cpus": 0.1}
    gpus = min(float(n["Resources"].get("GPU", 0)) for n in alive if n["NodeID"] in nodes)
    share = scope == "node" and gpus < 2
    return nodes, {"num_gpus": 0.5 if share else 1}


def actor(
    family: str,
    transport: str,
    node: str,
    resources: dict[str, Any],
    *,
    enabled: bool = True,
    restarts: int = 0,
) -> Any:
    """One end, pinned to `node`, enabled for tensor transport unless asked not to be."""
    ray: Any = importlib.import_module("ray")
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    device = DEVICE[transport] or ("cpu" if family == "cpu" else "cuda")
    env_vars = {"GLOO_SOCKET_IFNAME": "lo"} if family == "cpu" and not os.environ.get("RAY_ADDRESS") else {}
    options: dict[str, Any] = {
        **resources,
        "max_restarts": restarts,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False),
        "runtime_env": {"env_vars": env_vars},
    }
    # a class option: Ray sets up the transfer threads when the class is made remote, not per actor
    remote = ray.remote(enable_tensor_transport=True)(Peer) if enabled else ray.remote(Peer)
    return remote.options(**options).remote(device)


def pair(family: str, transport: str, scope: str, *, receiver_enabled: bool = True, restarts: int = 0) -> Pair:
    """A sender and a receiver placed for `scope`, in a collective group when the transport needs one."""
    import ray
    from ray.experimental.collective import create_collective_group

    nodes, resources = placement(scope, family)
    if family != "cpu" and transport == "NCCL" and resources.get("num_gpus") == 0.5:
        pytest.skip("one GPU on the node: NCCL needs a device per member (CUDA_IPC and NIXL share one)")
    ends = [
        actor(family, transport, node, resources, enabled=enabled, restarts=restarts)
        for node, enabled in zip(nodes, (True, receiver_enabled), strict=True)
    ]
    try:
        pids = ray.get([e.pid.remote() for e in ends], timeout=180)
        group = None
        if transport in GROUP_BACKEND:
            group = bounded(
                lambda: create_collective_group(ends, backend=GROUP_BACKEND[transport]), 120, "forming the group"
            )
    except BaseException:  # a pair that never formed ends here: its actors would hold their slots for good
        end(*ends)
        raise
    return Pair(sender=ends[0], receiver=ends[1], group=group, pids=(int(pids[0]), int(pids[1])))


def send(pair: Pair, transport: str | None) -> Any:
    """The sender's payload as an object ref: over `transport`, or through the object store when None."""
    method = pair.sender.send
    return (method.options(tensor_transport=transport.lower()) if transport else method).remote()


@dataclass(frozen=True)
class Outcome:
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0
    timed_out: bool = False


def attempt(fn: Callable[[], Any], seconds: float) -> Outcome:
    """Run `fn` in a thread and wait at most `seconds`: its value, its error, or timed_out (the thread is left to
    end when what it waits for is killed)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as error:
            box["error"] = error

    start = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    took = time.monotonic() - start
    if thread.is_alive():
        return Outcome(seconds=took, timed_out=True)
    return Outcome(value=box.get("value"), error=box.get("error"), seconds=took)


def bounded(fn: Callable[[], Any], seconds: float, what: str) -> Any:
    """`fn()`, or a failure naming `what` did not end within `seconds` or how it failed."""
    outcome = attempt(fn, seconds)
    if outcome.timed_out:
        pytest.fail(f"{what} did not end within {seconds:g}s", pytrace=False)
    if outcome.error is not None:
        pytest.fail(f"{what} failed: {first_line(outcome.error)}", pytrace=False)
    return outcome.value


def first_line(error: BaseException | None) -> str:
    """The error's type and the line of its message that says most (Ray wraps the remote traceback)."""
    if error is None:
        return "no error"
    text = str(error).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return f"{type(error).__name__}: {last[:300]}"


def end(*actors: Any) -> None:
    import ray

    for actor in actors:
        with contextlib.suppress(Exception):
            ray.kill(actor, no_restart=True)


def destroy(group: Any) -> None:
    """Destroy the group if Ray still knows it (Ray destroys a group itself after a failed transfer)."""
    from ray.experimental.collective import destroy_collective_group

    if group is not None:
        with contextlib.suppress(ValueError):
            destroy_collective_group(group)


def _nothing(_self: Any) -> None:
    return None


def settled(*actors: Any) -> None:
    """Wait until each actor has run every RDT system task sent to it so far (`__ray_send__`, `__ray_recv__`).

    Ray 2.60.0 runs them on the actor's `_ray_system` concurrency group, one at a time, and the driver's failure
    monitor (`RDTManager._monitor_failures`) watches their results: a transfer the caller has already received can
    still have its `__ray_recv__` reply on the way, and if the receiver dies then, the monitor counts the transfer
    as failed and `ray.kill`s both actors for good, whatever their `max_restarts`. A task queued behind them on the
    same group answers only once they have run."""
    import ray

    calls = [a.__ray_call__.options(concurrency_group="_ray_system").remote(_nothing) for a in actors]
    ray.get(calls, timeout=WORK)


def restarted(actor: Any, old_pid: int, timeout: float = RESTART_BOUND) -> int | None:
    """The restarted actor's pid, or None when Ray did not bring it back in time."""
    from conformancekit import restarted_pid

    return restarted_pid(actor, old_pid, timeout, ask=10)


@contextlib.contextmanager
def cleanup(*actors: Any) -> Iterator[list[Any]]:
    """Kill, on leaving, the actors given and those the test appends."""
    held = list(actors)
    try:
        yield held
    finally:
        end(*held)
