"""What a set of records says: performance regressions between runs of the same SKU and environment, and the
default environments and SKUs that nothing has proven lately. Pure: records and the matrix in, findings out."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.matrix.model import Matrix
    from accelenv.results.record import Record

DAY = 86400
DEFAULT_TOLERANCE = 0.10


@frozen
class Regression:
    env: str
    sku: str | None
    figure: str
    unit: str
    value: float  # the latest run's figure
    baseline: float  # the median of the same figure over the earlier runs
    drop: float  # 1 - value / baseline
    record: str  # the latest run's record id
    earlier: int  # earlier runs behind the baseline

    def as_json(self) -> dict[str, object]:
        return dict(vars(self))


@frozen
class Stale:
    env: str
    sku: str
    last_pass: int | None  # seconds since 1970 of the newest passing record, or None: never proven
    record: str | None

    def as_json(self) -> dict[str, object]:
        return dict(vars(self))


def regressions(records: list[Record], *, tolerance: float = DEFAULT_TOLERANCE) -> list[Regression]:
    """For each SKU x environment, the newest run's figures against the median of its earlier runs: a drop
    beyond `tolerance` (a fraction) is a regression."""
    groups: dict[tuple[str, str | None], list[Record]] = {}
    for record in sorted(records, key=lambda r: (r.started, r.id)):
        groups.setdefault((record.env, record.sku), []).append(record)
    found = []
    for (env, sku), runs in groups.items():
        latest, earlier = runs[-1], runs[:-1]
        for figure in latest.perf:
            before = [f.value for r in earlier for f in r.perf if f.name == figure.name and f.unit == figure.unit]
            if not before:
                continue
            baseline = float(statistics.median(before))
            if baseline <= 0:
                continue
            drop = 1 - figure.value / baseline
            if drop > tolerance:
                found.append(
                    Regression(
                        env=env,
                        sku=sku,
                        figure=figure.name,
                        unit=figure.unit,
                        value=figure.value,
                        baseline=baseline,
                        drop=drop,
                        record=latest.id,
                        earlier=len(before),
                    )
                )
    return found


def stale(matrix: Matrix, records: list[Record], *, days: float, now: float) -> list[Stale]:
    """Each SKU of each default environment without a passing record that finished within `days` days."""
    newest: dict[tuple[str, str], Record] = {}
    for record in records:
        if record.outcome != "passed" or record.sku is None:
            continue
        key = (record.env, record.sku)
        if key not in newest or newest[key].finished < record.finished:
            newest[key] = record
    out = []
    for env in matrix.envs.values():
        if not env.default:
            continue
        for sku in env.skus:
            last = newest.get((env.id, sku))
            if last is None or last.finished < now - days * DAY:
                out.append(
                    Stale(
                        env=env.id, sku=sku, last_pass=last.finished if last else None, record=last.id if last else None
                    )
                )
    return out
