"""The hardware layer: PCI functions from sysfs, kernel modules and device nodes. Works without any vendor tool,
so a host with a broken or missing driver is still seen for what it is."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.host.report import PciDevice

if TYPE_CHECKING:
    from accelenv.host.root import Root
    from accelenv.matrix import Family, Matrix

PCI_DEVICES = "/sys/bus/pci/devices"
# Display controllers (0x03xxxx), processing accelerators (0x12xxxx), co-processors (0x0b40xx).
ACCELERATOR_CLASSES = ("0x03", "0x12", "0x0b40")


def _hex_id(value: str | None, width: int = 4) -> str | None:
    if value is None:
        return None
    try:
        number = int(value, 16)
    except ValueError:
        return None
    return f"0x{number:0{width}x}"


def scan_pci(root: Root, matrix: Matrix) -> dict[str, list[PciDevice]]:
    """Accelerator PCI functions per family. A function counts when its device id belongs to a SKU of the family,
    or when its class is an accelerator class (so an unknown new model is still seen, as sku None)."""
    vendors = {vid: f.id for f in matrix.families.values() for vid in f.pci_vendor_ids}
    sku_by_id = {(sku.family, device_id): sku.id for sku in matrix.skus.values() for device_id in sku.pci_device_ids}
    found: dict[str, list[PciDevice]] = {}
    for address in root.listdir(PCI_DEVICES):
        base = f"{PCI_DEVICES}/{address}"
        vendor = _hex_id(root.read_value(f"{base}/vendor"))
        family = vendors.get(vendor or "")
        if family is None or vendor is None:
            continue
        device = _hex_id(root.read_value(f"{base}/device"))
        class_code = _hex_id(root.read_value(f"{base}/class"), width=6)
        sku = sku_by_id.get((family, device or ""))
        if sku is None and not (class_code and class_code.startswith(ACCELERATOR_CLASSES)):
            continue  # the vendor's NICs, audio and USB functions
        found.setdefault(family, []).append(
            PciDevice(
                address=address.lower(),
                vendor_id=vendor,
                device_id=device or "unknown",
                class_code=class_code,
                driver=root.link_name(f"{base}/driver"),
                sku=sku,
            )
        )
    return found


def module_versions(root: Root, names: tuple[str, ...]) -> dict[str, str | None]:
    """Loaded kernel modules among `names`, with `/sys/module/<name>/version` where the module has one."""
    loaded = {}
    for name in names:
        if root.exists(f"/sys/module/{name}"):
            loaded[name] = root.read_value(f"/sys/module/{name}/version")
    return loaded


def device_nodes(root: Root, family: Family) -> tuple[str, ...]:
    return tuple(sorted({node for pattern in family.device_nodes for node in root.glob(pattern)}))
