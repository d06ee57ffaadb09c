"""The nvidia-smi parsers against real captures (../shared/fixtures, see its SOURCES.md) and against garbage."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import pytest
from hostkit import FIXTURES, capture, make_root
from hypothesis import given, settings
from hypothesis import strategies as st

from accelenv.host.facts import DeviceFacts, ParseError, ToolFacts
from accelenv.host.probes import ProbeContext, nvidia
from accelenv.host.root import Root
from accelenv.host.run import ToolResult

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


MASKED_UUID = "GPU-00000000-0000-0000-0000-000000000000"  # nvidia_gpu_exporter masks every UUID to this


def header_fields(text: str) -> tuple[str, ...]:
    """The --query-gpu fields a capture was produced with, read from its header line (units included)."""
    return tuple(text.splitlines()[0].split(", "))


def exporter(kind: str, machine: str, driver: str, platform: str = "linux-x86_64") -> str:
    return f"{kind}__nvidia_gpu_exporter__{machine}__{driver}__{platform}.txt"


# --- a capture that lives in this file, so the basic parse is tested without ../shared --------------------------
# Figures from the H100 80GB HBM3 capture (590.48.01). The second line is made up from the first: the same card at
# another bus address, with MIG on.
INLINE_QUERY_GPU = (
    "0, NVIDIA H100 80GB HBM3, 00000000:00:09.0, 0x233010DE, GPU-00000000-0000-0000-0000-000000000000, "
    "81559, 9.0, 590.48.01, Disabled\n"
    "1, NVIDIA H100 80GB HBM3, 00000000:17:00.0, 0x233010DE, GPU-00000000-0000-0000-0000-000000000001, "
    "81559, 9.0, 590.48.01, Enabled\n"
)


def h100(index: int, bus: str, uuid: str, mig: str) -> DeviceFacts:
    return DeviceFacts(
        index=index,
        name="NVIDIA H100 80GB HBM3",
        arch="sm_90",
        memory_mib=81559,
        pci_bus_id=bus,
        pci_device_id="0x2330",
        uuid=uuid,
        extra={"driver_version": "590.48.01", "mig.mode.current": mig},
    )


def test_query_gpu_args() -> None:
    assert nvidia.query_gpu_args() == [
        "--query-gpu=index,name,pci.bus_id,pci.device_id,uuid,memory.total,compute_cap,driver_version,mig.mode.current",
        "--format=csv,noheader,nounits",
    ]


def test_parse_query_gpu_inline() -> None:
    assert nvidia.parse_query_gpu(INLINE_QUERY_GPU) == (
        h100(0, "0000:00:09.0", MASKED_UUID, "Disabled"),
        h100(1, "0000:17:00.0", "GPU-00000000-0000-0000-0000-000000000001", "Enabled"),
    )


def test_parse_query_gpu_inline_with_header_and_units() -> None:
    header = ", ".join(nvidia.QUERY_FIELDS).replace("memory.total", "memory.total [MiB]")
    text = header + "\n" + INLINE_QUERY_GPU.replace(", 81559,", ", 81559 MiB,")
    assert nvidia.parse_query_gpu(text) == nvidia.parse_query_gpu(INLINE_QUERY_GPU)


# --- --query-gpu captures ---------------------------------------------------------------------------------------
def one_gpu(
    name: str, arch: str, memory: int, *, bus: str, device: str, extra: dict[str, str]
) -> tuple[DeviceFacts, ...]:
    facts = DeviceFacts(
        index=0,
        name=name,
        arch=arch,
        memory_mib=memory,
        pci_bus_id=bus,
        pci_device_id=device,
        uuid=MASKED_UUID,
        extra=extra,
    )
    return (facts,)


def rtx_2080_super(extra: dict[str, str]) -> tuple[DeviceFacts, ...]:
    return one_gpu("NVIDIA GeForce RTX 2080 SUPER", "sm_75", 8192, bus="0000:0c:00.0", device="0x1e81", extra=extra)


QUERY_GPU_CASES: list[tuple[str, tuple[DeviceFacts, ...]]] = [
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-h100-80gb-hbm3", "590.48.01"),
        (h100(0, "0000:00:09.0", MASKED_UUID, "Disabled"),),
    ),
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-h100-mig", "590.48.01"),
        (h100(0, "0000:00:09.0", MASKED_UUID, "Enabled"),),
    ),
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-h200", "590.48.01"),
        one_gpu(
            "NVIDIA H200", "sm_90", 143771, bus="0000:83:00.0", device="0x2335",
            extra={"driver_version": "590.48.01", "mig.mode.current": "Disabled"},
        ),
    ),
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-h200-mig", "590.48.01"),
        one_gpu(
            "NVIDIA H200", "sm_90", 143771, bus="0000:83:00.0", device="0x2335",
            extra={"driver_version": "590.48.01", "mig.mode.current": "Enabled"},
        ),
    ),
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-l40s", "595.80"),
        one_gpu(
            "NVIDIA L40S", "sm_89", 46068, bus="0000:01:00.0", device="0x26b9",
            extra={"driver_version": "595.80", "kmd_version": "595.80"},
        ),
    ),
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-geforce-rtx-4080-super", "595.71.05"),
        one_gpu(
            "NVIDIA GeForce RTX 4080 SUPER", "sm_89", 16376, bus="0000:01:00.0", device="0x2702",
            extra={"driver_version": "595.71.05", "kmd_version": "595.71.05"},
        ),
    ),
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-geforce-rtx-2080-super", "595.71.05"),
        rtx_2080_super({"driver_version": "595.71.05", "kmd_version": "595.71.05"}),
    ),
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-geforce-rtx-2080-super", "610.57.04"),
        rtx_2080_super({"driver_version": "610.57.04", "kmd_version": "610.57.04"}),
    ),
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-geforce-rtx-2080-super", "610.62", "windows-x86_64"),
        rtx_2080_super({"driver_version": "610.62", "kmd_version": "610.62"}),
    ),
    (
        exporter("nvidia-smi-query-gpu-csv", "nvidia-geforce-rtx-2080-super", "591.86", "windows-x86_64"),
        rtx_2080_super({"driver_version": "591.86"}),
    ),
    (
        "nvidia-smi-query-gpu-csv__unnamed-repo-XE9780-perf-test__7x-B300-SXM6-AC__610.57.04.txt",
        tuple(
            DeviceFacts(index=i, name="NVIDIA B300 SXM6 AC", arch="sm_103", extra={"driver_version": "610.57.04"})
            for i in range(7)
        ),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("fixture", "expected"), QUERY_GPU_CASES, ids=[c[0].split("__")[2] for c in QUERY_GPU_CASES])
def test_parse_query_gpu_capture(fixture: str, expected: tuple[DeviceFacts, ...]) -> None:
    text = capture(fixture)
    assert nvidia.parse_query_gpu(text, header_fields(text)) == expected


def test_parse_query_gpu_header_must_match_fields() -> None:
    text = capture("nvidia-smi-query-gpu-csv__unnamed-repo-XE9780-perf-test__7x-B300-SXM6-AC__610.57.04.txt")
    with pytest.raises(ParseError) as excinfo:
        nvidia.parse_query_gpu(text)
    assert str(excinfo.value) == (
        "nvidia-smi --query-gpu: expected a header listing index, name, pci.bus_id, pci.device_id, uuid, "
        "memory.total, compute_cap, driver_version, mig.mode.current, found 'driver_version, name, compute_cap'"
    )


# --- single values ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("compute_cap", "arch"),
    [("7.5", "sm_75"), ("8.9", "sm_89"), ("9.0", "sm_90"), ("10.0", "sm_100"), ("10.3", "sm_103"), ("12.0", "sm_120")],
)
def test_compute_cap_to_arch(compute_cap: str, arch: str) -> None:
    (device,) = nvidia.parse_query_gpu(compute_cap, ["compute_cap"])
    assert device.arch == arch


@pytest.mark.parametrize(
    ("bus_id", "normalised"),
    [
        ("00000000:17:00.0", "0000:17:00.0"),
        ("00000000:0C:00.0", "0000:0c:00.0"),
        ("0000:C1:00.1", "0000:c1:00.1"),
        ("00010000:01:00.0", "10000:01:00.0"),  # a VMD domain keeps its fifth digit, as Linux writes it
    ],
)
def test_bus_id_normalised(bus_id: str, normalised: str) -> None:
    (device,) = nvidia.parse_query_gpu(bus_id, ["pci.bus_id"])
    assert device.pci_bus_id == normalised


@pytest.mark.parametrize(
    ("pci_id", "device_id"),
    [
        ("0x233010DE", "0x2330"),
        ("0x1E8110DE", "0x1e81"),
        ("20B210DE", "0x20b2"),
        ("000000DE", None),
        ("0x2330", "0x2330"),  # the device id alone, 4 digits
        ("0x20B2", "0x20b2"),
    ],
)
def test_pci_device_id(pci_id: str, device_id: str | None) -> None:
    (device,) = nvidia.parse_query_gpu(pci_id, ["pci.device_id"])
    assert device.pci_device_id == device_id


@pytest.mark.parametrize(
    "missing", ["[N/A]", "N/A", "[Not Supported]", "[Requested functionality has been deprecated]", ""]
)
def test_missing_values_become_none(missing: str) -> None:
    fields = ["name", "memory.total", "compute_cap", "pci.bus_id", "pci.device_id", "uuid", "mig.mode.current"]
    (device,) = nvidia.parse_query_gpu("3, " + ", ".join([missing] * len(fields)), ["index", *fields])
    assert device == DeviceFacts(index=3)


ALL = ", ".join(nvidia.QUERY_FIELDS)
Q = "nvidia-smi --query-gpu"
LINE_1 = f"{Q}, GPU line 1"


@pytest.mark.parametrize(
    ("text", "fields", "message"),
    [
        ("", nvidia.QUERY_FIELDS, f"{Q}: expected one csv line per GPU with 9 values, found nothing (empty output)"),
        ("No devices", nvidia.QUERY_FIELDS, f"{LINE_1}: expected 9 values ({ALL}), found 1: 'No devices'"),
        ("index, name\n", ["index", "name"], f"{Q}: expected a line per GPU after the header, found only the header"),
        ("x, A100", ["index", "name"], f"{LINE_1}: expected an integer index, found 'x'"),
        ("[N/A], A100", ["index", "name"], f"{LINE_1}: expected an integer index, found '[N/A]'"),
        ("9", ["compute_cap"], f"{LINE_1}: expected compute_cap like '9.0', found '9'"),
        ("80 GiB", ["memory.total"], f"{LINE_1}: expected memory in MiB like '81559' or '81559 MiB', found '80 GiB'"),
        ("17:00.0", ["pci.bus_id"], f"{LINE_1}: expected a PCI bus id like '00000000:17:00.0', found '17:00.0'"),
        ("0x23301", ["pci.device_id"], f"{LINE_1}: expected a PCI id like '0x233010DE' or '0x2330', found '0x23301'"),
        ("0", ["index", "INDEX"], f"{Q}: expected distinct field names, got ['index', 'INDEX']"),
    ],
)  # fmt: skip
def test_parse_query_gpu_errors(text: str, fields: list[str], message: str) -> None:
    with pytest.raises(ParseError) as excinfo:
        nvidia.parse_query_gpu(text, fields)
    assert str(excinfo.value) == message


# --- --version and the table header -----------------------------------------------------------------------------
VERSION_CASES = [
    ("nvidia-h100-80gb-hbm3", "590.48.01", "linux-x86_64", "13.1"),
    ("nvidia-h100-mig", "590.48.01", "linux-x86_64", "13.1"),
    ("nvidia-h200", "590.48.01", "linux-x86_64", "13.1"),
    ("nvidia-h200-mig", "590.48.01", "linux-x86_64", "13.1"),
    ("nvidia-geforce-rtx-2080-super", "591.86", "windows-x86_64", "13.1"),
    ("nvidia-geforce-rtx-2080-super", "595.71.05", "linux-x86_64", "13.2"),
    ("nvidia-geforce-rtx-4080-super", "595.71.05", "linux-x86_64", "13.2"),
    ("nvidia-l40s", "595.80", "linux-x86_64", "13.2"),
    ("nvidia-geforce-rtx-2080-super", "610.57.04", "linux-x86_64", "13.3"),
    ("nvidia-geforce-rtx-2080-super", "610.62", "windows-x86_64", "13.3"),
]
VERSION_IDS = [f"{machine}-{driver}-{platform}" for machine, driver, platform, _ in VERSION_CASES]


@pytest.mark.parametrize(("machine", "driver", "platform", "cuda"), VERSION_CASES, ids=VERSION_IDS)
def test_parse_version_capture(machine: str, driver: str, platform: str, cuda: str) -> None:
    text = capture(exporter("nvidia-smi--version", machine, driver, platform))
    assert nvidia.parse_version(text) == (driver, cuda)


@pytest.mark.parametrize("kind", ["nvidia-smi", "nvidia-smi-load"])
@pytest.mark.parametrize(("machine", "driver", "platform", "cuda"), VERSION_CASES, ids=VERSION_IDS)
def test_parse_table_capture(kind: str, machine: str, driver: str, platform: str, cuda: str) -> None:
    text = capture(exporter(kind, machine, driver, platform))
    assert nvidia.parse_table(text) == (driver, cuda)


@pytest.mark.parametrize(
    ("fixture", "driver", "cuda"),
    [
        ("nvidia-smi__unnamed-repo-XE9780-perf-test__7x-B300-SXM6-AC__610.57.04.txt", "610.57.04", "13.3"),
        ("nvidia-smi__unnamed-repo-openshift-spectrumx-guide__GH200-480GB__580.95.05.txt", "580.95.05", "13.0"),
        ("nvidia-smi__unnamed-repo-slurm-operator-gpu-docs__4x-GB200__590.48.01.txt", "590.48.01", "13.1"),
        ("nvidia-smi__thamada-nvidia-smi__H100SXMx8.txt", "565.57.01", "12.7"),
        ("nvidia-smi__thamada-nvidia-smi__A100SXMx4.txt", "555.42.02", "12.5"),
        ("nvidia-smi__thamada-nvidia-smi__L40S.txt", "550.127.05", "12.4"),
    ],
)
def test_parse_table_other_captures(fixture: str, driver: str, cuda: str) -> None:
    assert nvidia.parse_table(capture(fixture)) == (driver, cuda)


def test_parse_version_610_inline() -> None:
    text = (
        "NVIDIA-SMI version  : 610.57.04\n"
        "NVML version        : 610.57\n"
        'DRIVER version      : Deprecated, see "KMD version" instead\n'
        'CUDA version        : Deprecated, see "CUDA UMD version" instead\n'
        "KMD version         : 610.57.04\n"
        "CUDA UMD version    : 13.3\n"
    )
    assert nvidia.parse_version(text) == ("610.57.04", "13.3")
    assert nvidia.parse_version(text.replace("\n", "\r\n")) == ("610.57.04", "13.3")


def test_parse_version_without_cuda() -> None:
    assert nvidia.parse_version("DRIVER version : 590.48.01\n") == ("590.48.01", None)


def test_parse_table_cuda_not_available() -> None:
    header = "| NVIDIA-SMI 590.48.01              Driver Version: 590.48.01      CUDA Version: N/A      |"
    assert nvidia.parse_table(header) == ("590.48.01", None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "nvidia-smi --version: expected a 'DRIVER version' or 'KMD version' line, found nothing (empty output)"),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
            (
                "nvidia-smi --version: expected a 'DRIVER version' or 'KMD version' line, found "
                '"NVIDIA-SMI has failed because it couldn\'t communicate with the NVIDIA driver."'
            ),
        ),
        (
            'DRIVER version      : Deprecated, see "KMD version" instead\n',
            (
                "nvidia-smi --version: 'DRIVER version' is marked deprecated but 'KMD version' is missing: "
                "'DRIVER version      : Deprecated, see \"KMD version\" instead'"
            ),
        ),
        (
            "DRIVER version      : 590.48.01\nCUDA Version        : thirteen\n",
            "nvidia-smi --version: expected a version number for 'CUDA version', found 'thirteen'",
        ),
    ],
)
def test_parse_version_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError) as excinfo:
        nvidia.parse_version(text)
    assert str(excinfo.value) == message


def test_parse_table_cut_off_header() -> None:
    with pytest.raises(ParseError) as excinfo:
        nvidia.parse_table("| NVIDIA-SMI 590.48.01              Driver Version: 590.48.01      CUDA Version: 13")
    assert str(excinfo.value) == (
        "nvidia-smi: expected a table header '| NVIDIA-SMI ... Driver Version: ... CUDA Version: ... |', "
        "found '| NVIDIA-SMI 590.48.01              Driver Version: 590.48.01      CUDA Version:'..."
    )


# --- nvidia-smi -q -x -------------------------------------------------------------------------------------------
def xml_gpu(
    name: str, memory: int, *, bus: str, device: str | None, uuid: str, extra: dict[str, str], index: int = 0
) -> DeviceFacts:
    return DeviceFacts(
        index=index, name=name, memory_mib=memory, pci_bus_id=bus, pci_device_id=device, uuid=uuid, extra=extra
    )


XML_CASES: list[tuple[str, ToolFacts]] = [
    (
        "nvidia-smi-q-x__telegraf__A100-SXM4-80GB-MIG__535.54.03.xml",
        ToolFacts(
            family="nvidia", tool="nvidia-smi", driver_version="535.54.03", runtime_version="12.2",
            devices=(
                xml_gpu(
                    "NVIDIA A100-SXM4-80GB", 81920, bus="0000:01:00.0", device="0x20b2",
                    uuid="GPU-513536b6-7d19-9063-b049-1e69664bb298",
                    extra={"mig.mode.current": "Enabled", "product_architecture": "Ampere", "minor_number": "1"},
                ),
            ),
            # The telegraf test file keeps one of the four GPUs it says are attached.
            warnings=("nvidia-smi -q -x: <attached_gpus> says 4 but the XML lists 1 <gpu> element(s)",),
        ),
    ),
    (
        "nvidia-smi-q-x__telegraf__RTX-PRO-6000-Blackwell-MaxQ__590.44.01.xml",
        ToolFacts(
            family="nvidia", tool="nvidia-smi", driver_version="590.44.01", runtime_version="13.1",
            devices=(
                xml_gpu(
                    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 97887,
                    bus="0000:61:00.0", device="0x2bb4",
                    uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
                    extra={"product_architecture": "Blackwell", "minor_number": "0"},
                ),
            ),
        ),
    ),
    (
        "nvidia-smi-q-x__telegraf__Tesla-T4__515.105.01.xml",
        ToolFacts(
            family="nvidia", tool="nvidia-smi", driver_version="515.105.01", runtime_version="11.7",
            devices=(
                xml_gpu(
                    "Tesla T4", 15360, bus="0000:00:1e.0", device="0x1eb8",
                    uuid="GPU-d37e67a5-91dd-3774-a5cb-99096249601a",
                    extra={"product_architecture": "Turing", "minor_number": "0"},
                ),
            ),
        ),
    ),
    (
        "nvidia-smi-q-x__telegraf__2x-RTX-A5000__590.44.01.xml",
        ToolFacts(
            family="nvidia", tool="nvidia-smi", driver_version="590.44.01", runtime_version="13.1",
            devices=(
                # Index follows document (bus) order; the /dev/nvidiaN minor numbers run the other way here.
                xml_gpu(
                    "NVIDIA RTX A5000", 24564, bus="0000:81:00.0", device="0x2231",
                    uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789ab",
                    extra={"product_architecture": "Ampere", "minor_number": "1"},
                ),
                xml_gpu(
                    "NVIDIA RTX A5000", 24564, bus="0000:c1:00.0", device="0x2231",
                    uuid="GPU-12345678-aaaa-bbbb-cccc-0123456789cd",
                    extra={"product_architecture": "Ampere", "minor_number": "0"}, index=1,
                ),
            ),
        ),
    ),
    (
        "nvidia-smi-q-x__telegraf__A10G__515.105.01.xml",
        ToolFacts(
            family="nvidia", tool="nvidia-smi", driver_version="515.105.01", runtime_version="11.7",
            devices=(
                xml_gpu(
                    "NVIDIA A10G", 23028, bus="0000:00:1e.0", device=None,
                    uuid="GPU-9a9a6c50-2a47-2f51-a902-b82c3b127e94",
                    extra={"product_architecture": "Ampere", "minor_number": "0"},
                ),
            ),
            # The telegraf test file zeroes the PCI ids (000000DE): not a device id, so not guessed.
            warnings=("nvidia-smi -q -x, <gpu> 1: pci_device_id 000000DE is not an NVIDIA device id; left unknown",),
        ),
    ),
    (
        "nvidia-smi-q-x__telegraf__RTX-4000-SFF-Ada__595.84.xml",
        ToolFacts(
            family="nvidia", tool="nvidia-smi", driver_version="595.84", runtime_version="13.2",
            devices=(
                xml_gpu(
                    "NVIDIA RTX 4000 SFF Ada Generation", 20475, bus="0000:06:00.0", device="0x27b0",
                    uuid="GPU-37037c3f-65c8-ec4d-24a9-420204ad8026",
                    extra={"product_architecture": "Ada Lovelace", "minor_number": "0"},
                ),
            ),
        ),
    ),
]  # fmt: skip


@pytest.mark.parametrize(("fixture", "expected"), XML_CASES, ids=[c[0].split("__")[2] for c in XML_CASES])
def test_parse_xml_capture(fixture: str, expected: ToolFacts) -> None:
    assert nvidia.parse_xml(capture(fixture)) == expected


X = "nvidia-smi -q -x"
ENTITY_DOC = '<!DOCTYPE a [<!ENTITY x "y">]><nvidia_smi_log/>'
SMALL_XML = "<nvidia_smi_log><driver_version>590.44.01</driver_version><gpu>{}</gpu></nvidia_smi_log>"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", f"{X}: expected well-formed XML (no element found: line 1, column 0), found nothing (empty output)"),
        ("<gpu>", f"{X}: expected well-formed XML (no element found: line 1, column 5), found '<gpu>'"),
        ("<log/>", f"{X}: expected a <nvidia_smi_log> document, found <log>"),
        ("<nvidia_smi_log/>", f"{X}: expected <driver_version> in <nvidia_smi_log>, found '<nvidia_smi_log/>'"),
        (
            SMALL_XML.format("<fb_memory_usage><total>80 GB</total></fb_memory_usage>"),
            f"{X}, <gpu> 1: expected memory in MiB like '81559' or '81559 MiB', found '80 GB'",
        ),
        (
            SMALL_XML.format("<pci><pci_bus_id>0000:01:00</pci_bus_id></pci>"),
            f"{X}, <gpu> 1: expected a PCI bus id like '00000000:17:00.0', found '0000:01:00'",
        ),
        (ENTITY_DOC, f"{X}: expected nvidia-smi XML, found an entity declaration (refused): {ENTITY_DOC!r}"),
    ],
)  # fmt: skip
def test_parse_xml_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError) as excinfo:
        nvidia.parse_xml(text)
    assert str(excinfo.value) == message


def test_parse_xml_refuses_entity_expansion() -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
        "<nvidia_smi_log>&b;</nvidia_smi_log>"
    )
    with pytest.raises(ParseError, match="entity declaration"):
        nvidia.parse_xml(bomb)


# --- never anything but ParseError ------------------------------------------------------------------------------
PARSERS: list[Callable[[str], object]] = [
    nvidia.parse_query_gpu,
    nvidia.parse_version,
    nvidia.parse_table,
    nvidia.parse_xml,
]


def _nvidia_captures() -> list[str]:
    inline = [INLINE_QUERY_GPU, "driver_version, name, compute_cap\n610.57.04, NVIDIA B300 SXM6 AC, 10.3\n"]
    if not FIXTURES.is_dir():
        return inline
    files = sorted(p for p in FIXTURES.iterdir() if p.name.startswith("nvidia-smi") and "capture-full" not in p.name)
    return inline + [p.read_text(encoding="utf-8") for p in files]


CAPTURES = _nvidia_captures()


def parses_or_refuses(text: str) -> None:
    for parse in PARSERS:
        with contextlib.suppress(ParseError):
            parse(text)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_random_text_only_raises_parse_error(text: str) -> None:
    parses_or_refuses(text)


# Pieces of real output, so generated text gets past the first checks more often than random characters do.
TOKENS = [
    *("0", "9.0", "10.3", "00000000:17:00.0", "0x233010DE", "20B210DE", "81559", " MiB", "[N/A]", "N/A", "index"),
    *(
        ", ",
        ",",
        "\n",
        "\r\n",
        " : ",
        ":",
        "|",
        " ",
        "DRIVER version",
        "KMD version",
        "CUDA Version",
        "CUDA UMD version",
    ),
    *("Deprecated, see", "| NVIDIA-SMI 590.48.01", "Driver Version:", "KMD Version:", "CUDA Version:", "590.48.01"),
    *("<nvidia_smi_log>", "</nvidia_smi_log>", "<gpu>", "</gpu>", "<driver_version>", "</driver_version>", "&amp;"),
    *("<attached_gpus>", "</attached_gpus>", "<pci_bus_id>", "</pci_bus_id>", "<total>", "</total>", "<!ENTITY"),
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join))
def test_shuffled_pieces_only_raise_parse_error(text: str) -> None:
    parses_or_refuses(text)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(CAPTURES), st.data())
def test_truncated_captures_only_raise_parse_error(text: str, data: st.DataObject) -> None:
    parses_or_refuses(text[: data.draw(st.integers(min_value=0, max_value=len(text)))])


@pytest.mark.parametrize("text", CAPTURES[:2], ids=["inline-h100", "inline-b300"])
def test_every_prefix_of_inline_captures(text: str) -> None:
    for end in range(len(text) + 1):
        parses_or_refuses(text[:end])


# ---- the probe: a driver that refuses a query field, sources of the driver version --------------------------------

# What nvidia-smi does with a --query-gpu field its driver does not know: the message on stdout, a blank line, exit
# status 2, nothing on stderr (CoHDI/composable-resource-operator#37, `Field "device_minor" is not a valid field to
# query.\n\n`); drivers before R510 answer so for compute_cap (huggingface/candle#733, nvidia-smi 470.182.03).
REFUSED = 'Field "compute_cap" is not a valid field to query.\n\n'
# The fallback query's line for the A100 of NVIDIA/CUDALibrarySamples#104 (`nvidia-smi -a`: driver 470.103.01,
# NVIDIA A100-SXM4-80GB at 00000000:94:00.0, its UUID); device id and memory of the same product from the
# A100-SXM4-80GB `nvidia-smi -a` capture (thamada/nvidia-smi: Device Id 0x20B210DE, FB Memory Total 81920 MiB).
LEGACY_A100 = (
    "0, NVIDIA A100-SXM4-80GB, 00000000:94:00.0, 0x20B210DE, GPU-a75cda02-62ce-2c30-9150-555ef08935e2, 81920, "
    "470.103.01\n"
)
# what nvidia-smi prints for arguments it does not accept (influxdata/telegraf#6573, nvidia-smi 376.33)
INVALID_ARGUMENTS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"


def ran(argv: list[str], stdout: str, code: int = 0) -> ToolResult:
    fault = None if code == 0 else f"{argv[0]} exited with status {code}: {stdout.strip().splitlines()[0]}"
    return ToolResult(argv=tuple(argv), returncode=code, stdout=stdout, stderr="", seconds=0.1, fault=fault)


def test_a_refused_field_is_recognised() -> None:
    assert nvidia.refused_a_field(ran(["nvidia-smi"], REFUSED, 2))
    assert nvidia.refused_a_field(ran(["nvidia-smi"], 'Field "device_minor" is not a valid field to query.\n\n', 2))
    assert not nvidia.refused_a_field(ran(["nvidia-smi"], "NVML: Driver/library version mismatch\n", 9))
    assert not nvidia.refused_a_field(ran(["nvidia-smi"], REFUSED, 0))  # it ran fine: nothing to retry
    assert not nvidia.refused_a_field(None)


def test_an_older_driver_is_asked_again_without_compute_cap(tmp_path: Path) -> None:
    probe = nvidia.NvidiaProbe()
    commands = probe.commands()
    first = {"nvidia-smi-query": ran(commands["nvidia-smi-query"], REFUSED, 2)}
    retry = probe.followups(first)
    assert retry == {
        "nvidia-smi-query-legacy": [
            "nvidia-smi",
            "--query-gpu=index,name,pci.bus_id,pci.device_id,uuid,memory.total,driver_version",
            "--format=csv,noheader,nounits",
        ]
    }
    assert probe.followups({"nvidia-smi-query": ran(commands["nvidia-smi-query"], INLINE_QUERY_GPU)}) == {}
    results = {
        **first,
        "nvidia-smi-query-legacy": ran(retry["nvidia-smi-query-legacy"], LEGACY_A100),
        "nvidia-smi-version": ran(commands["nvidia-smi-version"], INVALID_ARGUMENTS, 2),
    }
    view = probe.interpret(ProbeContext(root=Root(make_root(tmp_path)), environ={}, distributions={}), results)
    assert view.errors == ()  # the refusal was answered, and the query gave the driver
    assert view.driver_version == "470.103.01"
    (device,) = view.devices
    assert (device.name, device.arch, device.pci_device_id, device.memory_mib) == (
        "NVIDIA A100-SXM4-80GB",
        None,  # no compute_cap: discovery takes the architecture of the SKU the PCI id names
        "0x20b2",
        81920,
    )


def test_a_failed_fallback_is_reported_with_the_refusal(tmp_path: Path) -> None:
    probe = nvidia.NvidiaProbe()
    commands = probe.commands()
    results = {
        "nvidia-smi-query": ran(commands["nvidia-smi-query"], REFUSED, 2),
        "nvidia-smi-query-legacy": ran(["nvidia-smi"], 'Field "uuid" is not a valid field to query.\n\n', 2),
    }
    view = probe.interpret(ProbeContext(root=Root(make_root(tmp_path)), environ={}, distributions={}), results)
    assert view.errors == (
        'nvidia-smi exited with status 2: Field "compute_cap" is not a valid field to query.',
        'nvidia-smi exited with status 2: Field "uuid" is not a valid field to query.',
    )
    assert view.devices == ()


def test_every_source_of_the_driver_version_is_kept(tmp_path: Path) -> None:
    probe = nvidia.NvidiaProbe()
    commands = probe.commands()
    nvrm = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.48.01  Mon Dec  1 00:00:00 UTC 2025\n"
    root = Root(make_root(tmp_path, files={"/proc/driver/nvidia/version": nvrm}))
    version = capture(exporter("nvidia-smi--version", "nvidia-h100-80gb-hbm3", "590.48.01"))
    results = {
        "nvidia-smi-query": ran(commands["nvidia-smi-query"], INLINE_QUERY_GPU),
        "nvidia-smi-version": ran(commands["nvidia-smi-version"], version.replace("590.48.01", "999.99.99")),
    }
    view = probe.interpret(ProbeContext(root=root, environ={}, distributions={}), results)
    assert view.sources == {
        "driver_version": {
            "nvidia-smi --version": "999.99.99",
            "nvidia-smi --query-gpu": "590.48.01",
            "/proc/driver/nvidia/version": "590.48.01",
        }
    }
    assert view.driver_version == "999.99.99"  # the checker's driver.sources says the sources disagree
