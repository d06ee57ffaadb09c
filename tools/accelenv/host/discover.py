"""Discovery: run every family's probe at once and join what the tools say with what the hardware shows.

Two layers per family, so a broken driver is still seen: the hardware layer (PCI functions, kernel modules,
device nodes, all read through the `Root`) and the vendor tool layer (each tool with a timeout, all at once).
Devices come from the tool when it answered, else from PCI; each is matched to a matrix SKU by PCI device id,
then by product name.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from accelenv import records
from accelenv.host.pci import PCI_DEVICES, device_nodes, module_versions, scan_pci
from accelenv.host.probes.python import python_info
from accelenv.host.probes.system import container, limits, os_info, reported_environment
from accelenv.host.report import PASSTHROUGH_DRIVERS, Accelerator, Device, HostReport, PciDevice, PythonInfo

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from accelenv.host.facts import DeviceFacts
    from accelenv.host.probes import FamilyProbe, ToolView
    from accelenv.host.root import Root
    from accelenv.host.run import Runner, ToolResult
    from accelenv.matrix import Family, Matrix

PROBE_ENTRY_POINTS = "accelenv.probes"
BUILTIN_PROBES = {  # family -> module holding its probe class; imported only when that family is probed
    "nvidia": ("accelenv.host.probes.nvidia", "NvidiaProbe"),
    "amd": ("accelenv.host.probes.amd", "AmdProbe"),
    "tpu": ("accelenv.host.probes.tpu", "TpuProbe"),
    "neuron": ("accelenv.host.probes.neuron", "NeuronProbe"),
    "gaudi": ("accelenv.host.probes.gaudi", "GaudiProbe"),
}


def builtin_probe(family: str) -> FamilyProbe:
    module, name = BUILTIN_PROBES[family]
    probe: FamilyProbe = getattr(importlib.import_module(module), name)()
    return probe


def probes(families: Iterable[str] | None = None) -> dict[str, FamilyProbe]:
    """Built-in probes (of `families`, default all), then those of family plugins (`accelenv.families`), then
    any registered under the `accelenv.probes` entry-point group: a plugin may add a family or replace a
    built-in one."""
    wanted = set(BUILTIN_PROBES if families is None else families)
    found: dict[str, FamilyProbe] = {f: builtin_probe(f) for f in BUILTIN_PROBES if f in wanted}
    from accelenv.host.plugin_probes import GuardedProbe, probe_of
    from accelenv.plugins import installed

    plugged = installed().loaded if families is None or wanted - set(BUILTIN_PROBES) else ()
    for plugin in plugged:  # each held to its promise: one that raises or hangs is an error of its view
        if families is None or plugin.family in wanted:
            found[plugin.family] = GuardedProbe(plugin.probe, plugin.package)
    from accelenv.distmeta import declared_entry_points

    for entry in declared_entry_points(PROBE_ENTRY_POINTS, sys.path):  # read bounded, not by importlib.metadata
        probe = probe_of(entry, entry.dist)
        found[str(probe.family)] = probe
    return found


def plugins_installed(paths: Iterable[str] | None = None, *, group: str = PROBE_ENTRY_POINTS) -> bool:
    """Whether any distribution on `paths` (default sys.path) declares entry points of `group` (a quick look at
    the `entry_points.txt` files, which spares `importlib.metadata` when there are none)."""
    from accelenv.distmeta import declares_entry_points

    return declares_entry_points(group, sys.path if paths is None else paths)


def discover(
    matrix: Matrix,
    *,
    root: Root,
    runner: Runner,
    environ: Mapping[str, str],
    families: Iterable[str] | None = None,
    fetch_metadata: Callable[[str], str | None] | None = None,
    registry: Mapping[str, FamilyProbe] | None = None,
    python: PythonInfo | None = None,
    topology: bool = True,
) -> HostReport:
    """Everything that can be seen of this host. `families` limits the vendor tools that run (and always reports
    those families, even when nothing of them is found). `python` replaces the running interpreter's facts.
    `topology=False` leaves out the interconnect summary (RDMA devices, GPU links, TPU shape) for a caller that
    will not look at it: a check whose environment requires none of it."""
    wanted = set(families) if families is not None else None
    selected = [f for f in matrix.families.values() if f.pci_vendor_ids and (wanted is None or f.id in wanted)]
    if registry is None:
        registry = probes([f.id for f in selected]) if selected else {}
    python = python or python_info()
    pci = {family: [_with_physfn(root, p) for p in found] for family, found in scan_pci(root, matrix).items()}
    bus_readable = bool(root.listdir(PCI_DEVICES)) or None  # None: nothing listed, so nothing can be judged

    results: dict[str, dict[str, ToolResult]] = {}
    accelerators = []
    if selected:  # families with devices: their tools run, their probes read what the tools said
        from accelenv.host.probes import ProbeContext, ToolView

        results = _run_tools(selected, registry, runner)
        ctx = ProbeContext(
            root=root, environ=environ, distributions=python.distributions, fetch_metadata=fetch_metadata
        )
        for family in selected:
            probe = registry.get(family.id)
            view = probe.interpret(ctx, results.get(family.id, {})) if probe else ToolView()
            accelerator = _accelerator(
                matrix, family, root=root, view=view, pci=pci.get(family.id, []), results=results.get(family.id, {})
            )
            accelerator = records.replace(accelerator, pci_bus_readable=bus_readable)
            if wanted is not None or _seen(accelerator, results.get(family.id, {})):
                accelerators.append(accelerator)
    topo = results.get("nvidia", {}).get("nvidia-smi-topo")
    summary: dict[str, object] = {}
    if topology:
        from accelenv.host.topology import summary as topology_summary

        summary = topology_summary(root, environ, topo.stdout if topo is not None and topo.ok else None)
        from accelenv.host.links import neutral

        said = {f: {k: r.stdout for k, r in rs.items() if r.ok} for f, rs in results.items()}
        tpu = next((len(a.devices) for a in accelerators if a.family == "tpu"), 0)
        devices = neutral(said, tpu, summary.get("tpu_topology") if tpu else None)  # type: ignore[arg-type]
        if devices:
            summary["devices"] = devices
    host_os, host_limits, host_container = os_info(root), limits(root), container(root, runner)
    return HostReport(
        topology=summary,
        root=str(root.path),
        os=host_os,
        python=python,
        accelerators=tuple(accelerators),
        environment=reported_environment(environ),
        limits=host_limits,
        container=host_container,
        raw={key: r for family_results in results.values() for key, r in family_results.items()},
        unreadable=root.unreadable,  # every read is done: what could not be read is known now
    )


def _run_tools(
    selected: list[Family], registry: Mapping[str, FamilyProbe], runner: Runner
) -> dict[str, dict[str, ToolResult]]:
    """family -> command key -> what the tool said: every probe's commands at once, then a second round only for
    probes whose tool refused a command of the first (an older driver's nvidia-smi)."""
    from accelenv.host.probes import followups

    jobs = [
        (family.id, key, argv)
        for family in selected
        if family.id in registry
        for key, argv in registry[family.id].commands().items()
    ]
    outcomes = runner.run_all([argv for _, _, argv in jobs])
    results: dict[str, dict[str, ToolResult]] = {}
    for (family_id, key, _), outcome in zip(jobs, outcomes, strict=True):
        results.setdefault(family_id, {})[key] = outcome
    retries = [
        (family_id, key, argv)
        for family_id, said in results.items()
        for key, argv in followups(registry[family_id], said).items()
    ]
    for (family_id, key, _), outcome in zip(retries, runner.run_all([argv for _, _, argv in retries]), strict=True):
        results[family_id][key] = outcome
    return results


def _with_physfn(root: Root, device: PciDevice) -> PciDevice:
    """`device`, marked as an SR-IOV virtual function when sysfs links it to its physical function."""
    physfn = root.link_name(f"{PCI_DEVICES}/{device.address}/physfn")
    return records.replace(device, physfn=physfn.lower()) if physfn else device


def _seen(accelerator: Accelerator, results: Mapping[str, ToolResult]) -> bool:
    tool_answered = any(r.ok or not (r.fault or "").endswith("not found on PATH") for r in results.values())
    return (
        bool(accelerator.devices or accelerator.pci_devices or accelerator.modules or accelerator.device_nodes)
        or tool_answered
    )


def _accelerator(
    matrix: Matrix,
    family: Family,
    *,
    root: Root,
    view: ToolView,
    pci: list[PciDevice],
    results: Mapping[str, ToolResult],
) -> Accelerator:
    bound = {p.driver for p in pci if p.driver}
    modules = module_versions(root, tuple(dict.fromkeys([*family.kernel_modules, *sorted(bound)])))
    shadow = sorted(d for d in bound if family.kernel_modules and d not in family.kernel_modules)
    shadow = [d for d in shadow if d not in PASSTHROUGH_DRIVERS]
    if view.devices:
        devices = tuple(_from_tool(matrix, family.id, d, pci) for d in view.devices)
        source = view.source or "tool"
    else:
        devices = tuple(_from_pci(matrix, i, p) for i, p in enumerate(pci))
        source = "pci" if pci else "none"
    sources = {fact: dict(said) for fact, said in view.sources.items()}
    module = family.kernel_modules[0] if family.kernel_modules else None
    driver_version = view.driver_version
    if module is not None and modules.get(module) and (sources or view.driver_version):
        # the loaded module's own version: what a tool built for another driver release cannot change
        sources.setdefault("driver_version", {})[f"kernel module {module}"] = str(modules[module])
    elif module is not None and modules.get(module) and driver_version is None:
        # the tools failed and no file of theirs says: the loaded module's version is the driver's, and the report
        # names it as the one source (/sys/module/<module>/version)
        driver_version = str(modules[module])
        sources["driver_version"] = {f"kernel module {module}": driver_version}
    return Accelerator(
        family=family.id,
        driver_version=driver_version,
        runtime_version=view.runtime_version,
        devices=devices,
        source=source,
        errors=view.errors,
        pci_devices=tuple(pci),
        modules=modules,
        device_nodes=device_nodes(root, family),
        shadowed_by=shadow[0] if shadow else None,
        extra={**view.extra, **({"tools": ",".join(sorted(k for k, r in results.items() if r.ok))} if results else {})},
        # one source is named only when it is the kernel module: the driver version then came from nothing else
        sources={
            fact: said for fact, said in sources.items() if len(said) > 1 or set(said) == {f"kernel module {module}"}
        },
    )


def match_sku(
    matrix: Matrix, family: str, *, pci_device_id: str | None, name: str | None, stated: str | None = None
) -> str | None:
    """The matrix SKU a device is: by PCI device id first (exact); when the id is unknown or names several SKUs,
    by the product name the tool printed, then by `stated`, the SKU the tool's own words imply (neuron-ls's
    instance type), when it is one of the candidates."""
    by_id = [
        sku
        for sku in matrix.skus.values()
        if sku.family == family and pci_device_id and pci_device_id.lower() in sku.pci_device_ids
    ]
    if len(by_id) == 1:
        return by_id[0].id
    candidates = by_id or [sku for sku in matrix.skus.values() if sku.family == family]
    if name:
        for sku in candidates:
            if sku.matches_name(name):
                return sku.id
    if stated is not None and any(sku.id == stated for sku in candidates):
        return stated
    return by_id[0].id if by_id else None


def _from_tool(matrix: Matrix, family: str, facts: DeviceFacts, pci: list[PciDevice]) -> Device:
    from accelenv.host.probes import STATED_SKU

    device_id = facts.pci_device_id
    if device_id is None and facts.pci_bus_id:
        device_id = next((p.device_id for p in pci if p.address == facts.pci_bus_id.lower()), None)
    sku = match_sku(matrix, family, pci_device_id=device_id, name=facts.name, stated=facts.extra.get(STATED_SKU))
    arch = facts.arch or (matrix.skus[sku].arch if sku else None)
    return Device(
        index=facts.index,
        name=facts.name,
        arch=arch,
        memory_mib=facts.memory_mib,
        pci_bus_id=facts.pci_bus_id,
        pci_device_id=device_id,
        uuid=facts.uuid,
        sku=sku,
    )


def _from_pci(matrix: Matrix, index: int, device: PciDevice) -> Device:
    sku = matrix.skus.get(device.sku) if device.sku else None
    return Device(
        index=index,
        name=sku.name if sku else None,
        arch=sku.arch if sku else None,
        memory_mib=None,
        pci_bus_id=device.address,
        pci_device_id=device.device_id,
        uuid=None,
        sku=device.sku,
    )
