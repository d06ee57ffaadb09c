"""The checker on fake hosts built from real captures: each rule of the issue, pass and fail, and faults as results.

A fake host is a sysfs tree under a temporary root plus a fake tool runner answering with captured nvidia-smi,
amd-smi and hl-smi output. Python distributions are set on the report directly, so no package is installed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hostkit import FakeRunner, Pci, capture, make_root, reorder_query
from reference import REFERENCE_MATRIX

from accelenv.check.checks import check
from accelenv.check.driver import numeric_version
from accelenv.check.rank import rank_environments
from accelenv.check.verdict import Finding, Status, verdict, verdict_json
from accelenv.host.discover import discover
from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.report import HostReport, PythonInfo
from accelenv.host.root import Root
from accelenv.host.run import ToolResult
from accelenv.host.snapshot import load_snapshot, save_snapshot
from accelenv.matrix import Matrix, load_matrix

REPO = Path(__file__).resolve().parents[2]
H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"
V610 = "nvidia-smi--version__nvidia_gpu_exporter__nvidia-geforce-rtx-2080-super__610.57.04__linux-x86_64.txt"


def version_text(driver: str, cuda: str) -> str:
    """`nvidia-smi --version` in the <=595 layout (as in the 590.48.01 capture), with other figures."""
    return (
        f"NVIDIA-SMI version  : {driver}\nNVML version        : {driver.rsplit('.', 1)[0]}\n"
        f"DRIVER version      : {driver}\nCUDA Version        : {cuda}\n"
    )


def b300_query(count: int = 2) -> str:
    """Our query's layout with the B300 capture's figures (name, 10.3, driver 610.57.04, memory 275040 MiB)."""
    return "".join(
        f"{i}, NVIDIA B300 SXM6 AC, 00000000:{0x1B + i:02X}:00.0, 0x318210DE, GPU-{i}, "
        "275040, 10.3, 610.57.04, Disabled\n"
        for i in range(count)
    )


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REFERENCE_MATRIX)


def nvidia_host(
    tmp_path: Path,
    matrix: Matrix,
    *,
    query: str | None,
    version: str | None,
    pci: list[Pci] | None = None,
    modules: dict[str, str | None] | None = None,
    environ: dict[str, str] | None = None,
    packages: dict[str, list[str]] | None = None,
    python: str = "3.12.7",
) -> HostReport:
    root = make_root(
        tmp_path / "host",
        pci=pci if pci is not None else [Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")],
        modules=modules if modules is not None else {"nvidia": "590.48.01"},
        files={
            "/proc/self/limits": "Max locked memory         unlimited            unlimited            bytes\n",
            "/proc/sys/kernel/arch": "x86_64\n",
        },
    )
    outputs: dict[str, str | ToolResult] = {}
    if query is not None:
        outputs["nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS)] = query
    if version is not None:
        outputs["nvidia-smi --version"] = version
    facts = PythonInfo(
        version=python,
        implementation="CPython",
        executable="/usr/bin/python3",
        distributions=packages
        if packages is not None
        else {"torch": ["2.9.1+cu128"], "ray": ["2.60.0"], "pytest": ["9.2.0"]},
    )
    return discover(
        matrix, root=Root(root), runner=FakeRunner(outputs), environ=environ or {}, families=["nvidia"], python=facts
    )


def by_id(findings: list[Finding]) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def h100_report(
    tmp_path: Path, matrix: Matrix, *, driver: tuple[str, str] | None = None, **kwargs: object
) -> HostReport:
    """The H100 capture's host; with `driver` (version, CUDA) the same host on another driver, consistently: the
    query, `--version` and the kernel module all report it (a host whose sources disagree is another test)."""
    query = reorder_query(capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS)
    kwargs.setdefault("version", capture("nvidia-smi--version__" + H100))
    if driver is not None:
        query = query.replace("590.48.01", driver[0])
        kwargs["version"] = version_text(*driver)
        kwargs.setdefault("modules", {"nvidia": driver[0]})
    return nvidia_host(tmp_path, matrix, query=query, **kwargs)  # type: ignore[arg-type]


def test_h100_on_590_passes_cu128(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix)
    acc = report.accelerator("nvidia")
    assert acc is not None
    assert (acc.driver_version, acc.runtime_version, acc.source) == ("590.48.01", "13.1", "nvidia-smi")
    assert [(d.name, d.arch, d.memory_mib, d.sku) for d in acc.devices] == [
        ("NVIDIA H100 80GB HBM3", "sm_90", 81559, "h100-sxm")
    ]
    findings = check(matrix, matrix.envs["gpu-nvidia-cu128"], report)
    assert verdict(findings) is Status.PASS, [f for f in findings if f.status is not Status.PASS]
    f = by_id(findings)
    assert f["driver.version"].found == "590.48.01"
    assert f["driver.cuda"].message == "driver supports CUDA 13.1"
    assert f["devices.arch"].found == "sm_90"


def test_cuda13_env_on_a_570_driver_fails(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix, driver=("570.124.06", "12.8"))
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu130"], report))
    assert f["driver.version"].status is Status.FAIL
    assert f["driver.version"].message == "driver 570.124.06 is below 580.65.06, the oldest that CUDA 13.0 runs on"
    assert f["driver.version"].fix.startswith("install driver 580.65.06 or newer")
    assert f["driver.cuda"].status is Status.FAIL
    assert f["driver.cuda"].message == "the driver supports CUDA 12.8; CUDA 13.0 needs 13.0"


def test_cuda128_on_a_535_driver_warns_minor_version_compatibility(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix, driver=("535.54.03", "12.2"))
    findings = check(matrix, matrix.envs["gpu-nvidia-cu128"], report)
    f = by_id(findings)
    assert f["driver.version"].status is Status.WARN
    assert "runs only through minor-version compatibility" in f["driver.version"].message
    assert "Drivers 525-569" in f["driver.version"].fix  # what is lost, from the matrix's notes
    assert f["driver.cuda"].status is Status.WARN
    assert verdict(findings) is Status.WARN


def test_driver_below_the_compat_floor_fails(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix, driver=("515.105.01", "11.7"))
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu126"], report))
    assert f["driver.version"].status is Status.FAIL
    assert "below 525.60.13" in f["driver.version"].message
    assert f["driver.cuda"].status is Status.FAIL


def test_610_driver_format_and_b300_under_cu128(tmp_path: Path, matrix: Matrix) -> None:
    report = nvidia_host(
        tmp_path,
        matrix,
        query=b300_query(2),
        version=capture(V610),
        pci=[
            Pci("0000:1b:00.0", "0x10de", "0x3182", driver="nvidia"),
            Pci("0000:1c:00.0", "0x10de", "0x3182", driver="nvidia"),
        ],
        modules={"nvidia": "610.57.04"},
    )
    acc = report.accelerator("nvidia")
    assert acc is not None
    assert (acc.driver_version, acc.runtime_version) == ("610.57.04", "13.3")
    assert {d.sku for d in acc.devices} == {"b300"}
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["devices.arch"].status is Status.FAIL
    assert f["devices.arch"].message == "CUDA 12.8 Update 1 has no code for sm_103"
    assert f["devices.sku"].status is Status.FAIL
    assert f["devices.sku"].fix == "use an environment made for it (gpu-nvidia-cu129, gpu-nvidia-cu130)"
    assert f["devices.sku"].found == "NVIDIA B300 SXM6 AC x2"
    assert verdict(check(matrix, matrix.envs["gpu-nvidia-cu129"], report, host_only=True)) is Status.PASS


def test_sku_floor_beats_the_toolkit_floor(tmp_path: Path, matrix: Matrix) -> None:
    # a B200 needs 570.133.20; CUDA 12.8's own floor is 570.124.06
    query = "0, NVIDIA B200, 00000000:1B:00.0, 0x290110DE, GPU-1, 183359, 10.0, 570.124.06, Disabled\n"
    report = nvidia_host(
        tmp_path,
        matrix,
        query=query,
        version=version_text("570.124.06", "12.8"),
        pci=[Pci("0000:1b:00.0", "0x10de", "0x2901", driver="nvidia")],
        modules={"nvidia": "570.124.06"},
    )
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["driver.version"].status is Status.FAIL
    assert f["driver.version"].message == "NVIDIA B200 needs driver 570.133.20 or newer"
    assert "b200 >= 570.133.20" in f["driver.version"].expected


def test_nouveau_holding_the_gpu(tmp_path: Path, matrix: Matrix) -> None:
    report = nvidia_host(
        tmp_path,
        matrix,
        query=None,
        version=None,
        pci=[Pci("0000:01:00.0", "0x10de", "0x2330", driver="nouveau")],
        modules={"nouveau": None},
    )
    acc = report.accelerator("nvidia")
    assert acc is not None
    assert acc.source == "pci"
    assert acc.shadowed_by == "nouveau"
    assert acc.devices[0].sku == "h100-sxm"
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["hardware.present"].status is Status.PASS
    assert f["driver.module"].status is Status.FAIL
    assert f["driver.module"].fix == "blacklist nouveau and load nvidia (then reboot)"
    assert f["driver.version"].status is Status.FAIL  # no nvidia-smi, no driver version


@pytest.mark.parametrize(
    ("result", "fragment"),
    [
        (
            ToolResult(
                argv=("nvidia-smi",),
                returncode=None,
                stdout="",
                stderr="",
                seconds=10,
                fault="nvidia-smi did not finish within 10 s",
            ),
            "did not finish",
        ),
        (
            ToolResult(
                argv=("nvidia-smi",),
                returncode=9,
                stdout="",
                stderr="NVML: Driver/library version mismatch",
                seconds=0.1,
                fault="nvidia-smi exited with status 9: NVML: Driver/library version mismatch",
            ),
            "version mismatch",
        ),
        (
            ToolResult(
                argv=("nvidia-smi",), returncode=0, stdout="\x00\x01garbage", stderr="", seconds=0.1, fault=None
            ),
            "nvidia-smi --query-gpu",
        ),
        (
            ToolResult(
                argv=("nvidia-smi",),
                returncode=None,
                stdout="",
                stderr="",
                seconds=0,
                fault="nvidia-smi is not permitted to run: Permission denied",
            ),
            "not permitted",
        ),
    ],
)
def test_tool_faults_are_findings(tmp_path: Path, matrix: Matrix, result: ToolResult, fragment: str) -> None:
    report = h100_report(tmp_path, matrix)
    root = make_root(
        tmp_path / "faulty",
        pci=[Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")],
        modules={"nvidia": "590.48.01"},
    )
    runner = FakeRunner({"nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): result, "nvidia-smi --version": result})
    report = dataclasses.replace(
        discover(matrix, root=Root(root), runner=runner, environ={}, families=["nvidia"]), python=report.python
    )
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["tools"].status is Status.FAIL
    assert fragment in f["tools"].found
    assert f["hardware.present"].status is Status.PASS  # the PCI layer still sees the GPU
    assert f["driver.module"].found == "nvidia 590.48.01"


def test_local_label_must_match(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix, packages={"torch": ["2.9.1+cpu"], "ray": ["2.60.0"]})
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["requirements.torch"].status is Status.FAIL
    assert f["requirements.torch"].message == (
        "torch 2.9.1+cpu is installed, gpu-nvidia-cu128 pins 2.9.1+cu128: a +cpu build, not +cu128"
    )
    assert f["requirements.ray"].status is Status.PASS


def test_duplicate_and_missing_installs(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix, packages={"torch": ["2.9.1+cu128", "2.9.1+cu128"]})
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["requirements.torch"].message == "torch is installed 2 times; which one imports is an accident"
    assert f["requirements.ray"].found == "not installed"


def test_python_version(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix, python="3.11.7")
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["python.version"].status is Status.FAIL
    assert f["python.version"].expected == "3.12"


@pytest.mark.parametrize(
    ("environ", "status", "fragment"),
    [
        ({"CUDA_VISIBLE_DEVICES": "0"}, Status.PASS, "agree"),
        ({"CUDA_VISIBLE_DEVICES": "3"}, Status.FAIL, "CUDA_VISIBLE_DEVICES names device 3, but the host has 1"),
        ({"CUDA_VISIBLE_DEVICES": ""}, Status.FAIL, "set but empty"),
        ({"NVIDIA_VISIBLE_DEVICES": "void"}, Status.FAIL, "hides every device"),
        ({"CUDA_VISIBLE_DEVICES": "GPU-deadbeef"}, Status.FAIL, "not a device of this host"),
        ({"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "0"}, Status.PASS, "agree"),
    ],
)
def test_visible_devices(
    tmp_path: Path, matrix: Matrix, environ: dict[str, str], status: Status, fragment: str
) -> None:
    report = h100_report(tmp_path, matrix, environ=environ)
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["devices.visible"].status is status
    assert fragment in f["devices.visible"].message


def test_no_hardware(tmp_path: Path, matrix: Matrix) -> None:
    report = nvidia_host(tmp_path, matrix, query=None, version=None, pci=[], modules={})
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["hardware.present"].status is Status.FAIL
    assert f["hardware.present"].found == "none: no PCI function of vendor 0x10de"
    assert "driver.version" not in f  # nothing else to judge


def test_tool_answers_without_pci_as_in_containers(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix, pci=[], modules={})
    acc = report.accelerator("nvidia")
    assert acc is not None
    assert acc.devices
    assert not acc.pci_devices
    f = by_id(check(matrix, matrix.envs["gpu-nvidia-cu128"], report))
    assert f["hardware.present"].status is Status.PASS
    assert f["driver.module"].status is Status.PASS
    assert "not visible here" in f["driver.module"].message


def test_snapshot_replays_the_verdict(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix, driver=("535.54.03", "12.2"))
    path = tmp_path / "node.json"
    save_snapshot(report, path)
    replayed = load_snapshot(path)
    env = matrix.envs["gpu-nvidia-cu128"]
    assert check(matrix, env, replayed) == check(matrix, env, report)
    assert replayed.raw["nvidia-smi-version"].stdout.startswith("NVIDIA-SMI version  : 535.54.03")
    data = json.loads(path.read_text())
    assert data["accelenv_snapshot"] == 1


def test_snapshot_redacts_secrets(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(
        tmp_path, matrix, environ={"TPU_API_TOKEN": "s3cret", "CUDA_VISIBLE_DEVICES": "0", "HOME": "/root"}
    )
    assert report.environment == {"CUDA_VISIBLE_DEVICES": "0", "TPU_API_TOKEN": "<redacted>"}


def test_which_ranks_the_hosts_envs(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix)
    ranked = rank_environments(matrix, report)
    runnable = [r["id"] for r in ranked if r["runnable"]]
    assert runnable[0] == "gpu-nvidia-cu128"  # the family default ranks first among equals
    assert set(runnable) == {
        "gpu-nvidia-cu128",
        "gpu-nvidia-cu129",
        "gpu-nvidia-cu130",
        "gpu-nvidia-cu126",
        "cpu-py311",
    }
    assert runnable[-1] == "cpu-py311"


def test_verdict_json_shape(tmp_path: Path, matrix: Matrix) -> None:
    report = h100_report(tmp_path, matrix)
    data = verdict_json("gpu-nvidia-cu128", check(matrix, matrix.envs["gpu-nvidia-cu128"], report), source="test")
    assert set(data) == {"env", "verdict", "source", "counts", "checks"}
    assert set(data["checks"][0]) == {"id", "status", "expected", "found", "message", "fix"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("570.124.06", "570.124.06"), ("1.22.1-97ec1a4", "1.22.1"), ("6.10.5", "6.10.5"), ("garbage", None), (None, None)],
)
def test_numeric_version(text: str | None, expected: str | None) -> None:
    version = numeric_version(text)
    assert (str(version) if version else None) == expected


def test_outputs_follow_their_published_schemas(tmp_path: Path, matrix: Matrix) -> None:
    import jsonschema

    from accelenv.host.schema import inspect_schema
    from accelenv.plan.schemas import check_schema

    report = h100_report(tmp_path, matrix, environ={"CUDA_VISIBLE_DEVICES": "0"})
    jsonschema.Draft202012Validator(inspect_schema()).validate(report.as_json())
    jsonschema.Draft202012Validator(inspect_schema()).validate(report.as_json(raw=True))
    verdict_data = verdict_json("gpu-nvidia-cu128", check(matrix, matrix.envs["gpu-nvidia-cu128"], report), source="t")
    jsonschema.Draft202012Validator(check_schema()).validate(verdict_data)


def _topo(name: str) -> str:
    text = (REPO / "tests" / "unit" / "data" / "topo" / name).read_text()
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("# source:"))


def _env_with(matrix: Matrix, **requires: object) -> object:
    from accelenv.matrix.model import Requires

    return dataclasses.replace(matrix.envs["gpu-nvidia-cu128"], requires=Requires(**requires))  # type: ignore[arg-type]


def test_topology_requirements(tmp_path: Path, matrix: Matrix) -> None:
    root = make_root(
        tmp_path / "host",
        pci=[Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")],
        modules={"nvidia": "590.48.01", "nvidia_peermem": None},
        files={
            "/sys/class/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n",
            "/sys/class/infiniband/mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)\n",
            "/sys/class/infiniband/mlx5_0/ports/1/link_layer": "InfiniBand\n",
        },
    )
    outputs: dict[str, str | ToolResult] = {
        "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): reorder_query(
            capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS
        ),
        "nvidia-smi --version": capture("nvidia-smi--version__" + H100),
        "nvidia-smi topo": _topo("h20-nv18-8nic.txt"),
    }
    report = discover(
        matrix, root=Root(root), runner=FakeRunner(outputs), environ={"TPU_TOPOLOGY": "2x2x1"}, families=["nvidia"]
    )
    assert report.topology["gpu"]["all_pairs_nvlink"] is True
    assert report.topology["gpu"]["min_nvlinks"] == 18
    assert report.topology["peermem"] is True
    env = _env_with(matrix, nvlink_all_pairs=True, min_nvlinks=18, rdma="peermem", infiniband=True, efa=True)
    f = by_id(check(matrix, env, report, host_only=True))  # type: ignore[arg-type]
    assert f["topology.nvlink"].status is Status.PASS
    assert f["topology.rdma"].status is Status.PASS
    assert f["topology.infiniband"].found == "mlx5_0"
    assert f["topology.efa"].status is Status.FAIL
    pcie = FakeRunner({**outputs, "nvidia-smi topo": _topo("rtx6000ada-pcie-4nic.txt")})
    report = discover(matrix, root=Root(root), runner=pcie, environ={}, families=["nvidia"])
    f = by_id(check(matrix, _env_with(matrix, nvlink_all_pairs=True), report, host_only=True))  # type: ignore[arg-type]
    assert f["topology.nvlink"].status is Status.FAIL
    assert f["topology.nvlink"].found == "4 GPUs, not every pair on NVLink"
