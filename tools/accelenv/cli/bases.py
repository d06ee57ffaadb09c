"""`accelenv base`: local stand-in bases for building where no registry can be reached (make, drop, list)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

from accelenv.cli.common import Command, matrix_of, repo_of
from accelenv.cli.output import dump_json
from accelenv.errors import UsageError

if TYPE_CHECKING:
    import argparse


def base_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("make", "drop", "list"), help="make a stand-in, drop an override, list them")
    p.add_argument("envs", nargs="*", metavar="ENV", help="environments (make, drop)")
    p.add_argument("--mirror", metavar="URL", help="the OS archive debootstrap fetches from (default: the OS's own)")
    p.add_argument(
        "--from",
        dest="source",
        metavar="IMAGE",
        help="use IMAGE, already on the engine (made as below), instead of running debootstrap",
    )
    p.add_argument("--force", action="store_true", help="make the stand-in again although the engine has it")
    p.add_argument("--json", action="store_true", help="print the overrides as JSON")


def base(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.build import overrides
    from accelenv.build.overrides import OVERRIDES, Override, override_lock_path
    from accelenv.matrix.resolve import get_env

    matrix = matrix_of(args)
    repo = repo_of(args)
    local = overrides.load(repo, matrix)
    if args.action != "list" and not args.envs:
        raise UsageError(f"accelenv base {args.action} needs at least one ENV")
    envs = [get_env(matrix, e) for e in args.envs]
    if args.action == "drop":
        for env in envs:
            if local.pop(env.id, None) is None:
                out.write(f"{env.id}: no override\n")
                continue
            override_lock_path(repo, env.id).unlink(missing_ok=True)
            out.write(f"{env.id}: override dropped; it builds on its real base again\n")
        overrides.save(repo, local)
    elif args.action == "make":
        from accelenv.build.engine import connect
        from accelenv.build.standin import make_standin, plan_standin

        plans = [plan_standin(matrix, env, mirror=args.mirror) for env in envs]  # every refusal before any work

        def say(line: str) -> None:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

        with connect(timeout=600) as engine:
            for plan in plans:
                existing = engine.image(plan.tag)
                if args.source:
                    source = engine.image(args.source)
                    if source is None:
                        raise UsageError(f"--from {args.source}: no such image on the engine")
                    engine.tag(source.id, plan.tag)
                    image_id = source.id
                elif existing is not None and not args.force:
                    say(f"{plan.tag} is on the engine already (--force makes it again)")
                    image_id = existing.id
                else:
                    image_id = make_standin(plan, engine, say)
                local[plan.env] = Override(env=plan.env, base=plan.tag, python=None)
                overrides.save(repo, local)
                out.write(
                    f"{plan.env}: builds on the local stand-in {plan.tag} ({image_id[:19]}), recorded in {OVERRIDES}\n"
                    f"  next: accelenv lock {plan.env} && accelenv build {plan.env} && accelenv verify {plan.env}\n"
                )
    if args.action == "list" or args.json:
        rows = [{"env": o.env, "base": o.base, "python": o.python} for o in local.values()]
        if args.json:
            dump_json(rows, out)
        elif not rows:
            out.write(f"no local base overrides ({OVERRIDES} names none)\n")
        for row in rows if not args.json else []:
            out.write(f"{row['env']:<24} {row['base']}\n")
    return 0


COMMANDS = {
    "base": Command(
        epilog="examples:\n  sudo accelenv base make cpu-py311   # debootstrap a stand-in base, point cpu-py311 at it\n"
        "  accelenv base make cpu-py311 --from accelenv-ci/debian:bookworm-minbase\n"
        "  accelenv base list\n  accelenv base drop cpu-py311           # back to the real base\n\n"
        "Where no registry can be reached: the stand-in is `debootstrap --variant=minbase` of the environment's\n"
        "OS, imported as accelenv-standin/<os>:<suite>-minbase (never under the real base's name). The override\n"
        "lives in .accelenv/overrides.toml (untracked); the environment's Python comes from the OS's packages,\n"
        "locked against the stand-in in .accelenv/overrides/<env>/os-packages.lock, never in envs/<env>/.\n"
        "verify warns that such an image is not a release image, and build --push refuses it.",
        arguments=base_arguments,
        run=base,
    ),
}
