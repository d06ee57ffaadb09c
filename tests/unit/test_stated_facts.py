"""Facts the tools state, used (issue 26): a failing tool's cause line and the library-mismatch finding, the loaded
module's version when the tools fail, neuron-ls's instance type, and captures not covered before (tpu-info on v5p,
MIG, Windows line endings). Captures: tests/unit/data/captures (its SOURCES.md) and ../shared/fixtures.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hostkit import FakeRunner, Pci, capture, make_root
from reference import REFERENCE_MATRIX

from accelenv.check.checks import check
from accelenv.check.verdict import Status
from accelenv.host.discover import discover, match_sku
from accelenv.host.probes import amd, neuron, nvidia, tpu
from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.report import HostReport, PythonInfo
from accelenv.host.root import Root
from accelenv.host.run import ToolResult, cause_line
from accelenv.host.topology import parse_nvidia_topo
from accelenv.matrix import Matrix, load_matrix

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

DATA = Path(__file__).resolve().parent / "data"
CAPTURES = DATA / "captures"
MISMATCH = (CAPTURES / "nvidia-smi__public-notes__driver-library-mismatch__580.126.txt").read_text(encoding="utf-8")
PYTHON = PythonInfo(version="3.12.7", implementation="CPython", executable="/usr/bin/python3", distributions={})
QUERY = "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS)


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REFERENCE_MATRIX)


def crlf(path: Path) -> str:
    """A file's text with its line endings as written (Path.read_text would turn CRLF into LF)."""
    with path.open(encoding="utf-8", newline="") as file:
        return file.read()


def failed(argv: tuple[str, ...], stdout: str, code: int = 18) -> ToolResult:
    """A tool that exited `code` after printing `stdout`, its fault as the runner writes it."""
    cause = cause_line(stdout)
    fault = f"{argv[0]} exited with status {code}" + (f": {cause}" if cause else "")
    return ToolResult(argv=argv, returncode=code, stdout=stdout, stderr="", seconds=0.1, fault=fault)


def host(
    tmp_path: Path,
    matrix: Matrix,
    family: str,
    outputs: Mapping[str, str | ToolResult],
    *,
    pci: Sequence[Pci],
    modules: Mapping[str, str | None],
) -> HostReport:
    root = make_root(tmp_path / family, pci=pci, modules=modules)
    return discover(matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=[family], python=PYTHON)


# ---- class 3: the cause line, and the mismatch as its own finding ----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        (MISMATCH, "Failed to initialize NVML: Driver/library version mismatch"),
        ("No devices were found\n", "No devices were found"),
        ("\n\n  NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\nMake sure ...\n",
         "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
        ("Traceback (most recent call last):\n  File \"x\", line 1\nAmdSmiLibraryException: Error code: 8\n",
         "AmdSmiLibraryException: Error code: 8"),
        ("=====\n\n", None),
        ("", None),
    ],
)  # fmt: skip
def test_the_cause_is_the_first_meaningful_line(text: str, cause: str | None) -> None:
    assert cause_line(text) == cause


def test_a_library_mismatch_is_its_own_finding_with_the_fix(tmp_path: Path, matrix: Matrix) -> None:
    smi = failed(("nvidia-smi",), MISMATCH)
    report = host(
        tmp_path,
        matrix,
        "nvidia",
        {QUERY: smi, "nvidia-smi --version": smi, "nvidia-smi topo": smi},
        pci=[Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")],
        modules={"nvidia": "580.119.02"},
    )
    (acc,) = report.accelerators
    assert "nvidia-smi exited with status 18: Failed to initialize NVML: Driver/library version mismatch" in acc.errors
    # class 4: no /proc/driver/nvidia/version, the tool broken: the loaded module is the driver, and says so
    assert acc.driver_version == "580.119.02"
    assert acc.sources == {"driver_version": {"kernel module nvidia": "580.119.02"}}
    findings = {f.id: f for f in check(matrix, matrix.envs["gpu-nvidia-cu128"], report)}
    mismatch = findings["driver.library-mismatch"]
    assert mismatch.status is Status.FAIL
    assert mismatch.found == (
        "Failed to initialize NVML: Driver/library version mismatch (library 580.126, loaded kernel module nvidia "
        "580.119.02)"
    )
    assert "reboot" in mismatch.fix
    assert "sudo modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia" in mismatch.fix


def test_no_mismatch_finding_for_another_fault(tmp_path: Path, matrix: Matrix) -> None:
    smi = failed(("nvidia-smi",), "No devices were found\n", code=6)
    report = host(
        tmp_path,
        matrix,
        "nvidia",
        {QUERY: smi, "nvidia-smi --version": smi},
        pci=[Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")],
        modules={"nvidia": "580.119.02"},
    )
    assert "nvidia-smi exited with status 6: No devices were found" in report.accelerators[0].errors
    assert "driver.library-mismatch" not in {f.id for f in check(matrix, matrix.envs["gpu-nvidia-cu128"], report)}


# ---- class 4: every family's module version when its tools fail --------------------------------------------------


@pytest.mark.parametrize(
    ("family", "module", "case"),
    [
        ("nvidia", "nvidia", ("590.48.01", Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia"))),
        ("amd", "amdgpu", ("6.10.5", Pci("0000:05:00.0", "0x1002", "0x74a1", driver="amdgpu"))),
        ("gaudi", "habanalabs", ("1.22.1-97ec1a4", Pci("0000:33:00.0", "0x1da3", "0x1020", driver="habanalabs"))),
        ("neuron", "neuron", ("2.26.5.0", Pci("0000:00:1e.0", "0x1d0f", "0x7164", driver="neuron"))),
    ],
)
def test_the_loaded_module_is_the_driver_when_the_tools_fail(
    tmp_path: Path, matrix: Matrix, family: str, module: str, case: tuple[str, Pci]
) -> None:
    version, pci = case
    report = host(tmp_path, matrix, family, {}, pci=[pci], modules={module: version})
    (acc,) = report.accelerators
    assert acc.driver_version == version
    assert acc.sources == {"driver_version": {f"kernel module {module}": version}}


def test_a_tool_version_keeps_the_module_as_a_second_source_only(tmp_path: Path, matrix: Matrix) -> None:
    version = capture("nvidia-smi--version__nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt")
    report = host(
        tmp_path,
        matrix,
        "nvidia",
        {"nvidia-smi --version": version},
        pci=[Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")],
        modules={"nvidia": "590.48.01"},
    )
    assert report.accelerators[0].sources == {
        "driver_version": {"nvidia-smi --version": "590.48.01", "kernel module nvidia": "590.48.01"}
    }


# ---- class 5: the instance type neuron-ls prints names the SKU ------------------------------------------------------


@pytest.mark.parametrize(
    ("instance", "sku", "arch"), [("trn1.2xlarge", "trn1", "neuroncore-v2"), ("inf2.xlarge", "inf2", "neuroncore-v2")]
)
def test_neuron_instance_type_settles_an_unknown_pci_id(
    tmp_path: Path, matrix: Matrix, instance: str, sku: str, arch: str
) -> None:
    json_output = capture("neuron-ls--json-output__unnamed-repo-rust-test__trn1.2xlarge.json")
    table = capture("neuron-ls__unnamed-repo-workshop__inf2.xlarge.txt").replace("inf2.xlarge", instance)
    report = host(
        tmp_path,
        matrix,
        "neuron",
        {"neuron-ls --json-output": json_output, "neuron-ls": table},
        pci=[Pci("0000:00:1e.0", "0x1d0f", "0x7fff", driver="neuron")],  # an id the matrix does not list
        modules={"neuron": "2.26.5.0"},
    )
    (acc,) = report.accelerators
    (device,) = acc.devices
    assert (device.sku, device.arch, device.pci_device_id) == (sku, arch, "0x7fff")
    assert acc.extra["instance_type"] == instance


def test_neuron_pci_id_wins_over_the_instance_type(tmp_path: Path, matrix: Matrix) -> None:
    json_output = capture("neuron-ls--json-output__unnamed-repo-rust-test__trn1.2xlarge.json")
    table = capture("neuron-ls__unnamed-repo-workshop__inf2.xlarge.txt")  # says inf2; the PCI id is Trainium's
    report = host(
        tmp_path,
        matrix,
        "neuron",
        {"neuron-ls --json-output": json_output, "neuron-ls": table},
        pci=[Pci("0000:00:1e.0", "0x1d0f", "0x7164", driver="neuron")],
        modules={"neuron": "2.26.5.0"},
    )
    assert report.accelerators[0].devices[0].sku == "trn1"


TRN2_LNC2 = (CAPTURES / "neuron-ls-j__Difflet-tests__trn2.3xlarge-lnc2.json").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("where", "json_output", "table"),
    [
        ("inside each device entry (newer neuron-ls -j)", TRN2_LNC2, None),
        (
            "on the table's first lines",
            TRN2_LNC2.replace('"instance_type": "trn2.3xlarge",', ""),
            "instance-type: trn2.3xlarge\n",
        ),
        (
            "on a line before the JSON",
            "instance-type: trn2.3xlarge\n" + TRN2_LNC2.replace('"instance_type": "trn2.3xlarge",', ""),
            None,
        ),
    ],
)
def test_neuron_instance_type_settles_the_sku_wherever_neuron_ls_puts_it(
    tmp_path: Path, matrix: Matrix, where: str, json_output: str, table: str | None
) -> None:
    outputs: dict[str, str | ToolResult] = {"neuron-ls --json-output": json_output}
    if table is not None:
        outputs["neuron-ls"] = table
    report = host(
        tmp_path,
        matrix,
        "neuron",
        outputs,
        pci=[Pci("0000:33:00.0", "0x1d0f", "0x7fff", driver="neuron")],  # an id the matrix does not list
        modules={"neuron": "2.26.5.0"},
    )
    (acc,) = report.accelerators
    (device,) = acc.devices
    assert (device.sku, device.memory_mib) == ("trn2", 98304), where
    assert acc.extra["instance_type"] == "trn2.3xlarge"


def test_neuron_instance_type_in_an_entry_is_checked_like_any_value() -> None:
    bad = TRN2_LNC2.replace('"trn2.3xlarge"', '"trn2 3xlarge; rm"')
    with pytest.raises(Exception, match="'instance_type': expected an EC2 instance type"):
        neuron.parse_neuron_ls_json(bad)
    notes: list[str] = []
    (device,) = neuron.parse_neuron_ls_json(bad, notes)
    assert "instance_type" not in device.extra
    assert notes == [
        "neuron-ls --json-output: device entry 0: 'instance_type': expected an EC2 instance type, found "
        + notes[0].split("found ", 1)[1]
    ]


# ---- class 6: placeholders in name fields ---------------------------------------------------------------------------


def test_rocm_smi_vendor_id_as_card_series_is_no_name() -> None:
    text = '{"card0": {"Card series": "0x1002", "Card model": "N/A", "Device ID": "0x74a1"}, "system": {}}'
    (device,) = amd.parse_rocm_smi_json(text).devices
    assert (device.name, device.pci_device_id) == (None, "0x74a1")


def test_query_gpu_placeholder_name_is_no_name() -> None:
    (device,) = nvidia.parse_query_gpu("0, [Unknown Error], 0x233010DE", ["index", "name", "pci.device_id"], [])
    assert (device.name, device.pci_device_id) == (None, "0x2330")


# ---- class 7: captures not covered before ---------------------------------------------------------------------------


def test_tpu_info_on_v5p() -> None:
    text = (CAPTURES / "tpu-info__public-runbook__v5p-4chips-idle.txt").read_text(encoding="utf-8")
    assert tpu.parse_tpu_info_version(text) == ("0.0.39", "v5p")
    assert tpu.generation_from_accelerator_type("v5p") == "v5p"


@pytest.mark.parametrize(("name", "generation"), [("v6e", "v6e"), ("tpu7x", "tpu7x")])
def test_tpu_info_version_on_v6e_and_v7(name: str, generation: str) -> None:
    text = (CAPTURES / f"tpu-info--version__own__{name}.txt").read_text(encoding="utf-8")
    libtpu, accelerator = tpu.parse_tpu_info_version(text)
    assert (libtpu, accelerator) == ("0.0.50.1", name)
    assert tpu.generation_from_accelerator_type(name) == generation


def test_query_gpu_with_mig_enabled_counts_physical_gpus() -> None:
    text = capture("nvidia-smi-query-gpu-csv__nvidia_gpu_exporter__nvidia-h100-mig__590.48.01__linux-x86_64.txt")
    lines = text.splitlines()
    devices = nvidia.parse_query_gpu(text, tuple(lines[0].split(", ")), [])
    assert len(devices) == len(lines) - 1  # one line per board, whatever its MIG instances
    assert {d.extra.get("mig.mode.current") for d in devices} == {"Enabled"}


def test_windows_line_endings_read_as_unix_ones() -> None:
    query = crlf(CAPTURES / "nvidia-smi-query-gpu__own-crlf__H100__590.48.01.txt")
    assert "\r\n" in query
    assert nvidia.parse_query_gpu(query, QUERY_FIELDS, []) == nvidia.parse_query_gpu(query.replace("\r\n", "\n"))
    version = crlf(CAPTURES / "nvidia-smi--version__own-crlf__590.48.01.txt")
    assert nvidia.parse_version(version) == ("590.48.01", "13.1")
    topo = crlf(CAPTURES / "nvidia-smi-topo-m__own-crlf__h20-nv18-8nic.txt")
    unix = (DATA / "topo" / "h20-nv18-8nic.txt").read_text(encoding="utf-8")
    assert "\r\n" in topo
    assert parse_nvidia_topo(topo) == parse_nvidia_topo(unix)


# ---- class 5: a PCI id two SKUs share is settled by the name the tool printed -------------------------------------


def test_an_ambiguous_pci_id_is_settled_by_the_product_name(matrix: Matrix) -> None:
    h100, h200 = matrix.skus["h100-sxm"], matrix.skus["h200"]
    shared = dataclasses.replace(h200, pci_device_ids=(*h200.pci_device_ids, *h100.pci_device_ids))
    twins = dataclasses.replace(matrix, skus={**matrix.skus, "h200": shared})
    assert match_sku(twins, "nvidia", pci_device_id="0x2330", name="NVIDIA H200") == "h200"
    assert match_sku(twins, "nvidia", pci_device_id="0x2330", name="NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert match_sku(twins, "nvidia", pci_device_id="0x2330", name=None) == "h100-sxm"  # the first, as before
    assert match_sku(matrix, "nvidia", pci_device_id="0x9999", name="NVIDIA H200") == "h200"  # an unknown id
    assert match_sku(matrix, "neuron", pci_device_id="0x7fff", name=None, stated="trn2") == "trn2"
    assert match_sku(matrix, "neuron", pci_device_id="0x7164", name=None, stated="trn2") == "trn1"  # the id wins
    assert match_sku(matrix, "neuron", pci_device_id=None, name=None, stated="h200") is None  # not that family's
