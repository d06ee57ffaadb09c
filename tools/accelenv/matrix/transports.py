"""What Ray Direct Transport (RDT) offers, as facts read from Ray 2.60.0's own code, and the rule that an
environment declares only transports its family's devices can use (registered by `rules.py`).

Ray 2.60.0 registers four transports (ray/experimental/rdt/util.py, `_ensure_default_transports_registered`):
NIXL for torch tensors on "cuda" and "cpu", GLOO on "cpu", NCCL and CUDA_IPC on "cuda". A family's tensors live on
one torch device type; a transport is usable when it moves that type. GLOO is also the CPU family's, since its
tensors are on "cpu". The Python distributions each transport imports are named beside it (NCCL goes through
ray.util.collective's NCCL group, which imports cupy; NIXL imports the nixl package; GLOO and CUDA_IPC only torch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.matrix.rulebook import Finding, rule
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Matrix


@frozen
class Transport:
    name: str
    devices: tuple[str, ...]  # torch device types Ray registers it for
    packages: tuple[tuple[str, ...], ...]  # each: distributions of which one must be installed
    two_sided: bool  # needs a collective group of sender and receiver (ray.experimental.collective)


TRANSPORTS = {
    "GLOO": Transport(name="GLOO", devices=("cpu",), packages=(("torch",),), two_sided=True),
    "NCCL": Transport(
        name="NCCL",
        devices=("cuda",),
        packages=(("torch",), ("cupy-cuda12x", "cupy-cuda13x", "cupy")),
        two_sided=True,
    ),
    "NIXL": Transport(
        name="NIXL", devices=("cuda", "cpu"), packages=(("torch",), ("nixl", "nixl-cu12", "nixl-cu13")), two_sided=False
    ),
    "CUDA_IPC": Transport(name="CUDA_IPC", devices=("cuda",), packages=(("torch",),), two_sided=False),
}
# the torch device type of each built-in family's tensors; a family left out has none that Ray's transports move
# (TPU: JAX arrays; Neuron: torch_xla's "xla"; Gaudi: "hpu"). AMD's ROCm torch names its GPUs "cuda".
FAMILY_DEVICE = {"cpu": "cpu", "nvidia": "cuda", "amd": "cuda"}


def usable(family: str, transport: str) -> bool:
    device = FAMILY_DEVICE.get(family)
    return device is not None and transport in TRANSPORTS and device in TRANSPORTS[transport].devices


@rule
def rdt_transports(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """An environment's RDT transports move tensors of its family's device type (Ray 2.60.0's registration)."""
    for env in m.envs.values():
        if env.transports and env.no_transports:
            yield Finding(
                path=("envs", env.id, "no_transports"),
                message="declares transports and says why it has none: keep one of them",
                rule="rdt-transport",
            )
        for index, transport in enumerate(env.transports):
            if usable(env.family, transport):
                continue
            device = FAMILY_DEVICE.get(env.family)
            fits = sorted(t for t in TRANSPORTS if usable(env.family, t))
            where = (
                f"a {env.family} environment's tensors are on torch device {device!r}"
                if device
                else (f"Ray 2.60.0 has no transport for a {env.family} environment's device tensors")
            )
            yield Finding(
                path=("envs", env.id, "transports", index),
                message=(
                    f"{transport} moves {'/'.join(TRANSPORTS[transport].devices) if transport in TRANSPORTS else 'no'} "
                    f"tensors only, and {where}: "
                    + (f"declare one of {', '.join(fits)}" if fits else "declare no transport (remove the key)")
                ),
                rule="rdt-transport",
            )
