"""The architecture rules: every architecture name fits its family's `arch_pattern` (a pattern that could take
exponential time to match is refused, never run), and every SKU of an environment has an architecture its
runtime compiles for. Registered with the other rule families by `rules.py`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelenv.matrix.rulebook import Finding, Path, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Matrix, Sku


def _compiled(pattern: str) -> re.Pattern[str] | None:
    """The pattern, unless it is invalid or could backtrack catastrophically (then it is never run)."""
    from accelenv.matrix.regexes import backtracking_risk

    if backtracking_risk(pattern):
        return None
    try:
        return re.compile(pattern)
    except re.error:
        return None


@rule
def architecture_names(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    from accelenv.matrix.regexes import backtracking_risk

    for family in m.families.values():
        if risk := backtracking_risk(family.arch_pattern):
            yield Finding(
                path=("families", family.id, "arch_pattern"),
                message=f"{family.arch_pattern!r} could take exponential time to match ({risk}); "
                "write each repetition once, without nesting, e.g. sm_[0-9]{2,3}",
                rule="architecture",
            )
        elif _compiled(family.arch_pattern) is None:
            yield Finding(
                path=("families", family.id, "arch_pattern"),
                message=f"{family.arch_pattern!r} is not a valid regular expression",
                rule="architecture",
            )
    named: list[tuple[Path, str, str]] = [(("skus", s.id, "arch"), s.family, s.arch) for s in m.skus.values()]
    named += [
        (("runtimes", r.id, "architectures", i), r.family, arch)
        for r in m.runtimes.values()
        for i, arch in enumerate(r.architectures)
    ]
    for path, family_id, arch in named:
        owner = m.families.get(family_id)
        pattern = _compiled(owner.arch_pattern) if owner else None
        if owner and pattern and not pattern.fullmatch(arch):
            yield Finding(
                path=path,
                message=f"{arch!r} is not a {owner.id} architecture name (expected {owner.arch_pattern})",
                rule="architecture",
            )


def _runtimes_supporting(m: Matrix, sku: Sku) -> list[str]:
    return [rt.id for rt in m.runtimes.values() if rt.family == sku.family and sku.arch in rt.architectures]


@rule
def architecture_support(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Every SKU of an environment has an architecture its runtime compiles for."""
    for env in m.envs.values():
        rt = m.runtimes.get(env.runtime)
        if rt is None or rt.family != env.family:
            continue
        for i, sku_id in enumerate(env.skus):
            sku = m.skus.get(sku_id)
            if sku is None or sku.family != env.family or sku.arch in rt.architectures:
                continue
            others = _runtimes_supporting(m, sku)
            fix = (
                f"use a runtime that lists it ({', '.join(others)})" if others else "no runtime in the matrix lists it"
            )
            yield Finding(
                path=("envs", env.id, "skus", i),
                message=(
                    f"{sku.name} ({sku.id}, {sku.arch}) is not supported by {rt.name} ({rt.id}), "
                    f"whose architectures are {', '.join(rt.architectures)}; {fix}, or drop the SKU"
                ),
                rule="architecture-support",
            )
