"""What a host with a given SKU needs from its driver under a runtime: the one judgement `check` applies to a host
and `show`, the report and the page print, so none of them states a floor the others do not use.

The runtime gives two floors: `runs_from`, the oldest driver it runs on at all (CUDA's minor-version compatibility
floor `compat_min`, else `min`, raised to the oldest `[drivers.*]` release the vendor documents), and `full`, the
driver of its full feature set (`min`). A SKU raises either only where its own floor is higher, per driver branch
(`driver_branches.py`: the B300 needs 580.95.05 on R580); an L4 (530.41.03) under CUDA 13.2 (580.65.06 in
compatibility mode, 595.71.05 in full) needs nothing beyond the runtime's floors, and neither `show` nor `check`
names one for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.matrix.driver_branches import below_floor, branch_floors
from accelenv.matrix.model import LiteralVersion
from accelenv.records import frozen

if TYPE_CHECKING:
    from packaging.version import Version

    from accelenv.matrix.model import Matrix, Runtime, Sku


@frozen
class DriverNeed:
    """`runs_from`: the oldest driver `check` passes (perhaps with a warning) for this SKU under this runtime;
    `full`: the oldest it passes without the runtime's reduced-support warning; `raised`: whether the SKU's own
    floor, not the runtime's, decides one of them; `branches`: the SKU's floors per driver branch when it has
    several (what `check` names when a host is on a branch between them)."""

    runs_from: Version | None
    full: Version | None
    raised: bool
    branches: tuple[tuple[int, Version], ...]


def runtime_floors(matrix: Matrix, runtime: Runtime) -> tuple[Version | None, Version | None]:
    """The runtime's own (runs_from, full) floors: its rule's, and the oldest documented driver release's report."""
    rule = runtime.driver
    documented = [LiteralVersion(matrix.drivers[r].reports) for r in rule.releases if r in matrix.drivers]
    oldest = min(documented, default=None)
    runs = [v for v in (rule.compat_min or rule.min, oldest) if v is not None]
    full = [v for v in (rule.min, oldest) if v is not None]
    return (max(runs) if runs else None, max(full) if full else None)


def driver_need(matrix: Matrix, runtime: Runtime, sku: Sku) -> DriverNeed:
    """The driver a host with `sku` needs under `runtime` (see the module)."""
    runs, full = runtime_floors(matrix, runtime)
    runs_from, full_from = _lowest_passing(sku, runs), _lowest_passing(sku, full)
    floors = branch_floors(sku)
    return DriverNeed(
        runs_from=runs_from,
        full=full_from,
        raised=runs_from != runs or full_from != full,
        branches=tuple(floors.items()) if len(floors) > 1 else (),
    )


def _lowest_passing(sku: Sku, start: Version | None) -> Version | None:
    """The oldest driver at or above `start` that the SKU's floors accept (`start` None: its lowest floor)."""
    floors = branch_floors(sku)
    if start is None:
        return min(floors.values(), default=None)
    if below_floor(sku, start) is None:
        return start
    return next((v for v in sorted(floors.values()) if v > start and below_floor(sku, v) is None), start)
