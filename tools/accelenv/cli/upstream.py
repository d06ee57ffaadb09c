"""Commands that ask upstream: outdated (package indexes) and pin (container registries)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TextIO

from accelenv.cli.common import Command, matrix_of, seconds
from accelenv.cli.output import dump_json
from accelenv.errors import AccelenvError, UsageError
from accelenv.matrix.load import find_matrix

if TYPE_CHECKING:
    import argparse
    from pathlib import Path


# ---------------------------------------------------------------------------------------------------- outdated


def outdated_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", action="append", metavar="ENV", help="only this environment (repeatable)")
    p.add_argument("--prereleases", action="store_true", help="also report pre-releases")
    p.add_argument("--format", choices=("table", "github"), default="table")
    p.add_argument("--json", action="store_true", help="findings and problems as JSON")


def outdated(args: argparse.Namespace, out: TextIO) -> int:
    import os

    from accelenv import netio
    from accelenv.upstream.outdated import as_json, render_github, render_table
    from accelenv.upstream.settings import read_index_settings
    from accelenv.upstream.survey import check_matrix

    matrix = matrix_of(args)
    settings = read_index_settings(os.environ)
    with netio.session() as session:
        found, problems = check_matrix(
            matrix, session, envs=args.env or None, prereleases=args.prereleases, settings=settings
        )
    if args.json:
        out.write(as_json(found, problems, settings=settings))
    elif args.format == "github":
        out.write(render_github(found, problems))
    else:
        if settings.main or settings.extra:
            out.write(f"indexes: {settings.origin} ({settings.strategy})\n")
        out.write(render_table(found, problems))
    return 1 if problems else 0


# ---------------------------------------------------------------------------------------------------- pin


def pin_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runtimes", nargs="*", metavar="RUNTIME", help="runtimes whose base images to pin (default: all)")
    p.add_argument("--check", action="store_true", help="write nothing; report unpinned images and moved tags")
    p.add_argument("--refresh", action="store_true", help="ask again for images that already have a digest")
    p.add_argument("--json", action="store_true", help="print one result per image as JSON")


def pin(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv import changeset, netio
    from accelenv.upstream.pin import pin as pin_images

    matrix = matrix_of(args)
    path = find_matrix(args.matrix)
    if not args.check:
        changeset.refuse_if_pending(path.parent)  # it writes matrix.toml: an interrupted refresh comes first
    unknown = [r for r in args.runtimes if r not in matrix.runtimes]
    if unknown:
        raise UsageError(f"no runtime {', '.join(unknown)}; runtimes are: {', '.join(matrix.runtimes)}")
    with netio.session() as session:
        try:
            results = pin_images(matrix, path, session, runtimes=args.runtimes, check=args.check, refresh=args.refresh)
        except ValueError as error:
            raise AccelenvError(str(error)) from error
    if args.json:
        dump_json([r.as_json() for r in results], out)
    else:
        for r in results:
            out.write(f"{r.runtime:<16} {r.os:<12} {r.state:<9} {r.image}: {r.message}\n")
        counts = {
            s: sum(1 for r in results if r.state == s) for s in ("pinned", "unchanged", "moved", "unpinned", "error")
        }
        out.write(", ".join(f"{n} {s}" for s, n in counts.items()) + "\n")
    failing = {"error", "moved"} | ({"unpinned"} if args.check else set())
    return 1 if any(r.state in failing for r in results) else 0


# ---------------------------------------------------------------------------------------------------- refresh


def refresh_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", action="append", metavar="ENV", help="only this environment (repeatable)")
    p.add_argument("--dry-run", action="store_true", help="print the summary and the diff; write nothing")
    p.add_argument("--no-lock", action="store_true", help="write the matrix and render, but resolve no lock")
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="as accelenv lock --no-verify: the new locks' hashes as the indexes advertise them, unchecked (and "
        "their headers say so)",
    )
    p.add_argument("-o", "--summary", metavar="FILE", help="also write the summary (Markdown) to FILE")
    p.add_argument(
        "--timeout", type=seconds, default=900.0, metavar="S", help="per lock resolution (default %(default)gs)"
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a source could not be checked (after writing what could be), so a scheduled job fails",
    )
    finish = p.add_mutually_exclusive_group()
    finish.add_argument(
        "--resume", action="store_true", help="finish a refresh that was interrupted while writing its files"
    )
    finish.add_argument(
        "--undo", action="store_true", help="put back the files an interrupted refresh had started to write"
    )


def refresh(args: argparse.Namespace, out: TextIO) -> int:
    import os

    from accelenv import changeset, netio
    from accelenv.fileio import read_text
    from accelenv.matrix.edit import diff
    from accelenv.matrix.load import load_matrix
    from accelenv.plan.render import refresh_targets
    from accelenv.upstream.indexes import IndexClient
    from accelenv.upstream.refresh import TpuLine, plan_refresh, summary_markdown, tpu_line
    from accelenv.upstream.settings import read_index_settings
    from accelenv.upstream.survey import check_matrix

    path = find_matrix(args.matrix)
    if args.resume or args.undo:
        how: Literal["resume", "undo"] = "resume" if args.resume else "undo"
        done = changeset.finish(path.parent, how, allowed=refresh_targets(path.name))
        verb = "finished" if args.resume else "undone"
        out.write(f"refresh {verb}: {len(done)} file(s) written\n" + "".join(f"  {rel}\n" for rel in done))
        return 0
    if not args.dry_run:
        changeset.refuse_if_pending(path.parent)
    text = read_text(path, what="matrix")
    matrix = load_matrix(path, use_cache=False)
    settings = read_index_settings(os.environ)
    with netio.session() as session:
        found, problems = check_matrix(matrix, session, envs=args.env or None, settings=settings)
        client = IndexClient(session)
        lines: dict[str, TpuLine] = {}
        for f in found:
            if f.kind == "runtime" and f.name == "jax" and not f.held:
                line = tpu_line(client, f.latest)
                if isinstance(line, TpuLine):
                    lines[f.env] = line
                else:
                    out.write(f"{f.env}: jax {f.latest} left out: {line}\n")
    plan = plan_refresh(text, matrix, found, problems, tpu_lines=lines)
    if args.dry_run or plan.empty:
        summary = summary_markdown(plan)
        out.write(summary)
        if plan.changes:
            out.write("\n" + diff(text, plan.text, path.name))
        _write_summary(args, summary)
        return 1 if args.strict and problems else 0
    locked: list[tuple[str, str]] = []
    unlocked: dict[str, str] = {}
    if not args.no_lock:
        locked, unlocked = _relock(plan.text, path, plan.envs, args.timeout, verify=not args.no_verify)
        if unlocked:  # leave those environments' changes out, and lock again what remains
            plan = plan_refresh(text, matrix, found, problems, tpu_lines=lines, exclude_envs=set(unlocked))
            locked, more = _relock(plan.text, path, plan.envs, args.timeout, verify=not args.no_verify)
            unlocked.update(more)
    if plan.changes:
        _write_all(path, text, plan.text, locked)
    summary = summary_markdown(plan, locked=[e for e, _ in locked], unlocked=unlocked)
    out.write(summary)
    _write_summary(args, summary)
    return 1 if args.strict and problems else 0


def _write_summary(args: argparse.Namespace, summary: str) -> None:
    if args.summary:
        from pathlib import Path

        from accelenv.fileio import write_atomic
        from accelenv.redact import redact_text

        write_atomic(Path(args.summary), redact_text(summary))  # the weekly workflow posts it as a PR body


def _relock(
    text: str, path: Path, envs: tuple[str, ...], timeout: float, *, verify: bool
) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Resolve the locks of `envs` as the new matrix text declares them, every file they name checked unless
    `verify` is false: (env, lock text) that resolved, and env -> why for those that did not. Nothing is written
    here."""
    import sys

    from accelenv.matrix.load import model_from_text
    from accelenv.plan.digests import Verifier
    from accelenv.plan.lock import glibc_of
    from accelenv.plan.resolver import resolve

    matrix = model_from_text(text, str(path))
    locked: list[tuple[str, str]] = []
    unlocked: dict[str, str] = {}
    for env_id in envs:
        env = matrix.envs[env_id]
        checker = Verifier(progress=sys.stderr) if verify else None
        result = resolve(env, glibc=glibc_of(matrix, env), timeout=timeout, verify=checker)
        if result.text is None:
            unlocked[env_id] = result.problem or "the resolver failed"
        else:
            locked.append((env_id, result.text))
    return locked, unlocked


def _write_all(path: Path, old_text: str, new_text: str, locked: list[tuple[str, str]]) -> None:
    """The matrix, the new locks and every generated file as one change (`accelenv.changeset`): all computed
    first, then written under the matrix folder's lock, so a run stopped midway can be resumed or undone."""
    from accelenv import changeset
    from accelenv.errors import WriteFailedError
    from accelenv.fileio import folder_lock, read_text
    from accelenv.matrix.load import model_from_text
    from accelenv.matrix.paths import lock_path
    from accelenv.plan.render import generated_files, refresh_targets, render_plan

    repo = path.parent
    rendered = render_plan(model_from_text(new_text, str(path)), generated_files(repo))
    changes: dict[str, str | None] = {path.name: new_text}
    changes |= {str(lock_path(repo, env_id).relative_to(repo)): lock_text for env_id, lock_text in locked}
    changes |= rendered.files
    changes |= dict.fromkeys(rendered.stale)
    with folder_lock(path):
        if read_text(path, what="matrix") != old_text:  # the indexes took a while: an edit meanwhile stays
            raise WriteFailedError(
                f"{path}: changed while refresh asked the indexes; nothing was written: run accelenv refresh again"
            )
        changeset.commit(repo, changes, purpose="refresh", allowed=refresh_targets(path.name))


COMMANDS = {
    "pin": Command(
        epilog="examples:\n  accelenv pin                 # every base image without a digest\n"
        "  accelenv pin cuda-13-2 --refresh\n  accelenv pin --check         # CI/scheduled: report re-pushed tags\n\n"
        "exit status: 0 done, 1 a registry error, a moved tag (or, with --check, an unpinned image)",
        arguments=pin_arguments,
        run=pin,
    ),
    "outdated": Command(
        epilog="examples:\n  accelenv outdated\n  accelenv outdated --env tpu-jax-0-12 --json\n"
        "  accelenv outdated --format github > findings.md   # one issue-ready section per finding\n\n"
        "Newer releases of a runtime the matrix holds back (runtimes.<id>.hold: the support window's reason) are\n"
        "listed apart, with the reason, not as updates to make.\n\n"
        "exit status: 0 the indexes answered (findings or not), 1 some index could not be asked",
        arguments=outdated_arguments,
        run=outdated,
    ),
    "refresh": Command(
        epilog="examples:\n  accelenv refresh --dry-run          # what would change, as a summary and a diff\n"
        "  accelenv refresh -o refresh.md       # write it: matrix, locks, rendered files; the PR body to a file\n\n"
        "Bumps pins that have newer releases (unless their runtime's hold says why not), adds a new TPU line\n"
        "(jax with the libtpu its [tpu] extra pins) beside the old one, and names what it cannot write: new\n"
        "CUDA, ROCm or Neuron lines, framework lines and devices need facts from the vendor's notes. Nothing is\n"
        "written unless the result validates; an environment whose lock cannot be resolved keeps its old pins.",
        arguments=refresh_arguments,
        run=refresh,
    ),
}
