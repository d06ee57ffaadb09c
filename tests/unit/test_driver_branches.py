"""NVIDIA driver floors by branch: every NVIDIA SKU of the shipped matrix against the rule of
`matrix/driver_branches.py` and the README history of NVIDIA's open kernel modules (the device-floor table in
../shared/research/data, or $ACCELENV_RESEARCH_DATA)."""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

import pytest
from packaging.version import Version

from accelenv.matrix import Matrix, Sku, load_matrix
from accelenv.matrix.driver_branches import FLOOR_EXCEPTIONS, below_floor, branch_floors, floor_problems
from accelenv.matrix.model import LiteralVersion

REPO = Path(__file__).resolve().parents[2]
RESEARCH = Path(os.environ.get("ACCELENV_RESEARCH_DATA", REPO.parent / "shared" / "research" / "data"))
TABLE = RESEARCH / "nvidia-open-modules-device-floors.tsv"
FIRST_OPEN_RELEASE = Version("515.48.07")  # the first release whose README lists any device


@dataclasses.dataclass(frozen=True)
class Row:
    first_listed: Version
    floor: Version | None  # None: the newest release does not list it


@functools.cache
def _table() -> dict[str, Row]:
    if not TABLE.is_file():
        message = f"{TABLE} is missing (set ACCELENV_RESEARCH_DATA to the folder that holds it)"
        if os.environ.get("ACCELENV_RESEARCH_DATA"):
            pytest.fail(message)  # asked for and not there: a failure, not a skip
        pytest.skip(message)
    rows = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if line.startswith(("#", "device_id")) or not line.strip():
            continue
        device, _names, first, floor, _listed = line.split("\t")
        rows[device.lower()] = Row(LiteralVersion(first), None if floor.startswith("not in") else LiteralVersion(floor))
    return rows


MATRIX: Matrix = load_matrix(REPO / "matrix.toml")
NVIDIA = sorted(s.id for s in MATRIX.skus.values() if s.family == "nvidia")


@pytest.mark.parametrize("sku_id", NVIDIA)
def test_every_nvidia_sku_follows_the_branch_rule(sku_id: str) -> None:
    sku = MATRIX.skus[sku_id]
    rows = [r for d in sku.pci_device_ids if (r := _table().get(d.lower())) is not None]
    exception = FLOOR_EXCEPTIONS.get(sku_id)
    if sku.driver_min is None:
        assert exception is None, "a SKU without a floor has no floor exception"
        assert sku.no_driver_min, "a SKU without a floor says why"
        # in no README, or listed from the first open release (the device predates the listing), or the T4,
        # which the README lists late though older data-center drivers run it
        assert all(r.first_listed == FIRST_OPEN_RELEASE or sku_id == "t4" for r in rows), rows
        return
    if not rows:
        # a device the README history does not list (yet): its floor is the vendor's word, which it cites, and
        # nothing in the history can ask for an exception
        assert exception is None, "an exception is relative to the README history, which does not list the SKU"
        assert sku.sources, "a floor no README listing gives is cited"
        assert branch_floors(sku) == {sku.driver_min.major: sku.driver_min}
        return
    assert len(rows) == 1, "a SKU with a floor is matched by one README-listed PCI id"
    row = rows[0]
    assert row.floor is not None, "the newest release lists the device"
    assert floor_problems(sku, row.first_listed, row.floor) == []
    floors = branch_floors(sku)
    if exception is None:
        return
    assert exception.reason, "an exception carries its reason"
    for version in (str(v) for v in floors.values()):
        assert version in sku.notes or version in exception.reason, f"{version} is explained"


def test_every_exception_names_an_nvidia_sku_of_the_matrix() -> None:
    assert sorted(FLOOR_EXCEPTIONS) == sorted(s for s in FLOOR_EXCEPTIONS if s in NVIDIA)


def sku(driver_min: str | None) -> Sku:
    return dataclasses.replace(MATRIX.skus["h20"], driver_min=Version(driver_min) if driver_min else None)


@pytest.mark.parametrize(
    ("sku_id", "driver", "message"),
    [
        ("h20", "535.161.07", None),
        (
            "h20",
            "535.154.05",
            (
                "NVIDIA H20 needs driver 535.161.07 or newer on branch R535 (floors by branch: "
                "R535 535.161.07, R550 550.40.53)"
            ),
        ),
        (
            "h20",
            "545.29.06",
            ("no release of branch R545 supports NVIDIA H20 (floors by branch: R535 535.161.07, R550 550.40.53)"),
        ),
        (
            "h20",
            "550.40.07",
            (
                "NVIDIA H20 needs driver 550.40.53 or newer on branch R550 (floors by branch: "
                "R535 535.161.07, R550 550.40.53)"
            ),
        ),
        ("h20", "580.95.05", None),
        (
            "h20",
            "525.147.05",
            ("NVIDIA H20 needs driver 535.161.07 or newer (floors by branch: R535 535.161.07, R550 550.40.53)"),
        ),
        ("h200", "550.90.07", None),
        (
            "h200",
            "555.42.02",
            (
                "NVIDIA H200 SXM 141GB needs driver 555.42.06 or newer on branch R555 (floors by "
                "branch: R550 550.90.07, R555 555.42.06)"
            ),
        ),
        ("h200", "560.35.05", None),
        (
            "gb10",
            "590.44.01",
            (
                "NVIDIA GB10 (DGX Spark) needs driver 590.48.01 or newer on branch R590 (floors by "
                "branch: R580 580.119.02, R590 590.48.01)"
            ),
        ),
        ("gb10", "580.119.02", None),
        ("rtx-pro-6000-server", "575.57.08", None),
        (
            "rtx-pro-6000-server",
            "580.94.06",
            (
                "NVIDIA RTX PRO 6000 Blackwell Server Edition needs driver 580.95.05 "
                "or newer on branch R580 (floors by branch: R575 575.57.08, R580 580.95.05)"
            ),
        ),
        ("rtx-pro-6000-server", "595.71.05", None),
        ("b300", "580.94.18", "NVIDIA B300 SXM6 needs driver 580.95.05 or newer"),
        ("b200", "570.86.15", "NVIDIA B200 needs driver 570.133.20 or newer"),
        ("b200", "570.133.20", None),
    ],
)
def test_a_host_driver_is_judged_by_its_own_branch(sku_id: str, driver: str, message: str | None) -> None:
    assert below_floor(MATRIX.skus[sku_id], Version(driver)) == message


def test_a_sku_without_a_floor_is_never_below_it() -> None:
    assert below_floor(sku(None), Version("450.80.02")) is None
    assert branch_floors(sku(None)) == {}


@pytest.mark.parametrize(
    ("sku_id", "driver_min", "first", "plain", "problem"),
    [
        # the RTX PRO 6000 Server Edition's floor without its exception: the 580.94.x hole would pass silently
        (
            "l40s",
            "575.57.08",
            "535.43.09",
            "580.95.05",
            ("driver_min 575.57.08 is not the plain floor 580.95.05, and no exception says why"),
        ),
        (
            "l40s",
            "535.43.09",
            "535.54.03",
            "535.104.05",
            ("driver_min 535.43.09 is below 535.54.03, the first release that lists it"),
        ),
        (
            "b200",
            "570.86.15",
            "570.86.15",
            "570.86.15",
            ("a vendor minimum must be one floor above the plain floor 570.86.15"),
        ),
        (
            "h200",
            "550.90.07",
            "550.40.65",
            "560.35.03",
            (
                "the opening-release exception keeps a floor in an earlier "
                "branch and gives R560 the plain floor 560.35.03, above that branch's opening release"
            ),
        ),
        (
            "h20",
            "550.40.07",
            "535.43.25",
            "550.40.53",
            ("the older-branch exception keeps a floor in an earlier branch and gives R550 the plain floor 550.40.53"),
        ),
    ],
)
def test_the_rule_refuses_floors_that_break_it(
    sku_id: str, driver_min: str, first: str, plain: str, problem: str
) -> None:
    bent = dataclasses.replace(MATRIX.skus[sku_id], driver_min=LiteralVersion(driver_min))
    assert problem in floor_problems(bent, LiteralVersion(first), LiteralVersion(plain))
