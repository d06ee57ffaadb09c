"""The rule on Ray's name for each SKU (`ray_accelerator_type`), registered with the other rule families by `rules.py`.

A SKU with neither is a warning of the `change` kind, so `validate --strict` (what a vendor's change must pass)
names it: without Ray's name `check --ray` cannot compare the type Ray reports for the node. That the shipped
names agree with Ray 2.60's own code is a test (tests/unit/test_ray_types.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.matrix.problems import Severity
from accelenv.matrix.rulebook import Finding, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Matrix


@rule
def ray_accelerator_types(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """A SKU gives Ray's name for it or the reason there is none: one of them (a warning without), not both."""
    for sku in m.skus.values():
        if not sku.ray_accelerator_type and not sku.no_ray_accelerator_type:
            yield Finding(
                path=("skus", sku.id),
                message=(
                    "says neither what Ray calls it nor why Ray has no name for it: give ray_accelerator_type (the "
                    "`accelerator_type:` resource Ray reports for the device) or no_ray_accelerator_type (why none)"
                ),
                rule="ray-accelerator-type",
                severity=Severity.WARNING,
            )
        elif sku.ray_accelerator_type and sku.no_ray_accelerator_type:
            yield Finding(
                path=("skus", sku.id, "no_ray_accelerator_type"),
                message=(
                    "has both ray_accelerator_type and no_ray_accelerator_type: keep Ray's name, or the reason "
                    "there is none"
                ),
                rule="ray-accelerator-type",
            )
