"""`show` and `check` state a SKU's driver floor from one function (`driver_need`): for every environment of the
shipped matrix and every SKU in it, a host on the driver `show` names passes `check` (perhaps with a warning),
one just below it fails, and `check` names a SKU's own floor exactly where `show` does."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from packaging.version import Version

from accelenv.check.checks import check
from accelenv.check.verdict import Status
from accelenv.cli import main
from accelenv.host.report import Accelerator, Container, Device, HostReport, Limits, OsInfo, PythonInfo
from accelenv.matrix import Matrix, load_matrix
from accelenv.matrix.driver_need import driver_need

REPO = Path(__file__).resolve().parents[2]
SHIPPED = load_matrix(REPO / "matrix.toml")
PAIRS = [
    (env.id, sku_id)
    for env in SHIPPED.envs.values()
    for sku_id in env.skus
    if driver_need(SHIPPED, SHIPPED.runtimes[env.runtime], SHIPPED.skus[sku_id]).runs_from is not None
]


def just_below(version: Version) -> str:
    """A version just below `version`: its last non-zero part one less, the parts after it very high."""
    parts = list(version.release)
    at = max(i for i, p in enumerate(parts) if p > 0)
    parts[at] -= 1
    return ".".join(str(p) for p in [*parts[: at + 1], *([99999] * (len(parts) - at - 1) or [99999])])


def host(matrix: Matrix, sku_id: str, driver: str) -> HostReport:
    sku = matrix.skus[sku_id]
    device = Device(
        index=0,
        name=sku.name,
        arch=sku.arch,
        memory_mib=None,
        pci_bus_id=None,
        pci_device_id=sku.pci_device_ids[0] if sku.pci_device_ids else None,
        uuid=None,
        sku=sku_id,
    )
    return HostReport(
        root="/",
        os=OsInfo(id="ubuntu", version_id="24.04", pretty_name=None, kernel=None, glibc="2.39", arch="x86_64"),
        python=PythonInfo(version="3.12.3", implementation="CPython", executable="python3", distributions={}),
        accelerators=(
            Accelerator(
                family=sku.family, driver_version=driver, runtime_version=None, devices=(device,), source="t", errors=()
            ),
        ),
        environment={},
        limits=Limits(shm_bytes=None, memlock_bytes=None, memlock_unlimited=True),
        container=Container(inside_container=False, docker_socket=False, nvidia_container_toolkit=False, cdi_specs=()),
    )


def driver_finding(env_id: str, sku_id: str, driver: str) -> tuple[Status, str, str]:
    report = host(SHIPPED, sku_id, driver)
    (found,) = [f for f in check(SHIPPED, SHIPPED.envs[env_id], report, host_only=True) if f.id == "driver.version"]
    return found.status, found.message, found.expected


@pytest.fixture(scope="module")
def shown() -> dict[str, dict[str, dict[str, object]]]:
    """`show ENV --json`'s SKU entries, per environment."""
    data = {}
    for env_id in SHIPPED.envs:
        out = io.StringIO()
        assert main(["--matrix", str(REPO / "matrix.toml"), "show", env_id, "--json"], out=out) == 0
        data[env_id] = {s["id"]: s for s in json.loads(out.getvalue())["skus"]}
    return data


def test_the_pairs_cover_every_family_with_a_driver() -> None:
    families = {SHIPPED.skus[sku].family for _, sku in PAIRS}
    assert {"nvidia", "amd", "neuron", "gaudi"} <= families
    assert len(PAIRS) > 50


@pytest.mark.parametrize(("env_id", "sku_id"), PAIRS)
def test_show_and_check_agree_on_the_floor(
    shown: dict[str, dict[str, dict[str, object]]], env_id: str, sku_id: str
) -> None:
    need = driver_need(SHIPPED, SHIPPED.runtimes[SHIPPED.envs[env_id].runtime], SHIPPED.skus[sku_id])
    entry = shown[env_id][sku_id]
    assert entry["driver_runs_from"] == str(need.runs_from)
    assert entry["driver_floor"] == (str(need.full) if need.full else None)
    assert need.runs_from is not None
    at, message, expected = driver_finding(env_id, sku_id, str(need.runs_from))
    assert at is not Status.FAIL, f"{env_id} {sku_id} on {need.runs_from}: {message}"
    below, message, _ = driver_finding(env_id, sku_id, just_below(need.runs_from))
    assert below is Status.FAIL, f"{env_id} {sku_id} on {just_below(need.runs_from)}: {message}"
    # check names the SKU's own floor exactly where show does
    assert (f"{sku_id} >= " in expected) == bool(entry["driver_raised"]), expected
    if entry["driver_raised"]:
        assert f"{sku_id} >= {need.runs_from}" in expected


def test_the_l4_under_cuda_13_2_has_no_floor_of_its_own(shown: dict[str, dict[str, dict[str, object]]]) -> None:
    l4 = shown["gpu-nvidia-cu132"]["l4"]
    assert (l4["driver_raised"], l4["driver_runs_from"], l4["driver_floor"]) == (False, "580.65.06", "595.71.05")
    _, message, expected = driver_finding("gpu-nvidia-cu132", "l4", "580.65.06")
    assert "l4 >=" not in expected
    assert "minor-version compatibility" in message


def test_just_below() -> None:
    assert [just_below(Version(v)) for v in ("580.65.06", "6.14", "2.27.0.0", "1.23.0")] == [
        "580.65.5.99999",
        "6.13.99999",
        "2.26.99999.99999",
        "1.22.99999",
    ]
