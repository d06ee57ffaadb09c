"""CI commands: `ci` (which jobs a run schedules, as GitHub JSON, a Buildkite pipeline or text), `collect` (the
judging job's step that keeps only the records its own run's jobs produced) and `hook` (the gate a node runs
before every job)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from accelenv.cli.common import Command, matrix_of, repo_of
from accelenv.errors import UsageError

if TYPE_CHECKING:
    import argparse


# ---------------------------------------------------------------------------------------------------- ci


def ci_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=("github", "buildkite", "text", "json"),
        default="github",
        help="github and json: the plan as JSON (strategy.matrix values, expected artifacts, what is not scheduled)",
    )
    p.add_argument("--json", action="store_const", const="json", dest="format", help="the same as --format json")
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
    p.add_argument(
        "--summary",
        metavar="PATH",
        help="append a Markdown summary (jobs, what is not scheduled and why) to PATH, e.g. $GITHUB_STEP_SUMMARY",
    )


def ci(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.matrix.load import load_matrix
    from accelenv.matrix.model import CiTier
    from accelenv.plan.ci import plan
    from accelenv.plan.ci_outputs import buildkite, github, not_scheduled_lines, summary, text
    from accelenv.plan.readiness import readiness

    matrix = matrix_of(args)
    previous = load_matrix(Path(args.base_matrix), use_cache=False) if args.base_matrix else None
    made = plan(
        matrix,
        tier=CiTier(args.tier),
        changed=args.changed,
        previous=previous,
        ready=readiness(matrix, repo_of(args)),
    )
    if args.format == "text":
        out.write(text(made))
    else:
        for line in [*not_scheduled_lines(made), *(f"note: {n}" for n in made.notes)]:
            sys.stderr.write(f"accelenv ci: {line}\n")  # stderr: stdout stays the document a workflow reads
        out.write(buildkite(made) if args.format == "buildkite" else github(made))
    if args.summary:  # appended, as GitHub's step summary file is written
        from accelenv.fileio import read_text_if_exists, write_atomic

        target = Path(args.summary)
        write_atomic(target, (read_text_if_exists(target, what="summary file") or "") + summary(made))
    if args.format != "text":  # text has them on stdout
        for error in made.errors:
            sys.stderr.write(f"accelenv ci: error: {error}\n")
    from accelenv.plugins import installed  # a family plugin that failed schedules nothing: say so, by name

    for failure in installed().failures:
        sys.stderr.write(f"accelenv ci: {failure.message()}\n")
    return 1 if made.errors else 0


# ---------------------------------------------------------------------------------------------------- collect


def collect_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("folder", metavar="ARTIFACTS", help="the run's downloaded artifacts, one folder per artifact")
    p.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="ARTIFACT=ENV",
        help="a session job of this run: its artifact and environment (repeatable; `accelenv ci` writes them)",
    )
    p.add_argument("--plan", metavar="PATH", help="the run's plan (`accelenv ci --format github` output)")
    p.add_argument(
        "--run",
        metavar="URL",
        help="this run's URL (default: from GITHUB_* or BUILDKITE_BUILD_URL); records of other runs are not counted",
    )
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="copy the records that count into DIR")


def collect(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.fileio import read_bytes, write_atomic
    from accelenv.host.run_url import build_url
    from accelenv.plan.ci_collect import collect as gather
    from accelenv.plan.ci_collect import expected_from_plan, parse_expected

    expected = parse_expected(args.expect)
    if args.plan:
        try:
            data = json.loads(read_bytes(Path(args.plan), what="CI plan"))
        except ValueError as error:
            raise UsageError(f"{args.plan}: not JSON ({error}); write it with `accelenv ci --format github`") from None
        expected += expected_from_plan(data, args.plan)
    run = args.run or build_url(os.environ)
    if not run:
        raise UsageError("this run's URL is unknown (no GITHUB_RUN_ID or BUILDKITE_BUILD_URL): pass --run URL")
    target = Path(args.output)
    if target.is_symlink() or (target.exists() and (not target.is_dir() or any(target.iterdir()))):
        raise UsageError(f"-o {target}: not a new or empty folder; collect writes only this run's records there")
    got = gather(Path(args.folder), expected, run=run)
    target.mkdir(parents=True, exist_ok=True)
    for artifact, name, text in got.accepted:
        (target / artifact).mkdir(exist_ok=True)
        write_atomic(target / artifact / name, text, inside=target)
    for name in got.ignored:
        out.write(f"ignored {name}: no job of this run uploads it\n")
    for problem in got.problems:
        out.write(f"{problem}\n")
    out.write(
        f"{len(got.accepted)} record(s) of {len(expected)} job(s) collected into {target}, "
        f"{len(got.problems)} problem(s)\n"
    )
    return 1 if got.problems else 0


# ---------------------------------------------------------------------------------------------------- hook


def hook_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", choices=("github", "buildkite"), required=True, help="the CI system that runs it")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="ENV",
        help="an environment this runner was registered for (GitHub; repeatable): the hook checks each",
    )
    p.add_argument(
        "--accelenv",
        metavar="COMMAND",
        help="the node's pinned accelenv, absolute paths (default: this one, `<its python> -m accelenv`)",
    )
    p.add_argument(
        "--matrix-path", metavar="PATH", help="the node's own matrix.toml (default: the one this command reads)"
    )
    p.add_argument("--root", metavar="DIR", help="check a captured host instead of the node (for testing a hook)")
    p.add_argument("-o", "--output", metavar="FILE", help="write the hook to FILE, executable (default: stdout)")


def hook(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.matrix.load import find_matrix
    from accelenv.plan.ci_hooks import hook as make_hook

    matrix = matrix_of(args)
    for env_id in args.env:
        if env_id not in matrix.envs:
            raise UsageError(f"--env {env_id!r}: not an environment of {matrix.path}")
    command = args.accelenv or f"{os.path.abspath(sys.executable)} -m accelenv"  # noqa: PTH100 - a venv's python is a symlink: keep it
    path = args.matrix_path or str(find_matrix(args.matrix).resolve())
    text = make_hook(args.system, accelenv=command, matrix=path, envs=args.env, root=args.root)
    if not args.output:
        out.write(text)
        return 0
    from accelenv.fileio import write_atomic

    target = Path(args.output)
    if args.system == "github" and target.suffix != ".sh":
        raise UsageError(f"{target}: GitHub runs a hook script only with its language's extension; name it *.sh")
    write_atomic(target, text)
    target.chmod(0o755)
    out.write(f"{target}: the {args.system} gate hook, checking with {command}\n")
    return 0


# ---------------------------------------------------------------------------------------------------- codeowners


def codeowners_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="FILE", help="put the section into FILE (e.g. .github/CODEOWNERS)")
    p.add_argument("--check", action="store_true", help="with -o: write nothing; exit 1 if the section is stale")


def codeowners(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.cli.common import sync_file
    from accelenv.fileio import read_text_if_exists
    from accelenv.plan.codeowners import replace_section, section

    text = section(matrix_of(args))
    if not args.output:
        if args.check:
            raise UsageError("--check needs -o FILE: the CODEOWNERS file to compare with")
        out.write(text)
        return 0
    target = Path(args.output)
    merged = replace_section(read_text_if_exists(target, what="CODEOWNERS") or "", text)
    stale = sync_file(target, merged, check=args.check, regenerate=f"accelenv codeowners -o {target}", out=out)
    return 1 if stale and args.check else 0


COMMANDS = {
    "ci": Command(
        epilog="examples:\n  accelenv ci --format github --tier pr\n"
        "  accelenv ci --format text --tier release       # what runs, what cannot and why\n"
        "  git show origin/main:matrix.toml > /tmp/base-matrix.toml   # the matrix before the change\n"
        "  git diff -z --name-only origin/main | xargs -0 printf -- '--changed=%s\\0' \\\n"
        "      | xargs -0 accelenv ci --format github --base-matrix /tmp/base-matrix.toml\n"
        "  accelenv ci --format buildkite --tier nightly | buildkite-agent pipeline upload\n\n"
        "Tiers nest: nightly includes the pr environments, release includes all. With --changed, only the\n"
        "environments the files affect; --base-matrix (matrix.toml as it was) narrows a matrix change to the\n"
        "environments whose resolved form changed, and the families whose SKUs changed. Exit status 1 when a\n"
        "default environment cannot be scheduled and the matrix does not say why (envs.ENV.ci_unschedulable).",
        arguments=ci_arguments,
        run=ci,
    ),
    "collect": Command(
        epilog="examples:\n  accelenv collect artifacts --plan plan.json -o collected\n"
        "  accelenv collect artifacts --expect accelenv-session-cpu-py311-amd64=cpu-py311 --run URL -o collected\n\n"
        "Keeps the records under ARTIFACTS/<artifact>/ of each expected job that name its environment and a job of\n"
        "this run; everything else is named and not counted. Exit status 1 when a record is not counted or a\n"
        "job left none.",
        arguments=collect_arguments,
        run=collect,
    ),
    "codeowners": Command(
        epilog="examples:\n  accelenv codeowners -o .github/CODEOWNERS\n"
        "  accelenv codeowners -o .github/CODEOWNERS --check   # CI: exit 1 when the section drifted\n\n"
        "Owners are GitHub users or teams in matrix.toml (families.F.owners, envs.E.owners, skus.S.owners);\n"
        "only those appear. The rest of the file is kept.",
        arguments=codeowners_arguments,
        run=codeowners,
    ),
    "hook": Command(
        epilog="examples:\n"
        "  accelenv hook --system github --env gpu-nvidia-cu132 -o /opt/accelenv/job-started.sh\n"
        "      # then ACTIONS_RUNNER_HOOK_JOB_STARTED=/opt/accelenv/job-started.sh in the runner's .env\n"
        "  accelenv hook --system buildkite -o /etc/buildkite-agent/hooks/pre-command\n\n"
        "Run it with the node's own accelenv (installed outside any checkout a job uses): the hook calls that one,\n"
        "by absolute path, with the node's matrix, in an emptied environment. A node that fails `accelenv check\n"
        "ENV --host-only` refuses the job with exit status 75 (docs/contributing-hardware.md).",
        arguments=hook_arguments,
        run=hook,
    ),
}
