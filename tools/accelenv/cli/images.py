"""Commands that build and use environment images through the container engine: build, verify, run, prune."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from accelenv.cli.common import Command, matrix_of, repo_of, shm_size
from accelenv.cli.output import dump_json, findings
from accelenv.errors import UsageError
from accelenv.fileio import read_text
from accelenv.matrix.load import find_matrix

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

    from accelenv.build.context import BuildPlan
    from accelenv.build.engine import DockerEngine, Engine, RunSpec
    from accelenv.build.prune import Current
    from accelenv.build.readiness import BasePuller, Blocker
    from accelenv.check.verdict import Finding
    from accelenv.matrix.model import Environment, Matrix


# seconds an engine call may take: creating a container copies the whole image on vfs storage (Podman without overlay)
RUN_TIMEOUT = 300.0


def _lock_text(repo: Path, env_id: str) -> str:
    from accelenv.matrix.paths import lock_path

    path = lock_path(repo, env_id)
    if not path.is_file():
        raise UsageError(f"{env_id} has no lock ({path.relative_to(repo)}): run `accelenv lock {env_id}` first")
    return read_text(path, what="lock file")


def _image_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", help="image reference (default: the human tag accelenv build gives it)")
    p.add_argument("--repository", default="accelenv", help="image repository name (default: %(default)s)")


def _image_ref(args: argparse.Namespace, matrix: Matrix, env_id: str) -> str:
    from accelenv.plan.render import human_tag

    return str(args.image or human_tag(args.repository, matrix, matrix.envs[env_id]))


# ---------------------------------------------------------------------------------------------------- build


def _plans(
    engine: Engine,
    matrix: Matrix,
    envs: list[Environment],
    args: argparse.Namespace,
    *,
    repo: Path,
    matrix_text: str,
    source_digest: str,
    pull: BasePuller | None = None,
) -> tuple[list[BuildPlan], list[tuple[str, list[Blocker]]]]:
    """The build plans of `envs` for the platforms asked for (`--platform`, default the engine's own), and (env,
    every blocker) for each that cannot be planned now; a foreign platform's row is named `env (platform)`."""
    from accelenv.build import overrides
    from accelenv.build.platforms import host_platform, platforms_for
    from accelenv.build.readiness import plan_env

    local = overrides.load(repo, matrix)
    native = host_platform(engine.info().arch)
    plans, unbuildable = [], []
    for env in envs:
        wanted = platforms_for(env, getattr(args, "platform", None), native=native)
        for platform in wanted:
            planned = plan_env(
                engine,
                matrix,
                env,
                repo=repo,
                matrix_text=matrix_text,
                source_digest=source_digest,
                repository=args.repository,
                overrides=local,
                pull=pull,
                push=bool(getattr(args, "push", None)),
                platform=platform,
                native=native,
            )
            if isinstance(planned, list):
                label = env.id if platform == native else f"{env.id} ({platform})"
                unbuildable.append((label, planned))
            else:
                plans.append(planned)
    return plans, unbuildable


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM during builds is handled as Ctrl-C: the build in progress is abandoned untagged, its temporary
    context removed, and accelenv exits 130."""
    import signal

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: leave SIGTERM as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def build_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("envs", nargs="*", metavar="ENV", help="environments (default: every one)")
    p.add_argument("--push", metavar="REGISTRY", help="also push to REGISTRY (skipped when it has the content tag)")
    p.add_argument("--dry-run", action="store_true", help="say what would be built; build nothing")
    p.add_argument("--no-cache", action="store_true", help="build again, without the engine's layer cache")
    p.add_argument(
        "--no-reproducible-id",
        dest="reproducible_id",
        action="store_false",
        help="keep the builder's image id (it changes every build); skips the docker save of each image built "
        "(about 5-8 s per GB) that reloads it under a canonical config",
    )
    p.add_argument(
        "--platform",
        metavar="PLATFORM",
        help="build for this platform (linux/amd64, linux/arm64; `all`: every platform the environment declares); "
        "a foreign one runs under QEMU user emulation (default: the engine's own)",
    )
    p.add_argument("--repository", default="accelenv", help="image repository name (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print results as JSON (progress goes to stderr)")


def build(args: argparse.Namespace, out: TextIO) -> int:
    """Exit 0 only when every asked environment (all of them without names) was built or is up to date."""
    from accelenv.build.context import build_order, find_source, source_hash
    from accelenv.build.engine import connect
    from accelenv.build.images import build_images, summary
    from accelenv.build.readiness import BasePuller
    from accelenv.matrix.resolve import get_env

    matrix = matrix_of(args)
    repo = repo_of(args)
    envs = [get_env(matrix, e) for e in args.envs] if args.envs else list(matrix.envs.values())
    source = find_source()
    source_digest = source_hash(source)
    matrix_text = read_text(find_matrix(args.matrix), what="matrix")
    progress = sys.stderr if args.json else out

    def say(line: str) -> None:
        progress.write(line + "\n")
        progress.flush()

    with connect() as engine, _sigterm_interrupts():
        info = engine.info()
        say(f"engine: {info.host}, Docker {info.server_version}, API {info.api_version} ({info.os}/{info.arch})")
        puller = BasePuller(engine, say, enabled=not args.dry_run)
        plans, unbuildable = _plans(
            engine,
            matrix,
            envs,
            args,
            repo=repo,
            matrix_text=matrix_text,
            source_digest=source_digest,
            pull=puller,
        )
        for env_id, blockers in unbuildable:
            say(f"{env_id}: not built ({len(blockers)} blocker{'' if len(blockers) == 1 else 's'}):")
            for blocker in blockers:
                say(f"  - {blocker.what}")
                if blocker.fix:
                    say(f"    fix: {blocker.fix}")
        results = build_images(
            engine,
            build_order(plans),
            source=source,
            logs=repo / ".accelenv" / "build-logs",
            nocache=args.no_cache,
            reproducible_id=args.reproducible_id,
            dry_run=args.dry_run,
            push=args.push,
            out=progress,
        )
    failed = any(r.status == "failed" for r in results)
    ok = not failed and not unbuildable
    if args.json:
        dump_json(
            {
                "ok": ok,
                "error": None,
                "results": [r.as_json() for r in results],
                "not_built": [
                    {
                        "env": e,
                        "reason": "; ".join(b.line() for b in blockers),
                        "blockers": [b.as_json() for b in blockers],
                    }
                    for e, blockers in unbuildable
                ],
                "pulled": puller.pulled,
            },
            out,
        )
    else:
        line = summary(results)
        if unbuildable:
            names = ", ".join(e for e, _ in unbuildable)
            line += f"; {len(unbuildable)} not built ({names}): see the blockers above"
        out.write(line + "\n")
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------------- verify


def verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", metavar="ENV")
    _image_options(p)
    p.add_argument(
        "--platform",
        metavar="PLATFORM",
        help="verify that platform's image (`<human tag>-<arch>`), started under QEMU emulation where it is foreign "
        "(default: the engine's own)",
    )
    _wiring_options(p)
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")


def verify(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.build import overrides
    from accelenv.build.engine import connect
    from accelenv.build.images import verify_image
    from accelenv.build.platforms import arch_of, emulation_problem, host_platform, platforms_for
    from accelenv.check.subject import Judged
    from accelenv.check.verdict import verdict_json
    from accelenv.matrix.resolve import get_env

    matrix = matrix_of(args)
    env = get_env(matrix, args.env)
    reference = _image_ref(args, matrix, env.id)
    lock = _lock_text(repo_of(args), env.id)
    override = overrides.load(repo_of(args), matrix).get(env.id)
    with connect(timeout=RUN_TIMEOUT) as engine:  # an image built on a stand-in is judged as that build saw the matrix
        native = host_platform(engine.info().arch)
        (platform,) = platforms_for(env, args.platform, native=native) if args.platform else (native,)
        if platform != native:
            problem = emulation_problem(platform, native=native)
            if problem is not None:
                raise UsageError(f"cannot start the {platform} image of {env.id}: {problem}")
            if not args.image:
                reference = f"{reference}-{arch_of(platform)}"
        found = verify_image(engine, overrides.apply(matrix, env, override), env, reference, lock, platform=platform)
        found += _devices_finding(engine, matrix, env, args)
    if override is not None:
        found.append(overrides.standin_finding(matrix, env, override))
    judged = Judged(host=f"image {reference}", kind="image", python="the image's own interpreter")
    result = verdict_json(env.id, found, source=f"image {reference}", judged=judged.as_json())
    if args.json:
        dump_json(result, out)
    else:
        out.write(f"accelenv verify {env.id}: {reference}\n{judged.words()}\n")
        findings(found, out, id_width=22, details=("fail",))
        out.write(f"verdict: {result['verdict']}\n")
    return 1 if result["verdict"] == "fail" else 0


# ---------------------------------------------------------------------------------------------------- run


def run_arguments(p: argparse.ArgumentParser) -> None:
    from accelenv.build.images import DEFAULT_SHM

    p.add_argument("env", metavar="ENV")
    _image_options(p)
    p.add_argument(
        "--shm-size",
        metavar="SIZE",
        type=shm_size,
        help=f"the container's /dev/shm, e.g. 16g (default: the family's container_shm_size, else {DEFAULT_SHM}); "
        "not for a family with container_ipc = host, whose containers use the host's IPC namespace and /dev/shm",
    )
    _wiring_options(p)
    p.add_argument(
        "--stale-ok",
        action="store_true",
        help="run an image whose env-hash label is not the matrix's (built from another matrix or an older one)",
    )
    p.add_argument(
        "--no-devices",
        action="store_true",
        help="start the container without the family's devices (say so rather than refuse when none can be given)",
    )
    p.set_defaults(command=[])  # everything after `--` (split off by the entry point: argparse would misread it)


def run(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.build.engine import connect
    from accelenv.build.images import container_user, run_spec
    from accelenv.host.root import Root
    from accelenv.host.run_url import run_url
    from accelenv.matrix.resolve import get_env

    matrix = matrix_of(args)
    env = get_env(matrix, args.env)
    command = list(args.command)
    if not command:
        raise UsageError("nothing to run: accelenv run ENV -- COMMAND [ARGS...]")
    workdir = Path.cwd()
    tree = workdir.stat()
    spec = run_spec(
        matrix,
        env,
        _image_ref(args, matrix, env.id),
        command,
        root=Root.from_option(args.root),
        workdir=workdir,
        shm_size=args.shm_size,
        user=container_user((os.getuid(), os.getgid()), (tree.st_uid, tree.st_gid)),
        run_url=run_url(os.environ),
    )

    def echo(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    def echo_error(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    with connect(timeout=RUN_TIMEOUT) as engine:
        spec = _settled(engine, matrix, env, spec, args)
        return engine.run(spec, echo, echo_error)


def _wiring_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--root",
        metavar="DIR",
        help="read the host's CDI specs and device nodes under DIR (a captured host; default: this host, or "
        "$ACCELENV_ROOT), as `accelenv check --root` does",
    )


def _devices_finding(engine: DockerEngine, matrix: Matrix, env: Environment, args: argparse.Namespace) -> list[Finding]:
    from accelenv.build.launch import devices_finding
    from accelenv.host.root import Root

    return devices_finding(engine, matrix, env, root=Root.from_option(args.root), environ=os.environ)


def _settled(
    engine: DockerEngine, matrix: Matrix, env: Environment, spec: RunSpec, args: argparse.Namespace
) -> RunSpec:
    from accelenv.build.launch import settle
    from accelenv.host.root import Root

    root = Root.from_option(args.root)
    return settle(
        engine,
        matrix,
        env,
        spec,
        root=root,
        environ=os.environ,
        stale_ok=args.stale_ok,
        no_devices=args.no_devices,
        err=sys.stderr,
    )


# ---------------------------------------------------------------------------------------------------- prune


def prune_arguments(p: argparse.ArgumentParser) -> None:
    from accelenv.build.prune import DEFAULT_KEEP
    from accelenv.cli.common import count

    p.add_argument(
        "--keep",
        type=count,
        default=DEFAULT_KEEP,
        metavar="N",
        help="per environment, keep the newest N content-tagged images (default: %(default)s); the human tag's "
        "target counts as the newest",
    )
    p.add_argument(
        "--unused",
        action="store_true",
        help="also remove images of environments the matrix no longer names, and images whose content tag is not "
        "what the current matrix, locks and source would build (the human tag's target stays)",
    )
    p.add_argument("--repository", default="accelenv", help="image repository name (default: %(default)s)")
    p.add_argument(
        "--dry-run", action="store_true", help="list what would be removed and what it frees; remove nothing"
    )
    p.add_argument("--json", action="store_true", help="print the plan and the results as JSON")


def _current(engine: Engine, args: argparse.Namespace) -> Current:
    """The content tag each environment of the matrix would be built under now (for --unused)."""
    from accelenv.build.context import find_source, source_hash
    from accelenv.build.prune import Current

    matrix = matrix_of(args)
    matrix_text = read_text(find_matrix(args.matrix), what="matrix")
    plans, unbuildable = _plans(
        engine,
        matrix,
        list(matrix.envs.values()),
        args,
        repo=repo_of(args),
        matrix_text=matrix_text,
        source_digest=source_hash(find_source()),
    )
    tags: dict[str, str | None] = {p.env: p.content_tag for p in plans}
    tags.update({env: None for env, _ in unbuildable})
    return Current(content_tags=tags, unknown={env: "; ".join(b.line() for b in bs) for env, bs in unbuildable})


def _one_line(text: str) -> str:
    """`text` on one line: a line break in what the engine reported (a label, a tag) is shown, not printed."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def prune(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.build.engine import connect
    from accelenv.build.prune import human_bytes, image_records, plan_prune
    from accelenv.build.prune import remove as remove_images

    with connect(timeout=120) as engine:  # the engine's disk usage takes a while on a full engine
        current = _current(engine, args) if args.unused else None
        plan = plan_prune(image_records(engine), repository=args.repository, keep=args.keep, current=current)
        if not args.json:
            for env, reason in sorted(plan.unknown.items()):
                out.write(_one_line(f"{env}: current content tag unknown ({reason}); only --keep applies") + "\n")
            for d in plan.decisions:
                what = {"remove": "would remove" if args.dry_run else "remove", "keep": "keep", "skip": "skip"}
                frees = f", frees {human_bytes(d.freed)}" if d.action == "remove" else ""
                line = f"{what[d.action]:<12} {' '.join(d.tags)}  {human_bytes(d.size)}{frees}: {'; '.join(d.reasons)}"
                out.write(_one_line(line) + "\n")
            out.flush()
        outcomes = [] if args.dry_run else remove_images(engine, plan, lambda _outcome: None)
    failed = [o for o in outcomes if not o.removed]
    removed = len(plan.removals) if args.dry_run else len(outcomes) - len(failed)
    freed = plan.freed if args.dry_run else sum(o.decision.freed for o in outcomes if o.removed)
    if args.json:
        results = {o.decision.image: o for o in outcomes}
        images = []
        for d in plan.decisions:
            entry = d.as_json()
            outcome = results.get(d.image)
            if outcome is not None:
                entry["removed"] = outcome.removed
                entry["error"] = outcome.error
            images.append(entry)
        dump_json(
            {
                "repository": plan.repository,
                "keep": plan.keep,
                "unused": plan.unused,
                "dry_run": args.dry_run,
                "images": images,
                "unknown_current": dict(plan.unknown),
                "removed": removed,
                "skipped": len(plan.skipped),
                "failed": len(failed),
                "freed_bytes": freed,
            },
            out,
        )
    else:
        for outcome in failed:
            out.write(f"failed to remove {' '.join(outcome.decision.tags)}: {outcome.error}\n")
        verb = "would remove" if args.dry_run else "removed"
        line = f"{verb} {removed} image{'' if removed == 1 else 's'}, {human_bytes(freed)} freed"
        if plan.skipped:
            line += f"; {len(plan.skipped)} skipped (in use)"
        if failed:
            line += f"; {len(failed)} failed"
        out.write(line + (" (dry run: nothing removed)" if args.dry_run else "") + "\n")
    return 1 if failed else 0


COMMANDS = {
    "build": Command(
        epilog="examples:\n  accelenv build                    # every locked environment\n"
        "  accelenv build cpu-py311 --json\n  accelenv build --dry-run\n"
        "  accelenv build gpu-nvidia-cu132 --push registry.example.com/team\n\n"
        "Images are tagged <repository>:<env>-<content hash> and <repository>:<env>-<wheel tag>-py<python>;\n"
        "an image whose content tag exists is not built again. Logs: .accelenv/build-logs/<env>.log\n"
        "A base missing from the engine is pulled (by digest where pinned); with no registry in reach, see\n"
        "`accelenv base make ENV`. Exit 0 only when every environment asked for (all without names) is built or up\n"
        "to date; each one that is not is listed with every blocker and its fix. --json: one document on stdout.",
        arguments=build_arguments,
        run=build,
    ),
    "verify": Command(
        epilog="examples:\n  accelenv verify cpu-py311\n"
        "  accelenv verify gpu-nvidia-cu132 --image accelenv:gpu-nvidia-cu132-py312",
        arguments=verify_arguments,
        run=verify,
    ),
    "run": Command(
        epilog="examples:\n  accelenv run gpu-nvidia-cu132 -- pytest tests/devices\n"
        "  accelenv run cpu-py311 -- python -V\n\n"
        "The container gets the family's devices, groups, container runtime and variables, and its /dev/shm and\n"
        "IPC namespace from the family's data (container_shm_size, container_ipc in matrix.toml).\n"
        "`accelenv show ENV` prints the same start as a docker run line.\n\n"
        "Devices: CDI names first (nvidia.com/gpu=all, narrowed by CUDA_VISIBLE_DEVICES and the like) where the\n"
        "engine takes them and the family's spec exists, else the toolkit, runtime or device nodes; the choice and\n"
        "its reason go to stderr. Refused (exit 125, as docker run) before anything starts when no way can give\n"
        "the devices (--no-devices starts it without) or the image's env-hash is not the matrix's (--stale-ok\n"
        "runs it); otherwise the exit status is the command's own.",
        arguments=run_arguments,
        run=run,
        takes_command=True,
    ),
    "prune": Command(
        epilog="examples:\n  accelenv prune --dry-run          # what would go, and what it frees\n"
        "  accelenv prune --keep 1\n  accelenv prune --unused --json\n\n"
        "Only images with accelenv's labels and a content tag <repository>:<env>-<hash> are considered.\n"
        "Per environment the newest N stay (the human tag's target counts as the newest, so it goes only with\n"
        "--keep 0); --unused also removes what the current matrix, locks and source would not build, except\n"
        "the human tag's target. An image a container uses is skipped. Freed bytes are the engine's unique\n"
        "sizes: a lower bound (layers shared only among removed images are freed but not counted).",
        arguments=prune_arguments,
        run=prune,
    ),
}
