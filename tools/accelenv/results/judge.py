"""What records prove, in one set of words shared by `accelenv results` and the page.

Each record has one state: passed, failed, not proven (the hardware was absent and its tests skipped as asked),
incomplete (the run began and never completed), or regressed (passed, but a figure dropped beyond its spread
against like runs; `compare.py`). A SKU x environment pair is *proven* only by its newest record when that record
passed, ran and passed every conformance kind the environment declares (distributed, recovery, performance), is of
today's lock, is not regressed and is recent; otherwise the page says which of those it is not. A family's maturity
is earned from the records (`maturity`), and each node (the runner or agent a record names) has its last job, its
last passing record and its verdicts (`nodes`). Pure: records, the matrix and the clock in, findings out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.results.record import Record

DAY = 86400
State = Literal["passed", "failed", "not proven", "incomplete", "regressed"]
STATES: tuple[State, ...] = ("passed", "failed", "not proven", "incomplete", "regressed")
KINDS = ("distributed", "recovery", "performance")
_FILE_KINDS = {
    "test_conformance_distributed.py": ("distributed",),
    "test_conformance_recovery.py": ("recovery",),
    "test_conformance_perf.py": ("performance",),
    "test_conformance_jax.py": KINDS,  # the JAX path's one file holds all three; its tests say which (`test_kind`)
}
PROVEN, SMOKE, OTHER_LOCK, STALE = "proven", "smoke only", "other lock", "stale"
BETA_DAYS, STABLE_DAYS = 30, 7
UNNAMED = "(runner not named)"


def state(record: Record, regressed: frozenset[str] = frozenset()) -> State:
    """The record's one word."""
    if record.outcome == "passed":
        return "regressed" if record.id in regressed else "passed"
    if record.outcome == "failed":
        return "failed"
    if record.outcome == "incomplete":
        return "incomplete"
    return "not proven"


def test_kind(test_id: str) -> str | None:
    """The conformance kind a test proves (by its file, and for a file of all three by its name), or None for a
    smoke test."""
    path, _, name = test_id.partition("::")
    kinds = _FILE_KINDS.get(path.rsplit("/", 1)[-1])
    if kinds is None:
        return None
    if len(kinds) == 1:
        return kinds[0]
    if "killed" in name or "recover" in name:
        return "recovery"
    if "bandwidth" in name or "figure" in name or "throughput" in name:
        return "performance"
    return "distributed"


def declared_kinds(env: Environment) -> tuple[str, ...]:
    """The conformance kinds the environment's tests declare; the three every accelerator runs when it names
    none (the CPU environments: their conformance run names the files itself)."""
    found = {k for path in env.tests for k in _FILE_KINDS.get(path.rsplit("/", 1)[-1], ())}
    return tuple(k for k in KINDS if k in found) or KINDS


def passed_kinds(record: Record) -> tuple[str, ...]:
    """The conformance kinds with a passing test and no failing one in the record."""
    passed, failed = set(), set()
    for test in record.tests:
        kind = test_kind(test.id)
        if kind is None:
            continue
        if test.outcome == "passed":
            passed.add(kind)
        elif test.outcome != "skipped":
            failed.add(kind)
    return tuple(k for k in KINDS if k in passed and k not in failed)


def missing_kinds(matrix: Matrix, record: Record) -> tuple[str, ...]:
    have = passed_kinds(record)
    return tuple(k for k in declared_kinds(matrix.envs[record.env]) if k not in have)


def defects(record: Record) -> tuple[str, ...]:
    """Each failure with a named upstream cause: "test: url: description"."""
    return tuple(f"{t.id.rsplit('::', 1)[-1]}: {t.defect}" for t in record.tests if t.defect)


def group_key(record: Record) -> tuple[str, str | None, int, int]:
    """Like runs: the same environment, SKU, device count and node count."""
    return (record.env, record.sku, record.device_count, record.nodes)


def newest_per_group(records: list[Record]) -> list[Record]:
    newest: dict[tuple[str, str | None, int, int], Record] = {}
    for record in records:
        key = group_key(record)
        if key not in newest or (newest[key].started, newest[key].id) < (record.started, record.id):
            newest[key] = record
    return sorted(newest.values(), key=lambda r: (r.started, r.id))


@frozen
class Proof:
    """A SKU x environment pair as its newest record leaves it."""

    sku: str
    env: str
    word: str  # proven, smoke only, other lock, stale, or the record's state (failed, regressed, ...)
    detail: str  # what the word rests on: missing kinds, the lock the record is for, the defect named
    record: Record


def proof(
    matrix: Matrix,
    records: list[Record],
    *,
    locks: dict[str, str | None],
    regressed: frozenset[str],
    now: float,
    days: float = BETA_DAYS,
) -> dict[tuple[str, str], Proof]:
    """Per (sku, env) with a record: the word for it. `locks`: each environment's lock sha256 today."""
    newest: dict[tuple[str, str], Record] = {}
    for r in records:
        if r.sku is None:
            continue
        key = (r.sku, r.env)
        if key not in newest or (newest[key].finished, newest[key].id) < (r.finished, r.id):
            newest[key] = r
    out = {}
    for (sku, env), r in newest.items():
        word: str = state(r, regressed)
        detail = "; ".join(defects(r))
        if word == "passed":
            missing = missing_kinds(matrix, r)
            today = locks.get(env)
            if missing:
                word, detail = SMOKE, "did not run and pass: " + ", ".join(missing)
            elif r.lock_sha256 != today:
                word = OTHER_LOCK
                detail = f"proves lock {_short(r.lock_sha256)}, today's is {_short(today)}"
            elif r.finished < now - days * DAY:
                word, detail = STALE, f"older than {days:g} days"
            else:
                word, detail = PROVEN, f"lock {_short(r.lock_sha256)}"
        out[(sku, env)] = Proof(sku=sku, env=env, word=word, detail=detail, record=r)
    return out


def _short(sha: str | None) -> str:
    return sha[:12] if sha else "none"


@frozen
class Tier:
    family: str
    tier: str  # declared, experimental, beta, stable
    claimed: str  # what matrix.toml says
    why: str
    records: tuple[str, ...]  # the records behind the tier


def maturity(
    matrix: Matrix, records: list[Record], *, locks: dict[str, str | None], regressed: frozenset[str], now: float
) -> list[Tier]:
    """Each family's earned tier (docs/results.md, "Maturity"):
    declared: no record; experimental: records, none proving a pair within 30 days; beta: a pair proven (every
    declared conformance kind passed, today's lock, not regressed) within 30 days; stable: every SKU of every
    default environment proven within 7 days, recovery among what passed, and no open regression."""
    recent = proof(matrix, records, locks=locks, regressed=regressed, now=now, days=BETA_DAYS)
    week = proof(matrix, records, locks=locks, regressed=regressed, now=now, days=STABLE_DAYS)
    open_regressions = {r.env for r in newest_per_group(records) if r.id in regressed}
    out = []
    for family in matrix.families.values():
        mine = [r for r in records if r.family == family.id]
        claimed = str(family.maturity)
        if not mine:
            out.append(Tier(family=family.id, tier="declared", claimed=claimed, why="no record", records=()))
            continue
        proven = [p for p in recent.values() if p.word == PROVEN and p.record.family == family.id]
        pairs = [(s, e.id) for e in matrix.envs.values() if e.family == family.id and e.default for s in e.skus]
        weekly = [week.get(pair) for pair in pairs]
        gaps = [f"{s} x {e}" for (s, e), p in zip(pairs, weekly, strict=True) if p is None or p.word != PROVEN]
        regressed_envs = sorted(e for e in open_regressions if matrix.envs[e].family == family.id)
        if pairs and not gaps and not regressed_envs:
            ids = tuple(p.record.id for p in weekly if p is not None)
            why = f"every default SKU proven within {STABLE_DAYS} days, recovery included, no open regression"
            out.append(Tier(family=family.id, tier="stable", claimed=claimed, why=why, records=ids))
        elif proven:
            ids = tuple(p.record.id for p in proven)
            why = f"{len(proven)} pair(s) proven within {BETA_DAYS} days; not stable: " + (
                f"open regression in {', '.join(regressed_envs)}"
                if regressed_envs
                else f"not proven within {STABLE_DAYS} days: {', '.join(gaps[:5])}{' ...' if len(gaps) > 5 else ''}"
            )
            out.append(Tier(family=family.id, tier="beta", claimed=claimed, why=why, records=ids))
        else:
            newest = max(mine, key=lambda r: (r.finished, r.id))
            why = f"{len(mine)} record(s), none proving a pair within {BETA_DAYS} days"
            out.append(Tier(family=family.id, tier="experimental", claimed=claimed, why=why, records=(newest.id,)))
    return out


@frozen
class Node:
    name: str
    last: Record  # its last job
    last_pass: Record | None
    verdicts: tuple[tuple[str, str], ...]  # (environment, newest check verdict on this node)
    silent: bool  # nothing from it within the --stale-after window


def nodes(records: list[Record], *, now: float, silent_after: float | None) -> list[Node]:
    """Per runner a record names: its last job, last passing record and verdicts; `silent_after` seconds."""
    by_name: dict[str, list[Record]] = {}
    for r in records:
        by_name.setdefault(r.runner or UNNAMED, []).append(r)
    out = []
    for name, mine in sorted(by_name.items()):
        mine.sort(key=lambda r: (r.finished, r.id))
        verdicts = {r.env: r.verdict for r in mine}
        passing = [r for r in mine if r.outcome == "passed"]
        last = mine[-1]
        silent = silent_after is not None and last.finished < now - silent_after
        out.append(
            Node(
                name=name,
                last=last,
                last_pass=passing[-1] if passing else None,
                verdicts=tuple(sorted(verdicts.items())),
                silent=silent,
            )
        )
    return out
