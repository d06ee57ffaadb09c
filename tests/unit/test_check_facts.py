"""Facts that contradict each other become findings (issue 15): the vendor tool against PCI (devices.count), the
architecture a tool reports against the one its PCI id names (devices.arch), one driver version read from several
places (driver.sources), the kernel's in-tree driver reported as a driver version, an older driver refusing a query
field, and damaged snapshots.

Hosts are fake sysfs trees answered by captured tool output (../shared/fixtures; inline lines say where their
figures come from), as in test_check.py.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import TYPE_CHECKING

import pytest
from hostkit import FakeRunner, Pci, capture, make_root, reorder_query
from reference import REFERENCE_MATRIX

from accelenv.check.checks import check
from accelenv.check.verdict import Finding, Status, verdict
from accelenv.errors import UsageError
from accelenv.host.discover import discover
from accelenv.host.probes.nvidia import LEGACY_QUERY_FIELDS, QUERY_FIELDS
from accelenv.host.report import HostReport, PciDevice, PythonInfo
from accelenv.host.root import Root
from accelenv.host.run import ToolResult
from accelenv.host.snapshot import load_snapshot, save_snapshot
from accelenv.matrix import Matrix, load_matrix

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"
H100_MIG = "nvidia_gpu_exporter__nvidia-h100-mig__590.48.01__linux-x86_64.txt"
PYTHON = PythonInfo(version="3.12.7", implementation="CPython", executable="/usr/bin/python3", distributions={})


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REFERENCE_MATRIX)


def h100_line(index: int, bus: int, *, cap: str = "9.0", driver: str = "590.48.01") -> str:
    """Our query's layout with the H100 capture's figures (590.48.01), at PCI bus `bus`."""
    uuid = f"GPU-{index:08d}-0000-0000-0000-000000000000"
    bus_id = f"00000000:{bus:02X}:00.0"
    return f"{index}, NVIDIA H100 80GB HBM3, {bus_id}, 0x233010DE, {uuid}, 81559, {cap}, {driver}, Disabled\n"


def h100_pci(bus: int, driver: str = "nvidia") -> Pci:
    return Pci(f"0000:{bus:02x}:00.0", "0x10de", "0x2330", driver=driver)


CAPTURED_H100 = Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")  # where the H100 captures' GPU sits


def nvidia_host(
    tmp_path: Path,
    matrix: Matrix,
    *,
    query: str | ToolResult,
    pci: list[Pci],
    version: str | None = None,
    module: str = "590.48.01",
    files: Mapping[str, str] | None = None,
    extra_outputs: Mapping[str, str | ToolResult] | None = None,
) -> HostReport:
    root = make_root(tmp_path / "host", pci=pci, modules={"nvidia": module}, files=files)
    outputs: dict[str, str | ToolResult] = {"nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): query}
    outputs["nvidia-smi --version"] = version or capture("nvidia-smi--version__" + H100)
    outputs.update(extra_outputs or {})
    return discover(matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=["nvidia"], python=PYTHON)


def finding(matrix: Matrix, env: str, report: HostReport, fid: str) -> Finding:
    return next(f for f in check(matrix, matrix.envs[env], report, host_only=True) if f.id == fid)


def with_devices(report: HostReport, **changes: object) -> HostReport:
    """`report` with its NVIDIA accelerator changed (devices, PCI functions): hosts too large to lay out in sysfs."""
    acc = report.accelerator("nvidia")
    assert acc is not None
    return dataclasses.replace(report, accelerators=(dataclasses.replace(acc, **changes),))  # type: ignore[arg-type]


# ---- devices.count: the tool against PCI -----------------------------------------------------------------------


def test_a_tool_listing_more_devices_than_pci_shows_is_a_finding(tmp_path: Path, matrix: Matrix) -> None:
    query = "".join(h100_line(i, 0x18 + i) for i in range(8))  # nvidia-smi lists 8 H100s ...
    report = nvidia_host(tmp_path, matrix, query=query, pci=[h100_pci(0x18), h100_pci(0x19)])  # ... PCI shows 2
    count = finding(matrix, "gpu-nvidia-cu129", report, "devices.count")
    assert count.status is Status.FAIL
    assert count.found == "nvidia-smi: 8 device(s); PCI: 2 function(s)"
    assert count.message == (
        "nvidia-smi lists 6 device(s) that PCI does not show: 0000:1a:00.0, 0000:1b:00.0, 0000:1c:00.0, 0000:1d:00.0 "
        "and 2 more"
    )
    assert "the installed driver's own tool" in count.fix
    assert finding(matrix, "gpu-nvidia-cu129", report, "hardware.present").found == "8 device(s) via nvidia-smi"
    assert verdict(check(matrix, matrix.envs["gpu-nvidia-cu129"], report, host_only=True)) is Status.FAIL


def test_twenty_thousand_pci_functions_under_one_listed_device(tmp_path: Path, matrix: Matrix) -> None:
    report = nvidia_host(tmp_path, matrix, query=h100_line(0, 0x18), pci=[h100_pci(0x18)])
    functions = tuple(
        PciDevice(
            address=f"0001:{n // 32 // 8:02x}:{n // 8 % 32:02x}.{n % 8}"
            if n
            else "0000:18:00.0",  # the listed GPU first, then 19,999 more
            vendor_id="0x10de",
            device_id="0x2330",
            class_code="0x030200",
            driver="nvidia",
            sku="h100-sxm",
        )
        for n in range(20_000)
    )
    crowded = with_devices(report, pci_devices=functions)
    start = time.monotonic()
    count = finding(matrix, "gpu-nvidia-cu129", crowded, "devices.count")
    assert time.monotonic() - start < 2
    assert count.status is Status.FAIL
    assert count.found == "nvidia-smi: 1 device(s); PCI: 20000 function(s)"
    assert count.message.startswith("19999 PCI function(s) are not listed by nvidia-smi: 0001:00:00.1, 0001:00:00.2")
    assert count.message.endswith(" and 19995 more")
    assert "fell off the bus" in count.fix


def test_an_uninitialised_gpu_on_a_bare_host_fails(tmp_path: Path, matrix: Matrix) -> None:
    query = "".join(h100_line(i, 0x18 + i) for i in range(7))  # one of 8 failed to initialise
    report = nvidia_host(tmp_path, matrix, query=query, pci=[h100_pci(0x18 + i) for i in range(8)])
    count = finding(matrix, "gpu-nvidia-cu129", report, "devices.count")
    assert (count.status, count.message) == (
        Status.FAIL,
        "1 PCI function(s) are not listed by nvidia-smi: 0000:1f:00.0",
    )


def test_agreeing_tool_and_pci_pass(tmp_path: Path, matrix: Matrix) -> None:
    query = reorder_query(capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS)
    report = nvidia_host(tmp_path, matrix, query=query, pci=[CAPTURED_H100])
    count = finding(matrix, "gpu-nvidia-cu129", report, "devices.count")
    assert (count.status, count.message) == (Status.PASS, "nvidia-smi and PCI agree on 1 device(s)")


def test_mig_is_explained_not_flagged(tmp_path: Path, matrix: Matrix) -> None:
    """The MIG capture: --query-gpu lists the physical H100 (MIG Enabled), so the counts agree; a tool that lists the
    MIG devices themselves (nvidia-smi -L of the same host shows 4) puts them all on the GPU's one PCI function."""
    query = reorder_query(capture("nvidia-smi-query-gpu-csv__" + H100_MIG), QUERY_FIELDS)
    assert "Enabled" in query
    report = nvidia_host(tmp_path, matrix, query=query, pci=[CAPTURED_H100])
    assert finding(matrix, "gpu-nvidia-cu129", report, "devices.count").status is Status.PASS
    listing = capture("nvidia-smi-L__" + H100_MIG)
    instances = [line for line in listing.splitlines() if line.strip().startswith("MIG ")]
    acc = report.accelerator("nvidia")
    assert acc is not None
    (gpu,) = acc.devices
    partitioned = with_devices(report, devices=tuple(dataclasses.replace(gpu, index=i) for i in range(len(instances))))
    count = finding(matrix, "gpu-nvidia-cu129", partitioned, "devices.count")
    assert (count.status, count.message) == (
        Status.PASS,
        (
            "nvidia-smi and PCI agree on 1 device(s); 4 devices are partitions (MIG or compute partitions) of 1 PCI "
            "device(s)"
        ),
    )


def test_sr_iov_virtual_functions_are_explained(tmp_path: Path, matrix: Matrix) -> None:
    pf = h100_pci(0x18)
    vfs = [Pci(f"0000:18:00.{n}", "0x10de", "0x2330", driver="nvidia") for n in range(4, 8)]
    report_root = tmp_path / "host"
    report = nvidia_host(tmp_path, matrix, query=h100_line(0, 0x18), pci=[pf, *vfs])
    for vf in vfs:  # sysfs links each virtual function to its physical one
        (report_root / "sys/bus/pci/devices" / vf.address / "physfn").symlink_to("../0000:18:00.0")
    report = discover(
        matrix,
        root=Root(report_root),
        runner=FakeRunner(
            {
                "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): h100_line(0, 0x18),
                "nvidia-smi --version": capture("nvidia-smi--version__" + H100),
            }
        ),
        environ={},
        families=["nvidia"],
        python=PYTHON,
    )
    acc = report.accelerator("nvidia")
    assert acc is not None
    assert [p.physfn for p in acc.pci_devices] == [None, *["0000:18:00.0"] * 4]
    count = finding(matrix, "gpu-nvidia-cu129", report, "devices.count")
    assert (count.status, count.found) == (Status.PASS, "nvidia-smi: 1 device(s); PCI: 1 function(s) and 4 virtual")
    assert count.message == "nvidia-smi and PCI agree on 1 device(s); 4 SR-IOV virtual function(s) not counted"


@pytest.mark.parametrize(
    ("files", "status", "message"),
    [
        ({}, Status.FAIL, "7 PCI function(s) are not listed by nvidia-smi: 0000:19:00.0, 0000:1a:00.0"),
        ({"/.dockerenv": ""}, Status.PASS, "nvidia-smi and PCI agree on 8 device(s); 7 not given to this container"),
    ],
    ids=["bare-host", "container"],
)
def test_a_container_sees_the_devices_it_was_given(
    tmp_path: Path, matrix: Matrix, files: dict[str, str], status: Status, message: str
) -> None:
    report = nvidia_host(
        tmp_path, matrix, query=h100_line(0, 0x18), pci=[h100_pci(0x18 + i) for i in range(8)], files=files
    )
    count = finding(matrix, "gpu-nvidia-cu129", report, "devices.count")
    assert count.status is status
    assert count.message.startswith(message)


def test_functions_passed_through_to_vms_are_explained(tmp_path: Path, matrix: Matrix) -> None:
    report = nvidia_host(tmp_path, matrix, query=h100_line(0, 0x18), pci=[h100_pci(0x18), h100_pci(0x19, "vfio-pci")])
    count = finding(matrix, "gpu-nvidia-cu129", report, "devices.count")
    assert (count.status, count.message) == (
        Status.PASS,
        "nvidia-smi and PCI agree on 2 device(s); 1 passed through to virtual machines (vfio-pci)",
    )


def test_an_unknown_function_of_the_vendor_is_a_warning(tmp_path: Path, matrix: Matrix) -> None:
    unknown = Pci("0000:1a:00.0", "0x10de", "0x9999", klass="0x030000")  # no SKU, no driver bound
    report = nvidia_host(tmp_path, matrix, query=h100_line(0, 0x18), pci=[h100_pci(0x18), unknown])
    count = finding(matrix, "gpu-nvidia-cu129", report, "devices.count")
    assert (count.status, count.message) == (
        Status.WARN,
        "1 PCI function(s) are not listed by nvidia-smi: 0000:1a:00.0",
    )


# ---- devices.arch: the tool's compute capability against the SKU's architecture --------------------------------


def test_a_compute_capability_that_contradicts_the_pci_id_fails(tmp_path: Path, matrix: Matrix) -> None:
    report = nvidia_host(tmp_path, matrix, query=h100_line(0, 0x18, cap="12.0"), pci=[h100_pci(0x18)])
    # CUDA 12.9 has code for sm_120, so judged on the tool's word alone the H100 would pass as an sm_120 device
    assert "sm_120" in matrix.runtimes[matrix.envs["gpu-nvidia-cu129"].runtime].architectures
    arch = finding(matrix, "gpu-nvidia-cu129", report, "devices.arch")
    assert arch.status is Status.FAIL
    assert arch.expected == "sm_90 (NVIDIA H100 SXM5 80GB)"
    assert arch.found == "sm_120"
    assert arch.message == (
        "the tool and the matrix disagree: device 0 reports sm_120, but its PCI id 0x2330 names the NVIDIA H100 "
        "SXM5 80GB, which is sm_90; the architecture is unknown, so is whether CUDA 12.9 Update 1 runs on it"
    )
    assert "[skus.h100-sxm]" in arch.fix


# ---- driver.sources: one fact, several sources ----------------------------------------------------------------

# The A100 host of NVIDIA/CUDALibrarySamples#104 (driver 470.103.01) in our query's layout; see test_nvidia.py.
A100_470 = (
    "0, NVIDIA A100-SXM4-80GB, 00000000:94:00.0, 0x20B210DE, GPU-a75cda02-62ce-2c30-9150-555ef08935e2, 81920, "
    "8.0, 470.103.01, Disabled\n"
)


def version_text(driver: str, cuda: str) -> str:
    """`nvidia-smi --version` in the <=595 layout (as the 590.48.01 capture prints it), with other figures."""
    return (
        f"NVIDIA-SMI version  : {driver}\nNVML version        : {driver.rsplit('.', 1)[0]}\n"
        f"DRIVER version      : {driver}\nCUDA Version        : {cuda}\n"
    )


def test_sources_that_disagree_on_the_driver_fail(tmp_path: Path, matrix: Matrix) -> None:
    report = nvidia_host(
        tmp_path,
        matrix,
        query=A100_470,
        pci=[Pci("0000:94:00.0", "0x10de", "0x20b2", driver="nvidia")],
        version=version_text("999.99.99", "13.9"),
        module="470.103.01",
    )
    sources = finding(matrix, "gpu-nvidia-cu126", report, "driver.sources")
    assert sources.status is Status.FAIL
    assert sources.found == (
        "kernel module nvidia: 470.103.01; nvidia-smi --query-gpu: 470.103.01; nvidia-smi --version: 999.99.99"
    )
    assert sources.message == (
        "the driver version is 470.103.01 by kernel module nvidia and nvidia-smi --query-gpu, 999.99.99 by "
        "nvidia-smi --version: the sources disagree, so the driver checks judge a version that may not be the one "
        "running"
    )
    assert sources.fix.startswith("a driver upgraded without a reboot leaves the old kernel module loaded")


def test_sources_that_agree_pass(tmp_path: Path, matrix: Matrix) -> None:
    query = reorder_query(capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS)
    nvrm = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.48.01  Mon Dec  1 00:00:00 UTC 2025\n"
    files = {"/proc/driver/nvidia/version": nvrm}
    report = nvidia_host(tmp_path, matrix, query=query, pci=[CAPTURED_H100], files=files)
    sources = finding(matrix, "gpu-nvidia-cu129", report, "driver.sources")
    assert (sources.status, sources.message) == (Status.PASS, "4 sources agree on driver 590.48.01")


def test_one_source_is_no_comparison(tmp_path: Path, matrix: Matrix) -> None:
    root = make_root(tmp_path / "host", pci=[CAPTURED_H100], modules={"nvidia": "590.48.01"})
    report = discover(matrix, root=Root(root), runner=FakeRunner({}), environ={}, families=["nvidia"], python=PYTHON)
    assert not any(f.id == "driver.sources" for f in check(matrix, matrix.envs["gpu-nvidia-cu129"], report))


# ---- an older driver: no compute_cap in the query ---------------------------------------------------------------


def test_a_driver_before_r510_is_read_without_compute_cap(tmp_path: Path, matrix: Matrix) -> None:
    refused = ToolResult(
        argv=("nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS)),
        returncode=2,
        stdout='Field "compute_cap" is not a valid field to query.\n\n',
        stderr="",
        seconds=0.1,
        fault='nvidia-smi exited with status 2: Field "compute_cap" is not a valid field to query.',
    )
    legacy = (
        "0, NVIDIA A100-SXM4-80GB, 00000000:94:00.0, 0x20B210DE, GPU-a75cda02-62ce-2c30-9150-555ef08935e2, 81920, "
        "470.103.01\n"
    )
    report = nvidia_host(
        tmp_path,
        matrix,
        query=refused,
        pci=[Pci("0000:94:00.0", "0x10de", "0x20b2", driver="nvidia")],
        version=version_text("470.103.01", "11.4"),
        module="470.103.01",
        extra_outputs={"nvidia-smi --query-gpu=" + ",".join(LEGACY_QUERY_FIELDS): legacy},
    )
    assert set(report.raw) == {"nvidia-smi-query", "nvidia-smi-query-legacy", "nvidia-smi-version", "nvidia-smi-topo"}
    acc = report.accelerator("nvidia")
    assert acc is not None
    assert acc.errors == ()
    assert [(d.sku, d.arch) for d in acc.devices] == [("a100-sxm4-80gb", "sm_80")]  # the arch of the PCI id's SKU
    found = {f.id: f for f in check(matrix, matrix.envs["gpu-nvidia-cu126"], report, host_only=True)}
    assert "tools" not in found
    assert (found["devices.arch"].status, found["devices.arch"].found) == (Status.PASS, "sm_80")
    assert found["driver.version"].status is Status.FAIL  # 470 is below CUDA 12.6's compatibility floor
    assert found["driver.sources"].status is Status.PASS


# ---- the kernel's in-tree amdgpu ---------------------------------------------------------------------------------

MI300X_IN_TREE = json.dumps(
    {
        "gpu_data": [
            {
                "gpu": 0,
                "asic": {
                    "market_name": "AMD Instinct MI300X",
                    "device_id": "0x74a1",
                    "target_graphics_version": "gfx942:sramecc+:xnack-",
                },
                "bus": {"bdf": "0000:26:00.0"},
                "driver": {"name": "amdgpu", "version": "6.8.0-79-generic"},
            }
        ]
    }
)


def test_the_in_tree_amdgpu_is_named_not_misread(tmp_path: Path, matrix: Matrix) -> None:
    """k8s-device-plugin#157's MI300X host: amd-smi version prints the kernel banner for amdgpu; amd-smi static the
    kernel release (the figures of the MI300X captures, see tests/unit/probes/test_amd.py)."""
    banner = next(
        line
        for line in capture(
            "amd-smi-version__k8s-device-plugin-issue157-and-legacy-rocm-build-issue4759.txt"
        ).splitlines()
        if "Linuxversion" in line
    )
    root = make_root(
        tmp_path / "host",
        pci=[Pci("0000:26:00.0", "0x1002", "0x74a1", klass="0x120000", driver="amdgpu")],
        modules={"amdgpu": None},  # the in-tree module has no /sys/module/amdgpu/version
        files={"/proc/sys/kernel/osrelease": "6.8.0-79-generic\n"},
    )
    runner = FakeRunner({"amd-smi static": MI300X_IN_TREE, "amd-smi version": banner})
    report = discover(matrix, root=Root(root), runner=runner, environ={}, families=["amd"], python=PYTHON)
    acc = report.accelerator("amd")
    assert acc is not None
    assert (acc.driver_version, acc.extra.get("driver_kernel")) == (None, "6.8.0-79-generic")
    driver = finding(matrix, "gpu-amd-rocm70", report, "driver.version")
    assert driver.status is Status.FAIL
    assert driver.found == "the kernel's in-tree amdgpu (kernel 6.8.0-79-generic)"
    assert driver.message == (
        "the amdgpu driver is the one built into kernel 6.8.0-79-generic: it has no driver release of its own, so "
        "nothing says ROCm 7.0.2 supports it"
    )
    assert driver.fix == "install the vendor's packaged amdgpu driver of a release documented for ROCm 7.0.2"


# ---- snapshots are checked against the published schema ---------------------------------------------------------


@pytest.fixture
def snapshot(tmp_path: Path, matrix: Matrix) -> dict[str, object]:
    query = reorder_query(capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS)
    report = nvidia_host(tmp_path, matrix, query=query, pci=[CAPTURED_H100])
    save_snapshot(report, tmp_path / "node.json")
    replayed = load_snapshot(tmp_path / "node.json")
    env = matrix.envs["gpu-nvidia-cu129"]
    assert check(matrix, env, replayed) == check(matrix, env, report)  # sources and physfn survive the round trip
    data: dict[str, object] = json.loads((tmp_path / "node.json").read_text())
    return data


def damaged(tmp_path: Path, data: object) -> str:
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError) as error:
        load_snapshot(path)
    return str(error.value).removeprefix(f"{path}: ")


def test_a_snapshot_with_errors_as_text_is_refused(tmp_path: Path, snapshot: dict[str, object]) -> None:
    snapshot["report"]["accelerators"][0]["errors"] = "boom"  # type: ignore[index]
    assert damaged(tmp_path, snapshot) == (
        "the snapshot is damaged: 1 problem(s) against schema/inspect.schema.json\n"
        "  report.accelerators[0].errors: 'boom' is not of type 'array'\n"
        "(write a new one with `accelenv snapshot -o FILE` on the host)"
    )


def test_a_snapshot_with_a_version_for_a_list_of_versions_is_refused(
    tmp_path: Path, snapshot: dict[str, object]
) -> None:
    snapshot["report"]["python"]["distributions"] = {"torch": "2.9.1"}  # type: ignore[index]
    assert "  report.python.distributions.torch: '2.9.1' is not of type 'array'\n" in damaged(tmp_path, snapshot)


@pytest.mark.parametrize("form", [True, "1", 1.0, 2, None])
def test_only_format_one_is_a_snapshot(tmp_path: Path, snapshot: dict[str, object], form: object) -> None:
    snapshot["accelenv_snapshot"] = form
    assert damaged(tmp_path, snapshot) == "not an accelenv snapshot (write one with `accelenv snapshot -o FILE`)"


def test_every_problem_is_reported_at_once(tmp_path: Path, snapshot: dict[str, object]) -> None:
    report = snapshot["report"]
    report["limits"]["shm_bytes"] = "lots"  # type: ignore[index]
    report["raw"]["nvidia-smi-version"]["returncode"] = "0"  # type: ignore[index]
    del report["os"]  # type: ignore[attr-defined]
    message = damaged(tmp_path, snapshot)
    assert message.splitlines()[1:4] == [
        "  report: 'os' is a required property",
        "  report.limits.shm_bytes: 'lots' is not of type 'integer', 'null'",
        "  report.raw.nvidia-smi-version.returncode: '0' is not of type 'integer', 'null'",
    ]
    assert message.startswith("the snapshot is damaged: 3 problem(s)")


def test_an_older_snapshot_without_the_new_fields_still_loads(tmp_path: Path, snapshot: dict[str, object]) -> None:
    for acc in snapshot["report"]["accelerators"]:  # type: ignore[index]
        del acc["sources"]
        for function in acc["pci_devices"]:
            del function["physfn"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(snapshot))
    acc = load_snapshot(path).accelerator("nvidia")
    assert acc is not None
    assert (acc.sources, acc.pci_devices[0].physfn) == ({}, None)


# ---- files that exist but cannot be read -------------------------------------------------------------------------


def test_a_file_that_cannot_be_read_is_a_finding(tmp_path: Path, matrix: Matrix) -> None:
    """The second GPU's PCI vendor file is a FIFO (as a hostile or broken capture may hold): reading it would block,
    so the Root refuses it, and the check says the host was judged without it instead of passing as a 1-GPU host."""
    query = h100_line(0, 0x18)
    pci = [h100_pci(0x18), h100_pci(0x19)]
    root = make_root(tmp_path / "host", pci=pci, modules={"nvidia": "590.48.01"})
    vendor = root / "sys/bus/pci/devices/0000:19:00.0/vendor"
    vendor.unlink()
    os.mkfifo(vendor)
    outputs = {
        "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): query,
        "nvidia-smi --version": capture("nvidia-smi--version__" + H100),
    }
    report = discover(
        matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=["nvidia"], python=PYTHON
    )
    assert list(report.unreadable) == ["/sys/bus/pci/devices/0000:19:00.0/vendor"]
    unreadable = finding(matrix, "gpu-nvidia-cu129", report, "host.readable")
    assert unreadable.status is Status.FAIL
    assert unreadable.found.startswith("1 unreadable: /sys/bus/pci/devices/0000:19:00.0/vendor (")
    assert unreadable.message == (
        "1 host file(s) exist but could not be read, so the checks that rest on them judged without them"
    )
    assert json.loads(json.dumps(report.as_json()))["unreadable"] == report.unreadable  # kept in inspect --json
    save_snapshot(report, tmp_path / "node.json")
    assert load_snapshot(tmp_path / "node.json").unreadable == report.unreadable
