"""`accelenv results`: read conformance result records (a folder, CI artifacts), merge them, compare each SKU x
environment's newest run with its earlier ones, and name what no passing record has proven lately."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from accelenv.cli.common import Command, days, fraction, matrix_of, repo_of
from accelenv.cli.output import dump_json, table
from accelenv.errors import UsageError

if TYPE_CHECKING:
    import argparse


def results_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="record files or folders searched for *.result.json (default: $ACCELENV_RESULTS or ./results)",
    )
    p.add_argument("--merge", metavar="DIR", help="write every accepted record into DIR (one file per record id)")
    p.add_argument(
        "--tolerance",
        type=fraction,
        default=0.10,
        metavar="F",
        help="a figure more than F below the median of earlier runs is a regression (default %(default)g)",
    )
    p.add_argument(
        "--stale-after",
        type=days,
        metavar="N",
        help="name the default environments' SKUs with no passing record newer than N days (exit 1 if any)",
    )
    p.add_argument("--json", action="store_true", help="print records, refused files, regressions, stale as JSON")


def _day(epoch: int | None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch)) if epoch is not None else "never"


def results(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.host.redact import one_line
    from accelenv.results.compare import regressions, stale
    from accelenv.results.record import read_records

    matrix = matrix_of(args)
    default = os.environ.get("ACCELENV_RESULTS") or str(repo_of(args) / "results")
    paths = [Path(p) for p in (args.paths or [default])]
    if not args.paths and not Path(default).is_dir():
        raise UsageError(f"{default}: no results folder; run an environment's session first, or name record files")
    now = time.time()
    records, refused = read_records(paths, matrix, now=now)
    found = regressions(records, tolerance=args.tolerance)
    old = stale(matrix, records, days=args.stale_after, now=now) if args.stale_after is not None else []
    if args.merge:
        from accelenv.results.merge import merge_into

        merge_into(Path(args.merge), records)
    if args.json:
        dump_json(
            {
                "records": [
                    {
                        "id": r.id,
                        "path": r.path,
                        "env": r.env,
                        "sku": r.sku,
                        "outcome": r.outcome,
                        "verdict": r.verdict,
                        "driver": r.driver,
                        "finished": r.data["finished"],
                        "run_url": r.run_url,
                        "frameworks_differ": list(r.frameworks_differ),
                        "perf": r.data["perf"],
                    }
                    for r in records
                ],
                "refused": [{"path": r.path, "reason": r.reason} for r in refused],
                "regressions": [r.as_json() for r in found],
                "stale": [s.as_json() for s in old],
                "tolerance": args.tolerance,
            },
            out,
        )
    else:
        rows = [
            [
                r.id,
                r.sku or "?",
                r.outcome,
                r.verdict,
                r.driver or "-",
                _day(r.finished),
                ", ".join(f"{f.name} {f.value:.3g} {f.unit}" for f in r.perf) or "-",
            ]
            for r in records
        ]
        table(rows, ["record", "sku", "outcome", "check", "driver", "date", "perf"], out)
        for r in records:
            if r.frameworks_differ:
                out.write(f"{r.id}: installed framework differs from the pins: {'; '.join(r.frameworks_differ)}\n")
        for bad in refused:
            out.write(f"refused {one_line(bad.path)}: {one_line(bad.reason)}\n")  # a file name cannot forge a line
        for g in found:
            out.write(
                f"regression {g.env} on {g.sku or '?'}: {g.figure} {g.value:.4g} {g.unit} in {g.record}, "
                f"{g.drop:.0%} below the median {g.baseline:.4g} {g.unit} of {g.earlier} earlier run(s) "
                f"(tolerance {args.tolerance:.0%})\n"
            )
        for s in old:
            out.write(
                f"stale {s.env} on {s.sku}: last passing record {_day(s.last_pass)}"
                f"{' (' + s.record + ')' if s.record else ''}, older than {args.stale_after:g} day(s)\n"
            )
        out.write(
            f"{len(records)} record(s), {len(refused)} refused, {len(found)} regression(s)"
            + (f", {len(old)} stale" if args.stale_after is not None else "")
            + (f"; merged into {args.merge}" if args.merge else "")
            + "\n"
        )
    return 1 if refused or found or old else 0


COMMANDS = {
    "results": Command(
        epilog="examples:\n  accelenv results                               # ./results (or $ACCELENV_RESULTS)\n"
        "  accelenv results artifacts/ --merge results/     # CI artifacts, merged into one folder\n"
        "  accelenv results --tolerance 0.05 --json\n"
        "  accelenv results --stale-after 7                # default envs' SKUs nothing proved this week\n\n"
        "Records are untrusted: one that is truncated, does not match schema/result.schema.json, names an\n"
        "environment or SKU the matrix lacks, or ends in the future is refused and named. Exit status 1\n"
        "when a record is refused, a figure regressed, or (with --stale-after) something is stale.",
        arguments=results_arguments,
        run=results,
    ),
}
