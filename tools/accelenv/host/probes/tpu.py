"""Pure TPU lookups and the parser for `tpu-info --version`.

Generations are named the way the matrix names them: v2, v3, v4, v5e, v5p, v6e, tpu7x. PCI ids are Google
tpu-info's (`tpu_info/device.py`, tpu-info 0.14.2): v2 and v3 share device 0x0027 and differ only in the
subsystem id (0x004e = v2, 0x004f = v3).
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

from accelenv.host.facts import ParseError
from accelenv.host.probes import ProbeContext, ToolView, first_installed, output, parsed, tool_errors
from accelenv.host.probes._text import excerpt as _excerpt

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.run import ToolResult

FAMILY = "tpu"
GOOGLE_PCI_VENDOR_ID: Final = "0x1ae0"
TPU_PCI_DEVICE_IDS: Final[Mapping[str, str | None]] = MappingProxyType(
    {
        "0x0027": None,  # v2 or v3: see TPU_V2_V3_SUBSYSTEM_IDS
        "0x005e": "v4",
        "0x0062": "v5p",
        "0x0063": "v5e",
        "0x006f": "v6e",
        "0x0076": "tpu7x",
    }
)
TPU_V2_V3_SUBSYSTEM_IDS: Final[Mapping[str, str]] = MappingProxyType({"0x004e": "v2", "0x004f": "v3"})
# Accelerator-type prefixes (before `-<count>`) -> generation. v5e is sold as "v5litepod"; tpu-info prints "v6e".
_GENERATION_BY_TYPE: Final[Mapping[str, str]] = MappingProxyType(
    {
        "v2": "v2",
        "v3": "v3",
        "v4": "v4",
        "v5litepod": "v5e",
        "v5lite": "v5e",
        "v5e": "v5e",
        "v5p": "v5p",
        "v6e": "v6e",
        "tpu7x": "tpu7x",
    }
)
_ACCELERATOR_TYPE = re.compile(r"([a-z0-9]+?)(?:-[0-9]{1,6})?")
_PCI_ID = re.compile(r"(?:0x)?([0-9a-f]{1,4})", re.IGNORECASE)
_VERSION_LINE = re.compile(r"(?:-\s*)?(tpu-info|libtpu|accelerator type)(?: version)?\s*:\s*(.*)", re.IGNORECASE)
_LIBTPU_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)+\S*")  # 0.0.18, 0.0.19.dev20250721+nightly
_NOT_AVAILABLE = frozenset({"", "n/a", "na", "none", "unknown"})
_ACCELERATOR_TYPE_TEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}")  # v6e, v5litepod-8, tpu7x-8, TPU v5p
# "N/A (incompatible environment)": tpu-info under a Python its libtpu does not support (3.12+ with libtpu 0.0.20 or
# older) prints this for libtpu and accelerator type; "unknown (package metadata not found)" for its own version
_NOT_AVAILABLE_BECAUSE = re.compile(r"(?:n/a|na|none|unknown)\s*\([^()\n]{0,200}\)", re.IGNORECASE)


def generation_from_accelerator_type(value: str) -> str | None:
    """`v5litepod-8` -> `v5e`, `v5p-8` -> `v5p`, `v6e-4` -> `v6e`, `tpu7x-8` -> `tpu7x`, `v4-16` -> `v4`.

    Takes the type with or without the count (tpu-info prints `v6e`). None for anything else, including
    generations this table does not know yet: a generation is never guessed from the spelling.
    """
    match = _ACCELERATOR_TYPE.fullmatch(value.strip().lower())
    return _GENERATION_BY_TYPE.get(match.group(1)) if match else None


def generation_from_pci_ids(device_id: str, subsystem_id: str | None = None) -> str | None:
    """The generation for a Google PCI device id (`0x006f` -> `v6e`); v2/v3 need the subsystem id."""
    device = _pci_id(device_id)
    if device is None:
        return None
    if device == "0x0027":
        subsystem = _pci_id(subsystem_id) if subsystem_id is not None else None
        return TPU_V2_V3_SUBSYSTEM_IDS.get(subsystem) if subsystem is not None else None
    return TPU_PCI_DEVICE_IDS.get(device)


def parse_tpu_info_version(text: str, notes: list[str] | None = None) -> tuple[str | None, str | None]:
    """(libtpu version, accelerator type) from `tpu-info --version`.

    Reads `- libtpu version: 0.0.18` and `- accelerator type: v6e`, and the same lines at the top of plain
    `tpu-info` (`Libtpu version: ...`, `Accelerator type: ...`). "N/A", and "N/A (incompatible environment)" from
    tpu-info in a Python where its libtpu cannot load, are None: unknown, not a parse error. With `notes` None an
    unreadable libtpu version raises ParseError; with a list it is None (the reason noted) and the accelerator type
    is still read.
    """
    found: dict[str, str | None] = {}
    for line in text.splitlines():
        match = _VERSION_LINE.fullmatch(line.strip())
        if match is None:
            continue
        key, value = match.group(1).lower(), match.group(2).strip()
        unknown = value.lower() in _NOT_AVAILABLE or _NOT_AVAILABLE_BECAUSE.fullmatch(value) is not None
        found.setdefault(key, None if unknown else value)
    if "libtpu" not in found and "accelerator type" not in found:
        raise ParseError(
            f"tpu-info --version: expected 'libtpu version:' and 'accelerator type:' lines, found {_excerpt(text)}"
        )
    libtpu = found.get("libtpu")
    if libtpu is not None and _LIBTPU_VERSION.fullmatch(libtpu) is None:
        problem = f"tpu-info --version: expected a version after 'libtpu version:', found {_excerpt(libtpu)}"
        if notes is None:
            raise ParseError(problem)
        notes.append(f"{problem}; left unknown")
        libtpu = None
    accelerator_type = found.get("accelerator type")
    if accelerator_type is not None and _ACCELERATOR_TYPE_TEXT.fullmatch(accelerator_type) is None:
        problem = f"tpu-info --version: expected an accelerator type such as 'v6e', found {_excerpt(accelerator_type)}"
        if notes is None:
            raise ParseError(problem)
        notes.append(f"{problem}; left unknown")
        accelerator_type = None
    return libtpu, accelerator_type


def _pci_id(value: str) -> str | None:
    match = _PCI_ID.fullmatch(value.strip())
    return f"0x{int(match.group(1), 16):04x}" if match else None


# ---- the probe ---------------------------------------------------------------------------------------------------

METADATA_ACCELERATOR_TYPE = "instance/attributes/accelerator-type"


class TpuProbe:
    """TPU chips are seen on PCI (the hardware layer); libtpu's version comes from the installed distribution, the
    accelerator type from TPU_ACCELERATOR_TYPE, tpu-info, or (only when allowed) the GCE metadata server."""

    family = FAMILY

    def commands(self) -> dict[str, list[str]]:
        return {"tpu-info-version": ["tpu-info", "--version"]}

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        errors = tool_errors(results)
        libtpu = first_installed(ctx.distributions, "libtpu")
        accelerator_type = ctx.environ.get("TPU_ACCELERATOR_TYPE") or None
        info = parsed(
            output(results.get("tpu-info-version")), lambda text: parse_tpu_info_version(text, errors), errors
        )
        if info is not None:
            libtpu = libtpu or info[0]
            accelerator_type = accelerator_type or info[1]
        if accelerator_type is None and ctx.fetch_metadata is not None:
            accelerator_type = ctx.fetch_metadata(METADATA_ACCELERATOR_TYPE)
        extra: dict[str, str] = {}
        if accelerator_type:
            extra["accelerator_type"] = accelerator_type
            generation = generation_from_accelerator_type(accelerator_type)
            if generation:
                extra["generation"] = generation
        jax = first_installed(ctx.distributions, "jax")
        if jax:
            extra["jax"] = jax
        return ToolView(runtime_version=libtpu, errors=tuple(errors), extra=extra)
