"""What a set of records says: performance regressions between like runs (same environment, SKU, device count
and node count), beyond each figure's spread, against the rolling median and a pinned baseline, with the driver
and framework changes beneath them; and the default environments and SKUs that nothing has proven lately. Pure:
records and the matrix in, findings out. The rules are written down in docs/results.md."""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from accelenv.records import frozen
from accelenv.results.judge import missing_kinds

if TYPE_CHECKING:
    from accelenv.matrix.model import Matrix
    from accelenv.results.record import Record

DAY = 86400
DEFAULT_TOLERANCE = 0.10


@frozen
class Regression:
    """A drop beyond the spread, or a figure that vanished, in the newest passing run of a group of like runs
    (same environment, SKU, device count and node count), against the rolling median of the group's earlier
    passing runs or against a pinned baseline."""

    kind: str  # "drop" or "vanished"
    against: str  # "rolling median" or "pinned baseline"
    env: str
    sku: str | None
    devices: int
    nodes: int
    figure: str
    unit: str
    value: float | None  # the newest run's figure (None: vanished)
    baseline: float  # the median of the same figure over the baseline runs
    drop: float | None  # 1 - value / baseline
    noise: float  # the spread the drop had to exceed (a fraction of the baseline)
    record: str  # the newest run's record id
    earlier: int  # baseline runs behind the median
    changes: tuple[str, ...]  # driver-branch and framework-version changes between the baseline and the run

    def as_json(self) -> dict[str, object]:
        return {**vars(self), "changes": list(self.changes)}


def _branch(driver: str | None) -> str | None:
    return driver.split(".", 1)[0] if driver else None


def _versions(record: Record) -> dict[str, str | None]:
    return {f["name"]: f["version"] for f in record.data["env"]["frameworks"]}


def changes(latest: Record, baseline: list[Record]) -> tuple[str, ...]:
    """What changed beneath the run: the driver branch, and each framework's version, against the baseline's."""
    out = []
    before = sorted({b for b in (_branch(r.driver) for r in baseline) if b})
    now = _branch(latest.driver)
    if now and before and before != [now]:
        out.append(f"driver branch {'/'.join(before)} -> {now} ({latest.driver})")
    mine = _versions(latest)
    for name in sorted(mine):
        seen = sorted({v for r in baseline for n, v in _versions(r).items() if n == name and v})
        if mine[name] and seen and seen != [mine[name]]:
            out.append(f"{name} {'/'.join(seen)} -> {mine[name]}")
    return tuple(out)


def _spread(values: list[float], recorded: list[float | None]) -> float:
    """A set of figures' spread as a fraction of their median: their own range, or the widest recorded one."""
    middle = float(statistics.median(values))
    own = (max(values) - min(values)) / middle if len(values) > 1 and middle > 0 else 0.0
    return max([own, *(s for s in recorded if s is not None)])


def _against(
    latest: Record, base: list[Record], against: str, tolerance: float, *, vanished_from: list[Record]
) -> list[Regression]:
    found = []
    what = changes(latest, base)

    def finding(kind: str, name: str, unit: str, *, value: float | None, baseline: float, noise: float, n: int) -> None:
        found.append(
            Regression(
                kind=kind,
                against=against,
                env=latest.env,
                sku=latest.sku,
                devices=latest.device_count,
                nodes=latest.nodes,
                figure=name,
                unit=unit,
                value=value,
                baseline=baseline,
                drop=None if value is None else 1 - value / baseline,
                noise=noise,
                record=latest.id,
                earlier=n,
                changes=what,
            )
        )

    names = {(f.name, f.unit) for f in latest.perf}
    for figure in latest.perf:
        before = [f for r in base for f in r.perf if (f.name, f.unit) == (figure.name, figure.unit)]
        if not before:
            continue
        baseline = float(statistics.median(f.value for f in before))
        if baseline <= 0:
            continue
        drop = 1 - figure.value / baseline
        # half of each side's range: a drop counts only where the two ranges no longer overlap
        noise = (_spread([f.value for f in before], [f.spread for f in before]) + (figure.spread or 0.0)) / 2
        if drop > tolerance and drop > noise:
            finding("drop", figure.name, figure.unit, value=figure.value, baseline=baseline, noise=noise, n=len(before))
    gone = sorted({(f.name, f.unit) for r in vanished_from for f in r.perf} - names)
    for name, unit in gone:
        values = [f.value for r in vanished_from for f in r.perf if (f.name, f.unit) == (name, unit)]
        finding("vanished", name, unit, value=None, baseline=float(statistics.median(values)), noise=0.0, n=len(values))
    return found


def regressions(
    records: list[Record], *, tolerance: float = DEFAULT_TOLERANCE, baseline: list[Record] | None = None
) -> list[Regression]:
    """For each group of like runs, the newest passing run's figures against the median of the group's earlier
    passing runs (a figure the previous run had and this one lacks has vanished) and, given `baseline` records (a
    release's), against the baseline's runs of the same group."""
    from accelenv.results.judge import group_key

    groups: dict[tuple[str, str | None, int, int], list[Record]] = {}
    for record in sorted(records, key=lambda r: (r.started, r.id)):
        if record.outcome == "passed":
            groups.setdefault(group_key(record), []).append(record)
    pinned: dict[tuple[str, str | None, int, int], list[Record]] = {}
    for record in baseline or []:
        if record.outcome == "passed":
            pinned.setdefault(group_key(record), []).append(record)
    found = []
    for key, runs in groups.items():
        latest, earlier = runs[-1], runs[:-1]
        if earlier:
            found += _against(latest, earlier, "rolling median", tolerance, vanished_from=earlier[-1:])
        if key in pinned:
            found += _against(latest, pinned[key], "pinned baseline", tolerance, vanished_from=pinned[key])
    return found


@frozen
class Stale:
    env: str
    sku: str
    last_pass: int | None  # seconds since 1970 of the newest passing record, or None: never proven
    record: str | None

    def as_json(self) -> dict[str, object]:
        return dict(vars(self))


def stale(matrix: Matrix, records: list[Record], *, days: float, now: float) -> list[Stale]:
    """Each SKU of each default environment without a passing record that finished within `days` days and ran
    and passed every conformance kind the environment declares (a smoke-only run keeps no pair fresh)."""
    newest: dict[tuple[str, str], Record] = {}
    for record in records:
        if record.outcome != "passed" or record.sku is None or missing_kinds(matrix, record):
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
