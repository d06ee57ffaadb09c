"""Findings about the vendor tools: that they failed (`tools`), and why, where the cause has a known fix of its
own.

"Driver/library version mismatch" is NVML's word for a host whose user-space driver (libnvidia-ml, nvidia-smi) was
upgraded while the old kernel module stayed loaded: nothing that uses the GPU works until the two match again, and
the fix is not "make nvidia-smi work" but a reboot, or unloading and reloading the driver's modules. The failing
tool's cause line is in the accelerator's errors (the tool runner keeps the first meaningful line) and in the raw
output a snapshot keeps; both are looked at, so a snapshot taken before the cause line was kept is judged the same.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import TYPE_CHECKING

from accelenv.check.verdict import Finding, Status

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.host.report import Accelerator, HostReport
    from accelenv.matrix import Family

_MISMATCH = re.compile(r"(?:[A-Za-z ]{0,40}NVML: )?Driver/library version mismatch", re.IGNORECASE)
_LIBRARY_VERSION = re.compile(r"NVML library version:\s*([0-9][0-9.]{0,30})", re.IGNORECASE)
# NVIDIA's modules, in the order they unload (each one holds the next); nvidia_peermem, where loaded, goes first
NVIDIA_MODULES = ("nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia")


def tool_errors(family: Family, acc: Accelerator) -> Iterator[Finding]:
    """A `tools` finding when running or reading the family's vendor tools went wrong (the devices then come from
    what else the host shows, and the checks that rest on the tools judge without them)."""
    if not acc.errors:
        return
    tool = family.host_tools[0] if family.host_tools else "the vendor tool"
    yield Finding(
        id="tools",
        status=Status.FAIL,
        expected=f"{', '.join(family.host_tools)} answer",
        found="; ".join(acc.errors),
        message=f"{len(acc.errors)} problem(s) running or reading the vendor tools",
        fix=f"make sure {tool} works on this host (run it by hand), then check again",
    )


def tool_faults(family: Family, acc: Accelerator | None, report: HostReport) -> Iterator[Finding]:
    """A `driver.library-mismatch` finding when a tool of `family` said its library and the loaded driver differ."""
    if acc is None:
        return
    texts = list(acc.errors)
    tools = set(family.host_tools)
    for result in report.raw.values():
        if result.argv and PurePath(result.argv[0]).name in tools and not result.ok:
            texts += [result.stdout[:4096], result.stderr[:4096]]
    cause = next((m.group(0).strip() for text in texts if (m := _MISMATCH.search(text)) is not None), None)
    if cause is None:
        return
    library = next((m.group(1) for text in texts if (m := _LIBRARY_VERSION.search(text)) is not None), None)
    module = family.kernel_modules[0] if family.kernel_modules else None
    loaded = acc.modules.get(module) if module else None
    found = cause
    if library or loaded:
        said = [f"library {library}" if library else "", f"loaded kernel module {module} {loaded}" if loaded else ""]
        found += " (" + ", ".join(part for part in said if part) + ")"
    if family.id == "nvidia":
        reload = f"sudo modprobe -r {' '.join(NVIDIA_MODULES)} && sudo modprobe nvidia"
    else:
        reload = f"sudo modprobe -r {module} && sudo modprobe {module}" if module else "reload the driver"
    yield Finding(
        id="driver.library-mismatch",
        status=Status.FAIL,
        expected="the driver's user-space library and the loaded kernel module from one driver release",
        found=found,
        message=(
            f"{family.name}'s user-space driver library and the loaded kernel module are from different driver "
            "releases: no program can use the devices until they match"
        ),
        fix=(
            "a driver upgrade without a reboot leaves the old kernel module loaded: reboot, or stop every process "
            f"using the devices and reload the driver's modules ({reload})"
        ),
    )
