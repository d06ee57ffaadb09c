"""Commands that generate files from the matrix: render, report (and `lock`: `cli.lock`; `ci`: `cli.ci`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from accelenv.cli.common import Command, matrix_of, repo_of, sync_file
from accelenv.cli.output import dump_json
from accelenv.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from accelenv.matrix.model import Matrix


# ---------------------------------------------------------------------------------------------------- render


def render_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if any generated file is out of date")


def render(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.plan.render import apply, generated_files, render_plan

    matrix = matrix_of(args)
    repo = repo_of(args)
    if not args.check:
        from accelenv.changeset import refuse_if_pending

        refuse_if_pending(repo)  # an interrupted refresh is finished or undone first
    result = apply(repo, render_plan(matrix, generated_files(repo)), check=args.check)
    if args.check:
        for rel in result.out_of_date:
            out.write(f"{rel}: out of date\n")
        if result.out_of_date:
            out.write(f"{len(result.out_of_date)} generated file(s) out of date; run `accelenv render` and commit\n")
            return 1
        out.write(f"{len(result.unchanged)} generated file(s) up to date\n")
        return 0
    for rel in result.written:
        out.write(f"{rel}: written\n")
    for rel in result.removed:
        out.write(f"{rel}: removed (its environment is gone)\n")
    out.write(f"{len(result.written)} written, {len(result.unchanged)} unchanged, {len(result.removed)} removed\n")
    return 0


# ---------------------------------------------------------------------------------------------------- report


def report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("md", "html", "json"), default="md")
    p.add_argument("-o", "--output", metavar="PATH", help="write here (default: standard output)")
    p.add_argument("--check", action="store_true", help="with -o: write nothing; exit 1 if the file is out of date")
    p.add_argument(
        "--repository", default="accelenv", help="image repository in the page's tags (default: %(default)s)"
    )
    p.add_argument(
        "--results",
        action="append",
        metavar="PATH",
        help="add an Evidence section from conformance result records (a file or folder; repeatable)",
    )
    p.add_argument(
        "--cluster",
        action="append",
        metavar="FILE",
        help="with --format html: draw a Ray cluster on the page from what `accelenv check ENV --ray --json` "
        "wrote (repeatable, one cluster each)",
    )


def _evidence(args: argparse.Namespace, matrix: Matrix, form: str) -> tuple[str, dict[str, str]]:
    """The Evidence section from --results records and each family's earned maturity, or ("", {}) without
    any records named (docs/compatibility.md has none)."""
    if not args.results:
        return "", {}
    import time

    from accelenv.plan.evidence import html_section, markdown_section
    from accelenv.plan.lock import lock_digests
    from accelenv.results.compare import regressions
    from accelenv.results.judge import maturity
    from accelenv.results.record import read_records

    now = time.time()
    records, refused = read_records([Path(p) for p in args.results], matrix, now=now)
    locks = lock_digests(repo_of(args), matrix)
    regressed = frozenset(g.record for g in regressions(records))
    tiers = {t.family: t.tier for t in maturity(matrix, records, locks=locks, regressed=regressed, now=now)}
    if form == "md":
        return markdown_section(matrix, records, refused, locks=locks, regressed=regressed, now=now), tiers
    from accelenv.plan.recipes import html_section as transports_section

    section = html_section(matrix, records, refused, locks=locks, regressed=regressed, now=now)
    return "\n".join(section + transports_section(matrix, records)), tiers


def _clusters(args: argparse.Namespace, matrix: Matrix) -> list[str]:
    """The page's cluster drawings, one a --cluster file: each the JSON `check ENV --ray --json` writes
    ({"env", "cluster", "nodes"}), checked for that shape; what the nodes said is escaped by the view."""
    import json

    from accelenv.cluster.view import cluster_section
    from accelenv.fileio import read_text

    drawn: list[str] = []
    for name in args.cluster or []:
        text = read_text(Path(name), what="cluster answer (check --ray --json)")
        try:
            data = json.loads(text)
        except ValueError as error:
            raise UsageError(f"{name}: not JSON ({error}); give what `accelenv check ENV --ray --json` wrote") from None
        if not isinstance(data, dict):
            raise UsageError(f"{name}: expected an object with env, cluster and nodes, as `check --ray --json` writes")
        env, cluster, nodes = data.get("env"), data.get("cluster"), data.get("nodes")
        if not isinstance(env, str) or env not in matrix.envs:
            raise UsageError(f"{name}: env: {env!r} is not an environment of the matrix; give `check ENV --ray --json`")
        if not isinstance(cluster, dict):
            raise UsageError(
                f"{name}: cluster: expected an object (check --ray's summary), got {type(cluster).__name__}"
            )
        if not isinstance(nodes, list) or not all(isinstance(n, dict) for n in nodes):
            bad = (
                ""
                if not isinstance(nodes, list)
                else f"[{next(i for i, n in enumerate(nodes) if not isinstance(n, dict))}]"
            )
            raise UsageError(f"{name}: nodes{bad}: expected a list of node objects, as `check --ray --json` writes")
        drawn.append(f'<div id="cluster-{len(drawn)}" class="cluster">{cluster_section(env, cluster, nodes)}</div>')
    return drawn


def report(args: argparse.Namespace, out: TextIO) -> int:
    matrix = matrix_of(args)
    if args.cluster and args.format != "html":
        raise UsageError("--cluster draws a Ray cluster on the HTML page: give --format html")
    if args.format == "md":
        from accelenv.plan.report import markdown

        text = markdown(matrix) + _evidence(args, matrix, "md")[0]
    else:
        from accelenv.build.readiness import image_blockers
        from accelenv.fileio import read_text
        from accelenv.matrix.load import find_matrix
        from accelenv.plan.lock import glibc_of, lock_state
        from accelenv.plan.page import html_page, page_data
        from accelenv.plan.start import stamp_of

        repo = repo_of(args)  # the page shows each environment's lock and what builds: read here, passed as data
        locks = {env.id: lock_state(repo, env, glibc_of(matrix, env)) for env in matrix.envs.values()}
        images = image_blockers(repo, matrix)
        if args.format == "html":
            path = find_matrix(args.matrix)
            stamp = stamp_of(path, read_text(path, what="matrix"))
            section, tiers = _evidence(args, matrix, "html")
            text = html_page(
                matrix,
                locks=locks,
                repository=args.repository,
                images=images,
                stamp=stamp,
                evidence=section.splitlines() or None,
                tiers=tiers,
                clusters=_clusters(args, matrix),
            )
        else:
            import io

            buffer = io.StringIO()
            dump_json(page_data(matrix, locks, images), buffer)
            text = buffer.getvalue()
    if not args.output:
        if args.check:
            raise UsageError("--check needs -o PATH: the committed file to compare with")
        out.write(text)
        return 0
    target = Path(args.output)
    regenerate = f"accelenv report --format {args.format} -o {target}"
    stale = sync_file(target, text, check=args.check, regenerate=regenerate, out=out)
    return 1 if stale and args.check else 0


COMMANDS = {
    "render": Command(
        epilog="examples:\n  accelenv render\n  accelenv render --check   # CI: exit 1 listing every out-of-date file",
        arguments=render_arguments,
        run=render,
    ),
    "report": Command(
        epilog="examples:\n  accelenv report --format md -o docs/compatibility.md\n"
        "  accelenv report --format html -o compatibility.html   # one offline page: grid, search, details\n"
        "  accelenv report --format json                          # the page's data: cells, reasons, locks\n"
        "  accelenv report --format html --results merged --cluster ray.json -o page/index.html\n"
        "  accelenv report --format md -o docs/compatibility.md --check   # CI: exit 1 when it drifted",
        arguments=report_arguments,
        run=report,
    ),
}
