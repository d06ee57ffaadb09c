"""Ray Direct Transport (RDT) in the result records: the names its figures carry, the form a failure caused by a
known upstream defect takes, and the validated recipe of each environment as the page shows it.

A transfer figure is named `transfer.<transport>.<scope>.<size>mib` (`transfer.gloo.cluster.64mib`, and
`transfer.object_store.cluster.64mib` for the object store moving the same tensor), so that two runs compare figure
by figure. A test that fails because of a known defect of an upstream project says so in its failure's first line,
`known upstream defect: <reference>: <what happens>`, the reference being the upstream issue
(`ray-project/ray#66264`) or `<project> (not filed)`; `defect_of` reads it back. The recipe (`recipes`) is computed
from validated records only (`accelenv.results.record.Record`), never from what the records claim about
themselves: ratios are recomputed from the two figures, fractions from the matrix's peaks.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Iterable

    from accelenv.matrix.model import Matrix
    from accelenv.results.record import Figure, Record

OBJECT_STORE = "object_store"
SCOPES = ("node", "cluster")  # two actors on one node; two actors on two nodes
KNOWN_DEFECT = "known upstream defect: "
_NAME = re.compile(r"transfer\.([a-z0-9_]{1,30})\.(node|cluster)\.([0-9]{1,7})mib")
_DEFECT = re.compile(
    r"known upstream defect: ([A-Za-z0-9_.-]{1,100}(?:/[A-Za-z0-9_.-]{1,100})?(?:#[0-9]{1,9}| \(not filed\))): (.+)"
)
_TEST = re.compile(r"test_rdt_[a-z_]+")


def figure_name(transport: str, scope: str, size_bytes: int) -> str:
    """The record's name of a transfer figure: `transfer.gloo.cluster.64mib` (sizes are whole MiB)."""
    if scope not in SCOPES:
        raise ValueError(f"scope {scope!r} is not one of {', '.join(SCOPES)}")
    if size_bytes <= 0 or size_bytes % 2**20:
        raise ValueError(f"a transfer figure's size is a whole number of MiB, not {size_bytes} bytes")
    return f"transfer.{transport.lower()}.{scope}.{size_bytes // 2**20}mib"


def parse_figure_name(name: str) -> tuple[str, str, int] | None:
    """(transport, scope, bytes) of a transfer figure's name, or None for any other figure."""
    found = _NAME.fullmatch(name)
    if found is None:
        return None
    return found[1], found[2], int(found[3]) * 2**20


def defect_message(reference: str, description: str) -> str:
    """The failure line of a test that a known upstream defect makes fail: `reference` is the upstream issue
    (`ray-project/ray#66264`) or `<project> (not filed)` where none is filed yet."""
    line = f"{KNOWN_DEFECT}{reference}: {' '.join(description.split())}"
    if _DEFECT.fullmatch(line) is None:
        raise ValueError(f"{reference!r} is neither owner/repo#number nor '<project> (not filed)'")
    return line


def defect_of(reason: str | None) -> tuple[str, str] | None:
    """(reference, description) of a failure caused by a known upstream defect, read from its first line."""
    if not reason:
        return None
    found = _DEFECT.fullmatch(reason.splitlines()[0].removeprefix("Failed: ").strip())
    return (found[1], found[2]) if found else None


@frozen
class Transfer:
    """One transport at one size and scope in one record, beside the object store moving the same tensor."""

    transport: str
    scope: str
    size_bytes: int
    gb_s: float
    object_store_gb_s: float | None
    vs_object_store: float | None  # gb_s / object_store_gb_s
    peak_gb_s: float | None  # the interconnect's documented peak for this scope (matrix data)
    fraction_of_peak: float | None


@frozen
class Defect:
    test: str
    reference: str
    description: str


@frozen
class Recipe:
    """What one record proves about an environment's transports: the newest record of each (env, SKU) pair that
    ran the RDT tests, its figures, which RDT tests passed and which failed for a known upstream defect."""

    env: str
    sku: str | None
    record: str
    finished: int
    nodes: int
    transfers: tuple[Transfer, ...]
    passed: tuple[str, ...]
    failed: tuple[str, ...]  # failed for another reason than a known upstream defect
    defects: tuple[Defect, ...]


def recipes(records: Iterable[Record], peaks: dict[tuple[str, str], float] | None = None) -> list[Recipe]:
    """The newest RDT recipe per (env, SKU), sorted by env and SKU. `peaks` maps (SKU, scope) to the
    interconnect's documented GB/s (matrix data); a transfer without one has no fraction of peak."""
    newest: dict[tuple[str, str | None], Record] = {}
    for record in records:
        if not any(_TEST.search(str(t.get("id", ""))) for t in record.data.get("tests", ())):
            continue
        key = (record.env, record.sku)
        if key not in newest or (newest[key].finished, newest[key].id) < (record.finished, record.id):
            newest[key] = record
    return [_recipe(newest[key], peaks or {}) for key in sorted(newest, key=lambda k: (k[0], k[1] or ""))]


def _recipe(record: Record, peaks: dict[tuple[str, str], float]) -> Recipe:
    passed, failed, defects = [], [], []
    for test in record.data.get("tests", ()):
        test_id = str(test.get("id", ""))
        if not _TEST.search(test_id):
            continue
        name = test_id.rsplit("::", maxsplit=1)[-1]
        if test.get("outcome") == "passed":
            passed.append(name)
        elif test.get("outcome") in ("failed", "error"):
            cause = defect_of(test.get("reason"))
            if cause is None:
                failed.append(name)
            else:
                defects.append(Defect(test=name, reference=cause[0], description=cause[1]))
    return Recipe(
        env=record.env,
        sku=record.sku,
        record=record.id,
        finished=record.finished,
        nodes=record.nodes,
        transfers=_transfers(record.perf, record.sku, peaks),
        passed=tuple(passed),
        failed=tuple(failed),
        defects=tuple(defects),
    )


def _transfers(perf: tuple[Figure, ...], sku: str | None, peaks: dict[tuple[str, str], float]) -> tuple[Transfer, ...]:
    by_key: dict[tuple[str, str, int], float] = {}
    for figure in perf:
        parsed = parse_figure_name(figure.name)
        if parsed is not None and figure.unit == "GB/s":
            by_key[parsed] = figure.value
    out = []
    for (transport, scope, size), value in sorted(by_key.items()):
        if transport == OBJECT_STORE:
            continue
        store = by_key.get((OBJECT_STORE, scope, size))
        peak = peaks.get((sku, scope)) if sku else None
        out.append(
            Transfer(
                transport=transport.upper(),
                scope=scope,
                size_bytes=size,
                gb_s=value,
                object_store_gb_s=store,
                vs_object_store=value / store if store else None,
                peak_gb_s=peak,
                fraction_of_peak=value / peak if peak else None,
            )
        )
    return tuple(out)


def interconnect_peaks(matrix: Matrix) -> dict[tuple[str, str], float]:
    """(SKU, "node") -> the one-way GB/s a transfer between two of its devices can reach within a node: half the
    datasheet's interconnect figure (NVLink's is both directions together), for SKUs whose peak gives one."""
    return {
        (sku.id, "node"): sku.peak.interconnect_gb_s / 2
        for sku in matrix.skus.values()
        if sku.peak is not None and sku.peak.interconnect_gb_s
    }
