"""Pure parsers for AWS Neuron output: `neuron-ls --json-output` (`-j`) and `/sys/module/neuron/version`.

neuron-ls names no product and no NeuronCore version, so devices carry neither name nor arch: the PCI device id
(from sysfs) or the instance type identifies the SKU. Plain `neuron-ls` prints the instance type on its first lines
(`instance-type: trn2n.48xlarge`); a newer `neuron-ls -j` puts it inside each device entry (`"instance_type":
"trn2.3xlarge"`); wherever it is, the instance family names the Neuron device every instance of it has. The
driver version is the `neuron` kernel module's, which is the aws-neuronx-dkms package version (2.26.5.0);
neuron-ls's "RUNTIME VERSION" is a process's runtime, not a host fact.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from accelenv.host.facts import DeviceFacts, ParseError
from accelenv.host.probes import STATED_SKU, ProbeContext, ToolView, first_installed, output, parsed, tool_errors
from accelenv.host.probes._text import bdf as _bdf
from accelenv.host.probes._text import describe as _describe
from accelenv.host.probes._text import excerpt as _excerpt
from accelenv.host.probes._text import load_json as _load_json
from accelenv.records import replace

if TYPE_CHECKING:
    from accelenv.host.run import ToolResult

FAMILY = "neuron"
_MODULE_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)+(?:[-+~][0-9A-Za-z.+~-]*)?")
_MAX_MEMORY_BYTES = 2**60
_INSTANCE_TYPE = r"[a-z0-9-]{1,32}\.[a-z0-9-]{1,32}"
_INSTANCE_TYPE_LINE = re.compile(rf"\s*instance-type:\s*({_INSTANCE_TYPE})\s*", re.IGNORECASE)
_INSTANCE_TYPE_VALUE = re.compile(rf"\s*({_INSTANCE_TYPE})\s*", re.IGNORECASE)
# EC2 instance family -> the matrix SKU of its Neuron devices (AWS's Inf1, Inf2, Trn1/Trn1n and Trn2 instance pages;
# the instance types are the ones neuron-ls prints in the captures: inf1.6xlarge, inf2.xlarge, trn1.32xlarge,
# trn2n.48xlarge). Families not listed are not guessed.
SKU_BY_INSTANCE_FAMILY: dict[str, str] = {
    "inf1": "inf1",
    "inf2": "inf2",
    "trn1": "trn1",
    "trn1n": "trn1",
    "trn2": "trn2",
    "trn2n": "trn2",
}


def parse_instance_type(text: str) -> str | None:
    """The `instance-type: trn2.48xlarge` line neuron-ls prints before its table (or its JSON), lower-cased; None
    when there is none."""
    for line in text.splitlines()[:20]:
        match = _INSTANCE_TYPE_LINE.fullmatch(line)
        if match is not None:
            return match.group(1).lower()
    return None


def sku_for_instance_type(instance_type: str | None) -> str | None:
    """`trn2n.48xlarge` -> `trn2`: the SKU every instance of that family has; None for a family not listed."""
    if instance_type is None:
        return None
    return SKU_BY_INSTANCE_FAMILY.get(instance_type.partition(".")[0])


def parse_neuron_ls_json(text: str, notes: list[str] | None = None) -> tuple[DeviceFacts, ...]:
    """Neuron devices from `neuron-ls --json-output`: a top-level list, one object per device.

    `extra` keeps what a check may need and DeviceFacts has no field for: `nc_count` (NeuronCores as neuron-ls
    counts them), `logical_neuroncore_config` (trn2 and newer), `numa_node`, `neuroncore_ids`, `connected_to` and
    `instance_type` (newer neuron-ls writes it into each entry).

    With `notes` None the first unreadable value raises ParseError; with a list an unreadable value costs that fact
    only (left out, the reason noted), and an entry that is not an object or has no device number costs that entry.
    """
    what = "neuron-ls --json-output"
    data = _load_json(text, what)
    if not isinstance(data, list):
        raise ParseError(f"{what}: expected a list of Neuron device objects, found {_describe(data)}")
    devices = []
    for position, entry in enumerate(data):
        try:
            if not isinstance(entry, Mapping):
                raise ParseError(f"{what}: expected an object for device entry {position}, found {_describe(entry)}")
            devices.append(_device(entry, f"{what}: device entry {position}", position, notes))
        except ParseError as error:
            if notes is None:
                raise
            notes.append(f"{error}; that device is left out")
    return tuple(devices)


def _device(entry: Mapping[str, object], where: str, position: int, notes: list[str] | None) -> DeviceFacts:
    def whole(key: str) -> int | None:
        try:
            return _whole(entry.get(key), f"{where}: '{key}'")
        except ParseError as error:
            if notes is None:
                raise
            notes.append(f"{error}; left unknown")
            return None

    def whole_list(key: str) -> list[int] | None:
        try:
            return _whole_list(entry.get(key), f"{where}: '{key}'")
        except ParseError as error:
            if notes is None:
                raise
            notes.append(f"{error}; left unknown")
            return None

    if "neuron_device" not in entry:
        keys = ", ".join(sorted(str(k) for k in entry)[:5]) or "none"
        raise ParseError(f"{where}: expected a 'neuron_device' number, found the keys: {keys}")
    try:
        index = _whole(entry["neuron_device"], f"{where}: 'neuron_device'")
        if index is None:
            raise ParseError(f"{where}: 'neuron_device': expected a whole number, found null")
    except ParseError as error:
        if notes is None:
            raise
        notes.append(f"{error}; the entry's position is its index")
        index = position
    extra: dict[str, str] = {}
    for key in ("nc_count", "logical_neuroncore_config"):
        number = whole(key)
        if number is not None:
            extra[key] = str(number)
    numa_node = entry.get("numa_node")
    if isinstance(numa_node, str | int) and not isinstance(numa_node, bool) and str(numa_node).strip():
        extra["numa_node"] = str(numa_node).strip()
    for key in ("neuroncore_ids", "connected_to"):
        numbers = whole_list(key)
        if numbers is not None:
            extra[key] = ",".join(str(n) for n in numbers)
    memory_bytes = whole("memory_size")
    if memory_bytes is not None and memory_bytes > _MAX_MEMORY_BYTES:
        if notes is None:
            raise ParseError(f"{where}: expected 'memory_size' in bytes, found {memory_bytes}")
        notes.append(f"{where}: expected 'memory_size' in bytes, found {memory_bytes}; left unknown")
        memory_bytes = None
    instance_type = entry.get("instance_type")
    if isinstance(instance_type, str) and (match := _INSTANCE_TYPE_VALUE.fullmatch(instance_type)) is not None:
        extra["instance_type"] = match.group(1).lower()
    elif instance_type is not None:
        if notes is None:
            raise ParseError(
                f"{where}: 'instance_type': expected an EC2 instance type, found {_describe(instance_type)}"
            )
        notes.append(
            f"{where}: 'instance_type': expected an EC2 instance type, found {_describe(instance_type)}; left unknown"
        )
    bdf = entry.get("bdf")
    return DeviceFacts(
        index=index,
        memory_mib=None if memory_bytes is None else memory_bytes // 2**20,
        pci_bus_id=_bdf(bdf) if isinstance(bdf, str) else None,
        extra=extra,
    )


def parse_module_version(text: str) -> str:
    """The Neuron driver version from `/sys/module/neuron/version` (`2.26.5.0`)."""
    value = text.strip()
    if _MODULE_VERSION.fullmatch(value) is None:
        raise ParseError(f"/sys/module/neuron/version: expected a version such as '2.26.5.0', found {_excerpt(text)}")
    return value


def _stated(device: DeviceFacts, host_instance_type: str | None) -> DeviceFacts:
    """The device with the SKU its instance type states (its own entry's, else the host's); unchanged when the
    instance family is not listed."""
    stated = sku_for_instance_type(device.extra.get("instance_type") or host_instance_type)
    if stated is None:
        return device
    return replace(device, extra={**device.extra, STATED_SKU: stated})


# ---- helpers ---------------------------------------------------------------------------------------------------


def _whole(value: object, where: str) -> int | None:
    """A non-negative whole number, None when absent or null."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ParseError(f"{where}: expected a whole number, found {_describe(value)}")


def _whole_list(value: object, where: str) -> list[int] | None:
    """A list of whole numbers; None when absent or null (`connected_to` is null on a lone device)."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise ParseError(f"{where}: expected a list of numbers or null, found {_describe(value)}")
    numbers = []
    for item in value:
        number = _whole(item, where)
        if number is not None:
            numbers.append(number)
    return numbers


# ---- the probe ---------------------------------------------------------------------------------------------------


class NeuronProbe:
    """neuron-ls for devices; the driver is the `neuron` kernel module (aws-neuronx-dkms) version."""

    family = FAMILY

    def commands(self) -> dict[str, list[str]]:
        # plain neuron-ls for the instance type it prints first (an older JSON output does not say it)
        return {"neuron-ls": ["neuron-ls", "--json-output"], "neuron-ls-table": ["neuron-ls"]}

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        errors = tool_errors({k: v for k, v in results.items() if k != "neuron-ls-table"})
        text = output(results.get("neuron-ls"))
        devices = parsed(text, lambda found: parse_neuron_ls_json(found, errors), errors) or ()
        table = output(results.get("neuron-ls-table"))
        instance_type = (
            (parse_instance_type(text) if text else None)
            or (parse_instance_type(table) if table else None)
            or next((d.extra["instance_type"] for d in devices if "instance_type" in d.extra), None)
        )
        devices = tuple(_stated(d, instance_type) for d in devices)
        driver = parsed(ctx.root.read_text("/sys/module/neuron/version"), parse_module_version, errors)
        runtime = first_installed(ctx.distributions, "neuronx-cc")
        extra = {"neuronx-cc": runtime} if runtime else {}
        if instance_type:
            extra["instance_type"] = instance_type
        return ToolView(
            driver_version=driver,
            runtime_version=None,
            devices=devices,
            source="neuron-ls" if devices else None,
            errors=tuple(errors),
            extra=extra,
        )
