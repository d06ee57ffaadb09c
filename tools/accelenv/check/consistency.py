"""Whether the host's layers agree: a vendor tool that lists what sysfs does not have is lying (or broken).

Each check compares what the vendor tool reports with the hardware layer (sysfs PCI functions) or with the
matrix's facts, and yields a failing finding only when they disagree; with nothing to compare (no PCI bus
readable, a tool that gives no bus id) there is no finding, since nothing was judged:
- a device the tool lists at a PCI address with no PCI function behind it, while the bus is readable;
- the tool's PCI device id differing from the one sysfs holds at that address (a B200 the tool calls an H100);
- two devices with one UUID;
- a device reporting far less memory than its SKU declares (an 80 GB part reporting 1 GiB).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from accelenv.check.verdict import Finding, Status

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.host.report import Accelerator
    from accelenv.matrix import Matrix

MEMORY_SHARE = 0.85  # a device reports a little less than its SKU's nominal memory (reserved, ECC); not less than this
_ADDRESS = re.compile(r"\A(?:[0-9a-fA-F]{4,8}:)?([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\Z")


def consistency_findings(matrix: Matrix, acc: Accelerator) -> Iterator[Finding]:
    """Failing findings for every disagreement between the tool's devices, sysfs and the matrix."""
    if acc.source == "pci":
        return  # the devices are the PCI functions: nothing to compare
    sysfs = {_bus(p.address): p for p in acc.pci_devices}
    for device in acc.devices:
        bus = _bus(device.pci_bus_id) if device.pci_bus_id else None
        if bus is None or not sysfs:
            continue
        function = sysfs.get(bus)
        if function is None:
            yield _fail(
                "accelerator.consistency.pci",
                expected=f"a PCI function at {device.pci_bus_id}",
                found=f"none (sysfs lists {', '.join(sorted(p.address for p in acc.pci_devices))})",
                message=f"{acc.source} lists device {device.index} at {device.pci_bus_id}, where sysfs has no "
                "PCI function",
            )
            continue
        tool_id = _device_id(device.pci_device_id)
        if tool_id is not None and tool_id != function.device_id.lower():
            yield _fail(
                "accelerator.consistency.pci-id",
                expected=f"PCI device id {function.device_id} (sysfs, {function.address})",
                found=f"{device.pci_device_id} ({acc.source})",
                message=f"{acc.source} reports device {device.index} as PCI device {tool_id}; sysfs holds "
                f"{function.device_id} at {function.address}",
            )
    uuids = Counter(d.uuid for d in acc.devices if d.uuid)
    for uuid, times in sorted(uuids.items()):
        if times > 1:
            yield _fail(
                "accelerator.consistency.uuid",
                expected="one device per UUID",
                found=f"{times} devices with UUID {uuid}",
                message=f"{acc.source} reports {times} devices with the same UUID {uuid}",
            )
    for device in acc.devices:
        sku = matrix.skus.get(device.sku) if device.sku else None
        if (
            sku
            and sku.memory_mib
            and device.memory_mib is not None
            and device.memory_mib < sku.memory_mib * MEMORY_SHARE
        ):
            yield _fail(
                "accelerator.consistency.memory",
                expected=f"about {sku.memory_mib} MiB ({sku.id})",
                found=f"{device.memory_mib} MiB",
                message=f"device {device.index} reports {device.memory_mib} MiB; a {sku.name} has {sku.memory_mib} MiB",
            )


def _bus(address: str) -> str | None:
    match = _ADDRESS.match(address.strip())
    return match[1].lower() if match else None


def _device_id(text: str | None) -> str | None:
    """`0x233010DE` (nvidia-smi: device and vendor) or `0x2330` as `0x2330`; None when it is neither."""
    if not text:
        return None
    digits = text.lower().removeprefix("0x")
    if re.fullmatch(r"[0-9a-f]{8}", digits):
        return "0x" + digits[:4]
    if re.fullmatch(r"[0-9a-f]{4}", digits):
        return "0x" + digits
    return None


def _fail(fid: str, *, expected: str, found: str, message: str) -> Finding:
    return Finding(
        id=fid,
        status=Status.FAIL,
        expected=expected,
        found=found,
        message=message,
        fix="the vendor tool and the hardware disagree: reset the device or reinstall the driver, and check again",
    )
