"""`check(matrix, env, report)`: is this host the environment the matrix declares? Pure: it runs nothing.

The same function judges a live host, a replayed snapshot, a container, or each node of a cluster. Each check
returns a `Finding` with what was expected, what was found, and a fix. Rules come from the matrix (driver
floors, architectures, pins, visible-device variables); this module only compares.

Why one module of ~600 lines: the checks share their inputs (one environment, one host report) and helpers, and
run in one order that is the order of the verdict; a reader following one verdict line reads one file.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from accelenv.check.cdi import container_cdi
from accelenv.check.framework import framework_findings
from accelenv.check.tool_faults import tool_faults
from accelenv.check.verdict import Finding, Status
from accelenv.host.report import PASSTHROUGH_DRIVERS
from accelenv.matrix.driver_branches import below_floor
from accelenv.matrix.model import PLATFORM_MACHINES, LiteralVersion, canonical_name, release_line

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from accelenv.host.report import Accelerator, Device, HostReport, PciDevice
    from accelenv.matrix import Environment, Family, Matrix, Runtime, Sku

SHM_RECOMMENDED = 1 << 30  # 1 GiB: NCCL and DataLoader workers exhaust docker's 64 MiB default
LISTED = 4  # how many addresses a finding names before "and N more"
_NUMERIC = re.compile(r"\d+(?:\.\d+)*")
INDEXED_VISIBLE_VARS = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ROCR_VISIBLE_DEVICES",
        "HABANA_VISIBLE_DEVICES",
        "TPU_VISIBLE_CHIPS",
    }
)


def numeric_version(text: str | None) -> Version | None:
    """The leading dotted number of a tool's version string (`1.22.1-97ec1a4` -> 1.22.1), printed as written."""
    if not text:
        return None
    match = _NUMERIC.match(text.strip())
    if not match:
        return None
    try:
        return LiteralVersion(match.group(0))
    except InvalidVersion:
        return None


def check(matrix: Matrix, env: Environment, report: HostReport, *, host_only: bool = False) -> list[Finding]:
    """Every finding for `env` on the host `report` describes. `host_only` leaves out the Python checks (used to
    rank which environments a host could run)."""
    family = matrix.families[env.family]
    runtime = matrix.runtimes[env.runtime]
    accelerator = report.accelerator(env.family)
    findings = list(_unreadable(report))
    findings += [_python(env, report)] if not host_only else []
    if not family.pci_vendor_ids:
        findings.append(_cpu_arch(matrix, env, report))
    else:
        findings += list(_accelerator_checks(matrix, env, family, runtime=runtime, acc=accelerator, report=report))
        findings += list(tool_faults(family, accelerator, report))
        if accelerator is not None:  # the host's layers agree (check/consistency.py)
            from accelenv.check.consistency import consistency_findings

            findings += list(consistency_findings(matrix, accelerator))
        findings += container_cdi(family, report)
    findings += list(_topology(env, report))
    if not host_only:
        findings += list(_requirements(env, report))
        findings += framework_findings(matrix, env, report)
        findings += list(_limits(family, report, required_unlimited=env.requires.memlock_unlimited))
    return findings


def _judged(fid: str, ok: bool, *, expected: str, found: str, good: str, bad: str, fix: str) -> Finding:
    return Finding(
        id=fid,
        status=Status.PASS if ok else Status.FAIL,
        expected=expected,
        found=found,
        message=good if ok else bad,
        fix="" if ok else fix,
    )


def _topology(env: Environment, report: HostReport) -> Iterator[Finding]:
    """The environment's `requires`: NVLink, RDMA, InfiniBand, EFA, TPU slice shape, from what the host shows."""
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


def _unreadable(report: HostReport) -> Iterator[Finding]:
    """Files that exist but could not be read were facts the checks could not see: say so, rather than judge the
    host as if they were absent."""
    if not report.unreadable:
        return
    paths = list(report.unreadable)
    shown = ", ".join(f"{path} ({report.unreadable[path]})" for path in paths[:LISTED])
    more = f" and {len(paths) - LISTED} more" if len(paths) > LISTED else ""
    yield Finding(
        id="host.readable",
        status=Status.FAIL,
        expected="every host file accelenv reads is readable",
        found=f"{len(paths)} unreadable: {shown}{more}",
        message=f"{len(paths)} host file(s) exist but could not be read, so the checks that rest on them judged "
        "without them",
        fix="run accelenv as a user that can read them (or with the groups that own them); with --root, give a "
        "complete capture of regular files",
    )


# ---------------------------------------------------------------------------------------------------- python


def _python(env: Environment, report: HostReport) -> Finding:
    found = ".".join(report.python.version.split(".")[:2])
    if found == env.python:
        return Finding(
            id="python.version",
            status=Status.PASS,
            expected=env.python,
            found=report.python.version,
            message=f"Python {report.python.version}",
        )
    return Finding(
        id="python.version",
        status=Status.FAIL,
        expected=env.python,
        found=report.python.version,
        message=f"{env.id} is pinned for Python {env.python}, this is Python {report.python.version}",
        fix=f"run under Python {env.python}: with it installed (`uv python install {env.python}`), "
        f"`nox -s {env.id}` checks again from a virtualenv made with it",
    )


def _cpu_arch(matrix: Matrix, env: Environment, report: HostReport) -> Finding:
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


# ---------------------------------------------------------------------------------------------------- devices


def _accelerator_checks(
    matrix: Matrix,
    env: Environment,
    family: Family,
    *,
    runtime: Runtime,
    acc: Accelerator | None,
    report: HostReport,
) -> Iterator[Finding]:
    tool = family.host_tools[0] if family.host_tools else "the vendor tool"
    if acc is None or not acc.devices:
        seen = []
        if acc is not None:
            seen += [f"module {m}" for m in acc.modules] + list(acc.device_nodes) + list(acc.errors)
        yield Finding(
            id="hardware.present",
            status=Status.FAIL,
            expected=f"{family.name} devices ({len(env.skus)} SKUs: see accelenv show {env.id})",
            found="; ".join(seen) or "none: no PCI function of vendor " + ", ".join(family.pci_vendor_ids),
            message=f"no {family.name} device found on this host",
            fix=f"run on a host with {family.name} devices, or pick another environment (accelenv which)",
        )
        return
    yield Finding(
        id="hardware.present",
        status=Status.PASS,
        expected=f"{family.name} devices",
        found=f"{len(acc.devices)} device(s) via {acc.source}",
        message=f"{len(acc.devices)} {family.name} device(s)",
    )
    yield from _driver_module(family, acc)
    if acc.errors:
        yield Finding(
            id="tools",
            status=Status.FAIL,
            expected=f"{', '.join(family.host_tools)} answer",
            found="; ".join(acc.errors),
            message=f"{len(acc.errors)} problem(s) running or reading the vendor tools",
            fix=f"make sure {tool} works on this host (run it by hand), then check again",
        )
    yield from _device_count(family, acc, report)
    yield from _skus(matrix, env, acc)
    yield _architectures(matrix, runtime, acc)
    yield from _driver_version(matrix, family, runtime, acc, report)
    yield from _driver_sources(family, acc)
    yield from _runtime_version(family, runtime, acc)
    yield from _visible_devices(family, acc, report)


def _driver_module(family: Family, acc: Accelerator) -> Iterator[Finding]:
    if not family.kernel_modules:
        return
    if acc.shadowed_by:
        yield Finding(
            id="driver.module",
            status=Status.FAIL,
            expected=f"devices bound to {', '.join(family.kernel_modules)}",
            found=f"bound to {acc.shadowed_by}",
            message=f"the {acc.shadowed_by} driver holds the {family.name} devices",
            fix=f"blacklist {acc.shadowed_by} and load {family.kernel_modules[0]} (then reboot)",
        )
        return
    loaded = [m for m in family.kernel_modules if m in acc.modules]
    if loaded:
        versions = ", ".join(f"{m} {acc.modules[m] or '(no version)'}" for m in loaded)
        yield Finding(
            id="driver.module",
            status=Status.PASS,
            expected=f"{family.kernel_modules[0]} loaded",
            found=versions,
            message=f"kernel module {versions}",
        )
    elif acc.driver_version:
        yield Finding(
            id="driver.module",
            status=Status.PASS,
            expected=f"{family.kernel_modules[0]} loaded",
            found=f"driver {acc.driver_version} reported by {acc.source}",
            message="driver answers (its module is not visible here, as in most containers)",
        )
    else:
        yield Finding(
            id="driver.module",
            status=Status.FAIL,
            expected=f"{family.kernel_modules[0]} loaded",
            found="not loaded",
            message=f"devices are present but the {family.kernel_modules[0]} driver is not loaded",
            fix=f"install and load the {family.kernel_modules[0]} driver",
        )


def _named(addresses: list[str]) -> str:
    shown = ", ".join(addresses[:LISTED])
    return shown + (f" and {len(addresses) - LISTED} more" if len(addresses) > LISTED else "")


def _slot(address: str) -> str:
    """`0000:17:00.0` -> `0000:17:00`: the device whose functions (or a tool's partitions of it) share a slot."""
    return address.rpartition(".")[0]


def _device_count(family: Family, acc: Accelerator, report: HostReport) -> Iterator[Finding]:
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


def _skus(matrix: Matrix, env: Environment, acc: Accelerator) -> Iterator[Finding]:
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


def _architectures(matrix: Matrix, runtime: Runtime, acc: Accelerator) -> Finding:
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


# ---------------------------------------------------------------------------------------------------- driver


def _driver_sources(family: Family, acc: Accelerator) -> Iterator[Finding]:
    """One fact read from several places (the tool's version output, its device query, the loaded kernel module)
    must read the same everywhere; if not, no verdict on it can be trusted."""
    said = dict(sorted(acc.sources.get("driver_version", {}).items()))
    if len(said) < 2:
        return
    by_value: dict[object, tuple[str, list[str]]] = {}  # the version (as a number) -> (as written, sources)
    for where, value in said.items():
        by_value.setdefault(numeric_version(value) or value, (value, []))[1].append(where)
    found = "; ".join(f"{where}: {value}" for where, value in said.items())
    module = family.kernel_modules[0] if family.kernel_modules else "the driver"
    tool = family.host_tools[0] if family.host_tools else "tool"
    if len(by_value) == 1:
        value = next(iter(said.values()))
        yield Finding(
            id="driver.sources",
            status=Status.PASS,
            expected="one driver version from every source",
            found=found,
            message=f"{len(said)} sources agree on driver {value}",
        )
        return
    yield Finding(
        id="driver.sources",
        status=Status.FAIL,
        expected="one driver version from every source",
        found=found,
        message="the driver version is "
        + ", ".join(f"{value} by {' and '.join(where)}" for value, where in by_value.values())
        + ": the sources disagree, so the driver checks judge a version that may not be the one running",
        fix=(
            f"a driver upgraded without a reboot leaves the old kernel module loaded (reboot, or reload {module}); "
            f"a tool from another install on PATH reports its own version (use the driver's own {tool})"
        ),
    )


def _driver_version(
    matrix: Matrix, family: Family, runtime: Runtime, acc: Accelerator, report: HostReport
) -> Iterator[Finding]:
    rule = runtime.driver
    floors = [(matrix.skus[d.sku], matrix.skus[d.sku].driver_min) for d in acc.devices if d.sku]
    sku_floors = {sku.id: (sku, floor) for sku, floor in floors if floor is not None}
    if not (rule.min or rule.compat_min or rule.max or rule.accepted or rule.releases or sku_floors):
        return
    expected = _describe_rule(matrix, runtime, sku_floors)
    found = numeric_version(acc.driver_version)
    if found is None:
        module = family.kernel_modules[0] if family.kernel_modules else None
        in_tree = acc.extra.get("driver_kernel") or (
            report.os.kernel if module and module in acc.modules and acc.modules[module] is None else None
        )
        if acc.driver_version is None and module and in_tree:
            yield Finding(
                id="driver.version",
                status=Status.FAIL,
                expected=expected,
                found=f"the kernel's in-tree {module} (kernel {in_tree})",
                message=(
                    f"the {module} driver is the one built into kernel {in_tree}: it has no driver release of its "
                    f"own, so nothing says {runtime.name} supports it"
                ),
                fix=f"install the vendor's packaged {module} driver of a release documented for {runtime.name}",
            )
            return
        yield Finding(
            id="driver.version",
            status=Status.FAIL,
            expected=expected,
            found=acc.driver_version or "unknown",
            message=f"the {family.name} driver version could not be read",
            fix=f"check that {', '.join(family.host_tools) or 'the vendor tool'} runs and reports the driver",
        )
        return
    fail, warn = [], []
    if rule.max is not None and found >= rule.max:
        fail.append(f"driver {found} is at or above {rule.max}, which {runtime.name} does not support")
    if rule.min is not None and found < rule.min:
        if rule.compat_min is not None and found >= rule.compat_min and family.runtime_kind == "cuda":
            warn.append(
                f"driver {found} is below {rule.min}: {runtime.name} runs only through minor-version compatibility "
                "(no JIT of newer PTX, no APIs newer than the driver)"
            )
        elif rule.compat_min is not None and found >= rule.compat_min:
            warn.append(
                f"driver {found} is below {rule.min}, the one {runtime.name} ships with: it is expected to work, "
                "with reduced support (see the fix)"
            )
        else:
            floor = rule.compat_min or rule.min
            fail.append(f"driver {found} is below {floor}, the oldest that {runtime.name} runs on")
    for sku, _floor in sku_floors.values():
        if (reason := below_floor(sku, found)) is not None:  # floors by driver branch (driver_branches.py)
            fail.append(reason)
    if family.newer_drivers == "may-need-newer-runtime" and rule.min is not None and _newer_line(found, rule.min):
        warn.append(
            f"driver {found} is a newer release than {rule.min}, the one {runtime.name} ships: {family.name} "
            "drivers can require a newer runtime, so this pairing is not known to work"
        )
    if rule.accepted and not any(_has_prefix(acc.driver_version or "", p) for p in rule.accepted):
        warn.append(f"driver {acc.driver_version} is not one known to work with {runtime.name}")
    documented = sorted(
        (matrix.drivers[r] for r in rule.releases if r in matrix.drivers), key=lambda r: LiteralVersion(r.reports)
    )
    reported = acc.driver_version or str(found)
    release = matrix.driver_release(family.id, reported)
    named = f"driver {reported}" + (f" ({release.release})" if release else "")
    oldest_release = documented[0] if documented else None
    if documented and not any(r.matches(reported) for r in documented):
        span = f"{documented[0].release} to {documented[-1].release}" if len(documented) > 1 else documented[0].release
        if oldest_release is not None and found < LiteralVersion(oldest_release.reports):
            fail.append(
                f"{named} is older than every driver documented for {runtime.name} ({span}; the oldest reports "
                f"{oldest_release.reported_as})"
            )
        else:
            warn.append(f"{named} is not among the drivers documented for {runtime.name} ({span})")
    status = Status.FAIL if fail else Status.WARN if warn else Status.PASS
    needed = max([v for v in (rule.min, *(f for _, f in sku_floors.values())) if v is not None], default=None)
    if fail and oldest_release is not None and (needed is None or LiteralVersion(oldest_release.reports) > needed):
        fix = f"install {oldest_release.release} or newer, or use an older runtime's environment"
    elif fail:
        fix = f"install driver {needed} or newer, or use an older runtime's environment" if needed else ""
    else:
        fix = rule.notes if warn else ""
    yield Finding(
        id="driver.version",
        status=status,
        expected=expected,
        found=acc.driver_version or str(found),
        message="; ".join(fail + warn) or f"{named} satisfies {runtime.name}",
        fix=fix,
    )


def _newer_line(found: Version, shipped: Version) -> bool:
    """A driver of a later release line (major.minor) than the one a runtime ships: 2.31.7 against 2.29.0."""
    return found.release[:2] > shipped.release[:2]


def _has_prefix(version: str, prefix: str) -> bool:
    return version == prefix or version.startswith(prefix + ".") or version.startswith(prefix + "-")


def _describe_rule(matrix: Matrix, runtime: Runtime, sku_floors: Mapping[str, tuple[Sku, Version]]) -> str:
    rule = runtime.driver
    parts = []
    documented = [matrix.drivers[r] for r in rule.releases if r in matrix.drivers]
    if documented:
        parts.append("documented: " + ", ".join(f"{r.release} ({r.reported_as})" for r in documented))
    if rule.min:
        parts.append(f">= {rule.min}")
    if rule.compat_min:
        parts.append(f"(>= {rule.compat_min} in compatibility mode)")
    if rule.max:
        parts.append(f"< {rule.max}")
    if rule.accepted:
        parts.append(f"known good: {', '.join(rule.accepted)}")
    parts += [f"{sku} >= {floor}" for sku, (_, floor) in sorted(sku_floors.items())]
    return " ".join(parts)


def _runtime_version(family: Family, runtime: Runtime, acc: Accelerator) -> Iterator[Finding]:
    """For CUDA: the driver's own CUDA version must cover the runtime's. Elsewhere the host's runtime release
    (ROCm install, Gaudi software) should be the runtime's release line."""
    if runtime.version is None or acc.runtime_version is None:
        return
    found = numeric_version(acc.runtime_version)
    if found is None:
        return
    wanted = Version(f"{runtime.version.major}.{runtime.version.minor}")
    have = Version(f"{found.major}.{found.minor}")
    if family.runtime_kind == "cuda":
        if have >= wanted:
            status, message = Status.PASS, f"driver supports CUDA {acc.runtime_version}"
        elif have.major == wanted.major and runtime.driver.compat_min is not None:
            status = Status.WARN
            message = (
                f"the driver supports CUDA {acc.runtime_version}, older than {wanted}: minor-version compatibility only"
            )
        else:
            status, message = (
                Status.FAIL,
                f"the driver supports CUDA {acc.runtime_version}; {runtime.name} needs {wanted}",
            )
        yield Finding(
            id="driver.cuda",
            status=status,
            expected=f">= {wanted}",
            found=acc.runtime_version,
            message=message,
            fix="" if status is Status.PASS else f"install a driver that supports CUDA {wanted} or newer",
        )
        return
    line = release_line(runtime.version)  # ROCm 7.14, Gaudi 1.24, libtpu 0.0.50: what a release line is
    same = release_line(found)[: len(line)] == line
    shown = ".".join(map(str, line))
    yield Finding(
        id="runtime.version",
        status=Status.PASS if same else Status.WARN,
        expected=f"{shown}.x",
        found=acc.runtime_version,
        message=f"host {runtime.name.split()[0]} {acc.runtime_version}"
        + ("" if same else f" differs from the environment's {runtime.version}"),
        fix="" if same else f"install the {shown} release on the host, or use the environment that matches it",
    )


# ---------------------------------------------------------------------------------------------------- visible


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


def _visible_devices(family: Family, acc: Accelerator, report: HostReport) -> Iterator[Finding]:
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


# ---------------------------------------------------------------------------------------------------- python pins


def _requirements(env: Environment, report: HostReport) -> Iterator[Finding]:
    installed = report.python.distributions
    for written, pin in env.requirements.pins:
        name = canonical_name(written)
        versions = installed.get(name, [])
        fid = f"requirements.{name}"
        if not versions:
            yield Finding(
                id=fid,
                status=Status.FAIL,
                expected=pin,
                found="not installed",
                message=f"{written} is not installed",
                fix=f"install the environment's lock into this Python: pip install --require-hashes -r "
                f"envs/{env.id}/requirements.lock (`nox -s {env.id}` does so in a virtualenv of its own)",
            )
        elif len(versions) > 1:
            yield Finding(
                id=fid,
                status=Status.FAIL,
                expected=pin,
                found=", ".join(versions),
                message=f"{written} is installed {len(versions)} times; which one imports is an accident",
                fix=f"recreate the environment (pip uninstall {written} until none is left, then reinstall)",
            )
        elif _same_version(versions[0], pin):
            yield Finding(id=fid, status=Status.PASS, expected=pin, found=versions[0], message=f"{written} {pin}")
        else:
            label_note = ""
            if versions[0].partition("+")[0] == pin.partition("+")[0]:
                label_note = f": a +{versions[0].partition('+')[2] or '(none)'} build, not +{pin.partition('+')[2]}"
            yield Finding(
                id=fid,
                status=Status.FAIL,
                expected=pin,
                found=versions[0],
                message=f"{written} {versions[0]} is installed, {env.id} pins {pin}{label_note}",
                fix=f"install the environment's lock into this Python: pip install --require-hashes -r "
                f"envs/{env.id}/requirements.lock (a plain pip install may pull another build)",
            )


def _same_version(installed: str, pin: str) -> bool:
    """Exact equality, local label included: `==2.8.0` would accept 2.8.0+cpu, this does not."""
    try:
        return Version(installed) == Version(pin) and Version(installed).local == Version(pin).local
    except InvalidVersion:
        return installed == pin


# ---------------------------------------------------------------------------------------------------- limits


def _limits(family: Family, report: HostReport, *, required_unlimited: bool = False) -> Iterator[Finding]:
    shm = report.limits.shm_bytes
    if shm is not None:
        ok = shm >= SHM_RECOMMENDED
        yield Finding(
            id="limits.shm",
            status=Status.PASS if ok else Status.WARN,
            expected=">= 1 GiB",
            found=f"{shm / 2**20:.0f} MiB",
            message="/dev/shm is large enough" if ok else "/dev/shm is small: NCCL and DataLoader workers run out",
            fix="" if ok else "give containers --shm-size=16g (or --ipc=host)",
        )
    if not family.pci_vendor_ids:
        return
    memlock = report.limits
    if memlock.memlock_unlimited:
        yield Finding(id="limits.memlock", status=Status.PASS, expected="unlimited", found="unlimited", message="")
    elif memlock.memlock_bytes is not None:
        yield Finding(
            id="limits.memlock",
            status=Status.FAIL if required_unlimited else Status.WARN,
            expected="unlimited",
            found=f"{memlock.memlock_bytes // 1024} KiB",
            message="locked memory is limited: RDMA (GPUDirect, EFA) registrations fail",
            fix="ulimit -l unlimited, or docker run --ulimit memlock=-1",
        )
