"""`check --ray` sees the cluster, not only nodes: the nodes grouped by the domains a scheduler packs by (NVLink
domain, rack, block, TPU slice, zone, placement group), read from the labels each node carries in Ray, and each
domain judged as a whole:

- incomplete: fewer nodes answer than the domain should hold. What it should hold comes from, first, a size the
  operator gave (`accelenv.io/<kind>-size`, e.g. `rack-size = "18"` in the facts file); for a TPU slice, the chips
  its shape holds over the chips of one host; else the largest domain of the same kind in the cluster (17 trays
  where another NVLink domain has 18). A node that is unreachable or dead still belongs to its domain (Ray kept
  its labels) and counts as missing;
- divided: its nodes disagree on the driver or on the verdict.

Pure: the labels and per-node outcomes in, plain data out (`cluster.ray` feeds it, `cluster.view` draws it).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

# kind -> the label keys that name a node's domain of that kind, first found wins
DOMAIN_KEYS: dict[str, tuple[str, ...]] = {
    "nvlink": ("ray.io/gpu-domain", "accelenv.io/nvlink-domain"),
    "rack": ("accelenv.io/rack",),
    "block": ("accelenv.io/block",),
    "slice": ("accelenv.io/tpu-slice",),
    "zone": ("accelenv.io/zone",),
    "placement-group": ("accelenv.io/placement-group",),
}
ANSWERED = ("pass", "warn", "fail")
_SHAPE = re.compile(r"\d{1,4}(?:x\d{1,4}){1,3}")


@frozen
class Member:
    """One node as a domain sees it."""

    node_id: str
    verdict: str  # pass, warn, fail, unreachable, dead, drained
    driver: str | None
    devices: int
    labels: dict[str, str]


def domains(members: Sequence[Member]) -> list[dict[str, Any]]:
    """Every domain of every kind that at least one node names, in kind order then name, each with its nodes,
    what it should hold (and where that figure comes from), and its problems."""
    found: list[dict[str, Any]] = []
    counted = [m for m in members if m.verdict != "drained"]
    for kind, keys in DOMAIN_KEYS.items():
        groups: dict[str, list[Member]] = {}
        for member in counted:
            name = next((member.labels[k] for k in keys if member.labels.get(k)), None)
            if name:
                groups.setdefault(name, []).append(member)
        peers = max((len(g) for g in groups.values()), default=0)
        for name, group in sorted(groups.items()):
            found.append(_domain(kind, name, group, peers, len(groups)))
    return found


def _domain(kind: str, name: str, group: list[Member], peers: int, siblings: int) -> dict[str, Any]:
    answered = [m for m in group if m.verdict in ANSWERED]
    expected, source = _expected(kind, group)
    if expected is None and siblings > 1 and peers > len(group):
        expected, source = peers, f"the largest {kind} domain in the cluster"
    problems = []
    missing = (expected or len(group)) - len(answered)
    if missing > 0:
        absent = [m.node_id for m in group if m.verdict not in ANSWERED]
        said = f"{len(answered)} of {expected or len(group)} nodes answer"
        if expected is not None:
            said += f" ({source})"
        if absent:
            said += f"; not answering: {', '.join(n[:12] for n in absent)}"
        problems.append(f"incomplete: {said}")
    drivers = sorted({m.driver for m in answered if m.driver})
    if len(drivers) > 1:
        problems.append("divided: drivers " + _split(answered, lambda m: m.driver or "-"))
    verdicts = sorted({m.verdict for m in answered})
    if len(verdicts) > 1:
        problems.append("divided: verdicts " + _split(answered, lambda m: m.verdict))
    return {
        "kind": kind,
        "name": name,
        "nodes": [m.node_id for m in group],
        "verdicts": {m.node_id: m.verdict for m in group},
        "expected": expected,
        "expected_from": source,
        "complete": missing <= 0,
        "problems": problems,
    }


def _split(members: list[Member], value: Any) -> str:
    """`580.95.05 (2 nodes), 570.124.06 (1 node: 3f2a...)`: each value with how many nodes have it, the fewest named."""
    by: dict[str, list[str]] = {}
    for member in members:
        by.setdefault(str(value(member)), []).append(member.node_id)
    parts = []
    for text, nodes in sorted(by.items(), key=lambda item: (-len(item[1]), item[0])):
        count = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}"
        named = f": {', '.join(n[:12] for n in nodes)}" if len(nodes) * 2 <= len(members) else ""
        parts.append(f"{text} ({count}{named})")
    return ", ".join(parts)


def _expected(kind: str, group: list[Member]) -> tuple[int | None, str]:
    """The size the domain should have, from the operator's `<kind>-size` label, or a TPU slice's shape."""
    sizes = {m.labels.get(f"accelenv.io/{_size_key(kind)}") for m in group} - {None}
    whole = sorted(int(s) for s in sizes if s and s.isdigit() and 0 < int(s) < 100000)
    if whole:
        return whole[-1], f"accelenv.io/{_size_key(kind)}"
    if kind == "slice":
        shapes = {m.labels.get("accelenv.io/tpu-topology", "") for m in group}
        per_host = {m.devices for m in group if m.verdict in ANSWERED and m.devices > 0}
        if len(shapes) == 1 and len(per_host) == 1:
            shape = shapes.pop()
            if _SHAPE.fullmatch(shape):
                chips = math.prod(int(axis) for axis in shape.split("x"))
                host = per_host.pop()
                if chips % host == 0 and chips >= host:
                    return chips // host, f"the slice shape {shape} over {host} chips a host"
    return None, ""


def _size_key(kind: str) -> str:
    return {"nvlink": "nvlink-domain-size", "slice": "tpu-slice-size"}.get(kind, f"{kind}-size")


def members_of(results: Sequence[Any], labels: Mapping[str, Mapping[str, str]]) -> list[Member]:
    """Members from `check --ray`'s node results and each node's labels in Ray."""
    return [
        Member(
            node_id=r.node_id,
            verdict=r.verdict,
            driver=r.driver,
            devices=r.devices,
            labels=dict(labels.get(r.node_id, {})),
        )
        for r in results
    ]
