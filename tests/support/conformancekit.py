"""The conformance suite's shared parts: the Ray cluster it runs on, one Ray actor per device forming a
torch.distributed process group over the family's backend (matrix data: `collective_backend`), a small
data-parallel training loop with its single-process reference, and timing with warm-up and a median.

For the CPU family the cluster is two Ray nodes on loopback (every node on 127.0.0.1, auth mode stated, its own
HOME), unless RAY_ADDRESS names a cluster to join. Elsewhere the suite joins RAY_ADDRESS or starts Ray on this
host with its devices. Actors end by Ray's API; the cluster ends by the handle that started it.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from accelenv.plugins import BUILTIN_FAMILIES

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import ModuleType

    from devicekit import Expected

    from accelenv.matrix import Environment, Matrix

STEPS = 6
FEATURES, OUTPUTS, SAMPLES = 16, 4, 64
LR = 0.1
# the Ray resource one member asks for: Ray's GPU and CPU counts by their own options, any other resource
# (families.<id>.ray_resource, a plugin's family bringing its own) by name
RESOURCE = {"cpu": {"num_cpus": 1}}
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}
if not os.environ.get("RAY_ADDRESS") and "ray" not in sys.modules:
    # Ray reads these when it is imported: with clusters "disabled" every node's address is loopback
    for _key, _value in LOOPBACK_ENV.items():
        os.environ.setdefault(_key, _value)


def need_torch(expected: Expected) -> tuple[ModuleType, ModuleType]:
    """torch and ray, or a failure that says where they should have come from: the suite drives
    torch.distributed through Ray actors, and a suite that imported nothing tested nothing (never a skip)."""
    from devicekit import need_module

    return need_torch_alone(expected), need_module(expected, "ray", from_lock=True)


def need_torch_alone(expected: Expected) -> ModuleType:
    """torch, for the single-process figures (no Ray: a machine with only PyTorch can measure them), or a failure
    that says where it should have come from."""
    from devicekit import need_module

    env = expected.env
    if env.family not in BUILTIN_FAMILIES:  # the adapter's modules first: one missing is named (CANN), not a traceback
        from pluginkit import load_modules, plugin_of

        load_modules(plugin_of(env.family))
    framework = env.framework
    if framework is not None and "torch" not in framework.name:
        try:
            return importlib.import_module("torch")
        except ImportError as error:
            pytest.fail(
                f"could not import 'torch' ({error}): the conformance suite drives torch.distributed, and "
                f"{env.id}'s framework is {framework.name}, which brings none; install a torch build for this host "
                "beside the environment's lock (tests/integration/test_conformance_cpu.py does so for the CPU "
                "family: the cpu lock plus torch for the CPU)",
                pytrace=False,
            )
    return need_module(expected, "torch")


def backend_of(matrix: Matrix, env: Environment) -> str:
    """The family's collective backend, qualified by the family (`gaudi:hccl`, `ascend:hccl`): the name alone
    can mean two backends."""
    backend = matrix.families[env.family].qualified_backend
    if backend is None:
        pytest.fail(f"family {env.family} has no collective_backend in the matrix")
    return backend


def free_port_on(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Cluster:
    address: str | None
    nodes: int
    members: int  # devices (CPU family: actors) the suite spreads over
    startup: dict[str, float] = field(default_factory=dict)  # seconds per start-up stage, this test's part only


# The CPU family's cluster: two nodes of one CPU each on loopback, with only the processes the suite uses. On a
# small host under load each process Ray starts competes with the GCS for the CPU while Ray's clients wait a bounded
# time for it (30 s for the GCS to answer, 30 s for a raylet to register), so the suite starts no autoscaler monitor
# and no log monitor (it reads no worker logs: log_to_driver=False), exports no metrics and sends no usage stats,
# and maps a small object store. It starts the cluster once per pytest process and gives each test a job of its
# own (a driver that connects and disconnects, so a test's actors end with it); benchmarks/cluster_startup.py
# measures both against the cluster per test this replaces.
NODE_ARGS: dict[str, Any] = {
    "num_cpus": 1,
    "node_ip_address": "127.0.0.1",
    "include_log_monitor": False,
    "object_store_memory": 512 * 2**20,  # the RDT suite moves a 256 MiB tensor through it, beside its transport
}
HEAD_ARGS: dict[str, Any] = {"include_dashboard": False, "no_monitor": True}
QUIET_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_enable_metrics_collection": "0"}
NODES_TIMEOUT_S = 60.0


@dataclass
class LocalCluster:
    """The CPU cluster this process started, by its handle, with the folders it lives in."""

    handle: Any  # ray.cluster_utils.Cluster
    home: str
    temp: str
    startup: dict[str, float]

    def environ(self) -> dict[str, str]:
        return {**LOOPBACK_ENV, **QUIET_ENV, "HOME": self.home, "RAY_TMPDIR": self.temp}

    def alive(self) -> bool:
        nodes = self.handle.list_all_nodes()
        return len(nodes) == 2 and all(n.remaining_processes_alive() for n in nodes)

    def stop(self) -> None:
        ray = sys.modules.get("ray")
        if ray is not None and getattr(ray, "is_initialized", lambda: False)():
            ray.shutdown()  # a driver still connected (a module's fixture) would make Cluster.shutdown refuse
        self.handle.shutdown()
        keep = os.environ.get("ACCELENV_KEEP_RAY_LOGS")  # a folder to keep Ray's logs in, to read a failure
        if keep:
            for session in Path(self.temp).glob("session_2*"):  # not session_latest, a link to one of them
                with contextlib.suppress(OSError):  # shutil.Error included: a log that vanished is not kept
                    shutil.copytree(session / "logs", Path(keep) / session.name)
        for folder in (self.home, self.temp):
            shutil.rmtree(folder, ignore_errors=True)


SHARED: list[LocalCluster] = []  # the CPU cluster of this pytest process, started by the first test that needs it


def stage(name: str, timings: dict[str, float], action: Callable[[], Any]) -> Any:
    """`action()`, timed into `timings[name]`; a failure names the stage, how long it and those before it took,
    and the host's load, never only Ray's own words."""
    start = time.monotonic()
    try:
        return action()
    except Exception as error:
        done = ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()) or "none"
        load = os.getloadavg()[0]
        pytest.fail(
            f"the CPU conformance cluster did not start: {name} failed after {time.monotonic() - start:.1f} s "
            f"({type(error).__name__}: {str(error).strip()[:300]}); stages before it: {done}; load average "
            f"{load:.1f} on {os.cpu_count()} CPU(s). Ray waits 30 s for the GCS and 30 s for each raylet; run "
            "benchmarks/cluster_startup.py to see how long start-up takes on this host",
            pytrace=False,
        )
    finally:
        timings[name] = round(time.monotonic() - start, 2)


def start_cpu_cluster() -> LocalCluster:
    """Two loopback nodes in folders of their own, started stage by stage; what started is ended if a stage fails."""
    from ray.cluster_utils import Cluster as RayCluster

    home = tempfile.mkdtemp(prefix="accelenv-ray-home-")
    temp = tempfile.mkdtemp(prefix="ar-", dir="/tmp")  # short: Ray's unix socket paths must fit in 107 bytes
    # the address file Ray's Cluster writes to $RAY_TMPDIR/ray (else /tmp/ray, shared with other clusters)
    Path(temp, "ray").mkdir()
    local = LocalCluster(RayCluster(), home, temp, {})
    saved = {k: os.environ.get(k) for k in local.environ()}
    os.environ.update(local.environ())
    node = {**NODE_ARGS, "temp_dir": temp}
    try:
        stage("head node (GCS, raylet)", local.startup, lambda: local.handle.add_node(**HEAD_ARGS, **node))
        stage("second node (raylet)", local.startup, lambda: local.handle.add_node(**node))
        stage("nodes registered", local.startup, lambda: local.handle.wait_for_nodes(timeout=NODES_TIMEOUT_S))
    except BaseException:
        local.stop()
        raise
    finally:
        restore(saved)
    return local


def shared_cpu_cluster() -> tuple[LocalCluster, bool]:
    """This process's CPU cluster and whether this call started it (a cluster whose processes died is replaced)."""
    if SHARED and SHARED[0].alive():
        return SHARED[0], False
    if SHARED:
        SHARED.pop().stop()
    SHARED.append(start_cpu_cluster())
    return SHARED[0], True


def stop_shared_cluster() -> None:
    """End this process's CPU cluster, by its handle (conftest calls it once no later test uses it)."""
    while SHARED:
        SHARED.pop().stop()


def restore(saved: dict[str, str | None]) -> None:
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextlib.contextmanager
def ray_cluster(family: str, device_count: int) -> Iterator[Cluster]:
    """A Ray cluster for the suite, connected, as a job of this test's own; disconnected afterwards (the CPU
    family's cluster stays for the next test and ends with the run)."""
    ray: Any = importlib.import_module("ray")  # need_torch, which every test calls first, fails when it is missing
    from ray._private import ray_constants

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not find tests/support
    address = os.environ.get("RAY_ADDRESS")
    saved: dict[str, str | None] = {}
    timings: dict[str, float] = {}
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        elif family == "cpu":
            if ray_constants.ENABLE_RAY_CLUSTER:
                pytest.fail("ray was imported before the conformance kit set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0")
            local, started = shared_cpu_cluster()
            if started:
                timings.update(local.startup)
            address = local.handle.address
            saved = {k: os.environ.get(k) for k in local.environ()}
            os.environ.update(local.environ())
            stage(
                "driver connect",
                timings,
                lambda: ray.init(address=address, _node_ip_address="127.0.0.1", log_to_driver=False),
            )
        else:
            ray.init(address="local", include_dashboard=False, log_to_driver=False)
        alive = [n for n in ray.nodes() if n["Alive"]]
        if family == "cpu":
            members = int(sum(n["Resources"].get("CPU", 0) for n in alive))
            members = min(members, 4)
        else:
            members = device_count
        yield Cluster(address=address, nodes=len(alive), members=members, startup=timings)
    finally:
        ray.shutdown()
        restore(saved)


def member_options(family: str, resource: str | None = None) -> dict[str, Any]:
    """Ray options that give a member one device: `resource` is the family's `ray_resource`."""
    if family in RESOURCE:
        return dict(RESOURCE[family])
    if resource is None:
        pytest.fail(f"family {family} has no ray_resource in the matrix: Ray cannot give a member one of its devices")
    if resource == "GPU":
        return {"num_gpus": 1}
    return {"num_cpus": 0, "resources": {resource: 1}}


def data() -> tuple[Any, Any, Any, Any]:
    """Initial weights, bias, inputs and targets: the same on every member and in the reference."""
    import torch

    generator = torch.Generator().manual_seed(2024)
    weight = torch.randn(OUTPUTS, FEATURES, generator=generator)
    bias = torch.randn(OUTPUTS, generator=generator)
    x = torch.randn(SAMPLES, FEATURES, generator=generator)
    y = x @ torch.randn(FEATURES, OUTPUTS, generator=generator) + 0.5
    return weight, bias, x, y


def reference(steps: int = STEPS) -> list[Any]:
    """The same training in one process over the whole batch: what every data-parallel run must end with."""
    import torch

    weight, bias, x, y = data()
    weight.requires_grad_(requires_grad=True)
    bias.requires_grad_(requires_grad=True)
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(x @ weight.T + bias, y)
        gw, gb = torch.autograd.grad(loss, [weight, bias])
        with torch.no_grad():
            weight -= LR * gw
            bias -= LR * gb
    return [weight.detach(), bias.detach()]


class RayMember:
    """What every member actor answers, whichever framework it drives: its pid, its node, and a rendezvous."""

    def pid(self) -> int:
        return os.getpid()

    def rendezvous(self) -> tuple[str, int]:
        """This member's node address and a port free on it, for the group's store or coordinator."""
        import ray.util

        address = str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]
        return address, free_port_on(address)

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())


class Member(RayMember):
    """One member of the process group: holds its shard and the model, trains a step at a time."""

    def __init__(self, rank: int, world: int, backend: str) -> None:
        self.rank, self.world, self.backend = rank, world, backend
        self.device = "cpu"
        self.params: list[Any] = []

    def join(self, address: str, port: int) -> None:
        """Form (or re-form) the group at tcp://address:port."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        self.device = device_for(self.backend)
        dist.init_process_group(
            self.backend.split(":", 1)[1],
            init_method=f"tcp://{address}:{port}",
            rank=self.rank,
            world_size=self.world,
            timeout=_timedelta(120),
        )

    def all_reduce(self) -> float:
        import torch
        import torch.distributed as dist

        tensor = torch.full((1024,), float(self.rank + 1), device=self.device)
        dist.all_reduce(tensor)
        return float(tensor.min().item())

    def load(self, params: list[Any]) -> None:
        self.params = [p.clone().to(self.device) for p in params]

    def state(self) -> list[Any]:
        return [p.detach().cpu() for p in self.params]

    def step(self) -> None:
        import torch
        import torch.distributed as dist

        _, _, x, y = data()
        x, y = x[self.rank :: self.world].to(self.device), y[self.rank :: self.world].to(self.device)
        weight, bias = (p.clone().requires_grad_(requires_grad=True) for p in self.params)
        loss = torch.nn.functional.mse_loss(x @ weight.T + bias, y)
        grads = torch.autograd.grad(loss, [weight, bias])
        for grad in grads:
            dist.all_reduce(grad)
        grads = tuple(grad / self.world for grad in grads)
        with torch.no_grad():
            self.params = [(p - LR * g).detach() for p, g in zip(self.params, grads, strict=True)]

    def bus_bandwidth(self, numel: int, warmup: int, reps: int) -> list[float]:
        import torch
        import torch.distributed as dist

        tensor = torch.ones(numel, dtype=torch.float32, device=self.device)
        seconds = timed(lambda: dist.all_reduce(tensor), sync=sync_for(self.device), warmup=warmup, reps=reps)
        size = tensor.numel() * tensor.element_size()
        return [size / s * 2 * (self.world - 1) / self.world / 1e9 for s in seconds]

    def leave(self) -> None:
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


def _timedelta(seconds: int) -> Any:
    import datetime

    return datetime.timedelta(seconds=seconds)


def device_for(backend: str) -> Any:
    """The device a member of a `backend` group computes on (`family:name`, as `backend_of` gives it), with the
    backend registered in torch.distributed. A plugin's family is driven by its conformance adapter."""
    import torch

    family, name = backend.split(":", 1)
    if name == "gloo":
        return torch.device("cpu")
    if family in ("nvidia", "amd") and name == "nccl":
        return torch.device("cuda", 0)  # Ray leaves each member its one device
    if family == "gaudi" and name == "hccl":
        import habana_frameworks.torch.distributed.hccl  # noqa: F401 - registers the backend

        return torch.device("hpu")
    if family in ("tpu", "neuron") and name == "xla":
        import torch_xla.core.xla_model as xm
        import torch_xla.distributed.xla_backend  # noqa: F401 - registers the backend

        return xm.xla_device()
    from pluginkit import adapter_device

    return adapter_device(family, name)


def sync_for(device: Any) -> Callable[[], None]:
    """What waits until the device has done the work queued so far (a no-op for the CPU)."""
    import torch

    kind = getattr(device, "type", "cpu")
    if kind == "cuda":
        synchronize: Callable[[], None] = torch.cuda.synchronize
        return synchronize
    if kind == "hpu":
        return torch.hpu.synchronize  # type: ignore[no-any-return]
    if kind not in ("cpu", "xla"):
        from pluginkit import adapter_sync

        return adapter_sync(kind)
    if kind == "xla":
        import torch_xla.core.xla_model as xm

        def step() -> None:
            xm.mark_step()
            xm.wait_device_ops()

        return step
    return lambda: None


def spawn(cluster: Cluster, family: str, backend: str, *, restarts: int = 0, resource: str | None = None) -> list[Any]:
    """One actor per member, spread over the nodes; `resource`: the family's ray_resource."""
    import ray

    options = member_options(family, resource)
    remote = ray.remote(Member).options(max_restarts=restarts, scheduling_strategy="SPREAD", **options)
    return [remote.remote(rank, cluster.members, backend) for rank in range(cluster.members)]


def form(members: list[Any]) -> None:
    """(Re-)form the group, its store at rank 0's node (127.0.0.1 on the CPU family's loopback cluster)."""
    import ray

    address, port = ray.get(members[0].rendezvous.remote(), timeout=180)
    ray.get([m.join.remote(address, port) for m in members], timeout=180)


def timed(fn: Callable[[], object], *, sync: Callable[[], None], warmup: int, reps: int) -> list[float]:
    """Seconds of each of `reps` runs after `warmup` untimed ones."""
    for _ in range(warmup):
        fn()
    sync()
    out = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - start)
    return out


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def processes_gone(pids: list[int], timeout: float = 30.0) -> list[int]:
    """The pids of `pids` still alive after `timeout` seconds (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        if alive:
            time.sleep(0.2)
    return alive


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return stat.rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


def device_holders(patterns: tuple[str, ...], exclude: int) -> list[str]:
    """`pid: path` for every process other than `exclude` with one of the family's device nodes open (read
    from /proc/*/fd links; processes this user cannot inspect are passed over)."""
    import fnmatch

    holders = []
    with os.scandir("/proc") as processes:  # closed however the walk ends (a process leaving mid-read)
        for entry in processes:
            if not entry.name.isdigit() or int(entry.name) == exclude:
                continue
            with contextlib.suppress(OSError), os.scandir(f"/proc/{entry.name}/fd") as fds:
                for fd in fds:
                    with contextlib.suppress(OSError):
                        target = str(Path(fd.path).readlink())
                        if any(fnmatch.fnmatchcase(target, p) for p in patterns):
                            holders.append(f"{entry.name}: {target}")
    return holders


def restarted_pid(member: Any, old_pid: int, timeout: float, ask: float = 30.0) -> int | None:
    """The restarted actor's pid (its `pid` method answers another than `old_pid`), or None when Ray does not bring
    it back within `timeout` seconds; each question waits at most `ask`."""
    import ray

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(ray.get(member.pid.remote(), timeout=ask))
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            time.sleep(0.5)
            continue
        if pid != old_pid:
            return pid
        time.sleep(0.2)
    return None


def restarted(member: Any, old_pid: int, timeout: float = 120.0) -> int:
    """The restarted actor's pid; fails when Ray does not bring it back in time."""
    pid = restarted_pid(member, old_pid, timeout)
    if pid is None:
        pytest.fail(f"Ray did not restart the member of pid {old_pid} within {timeout:g}s")
    return pid
