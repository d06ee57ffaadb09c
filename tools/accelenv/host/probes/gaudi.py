"""Pure parsers for Intel Gaudi `hl-smi` output: the CSV query (`-Q ... -f csv,noheader`) and the plain table.

Field names for `-Q` are the ones docs.habana.ai lists for hl-smi (index, name, bus_id, driver_version,
memory.total, uuid, module_id, serial, ...). hl-smi writes sizes as `131072 MiB` in the CSV and table; its `-L`
log says `98304 MB` for the same Gaudi 2 memory, so MB is read as MiB.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelenv.host.facts import DeviceFacts, ParseError
from accelenv.host.probes import ProbeContext, ToolView, output, parsed, tool_errors
from accelenv.host.probes._text import bdf as _bdf
from accelenv.host.probes._text import excerpt as _excerpt
from accelenv.host.probes._text import placeholder, product_name

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.run import ToolResult

FAMILY = "gaudi"
HL_QUERY_FIELDS: tuple[str, ...] = ("index", "name", "bus_id", "driver_version", "memory.total", "uuid")
_NOT_AVAILABLE = frozenset({"", "n/a", "na", "none", "unknown"})
# Product-name prefixes per generation, as the matrix's SKUs list them; HL-205 (first-generation Gaudi) is absent.
_ARCH_BY_MODEL_PREFIX: tuple[tuple[str, str], ...] = (
    ("HL-225", "gaudi2"),
    ("HL-288", "gaudi2"),
    ("HL-325", "gaudi3"),
    ("HL-328", "gaudi3"),
    ("HL-338", "gaudi3"),
    ("HL-388", "gaudi3"),
)
_EXTRA_FIELDS = ("driver_version", "module_id", "serial")
_MEMORY = re.compile(r"([0-9]{1,12})\s*(MiB|MB|GiB|GB)?", re.IGNORECASE)
_INDEX = re.compile(r"[0-9]{1,6}")
_DRIVER_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)+(?:[-+~][0-9A-Za-z.+~-]*)?")
_DRIVER_LINE = re.compile(r"Driver Version\s*:\s*([0-9][0-9A-Za-z.+~-]*)")
_HL_SMI_LINE = re.compile(r"HL-SMI Version\s*:\s*hl-([0-9]+(?:\.[0-9]+)+)")


def hl_smi_args(fields: tuple[str, ...] = HL_QUERY_FIELDS) -> list[str]:
    """Arguments (after the executable) for the CSV query that `parse_hl_smi_csv` reads."""
    return ["-Q", ",".join(fields), "-f", "csv,noheader"]


def arch_from_model(name: str | None) -> str | None:
    """`HL-225` -> `gaudi2`, `HL-325L` -> `gaudi3`; None for models not listed (HL-205 is first-generation Gaudi)."""
    if name is None:
        return None
    model = name.strip().upper()
    return next((arch for prefix, arch in _ARCH_BY_MODEL_PREFIX if model.startswith(prefix)), None)


def parse_hl_smi_csv(
    text: str, fields: tuple[str, ...] = HL_QUERY_FIELDS, notes: list[str] | None = None
) -> tuple[DeviceFacts, ...]:
    """Devices from `hl-smi -Q <fields> -f csv,noheader`, one line per device in the order of `fields`.

    Fields other than index, name, bus_id, memory.total and uuid are ignored, except driver_version, module_id
    and serial, which go to `extra`. Without an `index` field the line order is the index. A header line that
    names the fields is skipped, so `-f csv` output reads as well.

    With `notes` None the first unreadable value raises ParseError; with a list an unreadable value costs that fact
    only (None, the reason noted), an unreadable index falls back to the line number, and a line with the wrong
    number of values costs that device only.
    """
    what = f"hl-smi -Q {','.join(fields)} -f csv,noheader"
    if not fields:
        raise ParseError(f"{what}: expected at least one query field")
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ParseError(f"{what}: expected one line per device, found {_excerpt(text)}")
    if [cell.strip().lower() for cell in lines[0].split(",")] == [field.lower() for field in fields]:
        lines = lines[1:]
    devices = []
    for number, line in enumerate(lines):
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(fields):
            problem = (
                f"{what}: expected {len(fields)} comma-separated values on line {number + 1}, "
                f"found {len(cells)}: {_excerpt(line)}"
            )
            if notes is None:
                raise ParseError(problem)
            notes.append(f"{problem}; that device is left out")
            continue
        devices.append(_device(dict(zip(fields, cells, strict=True)), number, f"{what}: line {number + 1}", notes))
    return tuple(devices)


def _device(row: dict[str, str], position: int, where: str, notes: list[str] | None) -> DeviceFacts:
    def note(problem: str, instead: str = "left unknown") -> None:
        if notes is None:
            raise ParseError(problem)
        notes.append(f"{problem}; {instead}")

    index = position
    if "index" in row:
        if _INDEX.fullmatch(row["index"]) is None:
            note(f"{where}: expected a device index, found {_excerpt(row['index'])}", "the line number is its index")
        else:
            index = int(row["index"])
    name = product_name(_value(row.get("name")))
    bus_id = _value(row.get("bus_id"))
    pci_bus_id = _bdf(bus_id) if bus_id is not None else None
    if bus_id is not None and pci_bus_id is None:
        note(f"{where}: expected a PCI address such as 0000:43:00.0 for bus_id, found {_excerpt(bus_id)}")
    memory_mib = None
    try:
        memory_mib = _memory_mib(row.get("memory.total"), where)
    except ParseError as error:
        note(str(error))
    extra = {field: value for field in _EXTRA_FIELDS if (value := _value(row.get(field))) is not None}
    if "driver_version" in extra and _DRIVER_VERSION.fullmatch(extra["driver_version"]) is None:
        note(
            f"{where}: expected a driver version such as 1.22.1-97ec1a4, found {_excerpt(extra.pop('driver_version'))}"
        )
    return DeviceFacts(
        index=index,
        name=name,
        arch=arch_from_model(name),
        memory_mib=memory_mib,
        pci_bus_id=pci_bus_id,
        uuid=_value(row.get("uuid")),
        extra=extra,
    )


def parse_hl_smi_table(text: str) -> tuple[str | None, str | None]:
    """(driver version, software version) from plain `hl-smi` (or its `-L`/`-q` log).

    `Driver Version: 1.22.1-97ec1a4` gives the driver; `HL-SMI Version: hl-1.22.1-fw-61.4.2.1` gives the software
    release 1.22.1 (the part after `-fw-` is the firmware). `Nic Driver Version:` lines are not the driver.
    """
    driver = software = None
    for raw in text.splitlines():
        line = raw.strip().strip("|").strip()
        if driver is None and (match := _DRIVER_LINE.match(line)):
            driver = match.group(1)
        if software is None and (match := _HL_SMI_LINE.match(line)):
            software = match.group(1)
    if driver is None and software is None:
        raise ParseError(
            f"hl-smi: expected 'HL-SMI Version: hl-<version>-fw-<firmware>' and 'Driver Version: <version>', "
            f"found {_excerpt(text)}"
        )
    return driver, software


# ---- helpers ---------------------------------------------------------------------------------------------------


def _value(cell: str | None) -> str | None:
    if cell is None or cell.lower() in _NOT_AVAILABLE or placeholder(cell):
        return None
    return cell


def _memory_mib(cell: str | None, where: str) -> int | None:
    value = _value(cell)
    if value is None:
        return None
    match = _MEMORY.fullmatch(value)
    if match is None:
        raise ParseError(f"{where}: expected memory.total such as '131072 MiB', found {_excerpt(value)}")
    amount, unit = int(match.group(1)), (match.group(2) or "MiB").lower()
    return amount * 1024 if unit in ("gib", "gb") else amount


# ---- the probe ---------------------------------------------------------------------------------------------------


class GaudiProbe:
    """hl-smi -Q for devices; the plain hl-smi header for the driver and the software release."""

    family = FAMILY

    def commands(self) -> dict[str, list[str]]:
        # `topo -c -N`: each module's CPU and NUMA affinity (host/links.py)
        return {
            "hl-smi-query": ["hl-smi", *hl_smi_args()],
            "hl-smi": ["hl-smi"],
            "hl-smi-topo": ["hl-smi", "topo", "-c", "-N"],
        }

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        errors = tool_errors({k: v for k, v in results.items() if k != "hl-smi-topo"})  # affinity: not a fault here
        devices = (
            parsed(output(results.get("hl-smi-query")), lambda text: parse_hl_smi_csv(text, notes=errors), errors) or ()
        )
        driver, software = parsed(output(results.get("hl-smi")), parse_hl_smi_table, errors) or (None, None)
        said = {"hl-smi": driver} if driver else {}
        queried = list(dict.fromkeys(d.extra["driver_version"] for d in devices if d.extra.get("driver_version")))
        said.update({f"hl-smi -Q{'' if len(queried) == 1 else f' ({n + 1})'}": v for n, v in enumerate(queried)})
        return ToolView(
            driver_version=driver or next(iter(queried), None),
            runtime_version=software,
            devices=devices,
            source="hl-smi" if devices else None,
            errors=tuple(errors),
            sources={"driver_version": said} if said else {},
        )
