"""The interconnect: what an environment `requires` beyond devices (NVLink between GPU pairs, GPUDirect RDMA,
InfiniBand or EFA ports, a TPU slice's shape, one scale-up group of any family: `scale_up`, `scale_up_devices`),
judged from the topology summary discovery made of the host.
Nothing is asked of an environment that requires none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.check.verdict import Finding, Status

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.host.report import HostReport
    from accelenv.matrix import Environment


def topology(env: Environment, report: HostReport) -> Iterator[Finding]:
    need = env.requires
    topo = report.topology
    gpu = topo.get("gpu") if isinstance(topo.get("gpu"), dict) else None
    active = [d for d in topo.get("infiniband", []) if isinstance(d, dict) and d.get("active")]
    if need.nvlink_all_pairs or need.min_nvlinks:
        wanted = "NVLink between all GPU pairs" + (f", at least NV{need.min_nvlinks}" if need.min_nvlinks else "")
        if gpu is None:
            reason = str(topo.get("gpu_error") or "nvidia-smi topo -m did not answer")
            found = "unknown"
            ok = False
            bad = f"the GPU topology could not be read: {reason}"
        else:
            ok = bool(gpu["all_pairs_nvlink"]) and int(gpu["min_nvlinks"]) >= (need.min_nvlinks or 1)
            linked = f"NV{gpu['min_nvlinks']} or more between all pairs"
            found = f"{gpu['gpus']} GPUs, " + (linked if gpu["all_pairs_nvlink"] else "not every pair on NVLink")
            bad = "the GPUs are not linked as required"
        yield _judged(
            "topology.nvlink",
            ok,
            expected=wanted,
            found=found,
            good="NVLink as required",
            bad=bad,
            fix="run on an NVLink/NVSwitch system, or make sure `nvidia-smi topo -m` works here",
        )
    if need.rdma:
        peermem = bool(topo.get("peermem"))
        yield _judged(
            "topology.rdma",
            peermem if need.rdma == "peermem" else peermem or bool(active),
            expected=f"GPUDirect RDMA ({need.rdma})",
            found="nvidia_peermem loaded" if peermem else f"{len(active)} active RDMA device(s), no nvidia_peermem",
            good="GPUDirect RDMA is possible",
            bad="GPUDirect RDMA is not set up",
            fix="modprobe nvidia_peermem (or use dma-buf with a recent kernel and driver)",
        )
    for wanted_here, efa, label in ((need.infiniband, False, "InfiniBand/RoCE"), (need.efa, True, "EFA")):
        if not wanted_here:
            continue
        ports = [d for d in active if bool(d.get("efa")) is efa]
        yield _judged(
            "topology.efa" if efa else "topology.infiniband",
            bool(ports),
            expected=f"an active {label} device",
            found=", ".join(str(d.get("name")) for d in ports) or "none active",
            good=f"{len(ports)} active {label} device(s)",
            bad=f"no active {label} device",
            fix=f"check the {label} driver and port state (ibstat)",
        )
    if need.tpu_topology:
        shape = topo.get("tpu_topology")
        yield _judged(
            "topology.tpu",
            shape == need.tpu_topology,
            expected=need.tpu_topology,
            found=str(shape or "unknown"),
            good="the TPU slice has the declared shape",
            bad="the TPU slice shape differs",
            fix="use a slice of the declared topology (TPU_TOPOLOGY, the host bounds)",
        )
    yield from scale_up(env, report)


def scale_up(env: Environment, report: HostReport) -> Iterator[Finding]:
    """What `requires.scale_up` / `scale_up_devices` ask of the neutral topology (host/links.py) of the env's family."""
    need = env.requires
    if not need.scale_up and not need.scale_up_devices:
        return
    wanted = " and ".join(
        part
        for part in (
            f"every device on {need.scale_up}" if need.scale_up else "",
            f"at least {need.scale_up_devices} devices in one scale-up group" if need.scale_up_devices else "",
        )
        if part
    )
    devices = report.topology.get("devices")
    topo = devices.get(env.family) if isinstance(devices, dict) else None
    if not isinstance(topo, dict) or "error" in topo or not isinstance(topo.get("groups"), list):
        why = topo.get("error") if isinstance(topo, dict) else None
        yield _judged(
            "topology.scale_up",
            False,
            expected=wanted,
            found="unknown",
            good="",
            bad=f"the device topology could not be read: {why or 'no topology of ' + env.family + ' devices'}",
            fix="run where the family's topology tool answers (nvidia-smi topo -m, rocm-smi --showtopo, neuron-ls)",
        )
        return
    groups = [g for g in topo["groups"] if isinstance(g, list)]
    largest = max((len(g) for g in groups), default=0)
    kind = topo.get("scale_up")
    ok = (not need.scale_up or kind == need.scale_up) and largest >= (need.scale_up_devices or 0)
    found = (
        f"{len(topo.get('devices', []))} devices, scale-up groups of {', '.join(str(len(g)) for g in groups) or '0'}"
    )
    yield _judged(
        "topology.scale_up",
        ok,
        expected=wanted,
        found=found + (f", all on {kind}" if kind else ""),
        good="the devices are joined as required",
        bad="the devices are not joined as required",
        fix="run on a system whose devices share one scale-up fabric (NVLink, xGMI, NeuronLink, ICI)",
    )


def _judged(fid: str, ok: bool, *, expected: str, found: str, good: str, bad: str, fix: str) -> Finding:
    return Finding(
        id=fid,
        status=Status.PASS if ok else Status.FAIL,
        expected=expected,
        found=found,
        message=good if ok else bad,
        fix="" if ok else fix,
    )
