"""`npu-smi info`: Huawei's table of NPUs, read into accelenv's facts (pure), and the probe that runs it.

The table (as captured from npu-smi 23.0 and 24.1, see tests/data/SOURCES.md) has a title line with the driver's
version (`| npu-smi 23.0.7   Version: 23.0.7 |`), then two lines per NPU: `| <npu> <name> | <health> | power
temp hugepages |` and `| <chip> [<device>] | <bus id> | aicore  used / total memory  [used / total HBM] |`, then
a process table, which is not read. A device's index is its NPU id; where an NPU has several chips (each its own
pair of rows, the NPU id repeated), the devices are numbered in the table's order, NPU and chip kept in `extra`.
Memory is the HBM total where the row has one (training parts), else the memory total (inference parts).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelenv.host.facts import DeviceFacts, ParseError
from accelenv.host.probes import ToolView, output, parsed, tool_errors
from accelenv.records import replace

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.probes import ProbeContext
    from accelenv.host.run import ToolResult

FAMILY = "ascend"
_TITLE = re.compile(r"\A\|\s*npu-smi\s+(\S+)\s+Version:\s*(\S+)\s*\|\Z")
_FIRST = re.compile(r"\A\|\s*(\d{1,4})\s+([A-Za-z0-9_.-]{1,32})\s*\|\s*([A-Za-z]{1,16})\s*\|.*\|\Z")
_SECOND = re.compile(
    r"\A\|\s*(\d{1,4})(?:\s+(\d{1,4}))?\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*\|(.*)\|\Z"
)
_USAGE = re.compile(r"(\d{1,9})\s*/\s*(\d{1,9})")
_ARCH = re.compile(r"\A910B[1-4]\Z", re.IGNORECASE)  # the second-generation 910 parts (SoC family ascend910b)


def parse_npu_smi_info(text: str) -> tuple[str | None, tuple[DeviceFacts, ...]]:
    """(driver version, devices) from `npu-smi info`. Raises ParseError when the text is not that table."""
    lines = [line.strip() for line in text.splitlines()]
    version = next((m.group(2) for line in lines if (m := _TITLE.match(line))), None)
    devices: list[DeviceFacts] = []
    pending: tuple[int, str, str] | None = None
    for line in lines:
        if "Process id" in line or "Process name" in line:
            break  # the process table: nothing of the devices' own
        if (first := _FIRST.match(line)) is not None and not line.startswith("| NPU"):
            pending = (int(first.group(1)), first.group(2), first.group(3))
            continue
        second = _SECOND.match(line)
        if second is None or pending is None:
            continue
        index, name, health = pending
        pending = None
        usage = _USAGE.findall(second.group(4))
        totals = [int(total) for _, total in usage]
        memory = totals[1] if len(totals) >= 2 and totals[1] > 0 else (totals[0] if totals and totals[0] > 0 else None)
        devices.append(
            DeviceFacts(
                index=index,
                name=name,
                arch="ascend910b" if _ARCH.match(name) else None,
                memory_mib=memory,
                pci_bus_id=second.group(3).lower(),
                extra={"health": health, "npu": str(index), "chip": second.group(1)},
            )
        )
    if version is None and not devices:
        raise ParseError("npu-smi info: expected its table (a `npu-smi X Version: X` title, NPU rows); found neither")
    if len({d.index for d in devices}) < len(devices):  # NPUs of several chips (Atlas A3): one device per chip
        devices = [replace(d, index=position) for position, d in enumerate(devices)]
    return version, tuple(devices)


class NpuSmiProbe:
    """npu-smi info: the driver version and every NPU (name, HBM, bus id, health)."""

    family = FAMILY

    def commands(self) -> dict[str, list[str]]:
        return {"npu-smi-info": ["npu-smi", "info"]}

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        errors = tool_errors(results)
        version, devices = parsed(output(results.get("npu-smi-info")), parse_npu_smi_info, errors) or (None, ())
        unhealthy = [f"NPU {d.index} ({d.name}) reports health {d.extra['health']}" for d in devices]
        errors += [u for u, d in zip(unhealthy, devices, strict=True) if d.extra.get("health") != "OK"]
        return ToolView(
            driver_version=version,
            devices=devices,
            source="npu-smi" if devices else None,
            errors=tuple(errors),
        )
