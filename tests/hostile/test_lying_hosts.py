"""Issue 28, wrong verdicts from lying hosts: a device the tool lists with no PCI function behind it, a PCI
device id the tool and sysfs disagree on, two devices with one UUID, and memory far below the SKU's each fail
(check/consistency.py); an honest host raises nothing. Each lie is applied to the same honest host in turn."""

from __future__ import annotations

import dataclasses

import pytest
from reference import REFERENCE_MATRIX

from accelenv.check.consistency import consistency_findings
from accelenv.host.report import Accelerator, Device, PciDevice
from accelenv.matrix.load import load_matrix

MATRIX = load_matrix(REFERENCE_MATRIX, use_cache=False)
SKU = MATRIX.skus["h100-sxm"]


def _device(index: int) -> Device:
    return Device(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        arch="sm_90",
        memory_mib=81559,
        pci_bus_id=f"00000000:{0x17 + index:02X}:00.0",
        pci_device_id="0x233010DE",
        uuid=f"GPU-{index:08d}",
        sku=SKU.id,
    )


def _pci(index: int, device_id: str = "0x2330") -> PciDevice:
    return PciDevice(
        address=f"0000:{0x17 + index:02x}:00.0",
        vendor_id="0x10de",
        device_id=device_id,
        class_code="0x030200",
        driver="nvidia",
        sku=SKU.id,
    )


def _host(devices: list[Device], pci: list[PciDevice]) -> Accelerator:
    return Accelerator(
        family="nvidia",
        driver_version="590.48.01",
        runtime_version="13.1",
        devices=tuple(devices),
        source="nvidia-smi",
        errors=(),
        pci_devices=tuple(pci),
    )


HONEST = ([_device(0), _device(1)], [_pci(0), _pci(1)])
LIES = {
    "no PCI function behind a listed device": (HONEST[0], [_pci(0)], "accelerator.consistency.pci"),
    "the tool's device id is not sysfs's": (HONEST[0], [_pci(0), _pci(1, "0x2901")], "accelerator.consistency.pci-id"),
    "two devices with one UUID": (
        [_device(0), dataclasses.replace(_device(1), uuid="GPU-00000000")],
        HONEST[1],
        "accelerator.consistency.uuid",
    ),
    "an 80 GB part reporting 1 GiB": (
        [_device(0), dataclasses.replace(_device(1), memory_mib=1024)],
        HONEST[1],
        "accelerator.consistency.memory",
    ),
}


def test_an_honest_host_raises_nothing() -> None:
    assert SKU.memory_mib is not None  # the memory lie is judged against the matrix's declared memory
    assert list(consistency_findings(MATRIX, _host(*HONEST))) == []


@pytest.mark.parametrize("lie", list(LIES))
def test_each_lie_fails(lie: str) -> None:
    devices, pci, expected = LIES[lie]
    findings = list(consistency_findings(MATRIX, _host(devices, pci)))
    assert [f.id for f in findings] == [expected]
    assert all(f.status == "fail" for f in findings)


def test_without_a_readable_bus_nothing_is_judged() -> None:
    assert list(consistency_findings(MATRIX, _host(HONEST[0], []))) == []
