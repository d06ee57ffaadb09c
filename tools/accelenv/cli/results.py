"""`accelenv results`: read conformance result records (a folder, CI artifacts), merge them, judge each (one state:
passed, failed, not proven, incomplete, regressed), compare like runs with earlier ones and a pinned baseline,
name what no passing record has proven lately and the nodes gone silent, and earn each family its maturity."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from accelenv.cli.common import Command, duration, fraction, matrix_of, repo_of
from accelenv.cli.output import dump_json, table
from accelenv.errors import UsageError

if TYPE_CHECKING:
    import argparse
    from collections.abc import Mapping

    from accelenv.matrix.model import Matrix
    from accelenv.results.record import Record

FAILING = ("failed", "incomplete", "regressed")  # the states a record's owners are named beside


def results_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="record files or folders searched for *.result.json (default: $ACCELENV_RESULTS or ./results)",
    )
    p.add_argument("--merge", metavar="DIR", help="write every accepted record into DIR (one file per record id)")
    p.add_argument(
        "--baseline",
        action="append",
        metavar="PATH",
        help="pinned baseline records (a release's; file or folder, repeatable): each group's newest run is also "
        "compared with them",
    )
    p.add_argument(
        "--tolerance",
        type=fraction,
        default=0.10,
        metavar="F",
        help="a figure more than F (and more than its spread) below the baseline is a regression (default %(default)g)",
    )
    p.add_argument(
        "--stale-after",
        type=duration,
        metavar="DURATION",
        help="name the default environments' SKUs with no passing record, and the nodes with no record at all, "
        "newer than DURATION (7d, 12h; a bare number is days); exit 1 if any",
    )
    p.add_argument("--json", action="store_true", help="print records, refused, regressions, stale, nodes as JSON")


def _day(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(epoch)) if epoch is not None else "never"


def _record_json(
    r: Record, word: str, missing: tuple[str, ...], defects: tuple[str, ...], owners: tuple[str, ...]
) -> dict[str, Any]:
    return {
        "id": r.id,
        "path": r.path,
        "state": word,
        "outcome": r.outcome,
        "note": r.note,
        "env": r.env,
        "lock_sha256": r.lock_sha256,
        "sku": r.sku,
        "devices": r.device_count,
        "nodes": r.nodes,
        "runner": r.runner,
        "verdict": r.verdict,
        "driver": r.driver,
        "finished": r.data["finished"],
        "run_url": r.run_url,
        "conformance_missing": list(missing),
        "defects": list(defects),
        "owners": list(owners),  # who answers for it: the matrix's owners of its environment and SKU
        "frameworks_differ": list(r.frameworks_differ),
        "perf": [
            {"name": f.name, "value": f.value, "unit": f.unit, "devices": f.devices, "samples": f.samples}
            | {"spread": f.spread, "peak": f.peak, "fraction": f.fraction, "warning": f.warning}
            for f in r.perf
        ],
    }


def results(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.plan.codeowners import owners_words, run_owners
    from accelenv.plan.lock import lock_digests
    from accelenv.redact import one_line
    from accelenv.results.compare import regressions, stale
    from accelenv.results.judge import STATES, defects, maturity, missing_kinds, newest_per_group, nodes, proof, state
    from accelenv.results.record import read_records

    matrix = matrix_of(args)
    default = os.environ.get("ACCELENV_RESULTS") or str(repo_of(args) / "results")
    paths = [Path(p) for p in (args.paths or [default])]
    if not args.paths and not Path(default).is_dir():
        raise UsageError(f"{default}: no results folder; run an environment's session first, or name record files")
    now = time.time()
    records, refused = read_records(paths, matrix, now=now)
    baseline, refused_baseline = read_records([Path(p) for p in args.baseline or []], matrix, now=now)
    refused += refused_baseline
    found = regressions(records, tolerance=args.tolerance, baseline=baseline)
    regressed = frozenset(g.record for g in found)
    locks = lock_digests(repo_of(args), matrix)
    window = args.stale_after
    old = stale(matrix, records, days=window / 86400, now=now) if window is not None else []
    machines = nodes(records, now=now, silent_after=window)
    silent = [n for n in machines if n.silent]
    tiers = maturity(matrix, records, locks=locks, regressed=regressed, now=now)
    pairs = proof(matrix, records, locks=locks, regressed=regressed, now=now)
    words = {r.id: state(r, regressed) for r in records}
    open_failures = [r for r in newest_per_group(records) if words[r.id] in ("failed", "incomplete")]
    if args.merge:
        from accelenv.results.merge import merge_into

        merge_into(Path(args.merge), records)
    counts = {w: sum(1 for r in records if words[r.id] == w) for w in STATES}
    if args.json:
        dump_json(
            {
                "records": [
                    _record_json(r, words[r.id], missing_kinds(matrix, r), defects(r), run_owners(matrix, r.env, r.sku))
                    for r in records
                ],
                "counts": counts,
                "refused": [{"path": r.path, "reason": r.reason} for r in refused],
                "regressions": [g.as_json() | {"owners": list(run_owners(matrix, g.env, g.sku))} for g in found],
                "failing": [r.id for r in open_failures],
                "proof": [
                    {"sku": p.sku, "env": p.env, "word": p.word, "detail": p.detail, "record": p.record.id}
                    for p in pairs.values()
                ],
                "stale": [s.as_json() | {"ci_unschedulable": matrix.envs[s.env].ci_unschedulable} for s in old],
                "nodes": [
                    {
                        "name": n.name,
                        "last_job": n.last.id,
                        "last_job_state": words[n.last.id],
                        "last_job_finished": n.last.data["finished"],
                        "last_pass": n.last_pass.id if n.last_pass else None,
                        "verdicts": dict(n.verdicts),
                        "silent": n.silent,
                    }
                    for n in machines
                ],
                "maturity": [
                    {"family": t.family, "tier": t.tier, "claimed": t.claimed, "why": t.why, "records": list(t.records)}
                    for t in tiers
                ],
                "tolerance": args.tolerance,
                "baseline": len(baseline),
            },
            out,
        )
    else:
        _text(matrix, out, records, words)
        for bad in refused:
            out.write(f"refused {one_line(bad.path)}: {one_line(bad.reason)}\n")  # a file name cannot forge a line
        for g in found:
            who = owners_words(run_owners(matrix, g.env, g.sku), matrix.envs[g.env].family)
            out.write(_regression_line(g, args.tolerance).rstrip("\n") + f"; owners: {who}\n")
        for s in old:
            ci = matrix.envs[s.env].ci_unschedulable
            out.write(
                f"stale {s.env} on {s.sku}: last passing record {_day(s.last_pass)}"
                f"{' (' + s.record + ')' if s.record else ''}, older than {window / 86400:g} day(s)"
                f"{'; not scheduled in CI: ' + ci if ci else ''}\n"
            )
        for n in silent:
            out.write(f"silent node {n.name}: last record {n.last.id} finished {_day(n.last.finished)}\n")
        for p in pairs.values():
            out.write(f"{p.sku} x {p.env}: {p.word}{': ' + p.detail if p.detail else ''} ({p.record.id})\n")
        for t in tiers:
            behind = f" ({', '.join(t.records[:3])}{' ...' if len(t.records) > 3 else ''})" if t.records else ""
            out.write(f"maturity {t.family}: {t.tier} (claimed {t.claimed}): {t.why}{behind}\n")
        summary = ", ".join(f"{n} {w}" for w, n in counts.items() if n) or "none"
        out.write(
            f"{len(records)} record(s): {summary}; {len(refused)} refused, {len(found)} regression(s)"
            + (f", {len(old)} stale, {len(silent)} silent node(s)" if window is not None else "")
            + (f"; merged into {args.merge}" if args.merge else "")
            + "\n"
        )
    return 1 if refused or found or open_failures or old or silent else 0


def _text(matrix: Matrix, out: TextIO, records: list[Record], words: Mapping[str, str]) -> None:
    from accelenv.plan.codeowners import owners_words, run_owners
    from accelenv.results.judge import defects, missing_kinds

    rows = [
        [
            r.id,
            words[r.id],
            r.sku or "-",
            f"{r.device_count}x{r.nodes}",
            r.verdict,
            r.runner or "-",
            _day(r.finished),
            ", ".join(f"{f.name} {f.value:.3g} {f.unit}" for f in r.perf) or "-",
        ]
        for r in records
    ]
    table(rows, ["record", "state", "sku", "devices x nodes", "check", "runner", "finished", "perf"], out)
    for r in records:
        if r.note and words[r.id] != "passed":
            out.write(f"{r.id}: {words[r.id]}: {r.note}\n")
        for defect in defects(r):
            out.write(f"{r.id}: failed on a known upstream defect: {defect}\n")
        if words[r.id] in FAILING:
            out.write(f"{r.id}: {words[r.id]}: owners: {owners_words(run_owners(matrix, r.env, r.sku), r.family)}\n")
        missing = missing_kinds(matrix, r)
        if words[r.id] == "passed" and missing:
            out.write(f"{r.id}: smoke only: the conformance tests {', '.join(missing)} did not run and pass\n")
        if r.frameworks_differ:
            out.write(f"{r.id}: installed framework differs from the pins: {'; '.join(r.frameworks_differ)}\n")


def _regression_line(g: Any, tolerance: float) -> str:
    where = f"{g.env} on {g.sku or '?'} ({g.devices} device(s) x {g.nodes} node(s))"
    beneath = f"; changed beneath it: {'; '.join(g.changes)}" if g.changes else ""
    if g.kind == "vanished":
        return (
            f"vanished {where}: {g.figure} is missing from {g.record}; the {g.against} had "
            f"{g.baseline:.4g} {g.unit} over {g.earlier} run(s){beneath}\n"
        )
    return (
        f"regression {where}: {g.figure} {g.value:.4g} {g.unit} in {g.record}, {g.drop:.0%} below the "
        f"{g.against} {g.baseline:.4g} {g.unit} of {g.earlier} run(s) (tolerance {tolerance:.0%}, "
        f"spread {g.noise:.0%}){beneath}\n"
    )


COMMANDS = {
    "results": Command(
        epilog="examples:\n  accelenv results                               # ./results (or $ACCELENV_RESULTS)\n"
        "  accelenv results artifacts/ --merge results/     # CI artifacts, merged into one folder\n"
        "  accelenv results --baseline release-1.4/ --json  # also against a release's records\n"
        "  accelenv results --stale-after 7d               # unproven pairs and silent nodes this week\n\n"
        "Records are untrusted: one that is truncated, does not match schema/result.schema.json, names an\n"
        "environment or SKU the matrix lacks, ends in the future, or whose outcome its own tests, check\n"
        "verdict or device count contradict is refused and named. Each record has one state: passed, failed,\n"
        "not proven (hardware absent, skipped as asked), incomplete (the run died or was cancelled), regressed.\n"
        "Exit status 1 when a record is refused, a figure regressed or vanished, the newest run of a group\n"
        "failed or is incomplete, or (with --stale-after) something is stale or silent. docs/results.md has\n"
        "the rules.",
        arguments=results_arguments,
        run=results,
    ),
}
