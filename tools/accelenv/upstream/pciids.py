"""The PCI ID Repository: new device ids of a chip the matrix already has.

pci.ids names each device `<chip> [<product>]` under its vendor (`10de` NVIDIA: `3182  GB110 [B300 SXM6 AC]`).
A device id the matrix does not have, of a chip one of its SKUs has (a new GB110 board beside the B300), is
hardware a vendor may want to add, or an id to fold into an existing SKU. The matrix cites the pci.ids release it
was reviewed against (`[sources.pci-ids]`, its title names the release: `pci.ids 0.0~2026.10.24-1`); only a newer
release is read for news, so a review is done once per release, not every week. Ids a SKU's notes name were
reviewed and left out on purpose, and are not reported again.

The flow: text from the edge (`IndexClient.text`) -> `parse_pci_ids` (pure) -> `new_devices` (pure) ->
`Finding`s, or a `Problem` when the file cannot be had or read.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelenv.records import frozen
from accelenv.upstream.indexes import _Failure
from accelenv.upstream.outdated import Finding, Problem

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.matrix.model import Environment, Matrix
    from accelenv.upstream.indexes import IndexClient

PCI_IDS_URL = "https://raw.githubusercontent.com/pciutils/pciids/master/pci.ids"
MAX_PCI_IDS = 8 * 1024 * 1024  # about 1.5 MiB today

_RELEASE = re.compile(r"\A#\s+Version:\s+([0-9]{4}\.[0-9]{2}\.[0-9]{2})\s*\Z")
_CITED = re.compile(r"(?<![0-9])([0-9]{4}\.[0-9]{2}\.[0-9]{2})(?![0-9])")
_VENDOR = re.compile(r"\A([0-9a-f]{4})  (.{1,200})\Z")
_DEVICE = re.compile(r"\A\t([0-9a-f]{4})  (.{1,200})\Z")
_CHIP = re.compile(r"\A(.+?)(?: \[| \(|\Z)")


class UnreadablePciIds(ValueError):
    """The answer is not a pci.ids file."""


@frozen
class PciIds:
    """A pci.ids release: its version and, per vendor id (`10de`), device id (`3182`) -> name."""

    release: str
    devices: Mapping[str, Mapping[str, str]]


def parse_pci_ids(text: str) -> PciIds:
    """The devices of every vendor in a pci.ids file. Raises `UnreadablePciIds`."""
    if len(text) > MAX_PCI_IDS:
        raise UnreadablePciIds(f"larger than {MAX_PCI_IDS // (1024 * 1024)} MiB")
    release = None
    devices: dict[str, dict[str, str]] = {}
    vendor: str | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            match = _RELEASE.match(line)
            if match and release is None:
                release = match.group(1)
            continue
        if not line.strip():
            continue
        if line.startswith("C "):  # the device classes close the vendor list
            break
        if (match := _VENDOR.match(line)) is not None:
            vendor = match.group(1)
            devices.setdefault(vendor, {})
        elif (match := _DEVICE.match(line)) is not None and vendor is not None:
            devices[vendor][match.group(1)] = match.group(2).strip()
    if release is None:
        raise UnreadablePciIds("no '# Version: YYYY.MM.DD' line: not a pci.ids file")
    return PciIds(release=release, devices=devices)


def chip(name: str) -> str:
    """The chip a pci.ids device name starts with: `GB110 [B300 SXM6 AC]` -> `GB110`."""
    match = _CHIP.match(name)
    return match.group(1) if match else name


def cited_release(matrix: Matrix) -> str | None:
    """The pci.ids release the matrix was reviewed against, from the title of `[sources.pci-ids]`."""
    source = matrix.sources.get("pci-ids")
    match = _CITED.search(source.title) if source is not None else None
    return match.group(1) if match else None


def new_devices(matrix: Matrix, ids: PciIds, families: set[str]) -> list[tuple[str, str, str, str]]:
    """(family, "vendor:device", name, the SKU whose chip it shares) for each device of a chip a SKU of the
    family has, that no SKU lists and no SKU's notes name. Reserved ids (`[Reserved Dev ID A]`) are left out."""
    out = []
    for family_id in sorted(families):
        family = matrix.families[family_id]
        skus = [s for s in matrix.skus.values() if s.family == family_id]
        reviewed = " ".join(f"{s.notes} {s.no_driver_min}" for s in skus).lower()
        for vendor in (v.lower().removeprefix("0x") for v in family.pci_vendor_ids):
            named = ids.devices.get(vendor, {})
            known = {d.lower().removeprefix("0x"): s for s in skus for d in s.pci_device_ids}
            chips: dict[str, str] = {}  # chip -> the first SKU (by id) that has one of its devices
            for device, sku in sorted(known.items(), key=lambda pair: pair[1].id):
                if device in named:
                    chips.setdefault(chip(named[device]), sku.id)
            for device, name in sorted(named.items()):
                if device in known or "reserved" in name.lower() or f"0x{device}" in reviewed:
                    continue
                if chip(name) in chips:
                    out.append((family_id, f"{vendor}:{device}", name, chips[chip(name)]))
    return out


def pci_id_news(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, url: str = PCI_IDS_URL
) -> list[Finding | Problem]:
    """New device ids of known chips in a pci.ids release newer than the one the matrix cites."""
    families = {matrix.runtimes[e.runtime].family for e in chosen if e.runtime in matrix.runtimes}
    families = {f for f in families if matrix.families[f].pci_vendor_ids}
    if not families:
        return []
    cited = cited_release(matrix)
    if cited is None:
        message = "[sources.pci-ids] names no release (YYYY.MM.DD) in its title, so nothing says what was reviewed"
        return [Problem(env="pci-ids", name="pci.ids", index=url, message=message)]
    text = client.text(url, max_bytes=MAX_PCI_IDS, what="pci.ids")
    if isinstance(text, _Failure):
        return [Problem(env="pci-ids", name="pci.ids", index=url, message=text.message)]
    try:
        ids = parse_pci_ids(text)
    except UnreadablePciIds as error:
        return [Problem(env="pci-ids", name="pci.ids", index=url, message=f"GET {url} answered {error}")]
    if ids.release <= cited:  # YYYY.MM.DD sorts as text
        return []
    return [
        Finding(
            kind="sku",
            env=family,
            name=f"{name} ({device})",
            current="not in the matrix",
            latest=f"pci.ids {ids.release}",
            index=url,
            note=f"pci.ids {ids.release} (the matrix cites {cited}) names {device} {name!r}, a {chip(name)} like "
            f"skus.{sku}: fold it into that SKU's pci_device_ids, add a [skus.*] entry, or name it in the SKU's "
            "notes as left out; then cite the new release in [sources.pci-ids]",
        )
        for family, device, name, sku in new_devices(matrix, ids, families)
    ]
