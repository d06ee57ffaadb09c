"""NVIDIA driver floors by branch: the rule that keeps every SKU's `driver_min` consistent.

NVIDIA numbers a driver `<branch>.<minor>.<patch>`: 580.95.05 belongs to branch R580. The evidence for a
device's floor is the supported-GPU table of the open kernel modules README at every release tag: the *plain
floor* is the lowest release from which every higher release lists the device's PCI id. That floor is too
coarse in two ways, and this module says how each is handled:

- An **opening release** is the first release of a new branch (555.42.02 opens R555, 590.44.01 opens R590):
  a branch's first public drop, corrected by the branch's next release. When only such a release omits a
  device, the device keeps its floor in the earlier branch, and the opening branch gets a floor of its own (the
  release that lists the device again). A host on the opening release is judged by its own branch, so it fails,
  and a host on the earlier branch is not failed because of a release it does not run.
- **Side releases** inside a branch are not opening releases: 580.94.02 to 580.94.18 come after 580.65.06,
  580.76.05 and 580.82.07 in R580, the long-term branch data-center hosts install, so a release among them that
  omits a device counts. B300 and GB300 (listed from 580.82.07, omitted by 580.94.x) have 580.95.05 as their
  R580 floor; the RTX PRO 6000 Server Edition keeps NVIDIA's 575.57.08 for R575 and needs 580.95.05 on R580.

A floor per branch is a mapping from branch to the lowest release of that branch that lists the device. A host
driver passes when its branch has a floor and it is at or above it, or its branch is newer than every branch
with a floor (every later release lists the device, by the plain floor's definition); a branch between two
floors has none because none of its releases lists the device (R545 and 550.40.07 for the H20). The lowest
floor is the SKU's `driver_min` in `matrix.toml`; the other branches, and why a SKU differs from the plain
floor, are the exceptions below, each with its kind and reason. `tests/unit/test_driver_branches.py` checks
every NVIDIA SKU against this rule and the README history (the device-floor table).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from accelenv.matrix.model import LiteralVersion
from accelenv.records import field, frozen

if TYPE_CHECKING:
    from collections.abc import Mapping

    from packaging.version import Version

    from accelenv.matrix.model import Sku

ExceptionKind = Literal["opening-release", "side-releases", "older-branch", "vendor-minimum"]


@frozen
class FloorException:
    """Why a SKU's floor is not the plain README floor, and the floors of its other branches.

    `kind`: `opening-release` (only a later branch's opening release omits the device), `side-releases` (side
    releases inside a later branch omit it), `older-branch` (an older long-term branch lists it from a release
    below the plain floor, the branches between never do), `vendor-minimum` (a vendor statement is above the
    plain floor). `branches` maps branch numbers to the lowest release of that branch that lists the device,
    beyond the SKU's own `driver_min`."""

    kind: ExceptionKind
    reason: str
    branches: Mapping[int, Version] = field(default_factory=lambda: MappingProxyType({}))


def _floors(*releases: str) -> Mapping[int, Version]:
    return MappingProxyType({LiteralVersion(v).major: LiteralVersion(v) for v in releases})


OPENING_RELEASES: frozenset[Version] = frozenset(LiteralVersion(v) for v in ("555.42.02", "590.44.01"))
"""Opening releases of a branch that omit a device the branch's next release lists (README history)."""

FLOOR_EXCEPTIONS: Mapping[str, FloorException] = MappingProxyType(
    {
        "h20": FloorException(
            kind="older-branch",
            reason="R535 (the long-term branch H20 fleets run) lists it from 535.161.07; R545 and 550.40.07 never "
            "do, so the plain floor is 550.40.53",
            branches=_floors("550.40.53"),
        ),
        "h200": FloorException(
            kind="opening-release",
            reason="every R550 release from 550.90.07 lists it; only 555.42.02, the opening release of R555, omits "
            "it (555.42.06 lists it), which is why the plain floor is 555.42.06",
            branches=_floors("555.42.06"),
        ),
        "gb10": FloorException(
            kind="opening-release",
            reason="every R580 release from 580.119.02 lists it; only 590.44.01, the opening release of R590, "
            "omits it (590.48.01 lists it), which is why the plain floor is 590.48.01",
            branches=_floors("590.48.01"),
        ),
        "rtx-pro-6000-server": FloorException(
            kind="side-releases",
            reason="NVIDIA's GPU Operator requires 575.57.08 (its first listing, R575); in R580 the side releases "
            "580.94.02 to 580.94.18 omit it, so R580 hosts need 580.95.05, the plain floor",
            branches=_floors("580.95.05"),
        ),
        "b200": FloorException(
            kind="vendor-minimum",
            reason="NVIDIA's GPU Operator requires 570.133.20 for HGX B200, above the README history's 570.86.15",
        ),
    }
)
"""Every NVIDIA SKU whose floor differs from the plain README floor, or that has floors in several branches."""


def branch_floors(sku: Sku) -> dict[int, Version]:
    """Branch -> the lowest release of that branch that supports the SKU; empty when the SKU has no floor."""
    if sku.driver_min is None:
        return {}
    floors = {sku.driver_min.major: sku.driver_min}
    exception = FLOOR_EXCEPTIONS.get(sku.id) if sku.family == "nvidia" else None
    if exception is not None:
        floors.update(exception.branches)
    return dict(sorted(floors.items()))


def below_floor(sku: Sku, driver: Version) -> str | None:
    """Why `driver` does not support the SKU by its floors per branch, or None when it does."""
    floors = branch_floors(sku)
    if not floors:
        return None
    if len(floors) == 1:
        floor = next(iter(floors.values()))
        return f"{sku.name} needs driver {floor} or newer" if driver < floor else None
    lowest, newest = min(floors), max(floors)
    if driver.major in floors:
        floor = floors[driver.major]
        if driver >= floor:
            return None
        return f"{sku.name} needs driver {floor} or newer on branch R{driver.major} ({_listing(floors)})"
    if driver.major > newest:
        return None
    if driver.major < lowest:
        return f"{sku.name} needs driver {floors[lowest]} or newer ({_listing(floors)})"
    return f"no release of branch R{driver.major} supports {sku.name} ({_listing(floors)})"


def _listing(floors: Mapping[int, Version]) -> str:
    return "floors by branch: " + ", ".join(f"R{b} {v}" for b, v in floors.items())


def floor_problems(sku: Sku, first_listed: Version, plain_floor: Version) -> list[str]:
    """Where a SKU's floors break the rule, given the README history of its PCI id: the first release that lists
    it and the plain floor (every later release lists it). Empty when the floors follow the rule."""
    floors = branch_floors(sku)
    if not floors or sku.driver_min is None:
        return ["no floor to judge (driver_min is not set)"]
    problems = []
    if sku.driver_min < first_listed:
        problems.append(f"driver_min {sku.driver_min} is below {first_listed}, the first release that lists it")
    exception = FLOOR_EXCEPTIONS.get(sku.id)
    if exception is None:
        if floors != {plain_floor.major: plain_floor}:
            problems.append(
                f"driver_min {sku.driver_min} is not the plain floor {plain_floor}, and no exception says why"
            )
        return problems
    newest = floors[max(floors)]
    match exception.kind:
        case "vendor-minimum":
            if len(floors) != 1 or sku.driver_min <= plain_floor:
                problems.append(f"a vendor minimum must be one floor above the plain floor {plain_floor}")
        case "opening-release":
            opening = [v for v in OPENING_RELEASES if v.major == plain_floor.major and v < plain_floor]
            if newest != plain_floor or not opening or sku.driver_min.major >= plain_floor.major:
                problems.append(
                    f"the opening-release exception keeps a floor in an earlier branch and gives R{plain_floor.major} "
                    f"the plain floor {plain_floor}, above that branch's opening release"
                )
        case "side-releases" | "older-branch":
            if newest != plain_floor or sku.driver_min.major >= plain_floor.major:
                problems.append(
                    f"the {exception.kind} exception keeps a floor in an earlier branch and gives R{plain_floor.major} "
                    f"the plain floor {plain_floor}"
                )
    return problems
