"""Driver facts as data: SKU floors (or the stated reason there is none), vendor driver releases mapped to the
versions hosts report, and the support window. Rules are tried on a small matrix of the tests' own (see
tests/support/minimatrix.py), so they hold whatever the shipped matrix contains."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest
from minimatrix import MINI

from accelenv.check.checks import check
from accelenv.check.verdict import Status
from accelenv.host.discover import match_sku
from accelenv.host.report import Accelerator, Container, Device, HostReport, Limits, OsInfo, PythonInfo
from accelenv.matrix import Severity, validate_text
from accelenv.matrix.model import release_line

if TYPE_CHECKING:
    from accelenv.matrix import Matrix, Problem


def problems(text: str) -> list[Problem]:
    return list(validate_text(text).problems)


def errors(text: str) -> list[tuple[str, str, str]]:
    return [(p.path, p.rule or "", p.message) for p in problems(text) if p.is_error]


def mini() -> Matrix:
    validation = validate_text(MINI)
    assert validation.ok
    assert validation.matrix is not None
    return validation.matrix


def test_the_small_matrix_is_valid() -> None:
    assert errors(MINI) == []


# ---------------------------------------------------------------------------------------------- SKU floors


@pytest.mark.parametrize(
    ("old", "new", "path", "message"),
    [
        ('driver_min = "580.82.07"\n', "", "skus.b300", "no driver_min: add driver_min"),
        (
            'driver_min = "580.82.07"\n',
            'driver_min = "580.82.07"\nno_driver_min = "not listed"\n',
            "skus.b300.no_driver_min",
            "has both driver_min and no_driver_min",
        ),
    ],
)
def test_a_sku_needs_a_floor_or_a_reason(old: str, new: str, path: str, message: str) -> None:
    text = MINI.replace(old, new, 1)
    found = [e for e in errors(text) if e[1] == "driver-floor"]
    assert [(p, m.split(":")[0] if "no driver_min:" in m else m[: len(message)]) for p, _, m in found] == [
        (path, message if "no driver_min" not in message else "no driver_min")
    ]


def test_a_stated_reason_satisfies_the_floor_rule() -> None:
    text = MINI.replace('driver_min = "580.82.07"\n', 'no_driver_min = "no release lists it yet"\n', 1)
    assert errors(text) == []


def test_a_family_reason_covers_its_skus_and_a_family_without_driver_needs_none() -> None:
    without_reason = MINI.replace('no_sku_driver_min = "the ROCm release decides the amdgpu range"\n', "")
    assert [e[0] for e in errors(without_reason) if e[1] == "driver-floor"] == ["skus.mi300x"]
    no_module = without_reason.replace('kernel_modules = ["amdgpu"]\n', "")
    assert [e for e in errors(no_module) if e[1] == "driver-floor"] == []


# ---------------------------------------------------------------------------------------- driver releases


def test_driver_releases_must_exist_and_belong_to_the_runtimes_family() -> None:
    typo = MINI.replace('releases = ["amdgpu-rocm-6-4", "amdgpu-30-10"]', 'releases = ["amdgpu-30-1"]')
    assert errors(typo) == [
        (
            "runtimes.rocm-7-0.driver.releases[0]",
            "reference",
            "driver release 'amdgpu-30-1' is not defined under [drivers]; did you mean 'amdgpu-30-10'?",
        )
    ]
    wrong_family = MINI.replace('driver = { min = "580.65.06" }', 'driver = { releases = ["amdgpu-30-10"] }')
    assert [(p, r) for p, r, _ in errors(wrong_family)] == [("runtimes.cuda-13-2.driver.releases[0]", "family")]


def test_a_driver_release_reports_a_version() -> None:
    bad = MINI.replace('reports = "6.16"', 'reports = "six"')
    assert ("drivers.amdgpu-30-20.reports", "schema") in [(p, r) for p, r, _ in errors(bad)]


def test_matching_takes_the_longest_prefix() -> None:
    matrix = mini()
    finer = dataclasses.replace(matrix.drivers["amdgpu-30-20"], id="amdgpu-30-20-1", reports="6.16.6")
    both = dataclasses.replace(matrix, drivers={**matrix.drivers, finer.id: finer})
    assert both.driver_release("amd", "6.16.6") is finer
    assert both.driver_release("amd", "6.16.13").id == "amdgpu-30-20"  # type: ignore[union-attr]
    assert both.driver_release("amd", "6.1") is None  # 6.1 is not 6.16
    assert both.driver_release("nvidia", "6.16.6") is None


def _report(matrix: Matrix, family: str, driver: str, *, name: str, pci: str, arch: str) -> HostReport:
    sku = match_sku(matrix, family, pci_device_id=pci, name=name)
    assert sku is not None
    device = Device(
        index=0, name=name, arch=arch, memory_mib=None, pci_bus_id=None, pci_device_id=pci, uuid=None, sku=sku
    )
    return HostReport(
        root="/",
        os=OsInfo(id="ubuntu", version_id="24.04", pretty_name=None, kernel=None, glibc="2.39", arch="x86_64"),
        python=PythonInfo(version="3.12.3", implementation="CPython", executable="python3", distributions={}),
        accelerators=(
            Accelerator(
                family=family,
                driver_version=driver,
                runtime_version=None,
                devices=(device,),
                source="test",
                errors=(),
            ),
        ),
        environment={},
        limits=Limits(shm_bytes=None, memlock_bytes=None, memlock_unlimited=False),
        container=Container(inside_container=False, docker_socket=False, nvidia_container_toolkit=False, cdi_specs=()),
    )


def _driver_finding(matrix: Matrix, env: str, report: HostReport) -> tuple[Status, str]:
    found = [f for f in check(matrix, matrix.envs[env], report, host_only=True) if f.id == "driver.version"]
    assert len(found) == 1
    return found[0].status, found[0].message


@pytest.mark.parametrize(
    ("reported", "status", "message"),
    [
        # within a documented release: ROCm 6.4's amdgpu reports 6.12.x, driver 30.10 reports 6.14.x
        ("6.12.12", Status.PASS, "driver 6.12.12 (ROCm 6.4.x amdgpu) satisfies ROCm 7.0.2"),
        ("6.14.14", Status.PASS, "driver 6.14.14 (AMD GPU driver 30.10.x) satisfies ROCm 7.0.2"),
        # newer than documented: named by its release, and a warning, not a failure
        (
            "6.16.6",
            Status.WARN,
            (
                "driver 6.16.6 (AMD GPU driver 30.20.x) is not among the drivers documented for ROCm 7.0.2 "
                "(ROCm 6.4.x amdgpu to AMD GPU driver 30.10.x)"
            ),
        ),
        # older than every documented release: a failure
        (
            "6.10.5",
            Status.FAIL,
            (
                "driver 6.10.5 is older than every driver documented for ROCm 7.0.2 (ROCm 6.4.x amdgpu to AMD GPU "
                "driver 30.10.x; the oldest reports 6.12.x)"
            ),
        ),
        # a 6.13 module (no documented release) between two documented ones warns
        ("6.13.1", Status.WARN, "driver 6.13.1 is not among the drivers documented for ROCm 7.0.2"),
    ],
)
def test_amd_hosts_are_judged_by_the_module_version_they_report(reported: str, status: Status, message: str) -> None:
    matrix = mini()
    report = _report(matrix, "amd", reported, name="AMD Instinct MI300X", pci="0x74a1", arch="gfx942")
    found_status, found_message = _driver_finding(matrix, "gpu-amd-rocm70", report)
    assert (found_status, found_message[: len(message)]) == (status, message)


@pytest.mark.parametrize(
    ("driver", "status"),
    [("580.76.05", Status.FAIL), ("580.82.07", Status.PASS), ("575.57.08", Status.FAIL)],
)
def test_a_sku_floor_above_the_runtimes_fails_hosts_between_them(driver: str, status: Status) -> None:
    matrix = mini()
    report = _report(matrix, "nvidia", driver, name="NVIDIA B300 SXM6 AC", pci="0x3182", arch="sm_103")
    found_status, message = _driver_finding(matrix, "gpu-nvidia-cu132", report)
    assert found_status is status, message
    if status is Status.FAIL and driver.startswith("580"):
        assert "NVIDIA B300 needs driver 580.82.07 or newer" in message


# ------------------------------------------------------------------------------------------ support window


@pytest.mark.parametrize(
    ("version", "line"),
    [("13.2.2", (13, 2)), ("7.14.1", (7, 14)), ("0.0.52", (0, 0, 52)), ("0.8.3", (0, 8)), ("10", (10, 0))],
)
def test_release_lines(version: str, line: tuple[int, ...]) -> None:
    from packaging.version import Version

    assert release_line(Version(version)) == line


def test_two_releases_of_one_line_are_refused() -> None:
    second = MINI.replace(
        "[envs.gpu-nvidia-cu132]",
        """[runtimes.cuda-13-2-0]
family = "nvidia"
name = "CUDA 13.2.0"
version = "13.2.0"
wheel_tag = "cu132"
architectures = ["sm_90"]
base_images.ubuntu24 = { repository = "nvidia/cuda", tag = "13.2.0-runtime-ubuntu24.04" }
sources = ["notes"]

[envs.gpu-nvidia-cu132]""",
    )
    found = [(p, m) for p, r, m in errors(second) if r == "support-window"]
    assert found == [
        (
            "runtimes.cuda-13-2-0.version",
            (
                "13.2.0 is in the same release line (13.2) as runtime 'cuda-13-2' (13.2.2): keep only the newest "
                "release of a line"
            ),
        )
    ]


def test_an_unused_older_runtime_is_a_warning_to_retire_it() -> None:
    older = MINI.replace(
        "[envs.gpu-nvidia-cu132]",
        """[runtimes.cuda-12-9]
family = "nvidia"
name = "CUDA 12.9 Update 1"
version = "12.9.1"
wheel_tag = "cu129"
architectures = ["sm_90"]
base_images.ubuntu24 = { repository = "nvidia/cuda", tag = "12.9.1-runtime-ubuntu24.04" }
sources = ["notes"]

[runtimes.cuda-13-5]
family = "nvidia"
name = "CUDA 13.5"
version = "13.5.0"
wheel_tag = "cu135"
architectures = ["sm_90"]
base_images.ubuntu24 = { repository = "nvidia/cuda", tag = "13.5.0-runtime-ubuntu24.04" }
sources = ["notes"]

[envs.gpu-nvidia-cu132]""",
    )
    warned = [(p.path, p.rule) for p in problems(older) if p.severity is Severity.WARNING and p.rule != "unpinned"]
    # 12.9 is unused and not the newest: retire it; 13.5 is unused but the family's newest: kept
    assert warned == [("runtimes.cuda-12-9", "support-window")]


# ------------------------------------------------------------------------- the version space hosts report


@pytest.mark.parametrize(
    ("floor", "message"),
    [
        (
            "30.10",  # the driver package release, as AMD's compatibility pages name it
            (
                "driver_min 30.10 is the number of the driver release 'AMD GPU driver 30.10.x', not the amdgpu version "
                'hosts report, so check would fail every host that has it: write driver_min = "6.14" (what '
                "[drivers.amdgpu-30-10] says it reports)"
            ),
        ),
        (
            "30.20.1",
            (
                "driver_min 30.20.1 is the number of the driver release 'AMD GPU driver 30.20.x', not the amdgpu "
                'version hosts report, so check would fail every host that has it: write driver_min = "6.16" (what '
                "[drivers.amdgpu-30-20] says it reports)"
            ),
        ),
        (
            "6.4",  # the ROCm release the pre-30 driver was numbered after
            (
                "driver_min 6.4 is the number of the driver release 'ROCm 6.4.x amdgpu', not the amdgpu version hosts "
                'report, so check would fail every host that has it: write driver_min = "6.12" (what '
                "[drivers.amdgpu-rocm-6-4] says it reports)"
            ),
        ),
        (
            "7.0.2",  # the runtime's own version
            (
                "driver_min 7.0.2 is the version of the runtime ROCm 7.0.2, not the amdgpu version hosts report: write "
                "the amdgpu version of the oldest driver release that supports it (ROCm 6.4.x amdgpu reports 6.12; "
                "AMD GPU driver 30.10.x reports 6.14; AMD GPU driver 30.20.x reports 6.16)"
            ),
        ),
        (
            "31.10",  # a release the matrix does not list, in the same numbering
            (
                "driver_min 31.10 is in the numbering of the family's driver releases, not the amdgpu version hosts "
                "report: write the version the release reports (ROCm 6.4.x amdgpu reports 6.12; AMD GPU driver 30.10.x "
                "reports 6.14; AMD GPU driver 30.20.x reports 6.16)"
            ),
        ),
    ],
)
def test_an_amd_floor_in_another_numbering_is_refused(floor: str, message: str) -> None:
    text = MINI.replace('pci_device_ids = ["0x74a1"]\n', f'pci_device_ids = ["0x74a1"]\ndriver_min = "{floor}"\n', 1)
    assert [e for e in errors(text) if e[1] == "driver-space"] == [("skus.mi300x.driver_min", "driver-space", message)]


@pytest.mark.parametrize("floor", ["6.14.14", "6.14", "6.10.5", "6.16.6", "7.1.9"])
def test_an_amd_floor_hosts_report_is_accepted(floor: str) -> None:
    text = MINI.replace('pci_device_ids = ["0x74a1"]\n', f'pci_device_ids = ["0x74a1"]\ndriver_min = "{floor}"\n', 1)
    assert [e for e in errors(text) if e[1] == "driver-space"] == []


@pytest.mark.parametrize(
    ("old", "new", "path"),
    [
        ('driver = { releases = ["amdgpu-rocm-6-4", "amdgpu-30-10"] }', 'driver = { min = "30.10" }', "min"),
        (
            'driver = { releases = ["amdgpu-rocm-6-4", "amdgpu-30-10"] }',
            'driver = { accepted = ["30.10.1"] }',
            "accepted[0]",
        ),
        (
            'driver = { releases = ["amdgpu-rocm-6-4", "amdgpu-30-10"] }',
            'driver = { min = "6.12", max = "31.0" }',
            "max",
        ),
    ],
)
def test_a_runtime_driver_bound_in_another_numbering_is_refused(old: str, new: str, path: str) -> None:
    text = MINI.replace(old, new, 1)
    assert [e[0] for e in errors(text) if e[1] == "driver-space"] == [f"runtimes.rocm-7-0.driver.{path}"]


def test_a_family_without_driver_releases_is_not_judged_by_this_rule() -> None:
    text = MINI.replace('driver_min = "580.82.07"', 'driver_min = "30.10"', 1)  # NVIDIA: no [drivers.*] of its own
    assert [e for e in errors(text) if e[1] == "driver-space"] == []


# ------------------------------------------------------------------------------------- every fact cites a source


@pytest.mark.parametrize(
    ("entry", "path"),
    [
        ("[os.ubuntu24]", "os.ubuntu24.sources"),
        ("[families.amd]", "families.amd.sources"),
        ("[skus.mi300x]", "skus.mi300x.sources"),
        ("[drivers.amdgpu-30-10]", "drivers.amdgpu-30-10.sources"),
        ("[runtimes.rocm-7-0]", "runtimes.rocm-7-0.sources"),
        ("[envs.gpu-amd-rocm70]", "envs.gpu-amd-rocm70.sources"),
    ],
)
def test_an_entry_without_sources_is_refused_under_strict(entry: str, path: str) -> None:
    head, _, rest = MINI.partition(entry)
    body, sep, tail = rest.partition("\n[")
    text = head + entry + body.replace('sources = ["notes"]\n', "") + sep + tail
    uncited = [p for p in problems(text) if p.rule == "uncited"]
    assert [(p.path, p.severity, str(p.category)) for p in uncited] == [(path, Severity.WARNING, "change")]
    assert uncited[0].message.startswith('cites no source: add sources = ["<id>"]')
    assert [p for p in problems(MINI) if p.rule == "uncited"] == []
