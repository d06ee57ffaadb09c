"""The DRA selectors, proven against the checker: every generated selector, evaluated by a real CEL interpreter
on the attributes each vendor's DRA driver would publish for hosts built from real captures (through accelenv's
own probes), selects a device exactly when the parts of `accelenv check ENV --host-only` those attributes can
express pass for it: the SKU (`devices.sku` passes) and, where the driver publishes a version, the driver
(`driver.version` does not fail; a warning still runs). Hosts are the captured ones on their captured driver and
on both sides of every floor, and nodes mixing two SKUs.

A device is judged as the pod sees it: the report holds that device alone (what the claim would hand the pod).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from celkit import amd_product_name, amd_version, nvidia_version, selects, semver
from hostkit import FIXTURES, FakeRunner, Pci, capture, gaudi2_hl_smi_csv, make_root, reorder_query

from accelenv.check.checks import check
from accelenv.check.verdict import Status
from accelenv.host.discover import discover
from accelenv.host.probes.gaudi import hl_smi_args
from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.report import Accelerator, Device, HostReport, PythonInfo
from accelenv.host.root import Root
from accelenv.k8s.dra import AMD, GAUDI, NVIDIA, selection
from accelenv.matrix import Environment, Matrix, load_matrix
from accelenv.matrix.driver_branches import branch_floors
from accelenv.matrix.model import LiteralVersion
from accelenv.records import replace

REPO = Path(__file__).resolve().parents[2]
PYTHON = PythonInfo(version="3.12.3", implementation="CPython", executable="python3", distributions={})
EXPORTER = "nvidia_gpu_exporter__{}__linux-x86_64.txt"
NVIDIA_CAPTURES = [
    EXPORTER.format(name)
    for name in (
        "nvidia-h100-80gb-hbm3__590.48.01",
        "nvidia-h200__590.48.01",
        "nvidia-l40s__595.80",
        "nvidia-geforce-rtx-2080-super__595.71.05",
        "nvidia-geforce-rtx-4080-super__595.71.05",
        "nvidia-h100-mig__590.48.01",
    )
] + ["unnamed-repo-XE9780-perf-test__7x-B300-SXM6-AC__610.57.04.txt"]
AMD_VERSION = "amd-smi-version__k8s-device-plugin-issue157-and-legacy-rocm-build-issue4759.txt"
# amd-smi static --json as AMD's tools print it, with the facts of the captures (capture-amd: MI300X OAM 0x74a1;
# rocm-systems PR 2987: MI350X 0x75a0 gfx950)
AMD_STATIC = (
    '{"gpu_data": [{"gpu": 0, "asic": {"market_name": "%s", "device_id": "%s", "target_graphics_version": "%s"}, '
    '"bus": {"bdf": "0000:26:00.0"}, "vram": {"size": {"value": 196592, "unit": "MB"}}}]}'
)
AMD_DEVICES = [("AMD Instinct MI300X", "0x74a1", "gfx942"), ("AMD Instinct MI350X", "0x75a0", "gfx950")]


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")


@cache
def _selectors(env_id: str) -> tuple[str, ...]:
    matrix = load_matrix(REPO / "matrix.toml")
    return tuple(s.expression for s in selection(matrix, matrix.envs[env_id]).selectors)


# ---- what check says of one device, and what the driver publishes for it ------------------------------------


def checked(matrix: Matrix, env: Environment, report: HostReport, acc: Accelerator, device: Device) -> bool:
    alone = replace(report, accelerators=(replace(acc, devices=(device,)),))
    found = {f.id: f for f in check(matrix, env, alone, host_only=True)}
    # Gaudi's driver publishes no version: the claim cannot judge the driver, the preflight does
    driver = found.get("driver.version") if env.family != "gaudi" else None
    return found["devices.sku"].status is Status.PASS and (driver is None or driver.status is not Status.FAIL)


def published(family: str, acc: Accelerator, device: Device) -> dict[str, Any]:
    """The device as the vendor's DRA driver would publish it in a ResourceSlice."""
    attrs: dict[str, Any]
    if family == "nvidia":
        assert device.name
        assert acc.driver_version
        attrs = {"type": "gpu", "productName": device.name, "driverVersion": semver(nvidia_version(acc.driver_version))}
        return {"driver": NVIDIA.name, "attributes": {NVIDIA.name: attrs}}
    if family == "amd":
        attrs = {"type": "amdgpu", "productName": amd_product_name(device.name or "")}
        if device.pci_device_id:
            attrs["deviceID"] = device.pci_device_id
        module = acc.modules.get("amdgpu")
        if module:
            attrs["driverVersion"] = semver(amd_version(module))
        return {"driver": AMD.name, "attributes": {AMD.name: attrs}}
    model = GAUDI.models.get(device.pci_device_id or "", "Unknown")
    return {"driver": GAUDI.name, "attributes": {GAUDI.name: {"model": model, "healthy": True}}}


def agree(matrix: Matrix, report: HostReport, family: str) -> list[tuple[str, str, bool]]:
    """(env, device, selected) for every device and environment of the family; asserts CEL and check agree."""
    acc = report.accelerator(family)
    assert acc is not None
    assert acc.devices
    out = []
    for env in (e for e in matrix.envs.values() if e.family == family):
        for device in acc.devices:
            by_check = checked(matrix, env, report, acc, device)
            by_cel = selects(_selectors(env.id), published(family, acc, device))
            assert by_cel == by_check, (
                f"{env.id}: {device.name} ({device.pci_device_id}, {device.sku}) on driver {acc.driver_version}: "
                f"the claim {'selects' if by_cel else 'refuses'} it, check {'passes' if by_check else 'fails'} it"
            )
            out.append((env.id, device.sku or "unknown", by_cel))
    return out


# ---- hosts from the captures ------------------------------------------------------------------------------


def captured_version(name: str) -> str:
    """The driver a capture was taken on, from its file name (`...__590.48.01__...`, `...__610.57.04.txt`)."""
    found = re.search(r"__(\d+\.\d+(?:\.\d+)?)(?:__|\.txt\Z)", name)
    assert found is not None, name
    return found.group(1)


def _nvidia_rows(name: str, version: str) -> tuple[str, list[Pci]]:
    text = capture("nvidia-smi-query-gpu-csv__" + name)
    captured = captured_version(name)
    text = text.replace(captured, version)
    rows = reorder_query(text, QUERY_FIELDS)
    pci = []
    header = [h.strip().split(" [")[0] for h in text.splitlines()[0].split(",")]
    for line in text.splitlines()[1:]:
        if line.strip():
            cells = dict(zip(header, (c.strip() for c in line.split(",")), strict=False))
            if "pci.bus_id" in cells:  # the B300 capture has none: its devices are known by name
                bus = "0000" + cells["pci.bus_id"].lower()[8:]
                pci.append(Pci(bus, "0x10de", cells["pci.device_id"].lower()[:6], driver="nvidia"))
    return rows, pci


def nvidia_host(tmp: Path, matrix: Matrix, names: list[str], version: str) -> HostReport:
    rows, pci = "", list[Pci]()
    for name in names:
        more_rows, more_pci = _nvidia_rows(name, version)
        rows, pci = rows + more_rows, pci + more_pci
    outputs = {"nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): rows}
    if (FIXTURES / ("nvidia-smi--version__" + names[0])).is_file():  # the B300 capture comes without one
        text = capture("nvidia-smi--version__" + names[0])
        outputs["nvidia-smi --version"] = text.replace(captured_version(names[0]), version)
    root = make_root(tmp, pci=pci, modules={"nvidia": version})
    return discover(matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=["nvidia"], python=PYTHON)


def _nvidia_text(version: LiteralVersion) -> str:
    """A driver version as NVIDIA prints it: three parts, the last two digits wide (580.105.08)."""
    major, minor, patch = [*version.release, 0, 0][:3]
    return f"{major}.{minor:02d}.{patch:02d}"


def around(floor: LiteralVersion) -> list[str]:
    """The floor itself and the release just below it, as NVIDIA prints them."""
    major, minor, patch = [*floor.release, 0, 0][:3]
    below = (major, minor, patch - 1) if patch else (major, minor - 1, 99) if minor else (major - 1, 99, 99)
    return [_nvidia_text(floor), _nvidia_text(LiteralVersion(".".join(map(str, below))))]


def nvidia_versions(matrix: Matrix, skus: set[str]) -> list[str]:
    floors = [r.driver.min for r in matrix.runtimes.values() if r.family == "nvidia"]
    floors += [r.driver.compat_min for r in matrix.runtimes.values() if r.family == "nvidia"]
    for sku in skus:
        floors += list(branch_floors(matrix.skus[sku]).values())
    versions = {v for floor in floors if floor is not None for v in around(LiteralVersion(str(floor)))}
    return sorted(versions | {"610.57.04", "620.10.01"})


@pytest.mark.parametrize("name", NVIDIA_CAPTURES)
def test_nvidia_claims_agree_with_check_on_both_sides_of_every_floor(tmp_path: Path, matrix: Matrix, name: str) -> None:
    first = nvidia_host(tmp_path / "first", matrix, [name], captured_version(name))
    acc = first.accelerator("nvidia")
    assert acc is not None
    skus = {d.sku for d in acc.devices if d.sku}
    seen = []
    for i, version in enumerate(nvidia_versions(matrix, skus)):
        seen += agree(matrix, nvidia_host(tmp_path / str(i), matrix, [name], version), "nvidia")
    if skus:  # a SKU of the matrix is selected on some driver and refused on another
        assert {selected for _, _, selected in seen} == {True, False}
    else:  # a GeForce card is no SKU of any environment: never selected
        assert not any(selected for _, _, selected in seen)


def test_nvidia_580_105_08_is_compared_as_the_driver_publishes_it(tmp_path: Path, matrix: Matrix) -> None:
    # NVIDIA's own ResourceSlices show 580.105.08 as 580.105.8; semver() refuses the leading zero
    report = nvidia_host(tmp_path, matrix, [NVIDIA_CAPTURES[0]], "580.105.08")
    assert ("gpu-nvidia-cu132", "h100-sxm", True) in agree(matrix, report, "nvidia")
    assert all('semver("' + v + '")' not in " ".join(_selectors("gpu-nvidia-cu132")) for v in ("595.71.05",))
    assert 'semver("595.71.5")' in " ".join(_selectors("gpu-nvidia-cu132"))


def test_a_node_with_two_skus_gets_only_the_environments_devices(tmp_path: Path, matrix: Matrix) -> None:
    h100, l40s = NVIDIA_CAPTURES[0], NVIDIA_CAPTURES[2]
    report = nvidia_host(tmp_path, matrix, [h100, l40s], "595.80")
    seen = agree(matrix, report, "nvidia")
    assert ("gpu-nvidia-cu132", "h100-sxm", True) in seen
    assert ("gpu-nvidia-cu132", "l40s", True) in seen
    # an environment of one of them: the claim takes that SKU's device only, and check of the whole node fails
    only = replace(matrix.envs["gpu-nvidia-cu132"], id="h100-only", skus=("h100-sxm",))
    acc = report.accelerator("nvidia")
    assert acc is not None
    narrowed = replace(matrix, envs={**matrix.envs, "h100-only": only})
    chosen = [s.expression for s in selection(narrowed, only).selectors]
    taken = [d.sku for d in acc.devices if selects(chosen, published("nvidia", acc, d))]
    assert taken == ["h100-sxm"]
    whole = {f.id: f for f in check(narrowed, only, report, host_only=True)}
    assert whole["devices.sku"].status is Status.FAIL
    assert [checked(narrowed, only, report, acc, d) for d in acc.devices] == [True, False]


def amd_host(tmp: Path, matrix: Matrix, device: tuple[str, str, str], module: str | None) -> HostReport:
    line = next(line for line in capture(AMD_VERSION).splitlines() if "amdgpu version: 6.10.5" in line)
    outputs = {"amd-smi static": AMD_STATIC % device}
    if module:
        outputs["amd-smi version"] = line.replace("6.10.5", module)
    pci = [Pci("0000:26:00.0", "0x1002", device[1], klass="0x120000", driver="amdgpu")]
    root = make_root(tmp, pci=pci, modules={"amdgpu": module})
    return discover(matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=["amd"], python=PYTHON)


def rocm_smi_host(tmp: Path, matrix: Matrix, name: str, module: str) -> HostReport:
    # rocm-smi reports the module's version: the host's driver is the one both say
    text = re.sub(r'"Driver version": "[^"]*"', f'"Driver version": "{module}"', capture(name))
    device = re.search(r'"Device ID": "(0x[0-9a-f]+)"', text)
    assert device is not None
    pci = [Pci("0000:03:00.0", "0x1002", device.group(1), klass="0x038000", driver="amdgpu")]
    root = make_root(tmp, pci=pci, modules={"amdgpu": module})
    runner = FakeRunner({"rocm-smi": text})
    return discover(matrix, root=Root(root), runner=runner, environ={}, families=["amd"], python=PYTHON)


AMD_MODULES = ["6.12.12", "6.13.99", "6.14.0", "6.14.13", "6.14.14", "6.16.6", "6.19.14.31400000", "7.1.2"]


@pytest.mark.parametrize("device", AMD_DEVICES, ids=lambda d: d[0])
def test_amd_claims_agree_with_check_on_both_sides_of_every_floor(
    tmp_path: Path, matrix: Matrix, device: tuple[str, str, str]
) -> None:
    seen = []
    for i, module in enumerate([*AMD_MODULES, None]):
        seen += agree(matrix, amd_host(tmp_path / str(i), matrix, device, module), "amd")
    assert {selected for _, _, selected in seen} == {True, False}
    assert not any(selected for _, _, selected in seen[-2:])  # no module version: in-tree amdgpu, refused


def test_amd_rocm_smi_capture_of_an_mi100(tmp_path: Path, matrix: Matrix) -> None:
    # the ROCm 6.0.2 capture names its device id (the 5.7.1 one does not, so the PCI id would be made up)
    seen = []
    for i, module in enumerate(AMD_MODULES):
        report = rocm_smi_host(tmp_path / str(i), matrix, "rocm-smi-json__telegraf__mi100_rocm602.json", module)
        seen += agree(matrix, report, "amd")
    assert ("gpu-amd-rocm100", "mi100", True) in seen
    assert ("gpu-amd-rocm100", "mi100", False) in seen


@pytest.mark.parametrize(
    ("device", "sku"), [("0x1020", "gaudi2"), ("0x1060", "gaudi3"), ("0x1063", "gaudi3"), ("0x1021", "gaudi2")]
)
def test_gaudi_claims_select_by_model_and_leave_the_driver_to_the_preflight(
    tmp_path: Path, matrix: Matrix, device: str, sku: str
) -> None:
    outputs = {"hl-smi " + hl_smi_args()[0]: gaudi2_hl_smi_csv()} if device == "0x1020" else {}
    # the two HL-225s of the hl-smi capture sit at 33:00.0 and 9a:00.0
    pci = [Pci(f"0000:{bus}:00.0", "0x1da3", device, klass="0x120000", driver="habanalabs") for bus in ("33", "9a")]
    root = make_root(tmp_path, pci=pci, modules={"habanalabs": "1.22.1"})
    runner = FakeRunner(outputs)
    report = discover(matrix, root=Root(root), runner=runner, environ={}, families=["gaudi"], python=PYTHON)
    if device == "0x1021":
        # Intel's driver names 0x1021 "Unknown": the claim cannot select it although check knows it as Gaudi 2
        acc = report.accelerator("gaudi")
        assert acc is not None
        assert [d.sku for d in acc.devices] == [sku, sku]
        assert not selects(_selectors("gaudi-1-24"), published("gaudi", acc, acc.devices[0]))
        return
    assert {(sku, True)} <= {(s, sel) for _, s, sel in agree(matrix, report, "gaudi")}
