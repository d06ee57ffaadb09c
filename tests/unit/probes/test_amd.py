"""AMD parsers against real captures (../shared/fixtures, see its SOURCES.md) and small inline ones."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest
from hostkit import capture, make_root, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from accelenv.host.facts import DeviceFacts, ParseError
from accelenv.host.probes import ProbeContext, ToolView, amd
from accelenv.host.root import Root
from accelenv.host.run import ToolResult

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


STATIC_MI350X = "amd-smi-static-EXCERPT__rocm-systems-PR2987__MI350X.txt"
STATIC_JSON_BARE_LIST = "amd-smi-static-clock-json-EXCERPT__rocprofiler-compute-PR836__MI355-bare-list.txt"
STATIC_JSON_ENVELOPE = "amd-smi-static-json-EXCERPT__ajean-issue39__RX7800XT-gpu_data-envelope.txt"
VERSION_LINES = "amd-smi-version__k8s-device-plugin-issue157-and-legacy-rocm-build-issue4759.txt"
ROCM_SMI_MI100_571 = "rocm-smi-json__telegraf__mi100_rocm571.json"
ROCM_SMI_MI100_602 = "rocm-smi-json__telegraf__mi100_rocm602.json"
ROCM_SMI_RX6700XT = "rocm-smi-json__telegraf__rx6700xt_rocm612.json"
ROCM_SMI_MI50 = "rocm-smi-json__telegraf__vega-20-WKS-GL-XE.json"

# Inline captures in the real formats, with figures from the MI300X x4 captures (rocminfo: gfx942:sramecc+:xnack-,
# "AMD Instinct MI300X"; rocm-smi -a: 0x74a1, 0000:26:00.0, driver 6.7.0; hipDeviceQuery: 196592 MB) and from
# the MI350X `amd-smi static` excerpt.
STATIC_JSON_MI300X = """{
    "gpu_data": [
        {
            "gpu": 0,
            "asic": {
                "market_name": "AMD Instinct MI300X",
                "vendor_id": "0x1002",
                "device_id": "0x74a1",
                "target_graphics_version": "gfx942:sramecc+:xnack-"
            },
            "bus": {"bdf": "0000:26:00.0", "max_pcie_width": 16},
            "driver": {"name": "amdgpu", "version": "6.7.0"},
            "vram": {"type": "HBM", "vendor": "N/A", "size": {"value": 196592, "unit": "MB"}}
        }
    ]
}"""
STATIC_JSON_MI350X_BARE = """[
    {
        "gpu": 0,
        "asic": {"market_name": "AMD Instinct MI350X", "device_id": "0x75a0", "target_graphics_version": "gfx950"},
        "bus": {"bdf": "0000:05:00.0"},
        "driver": {"name": "amdgpu", "version": "6.18.3"},
        "vram": "N/A"
    }
]"""
ROCM_SMI_JSON_RX6700XT = """{
    "card0": {
        "Device Name": "Navi 22 [Radeon RX 6700/6700 XT / 6800M]",
        "Device ID": "0x73df",
        "Unique ID": "N/A",
        "PCI Bus": "0000:07:00.0",
        "VRAM Total Memory (B)": "12868124672",
        "Card Series": "Navi 22 [Radeon RX 6700/6700 XT / 6800M]",
        "GFX Version": "gfx1031"
    },
    "system": {"Driver version": "6.3.6"}
}"""
VERSION_LINE_LEGACY = (
    "AMDSMI Tool: 25.4.2+aca1101 | AMDSMI Library version: 25.4.0 | ROCm version: 6.4.1 | amdgpu version: 6.10.5 "
    "| amd_hsmp version: N/A"
)

MI300X = DeviceFacts(
    index=0,
    name="AMD Instinct MI300X",
    arch="gfx942",
    memory_mib=196592,
    pci_bus_id="0000:26:00.0",
    pci_device_id="0x74a1",
    extra={"gfx_target": "gfx942:sramecc+:xnack-", "driver_version": "6.7.0"},
)
MI350X = DeviceFacts(
    index=0,
    name="AMD Instinct MI350X",
    arch="gfx950",
    pci_bus_id="0000:05:00.0",
    pci_device_id="0x75a0",
    extra={"driver_version": "6.18.3"},
)
RX6700XT = DeviceFacts(
    index=0,
    name="Navi 22 [Radeon RX 6700/6700 XT / 6800M]",
    arch="gfx1031",
    memory_mib=12272,
    pci_bus_id="0000:07:00.0",
    pci_device_id="0x73df",
)


# ---- amd-smi static --json ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (STATIC_JSON_MI300X, (MI300X,)),
        (STATIC_JSON_MI350X_BARE, (MI350X,)),
        ("[]", ()),
        ('{"gpu_data": []}', ()),
    ],
    ids=["gpu_data-envelope-MI300X", "bare-list-MI350X", "no-gpus-bare", "no-gpus-envelope"],
)
def test_amd_smi_static_json_reads_both_shapes(text: str, expected: tuple[DeviceFacts, ...]) -> None:
    assert amd.parse_amd_smi_static_json(text) == expected


@pytest.mark.parametrize(
    ("size", "mib"),
    [
        ({"value": 196592, "unit": "MB"}, 196592),
        ("64289 MB", 64289),
        (64289, 64289),
        ({"value": 34342961152, "unit": "B"}, 32752),
        ({"value": 192, "unit": "GB"}, 196608),
        ("N/A", None),
        (None, None),
    ],
)
def test_amd_smi_vram_size_is_read_in_mib(size: object, mib: int | None) -> None:
    text = json.dumps([{"gpu": 3, "vram": {"size": size}}])
    (device,) = amd.parse_amd_smi_static_json(text)
    assert (device.index, device.memory_mib) == (3, mib)


def test_amd_smi_static_json_skips_cpu_entries_and_leading_noise() -> None:
    text = "~$ amd-smi static --json\n" + json.dumps([{"cpu": 0, "smu": {}}, {"gpu": 1, "asic": "N/A"}])
    assert amd.parse_amd_smi_static_json(text) == (DeviceFacts(index=1),)


def test_amd_smi_static_json_envelope_capture_reads_once_completed() -> None:
    """The RX 7800 XT excerpt (Python warnings, then JSON) is cut mid-document; closed after `bdf` it parses."""
    text = capture(STATIC_JSON_ENVELOPE)
    head = text[: text.index('"bdf": "0000:03:00.0"') + len('"bdf": "0000:03:00.0"')]
    (device,) = amd.parse_amd_smi_static_json(head + "}}]}")
    assert device == DeviceFacts(
        index=0, name="AMD Radeon RX 7800 XT", arch="gfx1101", pci_bus_id="0000:03:00.0", pci_device_id="0x747e"
    )


@pytest.mark.parametrize("name", [STATIC_JSON_ENVELOPE, STATIC_JSON_BARE_LIST])
def test_amd_smi_static_json_excerpts_are_truncated(name: str) -> None:
    with pytest.raises(ParseError, match=r"^amd-smi static --json: the output ends inside the JSON document"):
        amd.parse_amd_smi_static_json(capture(name))


def test_amd_smi_static_human_output_is_not_json() -> None:
    with pytest.raises(ParseError, match=r"^amd-smi static --json: expected JSON output, found '\$ amd-smi static"):
        amd.parse_amd_smi_static_json(capture(STATIC_MI350X))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "amd-smi static --json: expected JSON output, found empty output"),
        (
            '{"cpu_data": []}',
            "amd-smi static --json: expected a 'gpu_data' list in the top-level object, found keys: cpu_data",
        ),
        ('{"gpu_data": {}}', "amd-smi static --json: expected a list of GPU objects, found an object"),
        ("[1]", "amd-smi static --json: expected an object for GPU entry 0, found '1'"),
        ('[{"gpu": "zero"}]', "amd-smi static --json: GPU entry 0: 'gpu': expected a whole number, found 'zero'"),
        (
            '[{"gpu": 0, "vram": {"size": "16 furlongs"}}]',
            (
                "amd-smi static --json: GPU entry 0: 'vram.size': expected a size in B, KB, MB or GB, "
                "found the unit 'furlongs'"
            ),
        ),
        (
            '[{"gpu": 0, "vram": {"size": "lots"}}]',
            "amd-smi static --json: GPU entry 0: 'vram.size': expected a size such as '196592 MB', found 'lots'",
        ),
        ('[{"gpu": 0}] trailing', "amd-smi static --json: unexpected text after the JSON document: 'trailing'"),
    ],
)
def test_amd_smi_static_json_errors_say_what_was_expected(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=f"^{re.escape(message)}$"):
        amd.parse_amd_smi_static_json(text)


# ---- amd-smi version ---------------------------------------------------------------------------------------------


def _version_lines() -> list[str]:
    return [line for line in capture(VERSION_LINES).splitlines() if line.strip() and not line.startswith("#")]


def test_amd_smi_version_captures() -> None:
    in_tree_driver, dkms_driver = _version_lines()
    # issue #157: the in-tree amdgpu reports the kernel banner as its version, which is no driver version
    assert amd.parse_amd_smi_version(in_tree_driver) == (None, "6.4.0")
    assert amd.parse_amd_smi_version(dkms_driver) == ("6.10.5", "6.4.1")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (VERSION_LINE_LEGACY, ("6.10.5", "6.4.1")),
        (VERSION_LINE_LEGACY.replace(" | ", "\n"), ("6.10.5", "6.4.1")),
        ("AMDSMI Tool: 25.3.0 | ROCm version: N/A | amdgpu version: N/A", (None, None)),
    ],
    ids=["one-line", "one-field-per-line", "not-available"],
)
def test_amd_smi_version_forms(text: str, expected: tuple[str | None, str | None]) -> None:
    assert amd.parse_amd_smi_version(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "amd-smi version: expected fields such as 'ROCm version:' and 'amdgpu version:', found empty output"),
        (
            "command not found",
            "amd-smi version: expected fields such as 'ROCm version:' and 'amdgpu version:', found 'command not found'",
        ),
        ("ROCm version: seven", "amd-smi version: expected a version after 'ROCm version:', found 'seven'"),
    ],
)
def test_amd_smi_version_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=f"^{re.escape(message)}$"):
        amd.parse_amd_smi_version(text)


# ---- rocm-smi --json ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "driver", "bus_ids", "first"),
    [
        (
            ROCM_SMI_MI100_571,
            "6.2.4",
            ("0000:1e:00.0", "0000:22:00.0", "0000:3f:00.0", "0000:43:00.0", "0000:46:00.0", "0000:49:00.0"),
            DeviceFacts(
                index=0,
                name="Arcturus GL-XL [Instinct MI100]",
                memory_mib=32752,
                pci_bus_id="0000:1e:00.0",
                pci_device_id="0x738c",
            ),
        ),
        (
            ROCM_SMI_MI100_602,
            "6.3.6",
            ("0000:83:00.0", "0000:a3:00.0", "0000:c3:00.0", "0000:e3:00.0"),
            DeviceFacts(
                index=0,
                name="Arcturus GL-XL [Instinct MI100]",
                memory_mib=32752,
                pci_bus_id="0000:83:00.0",
                pci_device_id="0x738c",
                extra={"unique_id": "0x79ccd55167a2124a"},
            ),
        ),
        (ROCM_SMI_RX6700XT, "6.3.6", ("0000:07:00.0",), RX6700XT),
        (
            ROCM_SMI_MI50,
            "5.9.17",
            ("0000:63:00.0",),
            DeviceFacts(
                index=0,
                name="Radeon Instinct MI50 32GB",
                memory_mib=32752,
                pci_bus_id="0000:63:00.0",
                pci_device_id="0x66a1",
                extra={"unique_id": "0x2f048617326b1ea"},
            ),
        ),
    ],
    ids=["mi100-rocm5.7.1", "mi100-rocm6.0.2", "rx6700xt-rocm6.1.2", "mi50"],
)
def test_rocm_smi_json_captures(name: str, driver: str, bus_ids: tuple[str, ...], first: DeviceFacts) -> None:
    facts = amd.parse_rocm_smi_json(capture(name))
    assert (facts.family, facts.tool, facts.driver_version, facts.runtime_version) == ("amd", "rocm-smi", driver, None)
    assert tuple(d.pci_bus_id for d in facts.devices) == bus_ids
    assert [d.index for d in facts.devices] == list(range(len(bus_ids)))
    assert facts.devices[0] == first


def test_rocm_smi_json_inline() -> None:
    facts = amd.parse_rocm_smi_json(ROCM_SMI_JSON_RX6700XT)
    assert (facts.driver_version, facts.devices) == ("6.3.6", (RX6700XT,))


def test_rocm_smi_json_orders_cards_by_number() -> None:
    text = json.dumps({"card10": {}, "card2": {"GPU ID": "0x738C"}, "system": {}})
    facts = amd.parse_rocm_smi_json(text)
    assert [(d.index, d.pci_device_id) for d in facts.devices] == [(2, "0x738c"), (10, None)]
    assert facts.driver_version is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "rocm-smi --json: expected JSON output, found empty output"),
        ("[]", "rocm-smi --json: expected an object with 'card0'... and 'system', found a list"),
        ('{"gpu0": {}}', "rocm-smi --json: expected 'card0'... objects or a 'system' object, found keys: gpu0"),
        ('{"card0": "N/A"}', "rocm-smi --json: expected an object for 'card0', found 'N/A'"),
        (
            '{\n"card0": {\n',
            "rocm-smi --json: the output ends inside the JSON document (truncated), found '{ \"card0\": {'",
        ),
    ],
)
def test_rocm_smi_json_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=f"^{re.escape(message)}$"):
        amd.parse_rocm_smi_json(text)


# ---- /opt/rocm/.info/version -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"), [("6.4.1-120\n", "6.4.1"), ("6.3.0", "6.3.0"), ("7.0.2-56 ", "7.0.2"), ("5.7", "5.7")]
)
def test_rocm_version_file(text: str, expected: str) -> None:
    assert amd.rocm_version_from_file(text) == expected


@pytest.mark.parametrize("text", ["", "\n", "six", "6", "6.4.1 beta"])
def test_rocm_version_file_garbage(text: str) -> None:
    with pytest.raises(ParseError, match=r"^/opt/rocm/\.info/version: expected a version such as '6\.4\.1-120'"):
        amd.rocm_version_from_file(text)


# ---- the amdgpu version: one rule for amd-smi static, amd-smi version and rocm-smi ---------------------------------

MI300A_STATIC = "amd-smi-static__amdsmi-docs__MI300A.txt"
# `amd-smi static --json` of ROCm 6.0 on a one-GPU host: the GPU's object alone (amdsmi_logger at rocm-6.0.0 prints
# `self.output` when there is one device), with ROCm 6.0's keys (amdsmi_commands.py at rocm-6.0.0: driver_name,
# driver_version, driver_date; vram_size_mb) and the figures of the "Example output from amd-smi static" of
# ROCm/amdsmi amdsmi_cli/README.md at rocm-6.0.0 (a Navi 21, device 0x73bf, at 0000:23:00.0; driver 6.1.10;
# 16368 MB of GDDR6), values typed as that code writes them in JSON.
STATIC_JSON_ROCM60 = json.dumps(
    {
        "gpu": 0,
        "asic": {
            "market_name": "0x73bf",
            "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "subvendor_id": 0,
            "device_id": "0x73bf",
            "rev_id": "0xc3",
            "asic_serial": "0xffffffffffffffff",
            "xgmi_physical_id": "N/A",
        },
        "bus": {
            "bdf": "0000:23:00.0",
            "max_pcie_speed": 16,
            "max_pcie_lanes": 16,
            "pcie_interface_version": 4,
            "slot_type": "PCIE",
        },
        "vbios": {
            "name": "NAVI21 Gaming XL D41209",
            "build_date": "2020/10/29 13:30",
            "part_number": "113-D4120900-101",
            "version": "020.001.000.038.015720",
        },
        "board": {
            "model_number": "N/A",
            "product_serial": "0",
            "fru_id": "N/A",
            "manufacturer_name": "N/A",
            "product_name": "N/A",
        },
        "limit": {
            "max_power": 203,
            "current_power": 203,
            "slowdown_edge_temperature": 100,
            "slowdown_hotspot_temperature": 110,
            "slowdown_vram_temperature": 100,
            "shutdown_edge_temperature": 105,
            "shutdown_hotspot_temperature": 115,
            "shutdown_vram_temperature": 105,
        },
        "driver": {"driver_name": "amdgpu", "driver_version": "6.1.10", "driver_date": "2015/01/01 00:00"},
        "vram": {"vram_type": "GDDR6", "vram_vendor": "SAMSUNG", "vram_size_mb": 16368},
        "cache": {"cache 0": {"cache_size": 16, "cache_level": 1}},
        "ras": {
            "eeprom_version": "N/A",
            "parity_schema": "N/A",
            "single_bit_schema": "N/A",
            "double_bit_schema": "N/A",
            "poison_schema": "N/A",
            "ecc_block_state": "N/A",
        },
        "partition": {"compute_partition": "N/A", "memory_partition": "N/A"},
        "numa": {"node": 0, "affinity": "NONE"},
    },
    indent=4,
)
NAVI21 = DeviceFacts(
    index=0,
    name=None,  # amd-smi 6.0 printed the device id (0x73bf) where it had no market name: not a product name
    memory_mib=16368,
    pci_bus_id="0000:23:00.0",
    pci_device_id="0x73bf",
    extra={"driver_version": "6.1.10"},
)


def _static_driver(driver: dict[str, str]) -> str:
    """The MI300X inline capture with another `driver` section."""
    data = json.loads(STATIC_JSON_MI300X)
    data["gpu_data"][0]["driver"] = driver
    return json.dumps(data)


def _mi300a_driver_version() -> str:
    """What the MI300A `amd-smi static` of the amdsmi docs prints as DRIVER VERSION (a kernel release)."""
    return next(line.split(":", 1)[1].strip() for line in capture(MI300A_STATIC).splitlines() if "VERSION: 6." in line)


@pytest.mark.parametrize(
    ("reported", "version", "kernel"),
    [
        ("6.10.5", "6.10.5", None),  # amdgpu-dkms (legacy-rocm-build#4759)
        ("6.16.13", "6.16.13", None),  # AMD GPU driver 30.20.x (rocm-systems#7264)
        ("6.18.3", "6.18.3", None),  # the MI350X `amd-smi static` (rocm-systems#2987)
        ("6.19.14.31400000", "6.19.14.31400000", None),  # newer packaged drivers add a build number
        ("5.15.0-164-generic", None, "5.15.0-164-generic"),  # that host's OS_KERNEL_VERSION (rocm-systems#2987)
        ("6.8.4-3-pve", None, "6.8.4-3-pve"),  # a Proxmox VE kernel release (strongtz/i915-sriov-dkms#178)
        ("6.19.11-ogc1.1.fc44.x86_64", None, "6.19.11-ogc1.1.fc44.x86_64"),  # a Fedora one (ublue-os/bazzite#4786)
        ("6.17.1-300.fc43.x86_64", None, "6.17.1-300.fc43.x86_64"),  # issue 15
        ("7.0.0-3-pve", None, "7.0.0-3-pve"),  # issue 15
        (
            "Linux version 6.14.0-24-generic (buildd@lcy02-amd64-049) (x86_64-linux-gnu-gcc-13) #24-Ubuntu SMP",
            None,
            "6.14.0-24-generic",
        ),
        ("N/A", None, None),
        ("amdgpu", None, None),
    ],
)
def test_the_amdgpu_version_rule(reported: str, version: str | None, kernel: str | None) -> None:
    assert (amd.amdgpu_version(reported), amd.in_tree_kernel(reported)) == (version, kernel)


def test_the_rule_on_captures_of_in_tree_drivers() -> None:
    banner = _version_lines()[0].split("amdgpu version: ")[1].split(" |")[0]  # k8s-device-plugin#157
    assert (amd.amdgpu_version(banner), amd.in_tree_kernel(banner)) == (None, "6.8.0-79-generic")
    release = _mi300a_driver_version()  # the MI300A host of the amdsmi docs runs kernel 6.9.0-rc5+
    assert (release, amd.amdgpu_version(release), amd.in_tree_kernel(release)) == ("6.9.0-rc5+", None, "6.9.0-rc5+")


def test_a_custom_kernel_named_like_a_driver_is_known_by_the_running_kernel() -> None:
    assert amd.amdgpu_version("6.1.10") == "6.1.10"
    assert amd.amdgpu_version("6.1.10", kernel_release="6.1.10") is None
    assert amd.amdgpu_version("6.1.10", kernel_release="6.8.0-79-generic") == "6.1.10"


def test_amd_smi_static_of_rocm_6_0_on_a_one_gpu_host() -> None:
    assert amd.parse_amd_smi_static_json(STATIC_JSON_ROCM60) == (NAVI21,)
    assert amd.parse_amd_smi_static_json(f"[{STATIC_JSON_ROCM60}]") == (NAVI21,)


@pytest.mark.parametrize(
    "driver",
    [
        {"name": "amdgpu", "version": "6.9.0-rc5+"},
        {"driver_name": "amdgpu", "driver_version": "6.9.0-rc5+"},
        {"name": "amdgpu", "version": {"value": "6.9.0-rc5+"}},
    ],
    ids=["name-version", "rocm-6.0-keys", "value-leaf"],
)
def test_amd_smi_static_keeps_a_kernel_release_apart_from_the_driver_version(driver: dict[str, object]) -> None:
    (device,) = amd.parse_amd_smi_static_json(_static_driver(driver))  # type: ignore[arg-type]
    assert device.extra == {"gfx_target": "gfx942:sramecc+:xnack-", "driver_kernel": "6.9.0-rc5+"}


def test_rocm_smi_driver_version_falls_back_to_the_kernel_release() -> None:
    """rocm_smi_lib's rsmi_version_str_get reads /sys/module/amdgpu/version and, without it, uname's release."""
    text = ROCM_SMI_JSON_RX6700XT.replace('"Driver version": "6.3.6"', '"Driver version": "6.8.0-79-generic"')
    facts = amd.parse_rocm_smi_json(text)
    assert (facts.driver_version, facts.driver_kernel, facts.devices) == (None, "6.8.0-79-generic", (RX6700XT,))
    assert amd.parse_rocm_smi_json(ROCM_SMI_JSON_RX6700XT).driver_kernel is None


def _amd_view(tmp_path: Path, outputs: dict[str, str], files: dict[str, str] | None = None) -> ToolView:
    probe = amd.AmdProbe()
    results = {
        key: ToolResult(argv=tuple(argv), returncode=0, stdout=outputs[key], stderr="", seconds=0.1, fault=None)
        for key, argv in probe.commands().items()
        if key in outputs
    }
    ctx = ProbeContext(root=Root(make_root(tmp_path, files=files)), environ={}, distributions={})
    return probe.interpret(ctx, results)


def test_the_probe_applies_one_rule_to_every_path(tmp_path: Path) -> None:
    banner, dkms = _version_lines()
    in_tree = _amd_view(
        tmp_path / "in-tree",
        {
            "amd-smi-static": _static_driver({"name": "amdgpu", "version": "6.8.0-79-generic"}),
            "amd-smi-version": banner,
        },
    )
    assert (in_tree.driver_version, in_tree.extra, in_tree.sources, in_tree.errors) == (
        None,
        {"driver_kernel": "6.8.0-79-generic"},
        {},
        (),
    )
    packaged = _amd_view(
        tmp_path / "dkms",
        {"amd-smi-static": _static_driver({"name": "amdgpu", "version": "6.10.5"}), "amd-smi-version": dkms},
    )
    assert packaged.driver_version == "6.10.5"
    assert packaged.sources == {"driver_version": {"amd-smi static": "6.10.5", "amd-smi version": "6.10.5"}}
    custom = _amd_view(
        tmp_path / "custom",
        {"amd-smi-static": STATIC_JSON_ROCM60},
        files={"/proc/sys/kernel/osrelease": "6.1.10\n"},
    )
    assert (custom.driver_version, custom.extra) == (None, {"driver_kernel": "6.1.10"})
    legacy = _amd_view(
        tmp_path / "rocm-smi",
        {"rocm-smi": ROCM_SMI_JSON_RX6700XT.replace('"6.3.6"', '"6.9.0-rc5+"')},
    )
    assert (legacy.driver_version, legacy.extra, legacy.source) == (None, {"driver_kernel": "6.9.0-rc5+"}, "rocm-smi")


# ---- never anything but ParseError ---------------------------------------------------------------------------------

PARSERS: dict[str, Callable[[str], object]] = {
    "amd-smi-static-json": amd.parse_amd_smi_static_json,
    "amd-smi-version": amd.parse_amd_smi_version,
    "rocm-smi-json": amd.parse_rocm_smi_json,
    "rocm-version-file": amd.rocm_version_from_file,
}
JSON_KEYS = st.sampled_from(
    ["gpu_data", "gpu", "cpu", "asic", "market_name", "device_id", "target_graphics_version", "bus", "bdf", "vram",
     "size", "value", "unit", "driver", "version", "driver_version", "vram_size_mb", "card0", "card12", "system",
     "Driver version", "Card series",
     "Device ID", "GPU ID", "GFX Version", "PCI Bus", "VRAM Total Memory (B)", "Unique ID"]
)  # fmt: skip
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(JSON_KEYS | st.text(max_size=6), children, max_size=5)
    ),
    max_leaves=40,
)


@pytest.mark.parametrize("parser", PARSERS.values(), ids=PARSERS.keys())
@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_random_text_gives_facts_or_parse_error(parser: Callable[[str], object], text: str) -> None:
    assert outcome(parser, text)


@pytest.mark.parametrize("parser", [amd.parse_amd_smi_static_json, amd.parse_rocm_smi_json])
@settings(max_examples=200, deadline=None)
@given(value=JSON_VALUES)
def test_random_json_gives_facts_or_parse_error(parser: Callable[[str], object], value: object) -> None:
    assert outcome(parser, json.dumps(value))


@pytest.mark.parametrize(
    ("parser", "name"),
    [
        (amd.parse_amd_smi_static_json, STATIC_JSON_ENVELOPE),
        (amd.parse_amd_smi_static_json, STATIC_JSON_BARE_LIST),
        (amd.parse_amd_smi_version, VERSION_LINES),
        (amd.parse_rocm_smi_json, ROCM_SMI_MI100_571),
        (amd.parse_rocm_smi_json, ROCM_SMI_RX6700XT),
        (amd.rocm_version_from_file, VERSION_LINES),
    ],
)
def test_truncated_captures_give_facts_or_parse_error(parser: Callable[[str], object], name: str) -> None:
    text = capture(name)

    @settings(max_examples=200, deadline=None)
    @given(cut=st.integers(min_value=0, max_value=len(text)))
    def check(cut: int) -> None:
        assert outcome(parser, text[:cut])

    check()


@pytest.mark.parametrize(
    ("parser", "text"),
    [
        (amd.parse_amd_smi_static_json, STATIC_JSON_MI300X),
        (amd.parse_amd_smi_static_json, STATIC_JSON_MI350X_BARE),
        (amd.parse_amd_smi_static_json, STATIC_JSON_ROCM60),
        (amd.parse_amd_smi_version, VERSION_LINE_LEGACY),
        (amd.parse_rocm_smi_json, ROCM_SMI_JSON_RX6700XT),
    ],
)
def test_truncated_inline_captures_give_facts_or_parse_error(parser: Callable[[str], object], text: str) -> None:
    for cut in range(len(text) + 1):
        assert outcome(parser, text[:cut])
