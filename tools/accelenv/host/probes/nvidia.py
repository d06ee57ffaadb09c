"""NVIDIA: pure parsers for what `nvidia-smi` prints. Running the tool is the probe's job; nothing here does I/O.

Four outputs are read:

- `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`: the per-GPU facts, including the compute capability
  (the only output that has it) -> `parse_query_gpu`.
- `nvidia-smi --version`: driver and CUDA version -> `parse_version`.
- plain `nvidia-smi`: the same two versions from the table header -> `parse_table`.
- `nvidia-smi -q -x`: versions and per-GPU facts, but no compute capability -> `parse_xml`.

Driver branch 610 renamed the versions: "Driver Version" became "KMD Version" and "CUDA Version" became
"CUDA UMD Version", and `--version` keeps the old keys with the value `Deprecated, see "KMD version" instead`.
Every parser takes the new name first and never mistakes a deprecation notice for a version.

Every parser raises `ParseError` and nothing else on output it cannot read.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, TypeVar

from accelenv.host.facts import DeviceFacts, ParseError, ToolFacts
from accelenv.host.probes import ProbeContext, ToolView, output, parsed, tool_errors
from accelenv.host.probes._text import placeholder, product_name

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET
    from collections.abc import Callable, Mapping, Sequence

    from accelenv.host.run import ToolResult

T = TypeVar("T")

FAMILY = "nvidia"
TOOL = "nvidia-smi"

# Every field exists on the 5xx and the 610 branches, on Linux and Windows (the captures' csv headers show them);
# a field an older driver does not know (kmd_version before 595) makes nvidia-smi refuse the whole query.
QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "pci.bus_id",
    "pci.device_id",
    "uuid",
    "memory.total",
    "compute_cap",
    "driver_version",
    "mig.mode.current",
)

# The fallback query for a driver whose nvidia-smi refuses a field of QUERY_FIELDS: drivers before R510 do not know
# compute_cap (nvidia-smi 470.182.03 answers `Field "compute_cap" is not a valid field to query.`, exit status 2,
# huggingface/candle#733), so the architecture then comes from the PCI device id through the matrix. These fields
# are the ones every driver since the R4xx branches knows.
LEGACY_QUERY_FIELDS: tuple[str, ...] = tuple(f for f in QUERY_FIELDS if f not in {"compute_cap", "mig.mode.current"})

# --query-gpu fields copied verbatim into DeviceFacts.extra (under the field's own name) when they hold a value.
EXTRA_FIELDS: tuple[str, ...] = ("driver_version", "kmd_version", "mig.mode.current")

NVIDIA_PCI_VENDOR = 0x10DE

_VERSION = re.compile(r"\d+(?:\.\d+)+")  # 590.48.01, 610.62, 13.1
_DEPRECATED_SUFFIX = re.compile(r"\s*\[Deprecated[^\]]*\]\Z", re.IGNORECASE)  # -q on 610: "610.57.04 [Deprecated; ...]"
_UNIT_SUFFIX = re.compile(r"\s*\[[^\]]*\]\Z")  # csv header: "memory.total [MiB]"
_HEADER_CELL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*(?: \[[^\]]*\])?")
_INDEX = re.compile(r"\d+")
_MIB = re.compile(r"(\d+)(?:\s*MiB)?")
_COMPUTE_CAP = re.compile(r"(\d+)\.(\d+)")
_BUS_ID = re.compile(r"([0-9A-Fa-f]{1,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})\.([0-7])")
# `0x233010DE` (device and vendor, what --query-gpu prints) or `0x2330` (the device id alone, which some builds print)
_PCI_ID = re.compile(r"(?:0[xX])?([0-9A-Fa-f]{8})|0[xX]([0-9A-Fa-f]{4})")
_INVALID_FIELD = re.compile(r'Field "[^"\n]{1,80}" is not a valid field to query')
_TABLE_HEADER = re.compile(
    r"\|\s*NVIDIA-SMI\s+\S+\s+(?P<driver_key>Driver|KMD) Version:\s*(?P<driver>\S+)"
    r"\s+(?P<cuda_key>CUDA|CUDA UMD) Version:\s*(?P<cuda>\S+)\s*\|"
)


def query_gpu_args(fields: Sequence[str] = QUERY_FIELDS) -> list[str]:
    """The arguments that make nvidia-smi print what `parse_query_gpu` reads (by default QUERY_FIELDS)."""
    return [f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]


def refused_a_field(result: ToolResult | None) -> bool:
    """nvidia-smi ran and refused a --query-gpu field it does not know (`Field "compute_cap" is not a valid field
    to query.` on stdout, exit status 2)."""
    if result is None or result.ok or result.returncode is None:
        return False
    return _INVALID_FIELD.search(result.stdout[:4096] + "\n" + result.stderr[:4096]) is not None


def parse_query_gpu(
    text: str, fields: Sequence[str] = QUERY_FIELDS, notes: list[str] | None = None
) -> tuple[DeviceFacts, ...]:
    """Read `nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`: one DeviceFacts per line.

    `fields` are the names the output was produced with, in order; header names with units (`memory.total [MiB]`)
    are accepted too. A header line, if present, must list exactly those fields. Values such as `[N/A]`,
    `[Not Supported]` or `[Requested functionality has been deprecated]` become None. Without an `index` field a
    GPU's index is its line number (nvidia-smi lists GPUs in index order). With MIG enabled the lines still describe
    the physical GPUs (one line per board, whatever its MIG instances), so the device count is the number of GPUs,
    not of MIG instances.

    With `notes` None, the first value that cannot be read raises ParseError. With a list, one unreadable value costs
    that fact only (it is None, and the reason is appended to `notes`), an unreadable index falls back to the line
    number, and a line with the wrong number of values costs that GPU only; a missing or wrong header still raises.
    """
    what = "nvidia-smi --query-gpu"
    names = tuple(_field_name(f) for f in fields)
    if not names or len(set(names)) != len(names):
        raise ParseError(f"{what}: expected distinct field names, got {list(fields)!r}")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ParseError(f"{what}: expected one csv line per GPU with {len(names)} values, found {_excerpt(text)}")
    first = _split(lines[0])
    if all(_HEADER_CELL.fullmatch(cell) for cell in first) and {_field_name(c) for c in first} & set(names):
        header = tuple(_field_name(cell) for cell in first)
        if header != names:
            raise ParseError(f"{what}: expected a header listing {', '.join(names)}, found {_excerpt(lines[0])}")
        lines = lines[1:]
        if not lines:
            raise ParseError(f"{what}: expected a line per GPU after the header, found only the header")
    devices = []
    for position, line in enumerate(lines):
        try:
            devices.append(_device_from_row(names, _split(line), line, position, notes))
        except ParseError as error:
            if notes is None:
                raise
            notes.append(str(error))
    return tuple(devices)


def parse_version(text: str) -> tuple[str, str | None]:
    """Read `nvidia-smi --version` into (driver version, CUDA version).

    Up to 595: `DRIVER version : 590.48.01` and `CUDA Version : 13.1`. From 610: `KMD version : 610.57.04` and
    `CUDA UMD version : 13.3`, while the old keys say `Deprecated, see "KMD version" instead`. The driver version is
    required; the CUDA version is None when the tool does not print one.
    """
    what = "nvidia-smi --version"
    entries: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            entries.setdefault(" ".join(key.split()).lower(), value.strip())
    driver = _first_version(what, text, [(k, entries.get(k.lower())) for k in ("KMD version", "DRIVER version")])
    cuda = _first_version(what, text, [(k, entries.get(k.lower())) for k in ("CUDA UMD version", "CUDA version")])
    if driver is None:
        raise ParseError(f"{what}: expected a 'DRIVER version' or 'KMD version' line, found {_excerpt(text)}")
    return driver, cuda


def parse_table(text: str) -> tuple[str, str | None]:
    """Read the header of the plain `nvidia-smi` table into (driver version, CUDA version).

    Both layouts: `| NVIDIA-SMI 590.48.01  Driver Version: 590.48.01  CUDA Version: 13.1 |` and, from 610,
    `| NVIDIA-SMI 610.57.04  KMD Version: 610.57.04  CUDA UMD Version: 13.3 |`. The header line must be complete
    (closing `|`), so a cut-off line is an error rather than a shortened version.
    """
    what = "nvidia-smi"
    for line in text.splitlines():
        match = _TABLE_HEADER.fullmatch(line.strip())
        if match is not None:
            driver = _first_version(what, text, [(f"{match['driver_key']} Version", match["driver"])])
            cuda = _first_version(what, text, [(f"{match['cuda_key']} Version", match["cuda"])])
            if driver is None:
                raise ParseError(f"{what}: expected a driver version in the table header, found {_excerpt(line)}")
            return driver, cuda
    found = next((line for line in text.splitlines() if "NVIDIA-SMI" in line), text)
    raise ParseError(
        f"{what}: expected a table header '| NVIDIA-SMI ... Driver Version: ... CUDA Version: ... |', "
        f"found {_excerpt(found)}"
    )


def parse_xml(text: str) -> ToolFacts:
    """Read `nvidia-smi -q -x` into ToolFacts with one DeviceFacts per `<gpu>`, in document (= index) order.

    The XML has no compute capability, so `arch` is always None here: use `parse_query_gpu` for it. A device's
    `extra` holds `mig.mode.current`, `product_architecture` (Ampere, Hopper, ...) and `minor_number` (the N of
    /dev/nvidiaN, which is not the index) when the XML gives them. Input that declares entities is refused outright.
    """
    import xml.etree.ElementTree as ET

    what = "nvidia-smi -q -x"
    if "<!ENTITY" in text:
        raise ParseError(f"{what}: expected nvidia-smi XML, found an entity declaration (refused): {_excerpt(text)}")
    try:
        # Entity declarations are refused above and expat never fetches the external DTD nvidia-smi names.
        root = ET.fromstring(text)  # noqa: S314
    except (ET.ParseError, ValueError) as exc:
        raise ParseError(f"{what}: expected well-formed XML ({exc}), found {_excerpt(text)}") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"{what}: expected a <nvidia_smi_log> document, found <{root.tag[:40]}>")
    driver = _first_version(what, text, [(tag, root.findtext(tag)) for tag in ("kmd_version", "driver_version")])
    if driver is None:
        raise ParseError(f"{what}: expected <driver_version> in <nvidia_smi_log>, found {_excerpt(text)}")
    cuda = _first_version(what, text, [(tag, root.findtext(tag)) for tag in ("cuda_umd_version", "cuda_version")])
    warnings: list[str] = []
    devices = tuple(_device_from_xml(gpu, position, warnings) for position, gpu in enumerate(root.findall("gpu")))
    attached = _value(root.findtext("attached_gpus"))
    if attached is not None and (not _INDEX.fullmatch(attached) or int(attached) != len(devices)):
        warnings.append(f"{what}: <attached_gpus> says {attached} but the XML lists {len(devices)} <gpu> element(s)")
    return ToolFacts(
        family=FAMILY,
        tool=TOOL,
        driver_version=driver,
        runtime_version=cuda,
        devices=devices,
        warnings=tuple(warnings),
    )


def _device_from_row(
    names: tuple[str, ...], cells: list[str], line: str, position: int, notes: list[str] | None
) -> DeviceFacts:
    what = f"nvidia-smi --query-gpu, GPU line {position + 1}"
    if len(cells) != len(names):
        raise ParseError(
            f"{what}: expected {len(names)} values ({', '.join(names)}), found {len(cells)}: {_excerpt(line)}"
        )
    values = {name: _value(cell) for name, cell in zip(names, cells, strict=True)}

    def read(parse: Callable[[str, str | None], T], name: str) -> T | None:
        return _tolerant(notes, parse, what, values.get(name))

    index = position
    if "index" in values:
        raw_index = values["index"]
        if raw_index is None and notes is not None:
            pass  # a vendor placeholder is no value, not a fault: the line number stands in for it
        elif raw_index is None or not _INDEX.fullmatch(raw_index):
            found = f"expected an integer index, found {_excerpt(cells[names.index('index')])}"
            if notes is None:
                raise ParseError(f"{what}: {found}")
            notes.append(f"{what}: {found}; the line number is taken as its index")
        else:
            index = int(raw_index)
    extra = {name: value for name in EXTRA_FIELDS if (value := values.get(name)) is not None}
    if "driver_version" in extra and not _VERSION.fullmatch(extra["driver_version"]):
        bad = extra.pop("driver_version")
        if notes is None:
            raise ParseError(f"{what}: expected a version number for 'driver_version', found {_excerpt(bad)}")
        notes.append(f"{what}: expected a version number for 'driver_version', found {_excerpt(bad)}; left unknown")
    return DeviceFacts(
        index=index,
        name=product_name(values.get("name")),
        arch=read(_arch, "compute_cap"),
        memory_mib=read(_mib, "memory.total"),
        pci_bus_id=read(_bus_id, "pci.bus_id"),
        pci_device_id=read(_pci_device_id, "pci.device_id"),
        uuid=values.get("uuid"),
        extra=extra,
    )


def _tolerant(notes: list[str] | None, parse: Callable[[str, str | None], T], what: str, raw: str | None) -> T | None:
    """`parse(what, raw)`; with `notes`, a value it cannot read is None and the reason is noted instead of raised."""
    try:
        return parse(what, raw)
    except ParseError as error:
        if notes is None:
            raise
        notes.append(f"{error}; left unknown")
        return None


def _device_from_xml(gpu: ET.Element, position: int, warnings: list[str]) -> DeviceFacts:
    what = f"nvidia-smi -q -x, <gpu> {position + 1}"
    raw_device_id = _value(gpu.findtext("pci/pci_device_id"))
    device_id = _pci_device_id(what, raw_device_id)
    if raw_device_id is not None and device_id is None:
        warnings.append(f"{what}: pci_device_id {raw_device_id} is not an NVIDIA device id; left unknown")
    extra_tags = (("mig.mode.current", "mig_mode/current_mig"), ("product_architecture", "product_architecture"))
    extra = {key: value for key, tag in extra_tags if (value := _value(gpu.findtext(tag))) is not None}
    minor = _value(gpu.findtext("minor_number"))
    if minor is not None:
        extra["minor_number"] = minor
    return DeviceFacts(
        index=position,
        name=product_name(_value(gpu.findtext("product_name"))),
        memory_mib=_mib(what, _value(gpu.findtext("fb_memory_usage/total"))),
        pci_bus_id=_bus_id(what, _value(gpu.findtext("pci/pci_bus_id")) or _value(gpu.get("id"))),
        pci_device_id=device_id,
        uuid=_value(gpu.findtext("uuid")),
        extra=extra,
    )


def _first_version(what: str, text: str, candidates: Sequence[tuple[str, str | None]]) -> str | None:
    """The first candidate (label, raw value) holding a version, newest name first; deprecation notices are skipped."""
    deprecated: str | None = None
    for label, raw in candidates:
        value = _value(_DEPRECATED_SUFFIX.sub("", raw.strip())) if raw is not None else None
        if value is None:
            continue
        if value.lower().startswith("deprecated"):
            deprecated = label
            continue
        if not _VERSION.fullmatch(value):
            raise ParseError(f"{what}: expected a version number for '{label}', found {_excerpt(value)}")
        return value
    if deprecated is not None:
        names = " or ".join(f"'{label}'" for label, _ in candidates if label != deprecated) or "its replacement"
        raise ParseError(f"{what}: '{deprecated}' is marked deprecated but {names} is missing: {_excerpt(text)}")
    return None


def _field_name(field: str) -> str:
    return _UNIT_SUFFIX.sub("", field.strip()).lower()


def _split(line: str) -> list[str]:
    # nvidia-smi never quotes: values are joined with ", " (and no value we read holds a comma).
    return [cell.strip() for cell in line.split(",")]


def _value(raw: str | None) -> str | None:
    """A reported value, or None for nvidia-smi's ways of saying there is none: [N/A], N/A, [Not Supported], ..."""
    if raw is None:
        return None
    value = raw.strip()
    return None if placeholder(value) else value


def _arch(what: str, compute_cap: str | None) -> str | None:
    if compute_cap is None:
        return None
    match = _COMPUTE_CAP.fullmatch(compute_cap)
    if match is None:
        raise ParseError(f"{what}: expected compute_cap like '9.0', found {_excerpt(compute_cap)}")
    return f"sm_{int(match[1])}{int(match[2])}"


def _mib(what: str, memory: str | None) -> int | None:
    if memory is None:
        return None
    match = _MIB.fullmatch(memory)
    if match is None:
        raise ParseError(f"{what}: expected memory in MiB like '81559' or '81559 MiB', found {_excerpt(memory)}")
    return int(match[1])


def _bus_id(what: str, bus_id: str | None) -> str | None:
    """`00000000:17:00.0` -> `0000:17:00.0`: the domain at its natural width (at least 4 digits, as Linux writes it)."""
    if bus_id is None:
        return None
    match = _BUS_ID.fullmatch(bus_id)
    if match is None:
        raise ParseError(f"{what}: expected a PCI bus id like '00000000:17:00.0', found {_excerpt(bus_id)}")
    domain, bus, device, function = match.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def _pci_device_id(what: str, pci_id: str | None) -> str | None:
    """`0x233010DE` (device in the upper 16 bits, vendor in the lower) -> `0x2330`; None unless the vendor is NVIDIA.
    A 4-digit `0x2330` is the device id alone."""
    if pci_id is None:
        return None
    match = _PCI_ID.fullmatch(pci_id)
    if match is None:
        raise ParseError(f"{what}: expected a PCI id like '0x233010DE' or '0x2330', found {_excerpt(pci_id)}")
    if match[2] is not None:  # the device id alone: nothing says the vendor, and the field is NVIDIA's own
        device = int(match[2], 16)
        return f"0x{device:04x}" if device else None
    combined = int(match[1], 16)
    device, vendor = combined >> 16, combined & 0xFFFF
    if vendor != NVIDIA_PCI_VENDOR or device == 0:
        return None
    return f"0x{device:04x}"


def _excerpt(text: str, limit: int = 80) -> str:
    """A short quotation of what was found, for error messages."""
    stripped = text.strip()
    if not stripped:
        return "nothing (empty output)"
    if len(stripped) <= limit:
        return repr(stripped)
    return repr(stripped[:limit]) + "..."


# ---- the probe ---------------------------------------------------------------------------------------------------


QUERY = "nvidia-smi-query"
LEGACY_QUERY = "nvidia-smi-query-legacy"
VERSION = "nvidia-smi-version"
TOPOLOGY = "nvidia-smi-topo"
PROC_VERSION = "/proc/driver/nvidia/version"


class NvidiaProbe:
    """nvidia-smi --query-gpu for devices (a query without compute_cap when an older driver refuses that field),
    --version for the driver and its CUDA version; the kernel module's version when nvidia-smi is missing or broken.
    Every place the driver version was read is kept in `sources`, so the checker sees when they disagree."""

    family = FAMILY

    def commands(self) -> dict[str, list[str]]:
        return {
            QUERY: [TOOL, *query_gpu_args()],
            VERSION: [TOOL, "--version"],
            TOPOLOGY: [TOOL, "topo", "-m"],
        }

    def followups(self, results: Mapping[str, ToolResult]) -> dict[str, list[str]]:
        if refused_a_field(results.get(QUERY)):
            return {LEGACY_QUERY: [TOOL, *query_gpu_args(LEGACY_QUERY_FIELDS)]}
        return {}

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        legacy = results.get(LEGACY_QUERY)
        answered = LEGACY_QUERY if legacy is not None and legacy.ok else QUERY
        fields = LEGACY_QUERY_FIELDS if answered == LEGACY_QUERY else QUERY_FIELDS
        problems: list[str] = []
        devices = (
            parsed(output(results.get(answered)), lambda text: parse_query_gpu(text, fields, problems), problems) or ()
        )
        version = results.get(VERSION)
        driver, cuda = parsed(output(version), parse_version, problems) or (None, None)
        queried = _query_driver_versions(devices)
        # topo -m feeds the topology checks (discover reads it); its failure is not a device fault
        quiet = {TOPOLOGY}
        if answered == LEGACY_QUERY:
            quiet.add(QUERY)  # the driver refused a field; the fallback query answered
        if queried and version is not None and not version.ok and version.returncode is not None:
            quiet.add(VERSION)  # an older nvidia-smi without --version: the query gave the driver version
        errors = tool_errors({k: v for k, v in results.items() if k not in quiet}) + problems
        module = module_driver_version(ctx.root.read_text(PROC_VERSION))
        said = {f"{TOOL} --version": driver} if driver else {}
        said.update(queried)
        if module:
            said[PROC_VERSION] = module
        driver = driver or next(iter(queried.values()), None) or module
        return ToolView(
            driver_version=driver,
            runtime_version=cuda,
            devices=devices,
            source=TOOL if devices else None,
            errors=tuple(errors),
            sources={"driver_version": said} if said else {},
        )


def _query_driver_versions(devices: Sequence[DeviceFacts]) -> dict[str, str]:
    """The driver version the query printed per GPU, one source when the GPUs agree (as they always should)."""
    by_version: dict[str, list[int]] = {}
    for device in devices:
        if device.extra.get("driver_version"):
            by_version.setdefault(device.extra["driver_version"], []).append(device.index)
    if len(by_version) <= 1:
        return {f"{TOOL} --query-gpu": version for version in by_version}
    return {
        f"{TOOL} --query-gpu (GPU {', '.join(map(str, indexes))})": version for version, indexes in by_version.items()
    }


def module_driver_version(text: str | None) -> str | None:
    """`NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  ...` from /proc/driver/nvidia/version."""
    if not text:
        return None
    match = re.search(r"Kernel Module(?: for \S+)?\s+(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None
