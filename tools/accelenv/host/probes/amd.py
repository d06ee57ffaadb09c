"""Pure parsers for AMD tool output: `amd-smi static --json`, `amd-smi version`, `rocm-smi --json` and the ROCm
version file. No subprocess, no file reads: each takes the text and returns facts, or raises `ParseError`.

The amdgpu driver version: amd-smi and rocm-smi read `/sys/module/amdgpu/version`, which only AMD's packaged
(DKMS) driver has. With the kernel's own in-tree amdgpu they print the kernel instead, as its banner (`amd-smi
version`: `Linuxversion6.8.0-79-generic(buildd@...)`) or its release (rocm-smi and `amd-smi static`: uname -r, such
as `6.9.0-rc5+` or `6.17.1-300.fc43.x86_64`). Neither is a driver version: `amdgpu_version` is the one rule every
reader applies, and the probe applies it once more with the host's kernel release.

Units: AMD tools write binary sizes under decimal names. On the same MI300X, rocminfo's 201310208 KB pool is
hipDeviceQuery's 196592 MB (201310208 / 1024), so KB/MB/GB here are KiB/MiB/GiB and amd-smi's MB is taken as MiB.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypeVar

from accelenv.host.facts import DeviceFacts, ParseError, ToolFacts
from accelenv.host.probes import ProbeContext, ToolView, output, parsed, tool_errors
from accelenv.host.probes._text import bdf as _bdf
from accelenv.host.probes._text import describe as _describe
from accelenv.host.probes._text import excerpt as _excerpt
from accelenv.host.probes._text import load_json as _load_json
from accelenv.host.probes._text import placeholder, product_name

if TYPE_CHECKING:
    from collections.abc import Callable

    from accelenv.host.run import ToolResult

T = TypeVar("T")

FAMILY = "amd"
_NOT_AVAILABLE = frozenset({"", "n/a", "na", "none", "unknown", "not supported"})
_GFX = re.compile(r"(gfx[0-9a-f]{3,4})(?::\S*)?", re.IGNORECASE)
_HEX_ID = re.compile(r"(?:0x)?([0-9a-f]{1,4})", re.IGNORECASE)
_SIZE = re.compile(r"([0-9]{1,30}(?:\.[0-9]{1,30})?)\s*([a-z]*)", re.IGNORECASE)
_CARD = re.compile(r"card([0-9]{1,4})")
_VERSION_START = re.compile(r"[0-9]+(?:\.[0-9]+)+")
# amdgpu's own versions: 6.10.5 (amdgpu-dkms), 6.19.14.31400000 (newer packaged drivers add a build number)
_AMDGPU_VERSION = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}\.[0-9]{1,6}(?:\.[0-9]{1,12})?")
# a kernel release: a version with the distribution's suffix (6.8.0-79-generic, 6.17.1-300.fc43.x86_64, 7.0.0-3-pve,
# 6.9.0-rc5+), which uname -r gives and amdgpu-dkms never reports
_KERNEL_RELEASE = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}(?:\.[0-9]{1,6})?[-+][0-9A-Za-z._+~-]{0,120}")
# the kernel's banner (/proc/version), with or without its spaces: "Linux version 6.8.0-79-generic (buildd@..."
_KERNEL_BANNER = re.compile(r"Linux\s*version\s*([0-9][0-9A-Za-z._+~-]{0,120}?)(?=\(|\s|$)", re.IGNORECASE)
_ROCM_FILE = re.compile(r"([0-9]+\.[0-9]+(?:\.[0-9]+)?)(?:[-+~.][0-9A-Za-z.+~-]*)?")
# AMD's KB/MB/GB are binary (see the module docstring); B is bytes.
_BYTES_PER_UNIT = {"b": 1, "kb": 2**10, "kib": 2**10, "mb": 2**20, "mib": 2**20, "gb": 2**30, "gib": 2**30}


def amdgpu_version(reported: str | None, kernel_release: str | None = None) -> str | None:
    """The amdgpu driver version in what a tool reported for it, or None when that is no driver version: "N/A",
    the kernel's banner or release (the in-tree driver: see the module docstring), `kernel_release` itself (the
    running kernel's release, when known: a custom kernel may be called just `6.1.10`), or anything else."""
    value = _text(reported)
    if value is None or _KERNEL_BANNER.match(value) or (kernel_release and value == kernel_release.strip()):
        return None
    if _KERNEL_RELEASE.fullmatch(value) or not _AMDGPU_VERSION.fullmatch(value):
        return None
    return value


def in_tree_kernel(reported: str | None) -> str | None:
    """The kernel release a tool reported in place of the amdgpu version (the in-tree driver), else None."""
    value = _text(reported)
    if value is None:
        return None
    banner = _KERNEL_BANNER.match(value)
    if banner is not None:
        return banner.group(1)
    return value if _KERNEL_RELEASE.fullmatch(value) else None


def parse_amd_smi_static_json(text: str, notes: list[str] | None = None) -> tuple[DeviceFacts, ...]:
    """GPUs from `amd-smi static --json`: a bare list (amd-smi < 26) or `{"gpu_data": [...]}` (newer); on a host
    with one GPU, ROCm 6.0's amd-smi prints that GPU's object alone (`{"gpu": 0, ...}`).

    Leaves may be plain (`"196592 MB"`, `196592`) or `{"value": 196592, "unit": "MB"}`. ROCm 6.0 names the
    driver's fields `driver_name`/`driver_version` and the memory `vram_size_mb`; later releases `name`/`version`
    and `size`. Entries for CPUs (`{"cpu": 0, ...}`) are skipped. A driver version that is the kernel's (the
    in-tree driver) is not kept as one: its kernel release goes to `extra["driver_kernel"]`.

    In a compute partition mode (CPX: one MI300X seen as 8 GPUs) each partition is its own entry with its own
    `gpu` number, so the device count is the number of partitions; `extra` keeps `compute_partition` and
    `memory_partition` (NPS4) when amd-smi prints them.

    With `notes` None the first unreadable value raises ParseError; with a list an unreadable value costs that fact
    only (None, the reason noted) and an entry that is not an object costs that entry only.
    """
    what = "amd-smi static --json"
    data = _load_json(text, what)
    if isinstance(data, Mapping) and "gpu_data" not in data and "gpu" in data:
        data = [data]
    if isinstance(data, Mapping):
        if "gpu_data" not in data:
            keys = ", ".join(sorted(str(k) for k in data)[:5]) or "none"
            raise ParseError(f"{what}: expected a 'gpu_data' list in the top-level object, found keys: {keys}")
        data = data["gpu_data"]
    if not isinstance(data, list):
        raise ParseError(f"{what}: expected a list of GPU objects, found {_describe(data)}")
    devices = []
    for position, entry in enumerate(data):
        if not isinstance(entry, Mapping):
            problem = f"{what}: expected an object for GPU entry {position}, found {_describe(entry)}"
            if notes is None:
                raise ParseError(problem)
            notes.append(f"{problem}; that entry is left out")
            continue
        if "gpu" not in entry and "cpu" in entry:
            continue
        devices.append(_amd_smi_device(entry, f"{what}: GPU entry {position}", position, notes))
    return tuple(devices)


def _amd_smi_device(entry: Mapping[str, object], where: str, position: int, notes: list[str] | None) -> DeviceFacts:
    index = _tolerant(notes, lambda: _as_int(entry.get("gpu"), f"{where}: 'gpu'"), "the entry's position is its index")
    index = position if index is None else index
    asic = _section(entry, "asic")
    bus = _section(entry, "bus")
    vram = _section(entry, "vram")
    driver = _section(entry, "driver")
    target = _text(_leaf(asic.get("target_graphics_version")))
    extra: dict[str, str] = {}
    if target is not None and _gfx(target) != target:
        extra["gfx_target"] = target
    reported = _text(_leaf(driver.get("version", driver.get("driver_version"))))
    driver_version = amdgpu_version(reported)
    if driver_version is not None:
        extra["driver_version"] = driver_version
    elif (kernel := in_tree_kernel(reported)) is not None:
        extra["driver_kernel"] = kernel
    size_key = "size" if "size" in vram or "vram_size_mb" not in vram else "vram_size_mb"
    partition = _section(entry, "partition")
    for key in ("compute_partition", "memory_partition"):
        mode = _text(_leaf(partition.get(key)))
        if mode is not None:
            extra[key] = mode
    return DeviceFacts(
        index=index,
        name=product_name(_leaf(asic.get("market_name"))),
        arch=_gfx(target),
        memory_mib=_tolerant(
            notes, lambda: _mib(vram.get(size_key), default_unit="mb", where=f"{where}: 'vram.{size_key}'")
        ),
        pci_bus_id=_bdf(_text(_leaf(bus.get("bdf")))),
        pci_device_id=_device_id(_leaf(asic.get("device_id"))),
        extra=extra,
    )


def parse_amd_smi_version(text: str) -> tuple[str | None, str | None]:
    """(amdgpu driver version, ROCm version) from `amd-smi version`.

    Accepts the one-line form (`AMDSMI Tool: ... | ROCm version: 6.4.1 | amdgpu version: 6.10.5 | ...`) and the
    same fields one per line. With the in-tree kernel driver amd-smi prints the kernel's banner or release as the
    amdgpu version (`Linuxversion6.8.0-79-generic(...)`): that is not a driver version, so it is None
    (`amdgpu_version`).
    """
    fields: dict[str, str] = {}
    for line in text.splitlines():
        for part in line.split("|"):
            key, sep, value = part.partition(":")
            if sep:
                fields.setdefault(key.strip().lower(), value.strip())
    known = ("amdsmi tool", "amdsmi library version", "rocm version", "amdgpu version")
    if not any(key in fields for key in known):
        raise ParseError(
            f"amd-smi version: expected fields such as 'ROCm version:' and 'amdgpu version:', found {_excerpt(text)}"
        )
    driver = amdgpu_version(fields.get("amdgpu version"))
    rocm = _text(fields.get("rocm version"))
    if rocm is not None and not _VERSION_START.match(rocm):
        raise ParseError(f"amd-smi version: expected a version after 'ROCm version:', found {_excerpt(rocm)}")
    return driver, rocm


def parse_rocm_smi_json(text: str, notes: list[str] | None = None) -> ToolFacts:
    """Driver version and GPUs from `rocm-smi --json` (objects `card0`, `card1`, ... and `system`). Without
    `/sys/module/amdgpu/version` (the in-tree driver) rocm-smi prints uname's kernel release as the "Driver version"
    (rocm_smi_lib `rsmi_version_str_get`): that goes to `driver_kernel`, not `driver_version`.

    Key spellings moved between ROCm releases ("GPU ID" -> "Device ID", "Card series" -> "Card Series"), so keys
    are matched without regard to case and the older spelling is the fallback. `notes` as for
    `parse_amd_smi_static_json`.
    """
    what = "rocm-smi --json"
    data = _load_json(text, what)
    if not isinstance(data, Mapping):
        raise ParseError(f"{what}: expected an object with 'card0'... and 'system', found {_describe(data)}")
    cards: list[tuple[int, Mapping[str, object]]] = []
    for key, value in data.items():
        match = _CARD.fullmatch(str(key))
        if match is None:
            continue
        if not isinstance(value, Mapping):
            problem = f"{what}: expected an object for '{key}', found {_describe(value)}"
            if notes is None:
                raise ParseError(problem)
            notes.append(f"{problem}; that card is left out")
            continue
        cards.append((int(match.group(1)), value))
    system = data.get("system")
    if not cards and not isinstance(system, Mapping):
        keys = ", ".join(sorted(str(k) for k in data)[:5]) or "none"
        raise ParseError(f"{what}: expected 'card0'... objects or a 'system' object, found keys: {keys}")
    reported = _text(_folded(system).get("driver version")) if isinstance(system, Mapping) else None
    devices = tuple(_rocm_smi_device(number, card, f"{what}: 'card{number}'", notes) for number, card in sorted(cards))
    return ToolFacts(
        family=FAMILY,
        tool="rocm-smi",
        driver_version=amdgpu_version(reported),
        driver_kernel=in_tree_kernel(reported),
        devices=devices,
    )


def _rocm_smi_device(index: int, card: Mapping[str, object], where: str, notes: list[str] | None) -> DeviceFacts:
    fields = _folded(card)
    # older rocm-smi fills "Card series" or "Card model" with the vendor id (0x1002) or N/A: not a product name
    names = (product_name(fields.get(key)) for key in ("card series", "device name", "card model"))
    name = next((n for n in names if n is not None), None)
    device_id = fields.get("device id", fields.get("gpu id"))
    extra: dict[str, str] = {}
    unique_id = _text(fields.get("unique id"))
    if unique_id is not None:
        extra["unique_id"] = unique_id
    return DeviceFacts(
        index=index,
        name=name,
        arch=_gfx(_text(fields.get("gfx version"))),
        memory_mib=_tolerant(
            notes,
            lambda: _mib(
                fields.get("vram total memory (b)"), default_unit="b", where=f"{where}: 'VRAM Total Memory (B)'"
            ),
        ),
        pci_bus_id=_bdf(_text(fields.get("pci bus"))),
        pci_device_id=_device_id(device_id),
        extra=extra,
    )


def rocm_version_from_file(text: str) -> str:
    """The ROCm release from `/opt/rocm/.info/version` (`6.4.1-120` -> `6.4.1`)."""
    value = text.strip()
    match = _ROCM_FILE.fullmatch(value)
    if match is None:
        raise ParseError(f"/opt/rocm/.info/version: expected a version such as '6.4.1-120', found {_excerpt(text)}")
    return match.group(1)


# ---- helpers ---------------------------------------------------------------------------------------------------


def _tolerant(notes: list[str] | None, read: Callable[[], T], instead: str = "left unknown") -> T | None:
    """`read()`; with `notes`, a value it cannot read is None and the reason (and `instead`) is noted."""
    try:
        return read()
    except ParseError as error:
        if notes is None:
            raise
        notes.append(f"{error}; {instead}")
        return None


def _section(entry: Mapping[str, object], key: str) -> Mapping[str, object]:
    """A sub-object of a GPU entry; amd-smi writes "N/A" for sections a GPU does not support."""
    value = entry.get(key)
    return value if isinstance(value, Mapping) else {}


def _folded(mapping: Mapping[str, object]) -> dict[str, object]:
    """Keys lower-cased, first spelling wins."""
    folded: dict[str, object] = {}
    for key, value in mapping.items():
        folded.setdefault(str(key).strip().lower(), value)
    return folded


def _leaf(value: object) -> object:
    """The value of a `{"value": ..., "unit": ...}` leaf, or the leaf itself."""
    if isinstance(value, Mapping) and "value" in value:
        return value["value"]
    return value


def _text(value: object) -> str | None:
    """A reported string (or number) with "N/A" and friends as None."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value).strip()
    return None if text.lower() in _NOT_AVAILABLE or placeholder(text) else text


def _as_int(value: object, where: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,9}", value.strip()):
        return int(value)
    raise ParseError(f"{where}: expected a whole number, found {_describe(value)}")


def _mib(value: object, *, default_unit: str, where: str) -> int | None:
    """A size in MiB from `196592`, `"196592 MB"` or `{"value": 196592, "unit": "MB"}`; None when not reported."""
    from fractions import Fraction  # exact arithmetic for decimal sizes; only loaded when an AMD size is read

    unit = default_unit
    if isinstance(value, Mapping) and "value" in value:
        unit = str(value.get("unit") or default_unit)
        value = value["value"]
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int) or (isinstance(value, float) and math.isfinite(value)):
        amount = Fraction(value)
    elif isinstance(value, str):
        if _text(value) is None:
            return None
        match = _SIZE.fullmatch(value.strip())
        if match is None:
            raise ParseError(f"{where}: expected a size such as '196592 MB', found {_excerpt(value)}")
        amount, unit = Fraction(match.group(1)), match.group(2) or unit
    else:
        raise ParseError(f"{where}: expected a size, found {_describe(value)}")
    bytes_per_unit = _BYTES_PER_UNIT.get(unit.lower())
    if bytes_per_unit is None:
        raise ParseError(f"{where}: expected a size in B, KB, MB or GB, found the unit {_excerpt(unit)}")
    mib = amount * bytes_per_unit // 2**20
    if not 0 <= mib < 2**40:
        raise ParseError(f"{where}: expected a plausible size, found {_describe(value)} {unit}")
    return int(mib)


def _gfx(target: str | None) -> str | None:
    """`gfx942:sramecc+:xnack-` -> `gfx942`; None when the value is not an LLVM gfx target."""
    if target is None:
        return None
    match = _GFX.fullmatch(target)
    return match.group(1).lower() if match else None


def _device_id(value: object) -> str | None:
    """`"0x74A1"` -> `0x74a1` (a JSON number is taken as decimal); None when not a 16-bit id."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        text = _text(value)
        match = _HEX_ID.fullmatch(text) if text is not None else None
        if match is None:
            return None
        number = int(match.group(1), 16)
    return f"0x{number:04x}" if 0 <= number <= 0xFFFF else None


# ---- the probe ---------------------------------------------------------------------------------------------------

ROCM_SMI_ARGS = ["--showid", "--showproductname", "--showmeminfo", "vram", "--showdriverversion", "--json"]


class AmdProbe:
    """amd-smi (static JSON for devices, `version` for driver and ROCm), rocm-smi as the fallback, and the ROCm
    version file of the installation."""

    family = FAMILY

    def commands(self) -> dict[str, list[str]]:
        return {
            "amd-smi-static": ["amd-smi", "static", "--json"],
            "amd-smi-version": ["amd-smi", "version"],
            "rocm-smi": ["rocm-smi", *ROCM_SMI_ARGS],
            "amd-smi-topology": ["amd-smi", "topology"],  # the xGMI links (host/links.py)
            "rocm-smi-topo": ["rocm-smi", "--showtopo"],  # the same, where amd-smi is not installed
        }

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        topology = ("amd-smi-topology", "rocm-smi-topo")  # links (host/links.py): not a fault of the devices' facts
        errors = tool_errors({k: v for k, v in results.items() if k not in topology})
        kernel = ctx.root.read_value("/proc/sys/kernel/osrelease")
        devices: tuple[DeviceFacts, ...] = ()
        source: str | None = None
        said: dict[str, str] = {}
        static = parsed(
            output(results.get("amd-smi-static")), lambda text: parse_amd_smi_static_json(text, errors), errors
        )
        if static is not None:
            devices, source = static, "amd-smi"
            for version in dict.fromkeys(d.extra["driver_version"] for d in static if "driver_version" in d.extra):
                said.setdefault("amd-smi static", version)
        driver, rocm = parsed(output(results.get("amd-smi-version")), parse_amd_smi_version, errors) or (None, None)
        if driver is not None:
            said["amd-smi version"] = driver
        legacy = (
            None
            if devices
            else parsed(output(results.get("rocm-smi")), lambda text: parse_rocm_smi_json(text, errors), errors)
        )
        if legacy is not None:
            devices, source = legacy.devices, "rocm-smi"
            if legacy.driver_version is not None:
                said["rocm-smi"] = legacy.driver_version
        # the one rule once more, now that the host's kernel release is known (a custom kernel named `6.1.10`)
        kept = {where: version for where, version in said.items() if amdgpu_version(version, kernel) is not None}
        driver = kept.get("amd-smi version") or kept.get("rocm-smi") or kept.get("amd-smi static")
        in_tree = next((d.extra["driver_kernel"] for d in devices if "driver_kernel" in d.extra), None)
        in_tree = in_tree or (legacy.driver_kernel if legacy is not None else None)
        in_tree = in_tree or (kernel if len(kept) < len(said) else None)
        if rocm is None:
            rocm = parsed(ctx.root.read_text("/opt/rocm/.info/version"), rocm_version_from_file, errors)
        return ToolView(
            driver_version=driver,
            runtime_version=rocm,
            devices=devices,
            source=source,
            errors=tuple(errors),
            extra={"driver_kernel": in_tree} if in_tree and driver is None else {},
            sources={"driver_version": kept} if kept else {},
        )
