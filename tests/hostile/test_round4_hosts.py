"""Issue 41, verdicts that lie about a host: a GPU the vendor tool lists on a readable PCI bus that has no function
of that vendor fails `hardware.present`; and `run` reads the loaded driver from the one place `check` does (the
host report), so inside a container, where only the vendor tool says which driver is loaded, it never injects a
CDI spec `check` calls stale."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hostkit import FakeRunner, Pci, capture, make_root, reorder_query
from recordkit import SHIPPED_MATRIX
from reference import REFERENCE_MATRIX

from accelenv.build import launch
from accelenv.check.checks import check
from accelenv.check.verdict import Status
from accelenv.host.cdi import CdiSpec
from accelenv.host.discover import discover
from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.report import PythonInfo
from accelenv.host.root import Root
from accelenv.matrix import load_matrix

if TYPE_CHECKING:
    from accelenv.host.report import HostReport

MATRIX = load_matrix(REFERENCE_MATRIX)
SHIPPED = load_matrix(SHIPPED_MATRIX)  # the reference matrix names no CDI kind for NVIDIA; the shipped one does
H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"
PACKAGE = Path(launch.__file__).resolve().parents[1]


def _outputs() -> dict[str, str]:
    query = reorder_query(capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS)
    return {
        "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): query,
        "nvidia-smi --version": capture("nvidia-smi--version__" + H100),
    }


def _host(tmp_path: Path, pci: list[Pci], modules: dict[str, str | None] | None) -> tuple[Path, HostReport]:
    root = make_root(tmp_path / "host", pci=pci, modules=modules, files={"/proc/sys/kernel/arch": "x86_64\n"})
    python = PythonInfo(version="3.12.7", implementation="CPython", executable="/usr/bin/python3", distributions={})
    report = discover(
        MATRIX, root=Root(root), runner=FakeRunner(_outputs()), environ={}, families=["nvidia"], python=python
    )
    return root, report


NIC = Pci("0000:00:03.0", "0x8086", "0x1533", klass="0x020000", driver="igb")  # an Intel NIC, no NVIDIA function
GPU = Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")


@pytest.mark.parametrize(
    ("pci", "status"),
    [([NIC], Status.FAIL), ([NIC, GPU], Status.PASS), ([], Status.PASS)],
    ids=["readable bus, no NVIDIA function", "the GPU's function", "no bus to read"],
)
def test_a_gpu_the_pci_bus_does_not_have_fails_hardware_present(tmp_path: Path, pci: list[Pci], status: Status) -> None:
    _, report = _host(tmp_path, pci, {"nvidia": "590.48.01"})
    acc = report.accelerator("nvidia")
    assert acc is not None
    assert acc.devices
    present = next(f for f in check(MATRIX, MATRIX.envs["gpu-nvidia-cu128"], report) if f.id == "hardware.present")
    assert present.status is status, present


def test_a_snapshot_keeps_whether_the_bus_was_readable(tmp_path: Path) -> None:
    from accelenv.host.snapshot import load_snapshot, save_snapshot

    _, report = _host(tmp_path, [NIC], {"nvidia": "590.48.01"})
    save_snapshot(report, tmp_path / "snap.json")
    acc = load_snapshot(tmp_path / "snap.json").accelerator("nvidia")
    assert acc is not None
    assert acc.pci_bus_readable is True


def test_run_and_check_read_the_loaded_driver_from_one_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside a container: no /sys/module/nvidia/version, only nvidia-smi says 590.48.01. A spec generated for
    570.133.20 is stale for `check`; `run`'s wiring, given the driver the same way, does not use it either."""
    root, report = _host(tmp_path, [GPU], None)
    acc = report.accelerator("nvidia")
    assert acc is not None
    assert acc.driver_version == "590.48.01"
    spec = CdiSpec(
        path="/etc/cdi/nvidia.yaml",
        cdi_version="0.5.0",
        kind="nvidia.com/gpu",
        devices=("all",),
        driver_version="570.133.20",
    )
    from accelenv.check.container import container_cdi

    stale = [f for f in container_cdi(SHIPPED.families["nvidia"], _with_specs(report, spec)) if f.status is Status.FAIL]
    assert stale
    assert "stale" in stale[0].message

    import accelenv.host.run as run_module

    monkeypatch.setattr(run_module, "ToolRunner", lambda **_: FakeRunner(_outputs()))
    driver = launch.loaded_driver(MATRIX, "nvidia", root=Root(root), environ={})
    assert driver == acc.driver_version
    from accelenv.build.wiring import EngineCaps, choose

    caps = EngineCaps(host="unix:///x", product="Docker", version="28.0.0", cdi_spec_dirs=("/etc/cdi",), runtimes=())
    wiring = choose(SHIPPED.families["nvidia"], caps, (spec,), Root(root), {}, driver=driver)
    assert wiring.way != "cdi"
    assert "generated for driver 570.133.20, and driver 590.48.01 is loaded" in wiring.reason + wiring.refusal


def _with_specs(report: HostReport, spec: CdiSpec) -> HostReport:
    from accelenv import records

    return records.replace(report, container=records.replace(report.container, cdi=(spec,)))


def test_the_wiring_reads_no_driver_of_its_own() -> None:
    """Enumerates build/: no module there reads a driver version from the host (sysfs, /proc, the probes); the
    driver comes from the host report, through launch.loaded_driver or the caller's report."""
    offenders = []
    for source in sorted((PACKAGE / "build").glob("*.py")):
        text = source.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "/sys/module" in node.value:
                offenders.append(f"{source.name}: {node.value}")
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("accelenv.host.probes"):
                offenders.append(f"{source.name}: imports {node.module}")
    assert offenders == []
