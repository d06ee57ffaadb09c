"""Commands that ask upstream: outdated (package indexes) and pin (container registries)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from accelenv.cli.common import Command, matrix_of
from accelenv.cli.output import dump_json
from accelenv.errors import AccelenvError, UsageError
from accelenv.matrix.load import find_matrix

if TYPE_CHECKING:
    import argparse


# ---------------------------------------------------------------------------------------------------- outdated


def outdated_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--env", metavar="ENV", help="only this environment")
    p.add_argument("--prereleases", action="store_true", help="also report pre-releases")
    p.add_argument("--format", choices=("table", "github"), default="table")
    p.add_argument("--json", action="store_true", help="findings and problems as JSON")


def outdated(args: argparse.Namespace, out: TextIO) -> int:
    import requests

    from accelenv.upstream.outdated import as_json, check_matrix, render_github, render_table

    matrix = matrix_of(args)
    with requests.Session() as session:
        found, problems = check_matrix(
            matrix, session, envs=[args.env] if args.env else None, prereleases=args.prereleases
        )
    if args.json:
        out.write(as_json(found, problems))
    elif args.format == "github":
        out.write(render_github(found))
    else:
        out.write(render_table(found, problems))
    return 1 if problems else 0


# ---------------------------------------------------------------------------------------------------- pin


def pin_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("runtimes", nargs="*", metavar="RUNTIME", help="runtimes whose base images to pin (default: all)")
    p.add_argument("--check", action="store_true", help="write nothing; report unpinned images and moved tags")
    p.add_argument("--refresh", action="store_true", help="ask again for images that already have a digest")
    p.add_argument("--json", action="store_true", help="print one result per image as JSON")


def pin(args: argparse.Namespace, out: TextIO) -> int:
    import requests

    from accelenv.upstream.pin import pin as pin_images

    matrix = matrix_of(args)
    path = find_matrix(args.matrix)
    unknown = [r for r in args.runtimes if r not in matrix.runtimes]
    if unknown:
        raise UsageError(f"no runtime {', '.join(unknown)}; runtimes are: {', '.join(matrix.runtimes)}")
    with requests.Session() as session:
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
}
