"""The identity rules: each thing is identified once and can be identified. One default environment per family
(the one its nox session runs), one family per session, PCI vendor id, SKU product name and device id (no
product-name glob of one SKU matching another's name), every SKU in an environment or saying why not, and every
SKU and environment findable on a host. Registered with the other rule families by `rules.py`."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from accelenv.matrix.problems import Severity
from accelenv.matrix.rulebook import Finding, complete, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.matrix.model import Environment, Matrix, Sku


@rule
def defaults(m: Matrix, skipped: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Exactly one default environment per family: the one its nox session runs."""
    by_family: dict[str, list[Environment]] = defaultdict(list)
    for env in m.envs.values():
        by_family[env.family].append(env)
    whole = complete(skipped, "envs")
    for family in m.families.values():
        envs = by_family.get(family.id, [])
        marked = [e for e in envs if e.default]
        if not whole and not (envs and len(marked) > 1):
            continue  # an environment the schema refused may be this family's (default) one
        if not envs:
            yield Finding(
                path=("families", family.id),
                message=f"family '{family.id}' has no environment; `nox -s {family.session}` would have nothing to run",
                rule="default-env",
                severity=Severity.WARNING,
            )
        elif not marked:
            yield Finding(
                path=("envs", envs[0].id, "default"),
                message=(
                    f"family '{family.id}' has no default environment: set default = true on one of "
                    f"{', '.join(e.id for e in envs)}"
                ),
                rule="default-env",
            )
        elif len(marked) > 1:
            for env in marked[1:]:
                yield Finding(
                    path=("envs", env.id, "default"),
                    message=f"family '{family.id}' already has default environment '{marked[0].id}'; keep one",
                    rule="default-env",
                )


@rule
def unique_names(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Sessions, vendor ids, product names and device ids each identify one thing."""
    sessions: dict[str, str] = {}
    for family in m.families.values():
        if family.session in sessions:
            yield Finding(
                path=("families", family.id, "session"),
                message=f"session '{family.session}' is already the session of family '{sessions[family.session]}'",
                rule="unique",
            )
        sessions.setdefault(family.session, family.id)
    for env in m.envs.values():
        if env.id in sessions:
            yield Finding(
                path=("envs", env.id),
                message=(
                    f"environment id '{env.id}' collides with the nox session of family '{sessions[env.id]}'; "
                    "rename the environment (e.g. add its runtime: gpu-nvidia-cu128)"
                ),
                rule="unique",
            )
    vendors: dict[str, str] = {}
    for family in m.families.values():
        for i, vid in enumerate(family.pci_vendor_ids):
            if vid in vendors and vendors[vid] != family.id:
                yield Finding(
                    path=("families", family.id, "pci_vendor_ids", i),
                    message=f"PCI vendor {vid} already belongs to family '{vendors[vid]}'",
                    rule="unique",
                )
            vendors.setdefault(vid, family.id)
    claimed: dict[tuple[str, str, str], str] = {}
    for sku in m.skus.values():
        keys = [("pci_device_ids", d.lower()) for d in sku.pci_device_ids]
        keys += [("product_names", " ".join(n.split()).casefold()) for n in sku.product_names]
        for field, value in keys:
            owner = claimed.get((sku.family, field, value))
            if owner and owner != sku.id:
                index = [k for k in keys if k[0] == field].index((field, value))
                yield Finding(
                    path=("skus", sku.id, field, index),
                    message=f"{value!r} already identifies SKU '{owner}'; a host device must match one SKU only",
                    rule="unique",
                )
            claimed.setdefault((sku.family, field, value), sku.id)


def _witnesses(sku: Sku) -> list[str]:
    """Names a host tool may print for `sku`: its literal product names, and each glob with its wildcards taken
    as nothing (`*MI300A*` -> `MI300A`, `NVIDIA GH200 144G*` -> `NVIDIA GH200 144G`), and its marketing name."""
    names = [sku.name, *(p.replace("*", "").replace("?", "") for p in sku.product_names)]
    return [" ".join(n.split()) for n in dict.fromkeys(names) if n.strip()]


@rule
def overlapping_product_names(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """No product-name glob of one SKU matches a name of another SKU of its family: a host device whose tool
    prints that name would match both, and the first in file order would win (`match_sku`).

    Whether two globs overlap in general is the wrong question: any two globs of the form `*A*` and `*B*` do
    (the text "AB" matches both), and the matrix has many such pairs (`*MI300X*`, `*MI308X*`), yet no product is
    named both. So each glob is matched against what the other SKUs are known to be called: their marketing
    name, their literal product names and each glob with its wildcards taken as nothing (`_witnesses`). Every
    finding names a real string that both SKUs claim (no false alarms); a glob that overlaps only on names no
    SKU is called (`*MI3*` against a future `MI3`) is not caught until that SKU is added."""
    import fnmatch

    skus = list(m.skus.values())
    for sku in skus:
        for i, pattern in enumerate(sku.product_names):
            if not any(c in pattern for c in "*?"):
                continue  # a literal name: two equal ones are the `unique` rule's
            glob = " ".join(pattern.split()).casefold()
            for other in skus:
                if other.id == sku.id or other.family != sku.family:
                    continue
                hit = next((n for n in _witnesses(other) if fnmatch.fnmatchcase(n.casefold(), glob)), None)
                if hit is None:
                    continue
                yield Finding(
                    path=("skus", sku.id, "product_names", i),
                    message=(
                        f"{pattern!r} also matches {hit!r}, a name of SKU '{other.id}': a host device must match "
                        f"one SKU only; make the pattern name this model alone (e.g. the full product name)"
                    ),
                    rule="unique",
                )


NO_ENVIRONMENT = "no environment:"
"""How a SKU says why no environment lists it: its `notes` begin with these words (inf1's do)."""


@rule
def skus_in_environments(m: Matrix, skipped: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """Every SKU is in an environment of its family, or its notes say why not ("No environment: ..."): a SKU no
    environment lists is one `accelenv which` can name but no session tests."""
    if not complete(skipped, "envs"):
        return
    listed = {sku_id for env in m.envs.values() for sku_id in env.skus}
    families_with_envs = {env.family for env in m.envs.values()}
    for sku in m.skus.values():
        if sku.id in listed or sku.family not in families_with_envs:  # a family with none is `default-env`'s
            continue
        if sku.notes.strip().casefold().startswith(NO_ENVIRONMENT):
            continue
        envs = [env.id for env in m.envs.values() if env.family == sku.family]
        yield Finding(
            path=("skus", sku.id),
            message=(
                f"no environment lists this SKU: `accelenv attach {sku.id} ENV...` (the {sku.family} "
                f'environments are {", ".join(envs)}), or begin its notes with "No environment: <why>"'
            ),
            rule="sku-environment",
            severity=Severity.WARNING,
        )


@rule
def identification(m: Matrix, _: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    for sku in m.skus.values():
        family = m.families.get(sku.family)
        if family and family.pci_vendor_ids and not (sku.product_names or sku.pci_device_ids):
            yield Finding(
                path=("skus", sku.id),
                message="no product_names and no pci_device_ids: a host device could never be matched to this SKU",
                rule="identification",
            )
    for env in m.envs.values():
        family = m.families.get(env.family)
        has_skus = any(s.family == env.family for s in m.skus.values())
        if family and has_skus and not env.skus:
            yield Finding(
                path=("envs", env.id, "skus"),
                message="lists no SKUs: name the devices this environment is meant for",
                rule="identification",
            )
