"""The checker for AMD, Gaudi, Neuron and TPU hosts, from real captures (and inline fixtures with their figures)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostkit import FakeRunner, Pci, capture, gaudi2_hl_smi_csv, make_root
from reference import REFERENCE_MATRIX

from accelenv.check.checks import check
from accelenv.check.verdict import Finding, Status
from accelenv.host.discover import discover
from accelenv.host.probes.amd import ROCM_SMI_ARGS
from accelenv.host.probes.gaudi import hl_smi_args
from accelenv.host.report import HostReport, PythonInfo
from accelenv.host.root import Root
from accelenv.matrix import Matrix, load_matrix

REPO = Path(__file__).resolve().parents[2]

# amd-smi static --json in the gpu_data shape, with the MI300X x4 captures' figures (rocm-smi -a: 0x74a1 at
# 0000:26:00.0; rocminfo: gfx942:sramecc+:xnack-; hipDeviceQuery: 196592 MB), and the MI350X excerpt's.
AMD_STATIC = """{"gpu_data": [%s]}"""
AMD_GPU = (
    '{"gpu": %d, "asic": {"market_name": "%s", "device_id": "%s", "target_graphics_version": "%s"}, '
    '"bus": {"bdf": "%s"}, "vram": {"size": {"value": %d, "unit": "MB"}}}'
)
MI300X = AMD_GPU % (0, "AMD Instinct MI300X", "0x74a1", "gfx942:sramecc+:xnack-", "0000:26:00.0", 196592)
MI350X = AMD_GPU % (0, "AMD Instinct MI350X", "0x75a0", "gfx950", "0000:05:00.0", 294896)
AMD_VERSION = "amd-smi-version__k8s-device-plugin-issue157-and-legacy-rocm-build-issue4759.txt"


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REFERENCE_MATRIX)


def host(
    tmp_path: Path,
    matrix: Matrix,
    family: str,
    *,
    outputs: dict[str, str],
    pci: list[Pci],
    modules: dict[str, str | None],
    environ: dict[str, str] | None = None,
    packages: dict[str, list[str]] | None = None,
    files: dict[str, str] | None = None,
) -> HostReport:
    root = make_root(tmp_path / family, pci=pci, modules=modules, files=files)
    python = PythonInfo(version="3.12.3", implementation="CPython", executable="python3", distributions=packages or {})
    return discover(
        matrix, root=Root(root), runner=FakeRunner(outputs), environ=environ or {}, families=[family], python=python
    )


def by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def amd_version_line(rocm: str, amdgpu: str) -> str:
    line = next(
        line for line in capture(AMD_VERSION).splitlines() if "amdgpu version: 6.10.5" in line
    )  # the real legacy line: ROCm 6.4.1, amdgpu 6.10.5
    return line.replace("ROCm version: 6.4.1", f"ROCm version: {rocm}").replace(
        "amdgpu version: 6.10.5", f"amdgpu version: {amdgpu}"
    )


def test_amd_mi300x_on_rocm64(tmp_path: Path, matrix: Matrix) -> None:
    report = host(
        tmp_path,
        matrix,
        "amd",
        outputs={"amd-smi static": AMD_STATIC % MI300X, "amd-smi version": amd_version_line("6.4.1", "6.10.5")},
        pci=[Pci("0000:26:00.0", "0x1002", "0x74a1", klass="0x120000", driver="amdgpu")],
        modules={"amdgpu": "6.10.5"},
        packages={"torch": ["2.9.1+rocm6.4"], "ray": ["2.60.0"]},
    )
    acc = report.accelerator("amd")
    assert acc is not None
    assert [(d.name, d.arch, d.memory_mib, d.sku) for d in acc.devices] == [
        ("AMD Instinct MI300X", "gfx942", 196592, "mi300x")
    ]
    f = by_id(check(matrix, matrix.envs["gpu-amd-rocm64"], report))
    assert f["devices.arch"].status is Status.PASS
    assert f["runtime.version"].status is Status.PASS
    # a pre-30.x amdgpu-dkms is not in the known-good list: a warning that says so, not a failure
    assert f["driver.version"].status is Status.WARN
    assert f["driver.version"].message == "driver 6.10.5 is not one known to work with ROCm 6.4.1"
    assert f["requirements.torch"].status is Status.PASS


def test_amd_mi350x_needs_rocm7(tmp_path: Path, matrix: Matrix) -> None:
    report = host(
        tmp_path,
        matrix,
        "amd",
        outputs={"amd-smi static": AMD_STATIC % MI350X, "amd-smi version": amd_version_line("7.0.2", "30.10.1")},
        pci=[Pci("0000:05:00.0", "0x1002", "0x75a0", klass="0x120000", driver="amdgpu")],
        modules={"amdgpu": "30.10.1"},
    )
    f64 = by_id(check(matrix, matrix.envs["gpu-amd-rocm64"], report))
    assert f64["devices.arch"].status is Status.FAIL
    assert f64["devices.arch"].message == "ROCm 6.4.1 has no code for gfx950"
    assert f64["runtime.version"].status is Status.WARN
    f70 = by_id(check(matrix, matrix.envs["gpu-amd-rocm70"], report))
    assert f70["devices.arch"].status is Status.PASS
    assert f70["driver.version"].status is Status.PASS
    assert f70["devices.sku"].status is Status.PASS


def test_amd_falls_back_to_rocm_smi(tmp_path: Path, matrix: Matrix) -> None:
    report = host(
        tmp_path,
        matrix,
        "amd",
        outputs={"rocm-smi": capture("rocm-smi-json__telegraf__mi100_rocm602.json")},
        pci=[],
        modules={},
        files={"/opt/rocm/.info/version": "6.0.2-115\n"},
    )
    acc = report.accelerator("amd")
    assert acc is not None
    assert acc.source == "rocm-smi"
    assert acc.driver_version == "6.3.6"
    assert acc.runtime_version == "6.0.2"
    assert [d.name for d in acc.devices][:1] == ["Arcturus GL-XL [Instinct MI100]"]
    f = by_id(check(matrix, matrix.envs["gpu-amd-rocm64"], report))
    assert f["devices.sku"].status is Status.WARN  # an MI100 is no SKU of the matrix
    assert "matches no SKU in the matrix" in f["devices.sku"].message
    assert f["devices.sku"].found == "Arcturus GL-XL [Instinct MI100] x4"


def test_amd_rocr_and_hip_visible_devices_disagree(tmp_path: Path, matrix: Matrix) -> None:
    report = host(
        tmp_path,
        matrix,
        "amd",
        outputs={"amd-smi static": AMD_STATIC % MI300X, "amd-smi version": amd_version_line("6.4.1", "30.10.1")},
        pci=[Pci("0000:26:00.0", "0x1002", "0x74a1", klass="0x120000", driver="amdgpu")],
        modules={"amdgpu": None},
        environ={"HIP_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": "1"},
    )
    f = by_id(check(matrix, matrix.envs["gpu-amd-rocm64"], report))
    assert f["devices.visible"].status is Status.FAIL
    assert "ROCR_VISIBLE_DEVICES names device 1, but the host has 1" in f["devices.visible"].message
    assert "disagree" in f["devices.visible"].message


def test_gaudi2_on_1_22_1(tmp_path: Path, matrix: Matrix) -> None:
    table = capture("hl-smi__ray-docs__8x-HL-225-Gaudi2__1.22.1.txt")
    csv = gaudi2_hl_smi_csv()
    report = host(
        tmp_path,
        matrix,
        "gaudi",
        outputs={"hl-smi " + hl_smi_args()[0]: csv, "hl-smi": table},
        pci=[Pci("0000:33:00.0", "0x1da3", "0x1020", klass="0x120000", driver="habanalabs")],
        modules={"habanalabs": "1.22.1"},
    )
    acc = report.accelerator("gaudi")
    assert acc is not None
    assert (acc.driver_version, acc.runtime_version) == ("1.22.1-97ec1a4", "1.22.1")
    assert {d.sku for d in acc.devices} == {"gaudi2"}
    f23 = by_id(check(matrix, matrix.envs["gaudi-1-23"], report))
    assert f23["driver.version"].status is Status.WARN
    assert (
        f23["driver.version"].message
        == "driver 1.22.1-97ec1a4 is not one known to work with Intel Gaudi software 1.23.0"
    )
    assert f23["runtime.version"].status is Status.WARN


def test_gaudi3_from_the_hl_smi_csv_capture(tmp_path: Path, matrix: Matrix) -> None:
    # the all-smi capture was taken with other fields: index, serial, name, driver_version, memory.total, ...
    fields = ("index", "serial", "name", "driver_version", "memory.total")
    text = capture("hl-smi-Q-csv-noheader__all-smi-unittest__2x-HL-325L-Gaudi3__1.22.1.txt")
    csv = "\n".join(", ".join(line.split(", ")[: len(fields)]) for line in text.splitlines() if line.strip())
    from accelenv.host.probes.gaudi import parse_hl_smi_csv

    devices = parse_hl_smi_csv(csv, fields=fields)
    assert [(d.name, d.arch, d.memory_mib) for d in devices] == [("HL-325L", "gaudi3", 131072)] * 2


def test_neuron_trn1(tmp_path: Path, matrix: Matrix) -> None:
    report = host(
        tmp_path,
        matrix,
        "neuron",
        outputs={"neuron-ls": capture("neuron-ls--json-output__unnamed-repo-rust-test__trn1.2xlarge.json")},
        pci=[Pci("0000:00:1e.0", "0x1d0f", "0x7164", klass="0x088000", driver="neuron")],
        modules={"neuron": "2.29.0.0"},
        environ={"NEURON_RT_VISIBLE_CORES": "0-1"},
    )
    acc = report.accelerator("neuron")
    assert acc is not None
    assert [(d.arch, d.memory_mib, d.sku) for d in acc.devices] == [("neuroncore-v2", 32768, "trn1")]
    f = by_id(check(matrix, matrix.envs["neuron-2-31"], report))
    assert f["driver.version"].status is Status.PASS
    assert f["devices.sku"].status is Status.PASS
    assert f["devices.visible"].status is Status.PASS


SHIPPED = load_matrix(REPO / "matrix.toml")


@pytest.mark.parametrize(
    ("driver", "status", "message"),
    [
        ("2.29.0.0", Status.PASS, "driver 2.29.0.0 satisfies Neuron SDK 2.31.1"),
        ("2.29.4.0", Status.PASS, "driver 2.29.4.0 satisfies Neuron SDK 2.31.1"),
        (
            "2.31.7.0",  # Neuron 2.33's driver: AWS says a newer driver can require a newer runtime
            Status.WARN,
            (
                "driver 2.31.7.0 is a newer release than 2.29.0.0, the one Neuron SDK 2.31.1 ships: AWS Trainium and "
                "Inferentia drivers can require a newer runtime, so this pairing is not known to work"
            ),
        ),
        ("2.26.5.0", Status.FAIL, "driver 2.26.5.0 is below 2.27, the oldest that Neuron SDK 2.31.1 runs on"),
    ],
)
def test_neuron_driver_direction_follows_the_family(tmp_path: Path, driver: str, status: Status, message: str) -> None:
    assert SHIPPED.families["neuron"].newer_drivers == "may-need-newer-runtime"
    report = host(
        tmp_path,
        SHIPPED,
        "neuron",
        outputs={"neuron-ls": capture("neuron-ls--json-output__unnamed-repo-rust-test__trn1.2xlarge.json")},
        pci=[Pci("0000:00:1e.0", "0x1d0f", "0x7164", klass="0x088000", driver="neuron")],
        modules={"neuron": driver},
    )
    finding = by_id(check(SHIPPED, SHIPPED.envs["neuron-2-31"], report))["driver.version"]
    assert (finding.status, finding.message) == (status, message)


def test_a_newer_cuda_driver_runs_an_older_runtime() -> None:
    assert SHIPPED.families["nvidia"].newer_drivers == "run-older-runtimes"


def test_neuron_nic_of_the_same_vendor_is_not_an_accelerator(tmp_path: Path, matrix: Matrix) -> None:
    report = host(
        tmp_path,
        matrix,
        "neuron",
        outputs={},
        pci=[Pci("0000:00:05.0", "0x1d0f", "0xec20", klass="0x020000", driver="ena")],  # the ENA network card
        modules={},
    )
    acc = report.accelerator("neuron")
    assert acc is not None
    assert acc.pci_devices == ()
    assert by_id(check(matrix, matrix.envs["neuron-2-31"], report))["hardware.present"].status is Status.FAIL


def test_tpu_v6e_from_pci_and_environment(tmp_path: Path, matrix: Matrix) -> None:
    report = host(
        tmp_path,
        matrix,
        "tpu",
        outputs={"tpu-info --version": capture("tpu-info--version__cloud-accelerator-diagnostics-README__v6e.txt")},
        pci=[Pci(f"0000:00:0{i}.0", "0x1ae0", "0x006f", klass="0x120000", driver="vfio-pci") for i in range(4, 8)],
        modules={},
        environ={"TPU_ACCELERATOR_TYPE": "v6e-4", "TPU_VISIBLE_CHIPS": "0,1,2,3"},
        packages={"libtpu": ["0.0.32"]},
    )
    acc = report.accelerator("tpu")
    assert acc is not None
    assert acc.source == "pci"
    assert [d.sku for d in acc.devices] == ["tpu-v6e"] * 4
    assert acc.runtime_version == "0.0.32"
    assert acc.extra["generation"] == "v6e"
    assert acc.shadowed_by is None  # vfio-pci is how TPU VMs expose chips
    f = by_id(check(matrix, matrix.envs["tpu-jax-0-8"], report))
    assert f["devices.arch"].status is Status.PASS
    assert f["devices.visible"].status is Status.PASS
    assert f["runtime.version"].status is Status.PASS


def test_rocm_smi_arguments_name_the_fields_the_parser_reads() -> None:
    assert "--json" in ROCM_SMI_ARGS
    assert {"--showid", "--showproductname", "--showdriverversion"} <= set(ROCM_SMI_ARGS)
