"""The devices: are the family's devices there, counted alike by the vendor tool and the PCI bus, SKUs of the
environment, of an architecture its runtime has code for, and named rightly by the visible-device variables?

`hardware.present` (or `hardware.cpu`, for the cpu family), `devices.count`, `devices.sku`, `devices.mixed`,
`devices.arch` and `devices.visible`, in the order `check` asks them.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from accelenv.check.verdict import Finding, Status
from accelenv.host.report import PASSTHROUGH_DRIVERS
from accelenv.matrix.model import PLATFORM_MACHINES

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.host.report import Accelerator, Device, HostReport, PciDevice
    from accelenv.matrix import Environment, Family, Matrix, Runtime

LISTED = 4  # how many addresses a finding names before "and N more"
INDEXED_VISIBLE_VARS = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "HABANA_VISIBLE_DEVICES",
        "TPU_VISIBLE_CHIPS",
    }
)


def present(env: Environment, family: Family, acc: Accelerator | None) -> Finding:
    """`hardware.present`: the family's devices are there. When they are not, no other check of them can judge,
    so `check` asks nothing else about them; what was seen of the family instead (modules, device nodes, tool
    errors) is the finding's `found`."""
    if acc is None or not acc.devices:
        seen = []
        if acc is not None:
            seen += [f"module {m}" for m in acc.modules] + list(acc.device_nodes) + list(acc.errors)
        return Finding(
            id="hardware.present",
            status=Status.FAIL,
            expected=f"{family.name} devices ({len(env.skus)} SKUs: see accelenv show {env.id})",
            found="; ".join(seen) or "none: no PCI function of vendor " + ", ".join(family.pci_vendor_ids),
            message=f"no {family.name} device found on this host",
            fix=f"run on a host with {family.name} devices, or pick another environment (accelenv which)",
        )
    if acc.source != "pci" and acc.pci_bus_readable and not acc.pci_devices and family.pci_vendor_ids:
        vendors = ", ".join(family.pci_vendor_ids)
        return Finding(
            id="hardware.present",
            status=Status.FAIL,
            expected=f"{family.name} devices, each a PCI function of vendor {vendors}",
            found=f"{len(acc.devices)} device(s) via {acc.source}; the PCI bus, readable, has no function of {vendors}",
            message=f"{acc.source} lists {family.name} devices this host's PCI bus does not have",
            fix=f"find which {acc.source} runs (`command -v {acc.source}`): a stand-in or a broken install lists "
            "devices that are not there",
        )
    return Finding(
        id="hardware.present",
        status=Status.PASS,
        expected=f"{family.name} devices",
        found=f"{len(acc.devices)} device(s) via {acc.source}",
        message=f"{len(acc.devices)} {family.name} device(s)",
    )


def cpu_architecture(env: Environment, report: HostReport) -> Finding:
    """`hardware.cpu`, for a family without devices (cpu): the host's machine is one the environment is built for."""
    wanted = sorted({PLATFORM_MACHINES[p] for p in env.platforms})
    found = report.os.arch or "unknown"
    ok = found in wanted
    return Finding(
        id="hardware.cpu",
        status=Status.PASS if ok else Status.FAIL,
        expected=" or ".join(wanted),
        found=found,
        message=f"CPU architecture {found}" if ok else f"{env.id} is built for {', '.join(env.platforms)}",
        fix="" if ok else f"use a host of {' or '.join(wanted)}",
    )


def device_count(family: Family, acc: Accelerator, report: HostReport) -> Iterator[Finding]:
    """The vendor tool's devices against the PCI functions under them: every function listed once, nothing listed
    that PCI does not show. Explained, not flagged: SR-IOV virtual functions (the tool lists the physical one),
    partitions of one device (MIG instances, compute partitions: several devices on one PCI slot), functions
    passed through to VMs (vfio-pci), and the subset of devices a container was given."""
    if acc.source in ("pci", "none") or not acc.pci_devices:
        return  # one layer only (a container without sysfs, a host without the tool): nothing to compare
    tool = acc.source
    physical = [p for p in acc.pci_devices if not p.physfn]
    virtual = len(acc.pci_devices) - len(physical)
    addresses = {p.address: p for p in acc.pci_devices}
    slots: dict[str, PciDevice] = {}
    for candidate in physical + [p for p in acc.pci_devices if p.physfn]:  # a slot stands for its physical function
        slots.setdefault(_slot(candidate.address), candidate)
    on_pci: dict[str, list[Device]] = {}
    elsewhere: list[Device] = []
    unnamed = 0
    for device in acc.devices:
        function = addresses.get(device.pci_bus_id or "") or slots.get(_slot(device.pci_bus_id or ""))
        if function is not None:
            on_pci.setdefault(function.address, []).append(device)
        elif device.pci_bus_id:
            elsewhere.append(device)
        else:
            unnamed += 1
    unlisted: list[PciDevice] = [p for p in physical if p.address not in on_pci]
    if unnamed:  # devices the tool gave no address for stand for as many unlisted functions
        unlisted, unnamed = unlisted[unnamed:], max(0, unnamed - len(unlisted))
    partitioned = {address: len(listed) for address, listed in on_pci.items() if len(listed) > 1}
    passed_through = [p for p in unlisted if p.driver in PASSTHROUGH_DRIVERS]
    unlisted = [p for p in unlisted if p.driver not in PASSTHROUGH_DRIVERS]
    given = report.container.inside_container and bool(acc.devices)
    notes = []
    if virtual:
        notes.append(f"{virtual} SR-IOV virtual function(s) not counted")
    if partitioned:
        notes.append(
            f"{sum(partitioned.values())} devices are partitions (MIG or compute partitions) of "
            f"{len(partitioned)} PCI device(s)"
        )
    if passed_through:
        notes.append(f"{len(passed_through)} passed through to virtual machines ({passed_through[0].driver})")
    if unlisted and given:
        notes.append(f"{len(unlisted)} not given to this container")
        unlisted = []
    found = f"{tool}: {len(acc.devices)} device(s); PCI: {len(physical)} function(s)" + (
        f" and {virtual} virtual" if virtual else ""
    )
    expected = f"every {family.name} PCI function listed by {tool}, and no device PCI does not show"
    problems, fixes = [], []
    known = [p for p in unlisted if p.sku is not None or p.driver in family.kernel_modules]
    if unlisted:
        problems.append(
            f"{len(unlisted)} PCI function(s) are not listed by {tool}: {_named([p.address for p in unlisted])}"
        )
        fixes.append(
            "a device on PCI that the driver does not list failed to initialise or fell off the bus: look for it in "
            "the kernel log (dmesg), then reset it or reboot; a device meant for a VM belongs to vfio-pci"
        )
    if elsewhere or unnamed:
        count = len(elsewhere) + unnamed
        where = f": {_named([d.pci_bus_id or '?' for d in elsewhere])}" if elsewhere else ""
        problems.append(f"{tool} lists {count} device(s) that PCI does not show{where}")
        fixes.append(
            f"make sure {tool} is the installed driver's own tool and reports this host (not a stub, a wrapper or "
            "another machine's output), and that --root is this host"
        )
    if not problems:
        yield Finding(
            id="devices.count",
            status=Status.PASS,
            expected=expected,
            found=found,
            message="; ".join([f"{tool} and PCI agree on {len(physical)} device(s)", *notes]),
        )
        return
    sure = bool(known) or any(d.sku is not None for d in elsewhere) or bool(unnamed)
    yield Finding(
        id="devices.count",
        status=Status.FAIL if sure else Status.WARN,
        expected=expected,
        found=found,
        message="; ".join(problems + notes),
        fix="; ".join(fixes),
    )


def _named(addresses: list[str]) -> str:
    shown = ", ".join(addresses[:LISTED])
    return shown + (f" and {len(addresses) - LISTED} more" if len(addresses) > LISTED else "")


def _slot(address: str) -> str:
    """`0000:17:00.0` -> `0000:17:00`: the device whose functions (or a tool's partitions of it) share a slot."""
    return address.rpartition(".")[0]


def device_skus(matrix: Matrix, env: Environment, acc: Accelerator) -> Iterator[Finding]:
    labels = [d.name or d.pci_device_id or "unknown" for d in acc.devices]
    unknown = sorted({label for label, d in zip(labels, acc.devices, strict=True) if d.sku is None})
    foreign = sorted({d.sku for d in acc.devices if d.sku and d.sku not in env.skus})
    found = ", ".join(f"{label} x{count}" for label, count in sorted(Counter(labels).items()))
    if foreign:
        homes = sorted({e.id for e in matrix.envs.values() for s in foreign if s in e.skus})
        yield Finding(
            id="devices.sku",
            status=Status.FAIL,
            expected=", ".join(env.skus),
            found=found,
            message=f"{', '.join(foreign)} is not a SKU of {env.id}",
            fix=f"use an environment made for it ({', '.join(homes)})" if homes else "add the SKU to an environment",
        )
    elif unknown:
        yield Finding(
            id="devices.sku",
            status=Status.WARN,
            expected=", ".join(env.skus),
            found=found,
            message=f"{', '.join(unknown)} matches no SKU in the matrix",
            fix="add a [skus.*] entry with its product name and PCI device id (accelenv add sku)",
        )
    else:
        yield Finding(
            id="devices.sku",
            status=Status.PASS,
            expected=", ".join(env.skus),
            found=found,
            message=f"devices are SKUs of {env.id}",
        )
    if len({d.sku for d in acc.devices}) > 1:
        yield Finding(
            id="devices.mixed",
            status=Status.WARN,
            expected="one SKU per host",
            found=found,
            message="the host mixes device models; collectives run at the pace of the slowest",
        )


def architectures(matrix: Matrix, runtime: Runtime, acc: Accelerator) -> Finding:
    archs = sorted({d.arch for d in acc.devices if d.arch})
    missing = [a for a in archs if a not in runtime.architectures]
    conflicts = []
    for device in acc.devices:
        sku = matrix.skus.get(device.sku or "")
        if sku is not None and device.arch and device.arch != sku.arch:
            by = f"PCI id {device.pci_device_id}" if device.pci_device_id in sku.pci_device_ids else "name"
            conflicts.append((device, sku, by))
    if conflicts:
        device, sku, by = conflicts[0]
        more = f" (and {len(conflicts) - 1} more device(s))" if len(conflicts) > 1 else ""
        return Finding(
            id="devices.arch",
            status=Status.FAIL,
            expected=", ".join(sorted({f"{s.arch} ({s.name})" for _, s, _ in conflicts})),
            found=", ".join(archs),
            message=(
                f"the tool and the matrix disagree: device {device.index} reports {device.arch}, but its {by} names "
                f"the {sku.name}, which is {sku.arch}{more}; the architecture is unknown, so is whether "
                f"{runtime.name} runs on it"
            ),
            fix=(
                f"find which is wrong: the tool (a driver or tool from another install reporting for this device) or "
                f"the matrix's [skus.{sku.id}] entry (its arch, pci_device_ids, product_names)"
            ),
        )
    if missing:
        return Finding(
            id="devices.arch",
            status=Status.FAIL,
            expected=f"one of {', '.join(runtime.architectures)}",
            found=", ".join(archs),
            message=f"{runtime.name} has no code for {', '.join(missing)}",
            fix="use an environment whose runtime lists the architecture (accelenv which)",
        )
    if not archs:
        return Finding(
            id="devices.arch",
            status=Status.SKIP,
            expected=f"one of {', '.join(runtime.architectures)}",
            found="unknown",
            message="the architecture of the devices could not be determined",
        )
    return Finding(
        id="devices.arch",
        status=Status.PASS,
        expected=f"one of {', '.join(runtime.architectures)}",
        found=", ".join(archs),
        message=f"{runtime.name} supports {', '.join(archs)}",
    )


def visible_devices(family: Family, acc: Accelerator, report: HostReport) -> Iterator[Finding]:
    set_vars = {v: report.environment[v] for v in family.visible_devices_env if v in report.environment}
    if not set_vars:
        return
    problems, warnings = [], []
    uuids = {d.uuid for d in acc.devices if d.uuid}
    for var, value in set_vars.items():
        lowered = value.strip().lower()
        if lowered in ("all", "void", "none"):
            if lowered != "all":
                problems.append(f"{var}={value} hides every device")
            continue
        entries = _entries(value)
        if not entries:
            problems.append(f"{var} is set but empty: the process sees no device")
            continue
        if var not in INDEXED_VISIBLE_VARS:
            continue
        for entry in entries:
            if entry.lstrip("-").isdigit():
                if len(entry) > 7 or int(entry) < 0 or int(entry) >= len(acc.devices):  # 5000 digits: no int()
                    problems.append(f"{var} names device {entry}, but the host has {len(acc.devices)}")
            elif uuids and entry not in uuids and not entry.startswith("MIG-"):
                problems.append(f"{var} names {entry}, which is not a device of this host")
    indexed = {v: value for v, value in set_vars.items() if v in INDEXED_VISIBLE_VARS and value.lower() != "all"}
    if len(set(indexed.values())) > 1:
        warnings.append(" and ".join(f"{v}={val}" for v, val in indexed.items()) + " disagree")
    found = " ".join(f"{v}={val}" for v, val in set_vars.items())
    status = Status.FAIL if problems else Status.WARN if warnings else Status.PASS
    yield Finding(
        id="devices.visible",
        status=status,
        expected=f"{', '.join(family.visible_devices_env)} name existing devices, consistently",
        found=found,
        message="; ".join(problems + warnings) or "visible-device variables agree with the devices",
        fix="" if status is Status.PASS else f"unset or correct {', '.join(set_vars)}",
    )


def _entries(value: str) -> list[str]:
    out = []
    for raw in value.split(","):
        part = raw.strip()
        if bounds := re.fullmatch(r"(\d+)-(\d+)", part):
            low, high = bounds.groups()
            if len(low) > 6 or len(high) > 6:  # "0-99999999999": out of range, and not to be spelled out
                out += [low, high]
            else:
                out += [str(i) for i in range(int(low), min(int(high), int(low) + 4096) + 1)]
        elif part:
            out.append(part)
    return out
