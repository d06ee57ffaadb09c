"""Commands that generate files from the matrix: lock, render, report, ci."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from accelenv.cli.common import Command, matrix_of, repo_of, seconds, sync_file
from accelenv.cli.output import dump_json
from accelenv.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from accelenv.matrix.model import Environment, Matrix


# ---------------------------------------------------------------------------------------------------- render


def render_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if any generated file is out of date")


def render(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.plan.render import apply, generated_files, render_plan

    matrix = matrix_of(args)
    repo = repo_of(args)
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


# ---------------------------------------------------------------------------------------------------- lock


def lock_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("envs", nargs="*", metavar="ENV", help="environments (default: all)")
    p.add_argument("--check", action="store_true", help="exit 1 if a lock no longer matches the matrix (offline)")
    p.add_argument("--require-all", action="store_true", help="with --check: an unlocked environment fails too")
    p.add_argument("--force", action="store_true", help="resolve again even when the lock is current")
    p.add_argument("--timeout", type=seconds, default=900.0, metavar="S", help="per resolution (default %(default)gs)")
    p.add_argument("--json", action="store_true", help="print one result per environment as JSON")


def lock(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.matrix.resolve import get_env

    matrix = matrix_of(args)
    envs = [get_env(matrix, e) for e in args.envs] if args.envs else list(matrix.envs.values())
    if args.check:
        return _lock_check(args, matrix, envs, out)
    from accelenv.fileio import write_atomic
    from accelenv.plan.lock import LockState, glibc_of, lock_path, lock_state, resolve

    repo = repo_of(args)
    rows: list[dict[str, Any]] = []
    failed = 0
    for env in envs:
        glibc = glibc_of(matrix, env)
        if lock_state(repo, env, glibc) is LockState.CURRENT and not args.force:
            rows.append({"env": env.id, "state": "current", "problem": None})
            if not args.json:
                out.write(f"{env.id:<24} current (use --force to resolve again)\n")
            continue
        if not args.json:
            out.write(f"{env.id:<24} resolving for {', '.join(env.platforms)} ...\n")
            out.flush()
        result = resolve(env, glibc=glibc, timeout=args.timeout)
        if result.text is None:
            failed += 1
            rows.append({"env": env.id, "state": str(lock_state(repo, env, glibc)), "problem": result.problem})
            if not args.json:
                out.write(f"{env.id:<24} not locked: {result.problem}\n")
            continue
        write_atomic(lock_path(repo, env.id), result.text, inside=repo)
        rows.append({"env": env.id, "state": "current", "problem": None})
        if not args.json:
            pins = sum(1 for line in result.text.splitlines() if "==" in line and not line.startswith((" ", "#")))
            out.write(f"{env.id:<24} locked: {pins} distributions -> {lock_path(repo, env.id).relative_to(repo)}\n")
    if args.json:
        dump_json(rows, out)
    return 1 if failed else 0


def _lock_check(args: argparse.Namespace, matrix: Matrix, envs: list[Environment], out: TextIO) -> int:
    from accelenv.plan.lock import LockState, glibc_of, lock_path, lock_state

    repo = repo_of(args)
    rows = [
        {
            "env": env.id,
            "state": str(lock_state(repo, env, glibc_of(matrix, env))),
            "path": str(lock_path(repo, env.id).relative_to(repo)),
        }
        for env in envs
    ]
    stale = [r for r in rows if r["state"] == LockState.STALE]
    unlocked = [r for r in rows if r["state"] == LockState.UNLOCKED]
    if args.json:
        dump_json(rows, out)
    else:
        hint = {"unlocked": "  (no lock)"}
        for r in rows:
            extra = f"  (the matrix changed: run accelenv lock {r['env']})" if r["state"] == "stale" else ""
            out.write(f"{r['env']:<24} {r['state']}{extra or hint.get(r['state'], '')}\n")
        out.write(f"{len(rows) - len(stale) - len(unlocked)} current, {len(stale)} stale, {len(unlocked)} unlocked\n")
    return 1 if stale or (args.require_all and unlocked) else 0


# ---------------------------------------------------------------------------------------------------- report


def report_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", choices=("md", "html"), default="md")
    p.add_argument("-o", "--output", metavar="PATH", help="write here (default: standard output)")
    p.add_argument("--check", action="store_true", help="with -o: write nothing; exit 1 if the file is out of date")


def report(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.plan.report import html_page, markdown

    matrix = matrix_of(args)
    text = markdown(matrix) if args.format == "md" else html_page(matrix)
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
    from accelenv.plan.ci import buildkite, github, jobs

    matrix = matrix_of(args)
    previous = load_matrix(Path(args.base_matrix), use_cache=False) if args.base_matrix else None
    rows = jobs(matrix, tier=CiTier(args.tier), changed=args.changed, previous=previous)
    out.write(github(rows) if args.format == "github" else buildkite(rows))
    return 0


COMMANDS = {
    "lock": Command(
        epilog="examples:\n  accelenv lock                      # every environment whose lock is missing or stale\n"
        "  accelenv lock cpu-py311 --force\n  accelenv lock --check              # CI: no lock is stale (offline)\n\n"
        "Only the resolver writes a lock. An environment whose index cannot be reached stays unlocked, and\n"
        "its nox session says so.",
        arguments=lock_arguments,
        run=lock,
    ),
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
        "  accelenv report --format html -o compatibility.html   # self-contained: pick a SKU, see why\n"
        "  accelenv report --format md -o docs/compatibility.md --check   # CI: exit 1 when it drifted",
        arguments=report_arguments,
        run=report,
    ),
}
