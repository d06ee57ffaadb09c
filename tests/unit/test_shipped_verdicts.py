"""Real captures from each vendor against the shipped matrix: the verdict on the driver is the one the vendor's
own documents give (NVIDIA's minor-version compatibility, AMD's driver lists per ROCm release, AWS's
backward-compatible Neuron driver, Intel's one-release rule).

These state facts about the shipped matrix that survive a vendor adding a SKU: they name environments by
family default where they can."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostkit import FakeRunner, Pci, capture, gaudi2_hl_smi_csv, make_root, reorder_query

from accelenv.check.checks import check
from accelenv.check.verdict import Finding, Status
from accelenv.host.discover import discover
from accelenv.host.probes.gaudi import hl_smi_args
from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.report import HostReport, PythonInfo
from accelenv.host.root import Root
from accelenv.matrix import Environment, Matrix, load_matrix

REPO = Path(__file__).resolve().parents[2]
H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"
L40S = "nvidia_gpu_exporter__nvidia-l40s__595.80__linux-x86_64.txt"
AMD_VERSION = "amd-smi-version__k8s-device-plugin-issue157-and-legacy-rocm-build-issue4759.txt"
MI300X = (
    '{"gpu_data": [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "device_id": "0x74a1", '
    '"target_graphics_version": "gfx942:sramecc+:xnack-"}, "bus": {"bdf": "0000:26:00.0"}, '
    '"vram": {"size": {"value": 196592, "unit": "MB"}}}]}'
)


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")


def default(matrix: Matrix, family: str) -> Environment:
    env = matrix.default_env(family)
    assert env is not None
    return env


def host(
    tmp_path: Path, matrix: Matrix, family: str, *, outputs: dict[str, str], pci: list[Pci], modules: dict[str, str]
) -> HostReport:
    root = make_root(tmp_path / family, pci=pci, modules=dict(modules))
    python = PythonInfo(version="3.12.3", implementation="CPython", executable="python3", distributions={})
    return discover(matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=[family], python=python)


def driver(matrix: Matrix, env: Environment, report: HostReport) -> Finding:
    return next(f for f in check(matrix, env, report, host_only=True) if f.id == "driver.version")


def nvidia(tmp_path: Path, matrix: Matrix, name: str, pci: str, driver_version: str) -> HostReport:
    return host(
        tmp_path,
        matrix,
        "nvidia",
        outputs={
            "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): reorder_query(
                capture("nvidia-smi-query-gpu-csv__" + name), QUERY_FIELDS
            ),
            "nvidia-smi --version": capture("nvidia-smi--version__" + name),
        },
        pci=[Pci("0000:00:09.0", "0x10de", pci, driver="nvidia")],
        modules={"nvidia": driver_version},
    )


def test_h100_on_590_runs_cuda_13_2_through_minor_version_compatibility(tmp_path: Path, matrix: Matrix) -> None:
    report = nvidia(tmp_path, matrix, H100, "0x2330", "590.48.01")
    finding = driver(matrix, default(matrix, "nvidia"), report)
    # NVIDIA: CUDA 13.x applications run on R580 and newer; below the toolkit's own driver, with reduced features
    assert finding.status is Status.WARN, finding.message
    assert "minor-version compatibility" in finding.message
    cuda12 = next(e for e in matrix.envs.values() if e.family == "nvidia" and e.runtime == "cuda-12-6")
    assert driver(matrix, cuda12, report).status is Status.PASS  # a newer driver runs older CUDA


def test_l40s_on_595_80_satisfies_cuda_13_2(tmp_path: Path, matrix: Matrix) -> None:
    report = nvidia(tmp_path, matrix, L40S, "0x26b9", "595.80")
    finding = driver(matrix, default(matrix, "nvidia"), report)
    assert finding.status is Status.PASS, finding.message


def amd(tmp_path: Path, matrix: Matrix, module: str) -> HostReport:
    line = next(line for line in capture(AMD_VERSION).splitlines() if "amdgpu version: 6.10.5" in line)
    return host(
        tmp_path,
        matrix,
        "amd",
        outputs={"amd-smi static": MI300X, "amd-smi version": line.replace("6.10.5", module)},
        pci=[Pci("0000:26:00.0", "0x1002", "0x74a1", klass="0x120000", driver="amdgpu")],
        modules={"amdgpu": module},
    )


@pytest.mark.parametrize(
    ("module", "status", "release"),
    [
        # the captured host: ROCm 6.4.1 user space on ROCm 6.3's amdgpu 6.10.5, which AMD lists for no current ROCm
        ("6.10.5", Status.FAIL, None),
        # ROCm 6.4's driver: AMD dropped it from the lists from 7.14 on
        ("6.12.12", Status.FAIL, "ROCm 6.4.x amdgpu"),
        # AMD GPU driver 30.20.1 reports module 6.16.6 and is documented for ROCm 7.14 and 10.0
        ("6.16.6", Status.PASS, "AMD GPU driver 30.20.x"),
    ],
)
def test_mi300x_driver_by_amds_lists(
    tmp_path: Path, matrix: Matrix, module: str, status: Status, release: str | None
) -> None:
    finding = driver(matrix, default(matrix, "amd"), amd(tmp_path, matrix, module))
    assert finding.status is status, finding.message
    if release:
        assert f"({release})" in finding.message


@pytest.mark.parametrize(
    ("module", "status"), [("2.29.0.0", Status.PASS), ("2.31.7.0", Status.WARN), ("2.26.5.0", Status.FAIL)]
)
def test_trn1_driver_is_judged_within_the_window_aws_documents(
    tmp_path: Path, matrix: Matrix, module: str, status: Status
) -> None:
    report = host(
        tmp_path,
        matrix,
        "neuron",
        outputs={"neuron-ls": capture("neuron-ls--json-output__unnamed-repo-rust-test__trn1.2xlarge.json")},
        pci=[Pci("0000:00:1e.0", "0x1d0f", "0x7164", klass="0x088000", driver="neuron")],
        modules={"neuron": module},
    )
    # AWS: a newer driver can require a newer runtime (driver 2.29 needs runtime 2.33 or later), and runtime 2.32
    # and later refuse drivers 2.26 and older; Neuron 2.33's driver 2.31.7.0 is newer than 2.31.1's 2.29.0.0
    for env in matrix.envs.values():
        if env.family == "neuron" and "trn1" in env.skus:
            assert driver(matrix, env, report).status is status


def test_gaudi2_on_the_1_22_1_driver_is_not_known_to_work_with_newer_software(tmp_path: Path, matrix: Matrix) -> None:
    csv = gaudi2_hl_smi_csv()
    report = host(
        tmp_path,
        matrix,
        "gaudi",
        outputs={
            "hl-smi " + hl_smi_args()[0]: csv,
            "hl-smi": capture("hl-smi__ray-docs__8x-HL-225-Gaudi2__1.22.1.txt"),
        },
        pci=[Pci("0000:33:00.0", "0x1da3", "0x1020", klass="0x120000", driver="habanalabs")],
        modules={"habanalabs": "1.22.1"},
    )
    # Intel installs driver and software of one release together
    finding = driver(matrix, default(matrix, "gaudi"), report)
    assert finding.status is Status.WARN
    assert "is not one known to work" in finding.message


@pytest.mark.parametrize(
    ("device", "accelerator_type", "sku"), [("0x006f", "v6e-4", "tpu-v6e"), ("0x005e", "v4-8", "tpu-v4")]
)
def test_tpu_hosts_run_the_default_jax(
    tmp_path: Path, matrix: Matrix, device: str, accelerator_type: str, sku: str
) -> None:
    root = make_root(
        tmp_path / "tpu",
        pci=[Pci(f"0000:00:0{i}.0", "0x1ae0", device, klass="0x120000", driver="vfio-pci") for i in range(4, 8)],
        modules={},
    )
    python = PythonInfo(
        version="3.12.3", implementation="CPython", executable="python3", distributions={"libtpu": ["0.0.50.1"]}
    )
    report = discover(
        matrix,
        root=Root(root),
        runner=FakeRunner(
            {"tpu-info --version": capture("tpu-info--version__cloud-accelerator-diagnostics-README__v6e.txt")}
        ),
        environ={"TPU_ACCELERATOR_TYPE": accelerator_type},
        families=["tpu"],
        python=python,
    )
    acc = report.accelerator("tpu")
    assert acc is not None
    assert {d.sku for d in acc.devices} == {sku}
    findings = {f.id: f for f in check(matrix, default(matrix, "tpu"), report, host_only=True)}
    assert findings["devices.arch"].status is Status.PASS
    assert findings["runtime.version"].status is Status.PASS  # libtpu 0.0.50.1 is what jax 0.12.0.1 pins


def test_last_years_libtpu_is_another_release_line(tmp_path: Path, matrix: Matrix) -> None:
    root = make_root(tmp_path / "tpu", pci=[Pci("0000:00:04.0", "0x1ae0", "0x006f", driver="vfio-pci")], modules={})
    python = PythonInfo(
        version="3.12.3", implementation="CPython", executable="python3", distributions={"libtpu": ["0.0.32"]}
    )
    report = discover(matrix, root=Root(root), runner=FakeRunner({}), environ={}, families=["tpu"], python=python)
    finding = next(
        f for f in check(matrix, default(matrix, "tpu"), report, host_only=True) if f.id == "runtime.version"
    )
    assert finding.status is Status.WARN
    assert finding.expected == "0.0.50.x"
