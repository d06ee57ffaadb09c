"""Semantic rules: what the schema cannot say. Every rule family registers its rules (`rulebook.py`) when its
module is imported here; all run, always, and every finding is reported.

Each family is a module that reads top to bottom: references, architectures, pins and wheel tags, identity
(one of each, each findable), drivers, images, the support window, frameworks, Ray's names. The README's rule
table says what each refuses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.matrix import (
    architecture_rules,
    driver_rules,
    framework_rules,
    identity_rules,
    image_rules,
    ray_rules,
    reference_rules,
    requirement_rules,
    runtime_rules,
    transports,
)
from accelenv.matrix.rulebook import RULES, Finding

if TYPE_CHECKING:
    from accelenv.matrix.model import Matrix


FAMILIES = (
    reference_rules,
    architecture_rules,
    requirement_rules,
    identity_rules,
    driver_rules,
    image_rules,
    runtime_rules,
    framework_rules,
    ray_rules,
    transports,
)
"""The rule families in the order `validate` runs them, which is the order of the findings it reports at one key
path; within a family, its rules run in the order its module defines them. Explicit, so that which module
happens to be imported first cannot change it."""


def check_rules(matrix: Matrix, skipped: frozenset[tuple[str, str]] = frozenset()) -> list[Finding]:
    """Every finding of every rule. `skipped` names entries already refused by the schema."""
    order = {family.__name__: i for i, family in enumerate(FAMILIES)}
    ranked = sorted(RULES, key=lambda each: order.get(each.__module__, len(order)))  # stable: a family's own order
    return [finding for each in ranked for finding in each(matrix, skipped)]
