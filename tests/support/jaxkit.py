"""The conformance suite's JAX path, for the families whose framework is JAX (TPU): one Ray actor per JAX process
forms a multi-controller group with `jax.distributed.initialize`, and the collectives are XLA's own (`psum` under
`shard_map` over every device of every process: ICI/DCN on TPU, gloo between processes on the CPU). The data,
the training loop and its single-process reference are those of the torch path (conformancekit), written in
numpy so that a JAX-only environment needs no torch; the reference is plain numpy arithmetic, not JAX's autodiff.

Layout: on the CPU, one process per Ray CPU slot, each with one CPU device (so the group spans two loopback nodes
in CI); on TPU, one process per host holding all of its chips, which is how JAX runs on TPU VMs (a chip is not
shared between processes, and libtpu gives a process every chip it is allowed to see).

Recovery: a JAX process cannot leave a distributed group and join another (the backend keeps the first
topology), so after one member is killed Ray restarts it and the surviving members are restarted too (by Ray,
through `ray.kill(..., no_restart=False)`); the fresh processes form a new group and resume from the checkpoint.
"""

from __future__ import annotations

import importlib
import math
import sys
from typing import TYPE_CHECKING, Any

import pytest
from conformancekit import FEATURES, LR, OUTPUTS, SAMPLES, STEPS, RayMember, timed

if TYPE_CHECKING:
    from conformancekit import Cluster

PLATFORM = {"cpu": "cpu", "tpu": "tpu"}  # the families this path drives, and JAX's platform name for each


def platform_of(family: str) -> str:
    if family not in PLATFORM:
        pytest.fail(f"the JAX conformance path drives {sorted(PLATFORM)}; {family} has no JAX path")
    return PLATFORM[family]


def data() -> tuple[Any, Any, Any, Any]:
    """Initial weight, bias, inputs and targets (float32): the same on every member and in the reference."""
    import numpy as np

    rng = np.random.default_rng(2024)
    weight = rng.standard_normal((OUTPUTS, FEATURES), dtype=np.float32)
    bias = rng.standard_normal(OUTPUTS, dtype=np.float32)
    x = rng.standard_normal((SAMPLES, FEATURES), dtype=np.float32)
    y = x @ rng.standard_normal((FEATURES, OUTPUTS), dtype=np.float32) + np.float32(0.5)
    return weight, bias, x, y


def reference(steps: int = STEPS) -> list[Any]:
    """Full-batch gradient descent on the mean squared error, by hand in float64: what every run must end with."""
    weight, bias, x, y = (a.astype("float64") for a in data())
    scale = 2.0 / (SAMPLES * OUTPUTS)
    for _ in range(steps):
        error = x @ weight.T + bias - y
        weight = weight - LR * scale * (error.T @ x)
        bias = bias - LR * scale * error.sum(axis=0)
    return [weight, bias]


def assert_matches_reference(states: list[list[Any]], steps: int = STEPS) -> None:
    import numpy as np

    want = reference(steps)
    for rank, state in enumerate(states):
        for name, got, ref in zip(("weight", "bias"), state, want, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5, err_msg=f"rank {rank}: {name}")


class JaxMember(RayMember):
    """One JAX process of the group: joins it, all-reduces, trains a step at a time on its devices' shards."""

    def __init__(self, rank: int, world: int, platform: str) -> None:
        self.rank, self.world, self.platform = rank, world, platform
        self.params: list[Any] = []

    def join(self, address: str, port: int) -> dict[str, Any]:
        """Form the group with its coordinator at address:port; what this process then sees."""
        import jax

        if self.platform == "cpu":
            jax.config.update("jax_platforms", "cpu")
            jax.config.update("jax_cpu_collectives_implementation", "gloo")  # XLA's CPU collectives across processes
        jax.distributed.initialize(
            coordinator_address=f"{address}:{port}",
            num_processes=self.world,
            process_id=self.rank,
            initialization_timeout=120,
        )
        return {
            "processes": jax.process_count(),
            "devices": jax.device_count(),
            "local_devices": jax.local_device_count(),
            "platform": jax.devices()[0].platform,
            "version": jax.__version__,
        }

    def all_reduce(self) -> float:
        """Every device holds (its global index + 1); a psum over all of them gives n(n+1)/2 everywhere."""
        import numpy as np

        local = np.stack([np.full(1024, g + 1.0, dtype=np.float32) for g in _local_indices()])
        out = _psum()(_sharded(local))
        return min(float(np.asarray(shard.data).min()) for shard in out.addressable_shards)

    def load(self, params: list[Any]) -> None:
        import numpy as np

        self.params = [np.array(p, dtype=np.float32) for p in params]

    def state(self) -> list[Any]:
        return [p.copy() for p in self.params]

    def step(self) -> None:
        """One step of data-parallel training: each device's gradient of its share of the loss, psum'd."""
        import numpy as np

        _, _, x, y = data()
        xs, ys, masks = _shards(x, y)
        copies = len(_local_indices())  # one copy per device: a device's gradient is its own until the psum
        weight, bias = (_sharded(np.stack([p] * copies)) for p in self.params)
        grads = _train_grads()(weight, bias, xs, ys, masks)
        self.params = [
            p - np.float32(LR) * np.asarray(g.addressable_shards[0].data)
            for p, g in zip(self.params, grads, strict=True)
        ]

    def bus_bandwidth(self, numel: int, warmup: int, reps: int) -> list[float]:
        import numpy as np

        local = np.ones((len(_local_indices()), numel), dtype=np.float32)
        array, psum = _sharded(local), _psum()
        seconds = timed(lambda: psum(array).block_until_ready(), sync=lambda: None, warmup=warmup, reps=reps)
        devices = _device_count()
        size = numel * 4
        return [size / s * 2 * (devices - 1) / devices / 1e9 for s in seconds]

    def leave(self) -> None:
        import jax

        jax.distributed.shutdown()


def _device_count() -> int:
    import jax

    return int(jax.device_count())


def _mesh() -> Any:
    import jax
    import numpy as np
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()), ("d",))


def _local_indices() -> list[int]:
    """The global mesh positions of this process's devices, in mesh order."""
    import jax

    everything = list(jax.devices())
    return sorted(everything.index(d) for d in jax.local_devices())


def _sharded(local: Any) -> Any:
    """A global array, its first axis over every device, from this process's rows (one per local device)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    return jax.make_array_from_process_local_data(NamedSharding(_mesh(), PartitionSpec("d")), local)


def _shard_map() -> Any:
    import jax

    found = getattr(jax, "shard_map", None)
    if found is None:  # JAX before 0.7 kept it under experimental
        found = importlib.import_module("jax.experimental.shard_map").shard_map
    return found


def _psum() -> Any:
    import jax
    from jax.sharding import PartitionSpec

    spec = PartitionSpec("d")
    return jax.jit(_shard_map()(lambda a: jax.lax.psum(a, "d"), mesh=_mesh(), in_specs=spec, out_specs=spec))


def _shards(x: Any, y: Any) -> tuple[Any, Any, Any]:
    """Device g of n takes rows g::n, padded to the same length with masked-out rows."""
    import numpy as np

    n = _device_count()
    rows = math.ceil(SAMPLES / n)
    xs, ys, masks = [], [], []
    for g in _local_indices():
        part_x, part_y = x[g::n], y[g::n]
        pad = rows - len(part_x)
        xs.append(np.pad(part_x, ((0, pad), (0, 0))))
        ys.append(np.pad(part_y, ((0, pad), (0, 0))))
        masks.append(np.pad(np.ones(len(part_x), dtype=np.float32), (0, pad)))
    return _sharded(np.stack(xs)), _sharded(np.stack(ys)), _sharded(np.stack(masks))


def _train_grads() -> Any:
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec

    def per_device(weight: Any, bias: Any, x: Any, y: Any, mask: Any) -> Any:
        def loss(w: Any, b: Any) -> Any:
            predicted = jnp.matmul(x[0], w[0].T, precision=jax.lax.Precision.HIGHEST) + b[0]
            error = (predicted - y[0]) * mask[0][:, None]
            return jnp.sum(error * error) / (SAMPLES * OUTPUTS)  # this device's share of the batch mean

        # the parameters come in per device (not replicated), so JAX inserts no all-reduce of its own in the
        # backward pass: the psum here is the one all-reduce of each step
        grads = jax.grad(loss, argnums=(0, 1))(weight, bias)
        return tuple(jax.lax.psum(g[0], "d") for g in grads)

    replicated, split = PartitionSpec(), PartitionSpec("d")
    mapped = _shard_map()(
        per_device,
        mesh=_mesh(),
        in_specs=(split, split, split, split, split),
        out_specs=(replicated, replicated),
    )
    return jax.jit(mapped)


def member_count(cluster: Cluster, family: str) -> tuple[int, dict[str, Any]]:
    """How many JAX processes the group has, and the Ray options of each: one per CPU slot on the CPU, one per
    TPU host (all its chips) on TPU."""
    ray: Any = importlib.import_module("ray")

    if family == "cpu":
        return cluster.members, {"num_cpus": 1}
    chips = [int(n["Resources"]["TPU"]) for n in ray.nodes() if n["Alive"] and n["Resources"].get("TPU")]
    if not chips:
        pytest.fail("the Ray cluster has no node with TPU resources")
    return len(chips), {"num_cpus": 0, "resources": {"TPU": min(chips)}}


def spawn(cluster: Cluster, family: str, *, restarts: int = 0) -> list[Any]:
    ray: Any = importlib.import_module("ray")

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers need not find tests/support
    world, options = member_count(cluster, family)
    remote = ray.remote(JaxMember).options(max_restarts=restarts, scheduling_strategy="SPREAD", **options)
    return [remote.remote(rank, world, platform_of(family)) for rank in range(world)]


def form(members: list[Any]) -> list[dict[str, Any]]:
    """Form the group, its coordinator on rank 0's node; what each member sees."""
    import ray

    address, port = ray.get(members[0].rendezvous.remote(), timeout=180)
    seen: list[dict[str, Any]] = ray.get([m.join.remote(address, port) for m in members], timeout=180)
    return seen


def measure_in_child(kind: str, platform: str, dtype: str, *, warmup: int, reps: int) -> dict[str, Any]:
    """A single-device figure measured in a child process (`matmul` in TFLOP/s, `memory_bandwidth` in GB/s), so
    that this process never holds a TPU: libtpu gives a chip to one process, and the group's members need them."""
    import json
    import subprocess

    command = [sys.executable, __file__, kind, platform, dtype, str(warmup), str(reps)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        pytest.fail(f"measuring {kind} with JAX failed (exit {done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _measure(kind: str, platform: str, dtype: str, warmup: int, reps: int) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from conformancekit import median

    if platform == "cpu":
        jax.config.update("jax_platforms", "cpu")
    device = jax.devices(platform)[0]
    kind_of = {"bf16": jnp.bfloat16, "fp16": jnp.float16, "fp32": jnp.float32}[dtype]
    on_accelerator = platform != "cpu"
    if kind == "matmul":
        n = 8192 if on_accelerator else 512
        key_a, key_b = jax.random.split(jax.random.key(0))
        a = jax.device_put(jax.random.normal(key_a, (n, n), dtype=kind_of), device)
        b = jax.device_put(jax.random.normal(key_b, (n, n), dtype=kind_of), device)
        product = jax.jit(jnp.matmul)
        seconds = timed(lambda: product(a, b).block_until_ready(), sync=lambda: None, warmup=warmup, reps=reps)
        value = 2 * n**3 / median(seconds) / 1e12
    else:
        size = 2 * 2**30 if on_accelerator else 64 * 2**20  # bytes per buffer: far beyond any cache
        source = jax.device_put(jnp.ones(size // 4, dtype=jnp.float32), device)
        touch = jax.jit(lambda x: x + 1.0)  # reads and writes every byte once
        seconds = timed(lambda: touch(source).block_until_ready(), sync=lambda: None, warmup=warmup, reps=reps)
        value = 2 * size / median(seconds) / 1e9
    return {
        "value": value,
        "device_kind": str(device.device_kind),
        "local_devices": len(jax.local_devices()),
        "version": jax.__version__,
    }


if __name__ == "__main__":  # measure_in_child's child: kind, platform, dtype, warmup, reps
    import json

    kind, platform, dtype, warmup, reps = sys.argv[1:6]
    print(json.dumps(_measure(kind, platform, dtype, int(warmup), int(reps))))
