"""Commands that generate files from the matrix: render, report, ci (and `lock`: `cli.lock`)."""

from __future__ import annotations

import sys
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


def _evidence(args: argparse.Namespace, matrix: Matrix, form: str) -> str:
    """The Evidence section from --results records, or "" without any (docs/compatibility.md has none)."""
    if not args.results:
        return ""
    from accelenv.plan.evidence import html_section, markdown_section
    from accelenv.results.record import read_records

    records, refused = read_records([Path(p) for p in args.results], matrix)
    if form == "md":
        return markdown_section(matrix, records, refused)
    return "\n".join(html_section(matrix, records, refused))


def report(args: argparse.Namespace, out: TextIO) -> int:
    matrix = matrix_of(args)
    if args.format == "md":
        from accelenv.plan.report import markdown

        text = markdown(matrix) + _evidence(args, matrix, "md")
    else:
        from accelenv.fileio import read_text
        from accelenv.matrix.load import find_matrix
        from accelenv.plan.lock import glibc_of, lock_state
        from accelenv.plan.page import html_page, page_data
        from accelenv.plan.start import image_blockers, stamp_of

        repo = repo_of(args)  # the page shows each environment's lock and what builds: read here, passed as data
        locks = {env.id: lock_state(repo, env, glibc_of(matrix, env)) for env in matrix.envs.values()}
        images = image_blockers(repo, matrix)
        if args.format == "html":
            path = find_matrix(args.matrix)
            stamp = stamp_of(path, read_text(path, what="matrix"))
            section = _evidence(args, matrix, "html")
            text = html_page(
                matrix,
                locks=locks,
                repository=args.repository,
                images=images,
                stamp=stamp,
                evidence=section.splitlines() or None,
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


# ---------------------------------------------------------------------------------------------------- ci


def ci_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("github", "buildkite"), default="github")
    p.add_argument("--tier", choices=("pr", "nightly", "release"), default="pr")
    p.add_argument(
        "--changed",
        nargs="*",
        action="extend",
        metavar="FILE",
        help="changed files (repository-relative); repeatable: --changed=FILE keeps a name that starts with -",
    )
    p.add_argument(
        "--base-matrix", metavar="PATH", help="the matrix before the change (e.g. git show main:matrix.toml)"
    )


def ci(args: argparse.Namespace, out: TextIO) -> int:

    from accelenv.matrix.load import load_matrix
    from accelenv.matrix.model import CiTier
    from accelenv.plan.ci import buildkite, github, jobs, not_scheduled
    from accelenv.plan.readiness import blockers, platform_blockers

    matrix = matrix_of(args)
    previous = load_matrix(Path(args.base_matrix), use_cache=False) if args.base_matrix else None
    blocked = blockers(matrix, repo_of(args))
    per_platform = platform_blockers(matrix, repo_of(args), blocked)
    tier = CiTier(args.tier)
    rows = jobs(
        matrix, tier=tier, changed=args.changed, previous=previous, blocked=blocked, blocked_platforms=per_platform
    )
    skipped = not_scheduled(
        matrix, tier=tier, changed=args.changed, previous=previous, blocked=blocked, blocked_platforms=per_platform
    )
    for env_id, why in skipped:  # stderr: stdout stays the document a workflow reads
        sys.stderr.write(f"accelenv ci: {env_id} not scheduled: {why}\n")
    from accelenv.plugins import installed  # a family plugin that failed schedules nothing: say so, by name

    for failure in installed().failures:
        sys.stderr.write(f"accelenv ci: {failure.message()}\n")
    out.write(github(rows) if args.format == "github" else buildkite(rows, skipped))
    return 0


COMMANDS = {
    "render": Command(
        epilog="examples:\n  accelenv render\n  accelenv render --check   # CI: exit 1 listing every out-of-date file",
        arguments=render_arguments,
        run=render,
    ),
    "ci": Command(
        epilog="examples:\n  accelenv ci --format github --tier pr\n"
        "  git show origin/main:matrix.toml > /tmp/base-matrix.toml   # the matrix before the change\n"
        "  git diff -z --name-only origin/main | xargs -0 printf -- '--changed=%s\\0' \\\n"
        "      | xargs -0 accelenv ci --format github --base-matrix /tmp/base-matrix.toml\n"
        "  accelenv ci --format buildkite --tier nightly | buildkite-agent pipeline upload\n\n"
        "Tiers nest: nightly includes the pr environments, release includes all. With --changed, only the\n"
        "environments the files affect; --base-matrix (matrix.toml as it was) narrows a matrix change to the\n"
        "environments whose resolved form changed.",
        arguments=ci_arguments,
        run=ci,
    ),
    "report": Command(
        epilog="examples:\n  accelenv report --format md -o docs/compatibility.md\n"
        "  accelenv report --format html -o compatibility.html   # one offline page: grid, search, details\n"
        "  accelenv report --format json                          # the page's data: cells, reasons, locks\n"
        "  accelenv report --format md -o docs/compatibility.md --check   # CI: exit 1 when it drifted",
        arguments=report_arguments,
        run=report,
    ),
}
