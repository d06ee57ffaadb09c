"""The rule on Ray's name for each SKU (`ray_accelerator_type`), registered with the others in `rules`.

That every SKU of the shipped matrix has one or the other is a test of the shipped matrix
(tests/unit/test_ray_types.py): a matrix of one's own may leave both out, and `check --ray` then does not compare
the type."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.matrix.rules import Finding, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Matrix


@rule
def ray_accelerator_types(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """A SKU gives Ray's name for it or the reason there is none, not both."""
    for sku in m.skus.values():
        if sku.ray_accelerator_type and sku.no_ray_accelerator_type:
            yield Finding(
                path=("skus", sku.id, "no_ray_accelerator_type"),
                message=(
                    "has both ray_accelerator_type and no_ray_accelerator_type: keep Ray's name, or the reason "
                    "there is none"
                ),
                rule="ray-accelerator-type",
            )
