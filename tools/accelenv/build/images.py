"""Build, verify and run environment images through an `Engine`.

build: content-addressed (an image whose content tag exists is not built again), tagged only after success (a
failed or interrupted build leaves no tag), progress streamed with elapsed time, a log per image, a summary. The
image then gets a reproducible id (`normalise_image`): the same inputs give the same id, build after build.
verify: the image's labels against the matrix, `accelenv check` inside it, and its installed distributions
against the lock. run: a command in the image with the working tree mounted and the family's devices wired in.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from packaging.utils import canonicalize_name

from accelenv.build.context import BuildError, BuildPlan, assemble, platform_tag
from accelenv.build.engine import EngineError, RunSpec
from accelenv.build.image_config import normalise
from accelenv.check.verdict import Finding, Status
from accelenv.fileio import check_writable, write_atomic
from accelenv.plan.lock import glibc_of, input_digest
from accelenv.plan.render import LABEL_PREFIX, env_hash
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable

    from accelenv.build.engine import Engine, ImageInfo
    from accelenv.host.root import Root
    from accelenv.matrix import Environment, Matrix

_STEP = re.compile(r"\AStep (\d+)/(\d+) : (.*)\Z")
# the classic builder reuses cached layers as untagged images; a removal elsewhere (`prune`, `docker rmi`, another
# build's clean-up) may delete one between the step that reused it and the next commit: the build then fails with
# one of these (at the commit, or when a step's container is made from the lost layer), and the same build run again
# rebuilds that layer; a missing base is named by its reference, never by a bare id
_CACHE_LOST = re.compile(r"unknown parent image ID|No such image: sha256:[0-9a-f]+", re.IGNORECASE)
# the builder's image is tagged `accelenv-build-hold:<env>-<random>` until accelenv has tagged it: another build of the
# same content gets the same image from the cache, and its clean-up (or a prune) would otherwise remove it meanwhile
HOLD_REPOSITORY = "accelenv-build-hold"


@frozen
class BuildResult:
    env: str
    status: str  # built, skipped, failed, planned (dry run)
    content_tag: str
    human_tag: str
    image_id: str | None = None
    size: int | None = None
    seconds: float = 0.0
    log: str | None = None
    reason: str = ""
    reproducible_id: bool | None = None  # built: whether the id is the canonical config's (None: not built here)
    platform: str = "linux/amd64"
    index: str | None = None  # pushed: the multi-platform tag published over this environment's platforms

    def as_json(self) -> dict[str, Any]:
        return dict(vars(self))


def build_images(
    engine: Engine,
    plans: list[BuildPlan],
    *,
    source: Path,
    logs: Path,
    nocache: bool,
    dry_run: bool,
    push: str | None,
    out: TextIO,
    assemble_context: Callable[[BuildPlan, Path], None] | None = None,
    publish: Callable[[str, dict[str, str]], tuple[str, bool]] | None = None,
    reproducible_id: bool = True,
) -> list[BuildResult]:
    """Build every plan in order; one failure does not stop the others. `reproducible_id`: give each image built
    the id of its canonical config (`normalise_image`) rather than the one the builder stamps with the time. With
    `push`, each environment's human tag is then published as one image index over its platforms, by `publish`
    (default: `publish_through_registry`)."""
    assemble_context = assemble_context or (lambda plan, ctx: assemble(plan, ctx, source=source))
    results = []
    for plan in plans:
        remotes = [f"{push.rstrip('/')}/{tag}" for tag in (plan.content_tag, platform_tag(plan))] if push else []
        existing = engine.image(plan.content_tag)
        if existing is not None and not nocache:
            _tag_locally(engine, existing.id, plan)
            pushed = [] if dry_run else _push(engine, existing.id, remotes, out)
            note = f"; pushed {', '.join(pushed)}" if pushed else ""
            out.write(f"{plan.env}: up to date ({plan.content_tag}){note}\n")
            results.append(
                BuildResult(
                    env=plan.env,
                    status="skipped",
                    content_tag=plan.content_tag,
                    human_tag=plan.human_tag,
                    image_id=existing.id,
                    size=existing.size,
                    reason="an image with this content already exists" + note,
                    platform=plan.platform,
                )
            )
            continue
        if dry_run:
            out.write(f"{plan.env}: would build {plan.content_tag} (also {plan.human_tag}) on {plan.base_image}\n")
            results.append(
                BuildResult(
                    env=plan.env,
                    status="planned",
                    content_tag=plan.content_tag,
                    human_tag=plan.human_tag,
                    platform=plan.platform,
                )
            )
            continue
        results.append(
            _build_one(
                engine,
                plan,
                logs=logs,
                nocache=nocache,
                remotes=remotes,
                out=out,
                ctx=assemble_context,
                reproducible_id=reproducible_id,
            )
        )
    if push and not dry_run:
        results = _publish_indexes(publish or publish_through_registry, push, plans, results, out)
    return results


def _tag_locally(engine: Engine, image_id: str, plan: BuildPlan) -> None:
    """The content tag, `<human tag>-<arch>`, and the plain human tag for the engine's own platform."""
    engine.tag(image_id, plan.content_tag)
    engine.tag(image_id, platform_tag(plan))
    if plan.native:
        engine.tag(image_id, plan.human_tag)


def publish_through_registry(remote: str, platform_tags: dict[str, str]) -> tuple[str, bool]:
    """`remote` (registry/repository:tag) as one OCI image index over the images pushed under `platform_tags`
    (platform -> tag): (its digest, whether it was written). Through the registry's API (`build.index`): the engine
    pushes images but cannot make an index, so this is no part of its adapter."""
    from accelenv import netio
    from accelenv.build.index import publish_index

    with netio.session() as session:
        return publish_index(session, remote, platform_tags)


def _publish_indexes(
    publish: Callable[[str, dict[str, str]], tuple[str, bool]],
    push: str,
    plans: list[BuildPlan],
    results: list[BuildResult],
    out: TextIO,
) -> list[BuildResult]:
    """Per environment, the human tag in the registry as one OCI image index over every platform pushed in this
    run (`build.index`); a failure to write it fails that environment's results."""
    tags: dict[str, dict[str, str]] = {}
    for plan, result in zip(plans, results, strict=True):
        if result.status in ("built", "skipped"):
            tags.setdefault(plan.env, {})[plan.platform] = plan.content_tag.rpartition(":")[2]
    human = {plan.env: plan.human_tag for plan in plans}
    published: dict[str, str] = {}
    failures: dict[str, str] = {}
    for env, platform_tags in tags.items():
        remote = f"{push.rstrip('/')}/{human[env]}"
        try:
            digest, written = publish(remote, platform_tags)
        except EngineError as error:
            failures[env] = f"the multi-platform tag {remote} was not published: {error}"
            out.write(f"{env}: FAILED: {failures[env]}\n")
            continue
        what = "published" if written else "already published"
        out.write(f"{env}: {what} {remote} ({', '.join(sorted(platform_tags))}) {digest[:19]}\n")
        published[env] = remote

    def outcome(result: BuildResult) -> BuildResult:
        if result.env in failures:
            return BuildResult(**{**vars(result), "status": "failed", "reason": failures[result.env]})
        if result.env in published:
            return BuildResult(**{**vars(result), "index": published[result.env]})
        return result

    return [outcome(result) for result in results]


def _build_one(
    engine: Engine,
    plan: BuildPlan,
    *,
    logs: Path,
    nocache: bool,
    remotes: list[str],
    out: TextIO,
    ctx: Callable[[BuildPlan, Path], None],
    reproducible_id: bool,
) -> BuildResult:
    start = time.monotonic()
    log_path = logs / f"{plan.env}.log"
    check_writable(log_path, inside=logs.parent.parent)  # a FIFO or a link there is refused before building
    lines: list[str] = []

    def progress(text: str) -> None:
        out.write(f"{plan.env}: [{time.monotonic() - start:6.1f}s] {text}\n")

    def on_line(line: str) -> None:
        lines.append(line)
        step = _STEP.match(line)
        if step:
            progress(f"step {step[1]}/{step[2]} {step[3][:90]}")
            out.flush()

    def failed(reason: str) -> BuildResult:
        write_atomic(log_path, "\n".join([*lines, f"FAILED: {reason}"]) + "\n", inside=logs.parent.parent)
        out.write(f"{plan.env}: FAILED after {time.monotonic() - start:.1f}s: {reason} (log: {log_path})\n")
        return BuildResult(
            env=plan.env,
            status="failed",
            content_tag=plan.content_tag,
            human_tag=plan.human_tag,
            seconds=time.monotonic() - start,
            log=str(log_path),
            reason=reason,
            platform=plan.platform,
        )

    def note(text: str) -> None:
        lines.append(text)
        progress(text)

    emulated = "" if plan.native else f", {plan.platform} under QEMU emulation"
    out.write(f"{plan.env}: building {plan.content_tag} on {plan.base_image}{emulated}\n")
    hold = f"{HOLD_REPOSITORY}:{plan.env}-{secrets.token_hex(8)}"
    with tempfile.TemporaryDirectory(prefix=f"accelenv-{plan.env}-") as folder:
        context = Path(folder) / "context"
        try:
            ctx(plan, context)
            progress("context ready (wheels checked on the host)")
            image_id = _engine_build(engine, plan, context, hold, nocache=nocache, on_line=on_line, note=note)
        except KeyboardInterrupt:
            failed("interrupted")
            raise
        except (EngineError, BuildError, OSError) as error:  # the engine, or context assembly (pip, file system)
            return failed(str(error))
    try:
        normalised = False
        if reproducible_id:  # after the context is gone: it holds every wheel
            began = time.monotonic()
            try:
                image_id = normalise_image(engine, image_id, epoch=plan.epoch)
                normalised = True
                lines.append(f"reproducible image id {image_id} ({time.monotonic() - began:.1f}s)")
                progress(f"reproducible image id {image_id[:19]}")
            except KeyboardInterrupt:
                failed("interrupted")
                raise
            except (EngineError, ValueError) as error:  # the image is sound; only its id is the builder's
                lines.append(f"WARNING: the image keeps the builder's id {image_id}: {error}")
                out.write(
                    f"{plan.env}: warning: the image id is not reproducible (the builder's, {image_id[:19]}): {error}\n"
                )
        _tag_locally(engine, image_id, plan)
        try:
            _push(engine, image_id, remotes, out)
        except EngineError as error:
            return failed(str(error))
        info = engine.image(plan.content_tag)
        write_atomic(log_path, "\n".join(lines) + "\n", inside=logs.parent.parent)  # the tree holding .accelenv
        seconds = time.monotonic() - start
        size = info.size if info else None
        out.write(f"{plan.env}: built {plan.human_tag} in {seconds:.1f}s, {_size(size)} (log: {log_path})\n")
        return BuildResult(
            env=plan.env,
            status="built",
            content_tag=plan.content_tag,
            human_tag=plan.human_tag,
            image_id=image_id,
            size=size,
            seconds=seconds,
            log=str(log_path),
            reproducible_id=normalised,
            platform=plan.platform,
        )
    finally:  # the builder's image loses its last tag when it got a new id: it goes, with its untagged parents
        with contextlib.suppress(EngineError):
            engine.remove(hold)


def normalise_image(engine: Engine, built: str, *, epoch: int) -> str:
    """The image `built` again, under the id of its canonical config (`image_config.normalise`: the builder's
    times clamped to `epoch`, its container left out), loaded from that config alone on the layers the build
    made; so the same inputs give the same id. The builder's image stays: the build removes its hold tag, and with
    it the image and its untagged parents as `docker rmi` does (the final stage's steps; the other stages' cache
    stays), unless something else tagged it. Costs a `docker save` of the image on the engine's side. The new id."""
    return engine.load_config(normalise(engine.image_config(built), epoch=epoch))


def _engine_build(
    engine: Engine,
    plan: BuildPlan,
    context: Path,
    hold: str,
    *,
    nocache: bool,
    on_line: Callable[[str], None],
    note: Callable[[str], None],
) -> str:
    """The engine's build of `context`, its image tagged `hold` on success; built again, once, when the engine
    lost a cached layer under it (`_CACHE_LOST`)."""

    def build() -> str:
        return engine.build(
            str(context),
            tag=hold,
            nocache=nocache,
            on_line=on_line,
            buildargs={"BASE_IMAGE": plan.base_pin, "SOURCE_DATE_EPOCH": str(plan.epoch)},
            platform=plan.platform,
        )

    try:
        return build()
    except EngineError as error:
        if not _CACHE_LOST.search(str(error)):
            raise
        note(f"the engine lost a cached layer while building ({error}); building again")
    return build()


def _push(engine: Engine, image_id: str, remotes: list[str], out: TextIO) -> list[str]:
    """Push under every remote name the registry does not have yet (the content tag decides)."""
    if not remotes or engine.registry_has(remotes[0]):
        return []
    for remote in remotes:
        engine.tag(image_id, remote)
        out.write(f"pushing {remote}\n")
        engine.push(remote, lambda _line: None)
    return remotes


def _size(size: int | None) -> str:
    return f"{size / 2**20:.0f} MiB" if size is not None else "size unknown"


def summary(results: list[BuildResult]) -> str:
    counts = {s: sum(1 for r in results if r.status == s) for s in ("built", "skipped", "failed", "planned")}
    total = sum(r.size or 0 for r in results)
    return (
        f"{counts['built']} built, {counts['skipped']} up to date, {counts['failed']} failed"
        + (f", {counts['planned']} planned" if counts["planned"] else "")
        + f"; {total / 2**20:.0f} MiB in all"
    )


# ---------------------------------------------------------------------------------------------------- verify


def verify_image(
    engine: Engine, matrix: Matrix, env: Environment, reference: str, lock: str, *, platform: str | None = None
) -> list[Finding]:
    """The image against the matrix: labels, the platform it states (when one is asked for), `accelenv check`
    inside it, and its distributions against the lock."""
    info = engine.image(reference)
    if info is None:
        return [
            Finding(
                id="image.present",
                status=Status.FAIL,
                expected=reference,
                found="no such image",
                message=f"{reference} is not built",
                fix=f"accelenv build {env.id}",
            )
        ]
    findings = [_label(info.labels, "env-hash", f"sha256:{env_hash(matrix, env)}", "resolved environment")]
    if platform is not None:
        findings.append(_platform_finding(info, platform, env.id))
    findings.append(_label(info.labels, "lock-input", f"sha256:{input_digest(env, glibc_of(matrix, env))}", "lock"))
    findings.append(_inside_check(engine, env, reference))
    findings.append(_distributions(engine, env, reference, lock))
    return findings


def _platform_finding(info: ImageInfo, platform: str, env_id: str) -> Finding:
    from accelenv.build.platforms import image_platform

    found = image_platform(info) or (info.architecture or "no architecture")
    ok = found == platform
    return Finding(
        id="image.platform",
        status=Status.PASS if ok else Status.FAIL,
        expected=platform,
        found=found,
        message=f"an image for {platform}" if ok else f"the image states {found}, not {platform}",
        fix="" if ok else f"accelenv build {env_id} --platform {platform}",
    )


def _label(labels: dict[str, str], name: str, expected: str, what: str) -> Finding:
    found = labels.get(f"{LABEL_PREFIX}.{name}", "(none)")
    ok = found == expected
    return Finding(
        id=f"image.{name}",
        status=Status.PASS if ok else Status.FAIL,
        expected=expected,
        found=found,
        message=f"built from the {what} the matrix declares now"
        if ok
        else f"built from another {what} than the matrix's",
        fix="" if ok else "rebuild: accelenv build",
    )


def _capture(engine: Engine, reference: str, command: list[str]) -> tuple[int, str]:
    lines: list[str] = []
    code = engine.run(RunSpec(image=reference, command=command), lines.append)
    return code, "\n".join(lines)


def _inside_check(engine: Engine, env: Environment, reference: str) -> Finding:
    code, output = _capture(engine, reference, ["accelenv", "check", env.id, "--json", "--allow-missing-hardware"])
    try:
        verdict = json.loads(output[output.index("{") :])
    except (ValueError, json.JSONDecodeError):
        return Finding(
            id="image.check",
            status=Status.FAIL,
            expected="accelenv check runs inside the image",
            found=f"exit {code}: {output[-300:]}",
            message="accelenv check did not run inside the image",
            fix="rebuild the image; look at its build log",
        )
    failing = [c["id"] for c in verdict.get("checks", []) if c.get("status") == "fail"]
    return Finding(
        id="image.check",
        status=Status.FAIL if failing else Status.PASS,
        expected="no failing check (missing hardware allowed)",
        found=f"verdict {verdict.get('verdict')}" + (f": {', '.join(failing)}" if failing else ""),
        message="accelenv check passes inside the image" if not failing else "accelenv check fails inside the image",
        fix="" if not failing else "rebuild the image from the current lock",
    )


def _distributions(engine: Engine, env: Environment, reference: str, lock: str) -> Finding:
    script = "import json; from accelenv.host.probes.python import installed_distributions as d; print(json.dumps(d()))"
    code, output = _capture(engine, reference, ["python", "-c", script])
    try:
        installed: dict[str, list[str]] = json.loads(output[output.index("{") :])
    except (ValueError, KeyError, json.JSONDecodeError):
        return Finding(
            id="image.distributions",
            status=Status.FAIL,
            expected="accelenv inspect runs inside the image",
            found=f"exit {code}: {output[-300:]}",
            message="the image's distributions could not be read",
        )
    differences = []
    for name, version in locked_pins(lock):
        have = installed.get(name, [])
        if have != [version]:
            differences.append(f"{name} {', '.join(have) or 'missing'} (lock: {version})")
    return Finding(
        id="image.distributions",
        status=Status.FAIL if differences else Status.PASS,
        expected="every locked distribution, once, at its locked version",
        found="; ".join(differences) or f"{len(locked_pins(lock))} distributions as locked",
        message="installed distributions match the lock" if not differences else "the image differs from the lock",
        fix="" if not differences else "rebuild: accelenv build",
    )


def locked_pins(lock: str) -> list[tuple[str, str]]:
    """(normalised name, version) of every pin in a lock file (lines with a marker included)."""
    pins: list[tuple[str, str]] = []
    for line in lock.splitlines():
        if line.startswith((" ", "#", "-")) or "==" not in line:
            continue
        requirement = line.split(";")[0].split(" \\")[0].strip()
        name, _, version = requirement.partition("==")
        pins.append((canonicalize_name(name), version))
    return pins


# ---------------------------------------------------------------------------------------------------- run


DEFAULT_SHM = "8g"  # a cap, not a reservation: NCCL and DataLoader workers need far more than docker's 64 MiB


def shm_and_ipc(
    ipc: str | None, shm_size: str | None, override: str | None = None, *, family: str = "the family"
) -> tuple[str | None, str | None]:
    """The container's /dev/shm size and IPC mode from a family's `container_ipc` and `container_shm_size`: its
    size, else DEFAULT_SHM, in the engine's IPC mode unless the family names one. `override` (--shm-size) replaces
    the size; a family that shares the host's IPC namespace gets the host's /dev/shm, where a size means nothing
    (asking for one is an error)."""
    if ipc == "host":
        if override is not None:
            from accelenv.errors import UsageError

            raise UsageError(
                f"--shm-size does not apply to {family}'s containers: they share the host's IPC namespace and its "
                f"/dev/shm (matrix: families.{family}.container_ipc = host)"
            )
        return None, "host"
    return override or shm_size or DEFAULT_SHM, ipc


def container_user(caller: tuple[int, int], owner: tuple[int, int]) -> tuple[int, int]:
    """Whom `accelenv run`'s container runs as: the caller (uid, gid), so what the command writes is theirs, in
    their own tree or any other folder they may write to. Root, as under `sudo`, runs it as the owner of the
    working tree instead: files root would create there would leave the tree's owner unable to change them."""
    return owner if caller[0] == 0 else caller


def run_spec(
    matrix: Matrix,
    env: Environment,
    image: str,
    command: list[str],
    *,
    root: Root,
    workdir: Path,
    shm_size: str | None = None,
    user: tuple[int, int] | None = None,
    run_url: str | None = None,
) -> RunSpec:
    """The container for `accelenv run`: the working tree at /workspace, written as `user` (uid, gid; default:
    the owner of `workdir`; the command line passes `container_user`), so files the command creates belong to the
    host user whatever their uid; the family's devices; /dev/shm and IPC as the family's data says (see
    `shm_and_ipc`); `run_url`, the CI job that runs it, as ACCELENV_RUN_URL (a result record made inside names
    its job). Pure data."""
    family = matrix.families[env.family]
    devices = sorted({node for pattern in family.container_devices for node in root.glob(pattern)})
    if user is None:
        owner = workdir.stat()
        user = (owner.st_uid, owner.st_gid)
    environment = dict(family.container_env)
    environment.setdefault("HOME", "/tmp")  # the host uid may have no home in the image
    if run_url:
        environment["ACCELENV_RUN_URL"] = run_url
    shm, ipc = shm_and_ipc(family.container_ipc, family.container_shm_size, shm_size, family=family.id)
    return RunSpec(
        image=image,
        command=command,
        environment=environment,
        volumes={str(workdir): "/workspace"},
        devices=devices,
        group_add=list(family.container_groups),
        gpus=family.container_gpus,
        runtime=family.container_runtime,
        workdir="/workspace",
        user=f"{user[0]}:{user[1]}",
        shm_size=shm,
        ipc_mode=ipc,
    )
