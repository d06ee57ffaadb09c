"""Whether an environment can be built now, and if not, everything that stands in the way, each with its fix.

`plan_env` gives the build plan of an environment, or every blocker at once (no current lock, an OS package
lock missing, its base neither on the engine nor pullable, a stand-in lock where the real base's lock belongs),
so a user fixes them in one pass. A missing base is pulled (by digest where the matrix pins one) when the caller
allows it. A local base override (`build.overrides`) replaces the runtime's base for the environment it names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.build.engine import EngineError
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from accelenv.build.context import BuildPlan
    from accelenv.build.engine import Engine, ImageInfo
    from accelenv.build.overrides import Override
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.plan.start import Unavailable

NO_REGISTRY_HELP = "docs/images.md: Images without a registry"


@frozen
class Blocker:
    """One thing that stops an environment's build, and the exact step that removes it."""

    what: str
    fix: str

    def as_json(self) -> dict[str, str]:
        return {"what": self.what, "fix": self.fix}

    def line(self) -> str:
        return f"{self.what}; fix: {self.fix}" if self.fix else self.what


class BasePuller:
    """Pulls each missing base once per command (several environments share a base) and remembers the outcome:
    None when pulled, else why not."""

    def __init__(self, engine: Engine, progress: Callable[[str], None], *, enabled: bool) -> None:
        self.engine = engine
        self.progress = progress
        self.enabled = enabled
        self.pulled: list[str] = []
        self._outcomes: dict[str, str | None] = {}

    def __call__(self, reference: str) -> str | None:
        if not self.enabled:
            return "not pulled (--dry-run)"
        if reference not in self._outcomes:
            self.progress(f"pulling {reference} (the base is not on the engine)")
            try:
                self.engine.pull(reference, lambda line: self.progress(f"  {reference}: {line}"))
            except EngineError as error:
                self._outcomes[reference] = str(error)
                self.progress(f"  {reference}: not pulled")
            else:
                self._outcomes[reference] = None
                self.pulled.append(reference)
        return self._outcomes[reference]


def _base_on_engine(
    engine: Engine, reference: str, pin: str | None, pull: BasePuller | None
) -> tuple[ImageInfo | None, str | None]:
    """The base as the engine has it (by the OS lock's pin first), pulling it when missing; else why not."""
    found = engine.image(pin) if pin else None
    found = found or engine.image(reference)
    if found is not None or pull is None:
        return found, None
    why = pull(reference)
    if why is None:
        found = (engine.image(pin) if pin else None) or engine.image(reference)
        if found is None:
            why = f"the engine pulled {reference} but does not show it"
    return found, why


def plan_env(
    engine: Engine,
    matrix: Matrix,
    env: Environment,
    *,
    repo: Path,
    matrix_text: str,
    source_digest: str,
    repository: str,
    overrides: dict[str, Override],
    pull: BasePuller | None = None,
    push: bool = False,
    platform: str = "linux/amd64",
    native: str = "linux/amd64",
) -> BuildPlan | list[Blocker]:
    """The build plan of `env` for `platform`, or every blocker that stands in its way (for a foreign platform
    also: no QEMU emulation, no base of that platform on the engine)."""
    from accelenv.build.context import BaseImage, BuildError, plan_build
    from accelenv.build.overrides import OVERRIDES, apply, committed_standin_lock, override_lock_path
    from accelenv.build.platforms import base_reference, emulation_problem, image_platform
    from accelenv.fileio import read_text
    from accelenv.matrix.paths import lock_path
    from accelenv.plan.lock import (
        LockState,
        glibc_of,
        image_lock_path,
        image_lock_state,
        lock_state,
        os_lock_defect,
        os_lock_name,
        os_lock_path,
        os_lock_state,
        parse_os_lock,
    )
    from accelenv.plan.render import IMAGE_DEPENDENCIES, os_packages

    override = overrides.get(env.id)
    view = apply(matrix, env, override)
    blockers: list[Blocker] = []
    state = lock_state(repo, env, glibc_of(matrix, env))
    if state is not LockState.CURRENT:
        rel = lock_path(repo, env.id).relative_to(repo)
        what = f"{rel} is missing" if state is LockState.UNLOCKED else f"{rel} is stale (the matrix changed)"
        blockers.append(Blocker(what=what, fix=f"accelenv lock {env.id}"))
    image_state = image_lock_state(repo, IMAGE_DEPENDENCIES)
    if image_state is not LockState.CURRENT:
        blockers.append(
            Blocker(what=f"{image_lock_path(repo).relative_to(repo)} is {image_state}", fix="accelenv lock")
        )
    if emulation := emulation_problem(platform, native=native):
        blockers.append(Blocker(what=emulation.split(": ", 1)[0], fix=emulation.split(": ", 1)[-1]))
    lock_option = "" if platform == native else f" --platform {platform}"
    if standin := committed_standin_lock(repo, env.id, overrides):
        blockers.append(Blocker(what=standin, fix=f"git rm {os_lock_path(repo, env.id).relative_to(repo)}"))
    reference = view.runtimes[env.runtime].base_images[env.os].reference
    packages = os_packages(view, env)
    os_path = (
        override_lock_path(repo, env.id).with_name(os_lock_name(platform))
        if override
        else os_lock_path(repo, env.id, platform)
    )
    os_rel = os_path.relative_to(repo)
    os_lock, os_text = None, ""
    os_blocker: Blocker | None = None
    if packages:
        os_state = os_lock_state(repo, env.id, reference, packages, platform, path=os_path)
        if os_state is LockState.UNLOCKED:
            os_blocker = Blocker(
                what=f"{os_rel} is missing: the base {reference} lacks Python {env.python}, so its OS packages "
                f"({', '.join(packages)}) must be locked first",
                fix=f"accelenv lock {env.id}{lock_option}",
            )
        elif os_state is LockState.STALE:
            defect = os_lock_defect(repo, env.id, platform, path=os_path) or "made for another base or package list"
            os_blocker = Blocker(what=f"{os_rel} is stale: {defect}", fix=f"accelenv lock {env.id}{lock_option}")
        else:
            os_text = read_text(os_path, what="OS package lock")
            try:
                os_lock = parse_os_lock(os_text, where=str(os_rel))
            except ValueError as error:
                os_blocker = Blocker(what=str(error), fix=f"accelenv lock {env.id} --force")
    why: str | None = None
    if platform != native:  # an engine keeps one image per tag: a foreign base lives under accelenv's own name
        local = base_reference(reference, platform, native=native)
        found = engine.image(local)
        if found is None:
            blockers.append(
                Blocker(
                    what=f"its base image {reference} for {platform} is not on the engine as {local}",
                    fix=f"docker pull --platform {platform} {reference} && docker tag {reference} {local}, then "
                    f"docker pull {reference} again for this machine (docs/images.md: Other platforms)",
                )
            )
        elif image_platform(found) != platform:
            blockers.append(
                Blocker(
                    what=f"the engine's {local} states {found.architecture or 'no architecture'}, not {platform}",
                    fix=f"python -m accelenv.build.platforms ROOTFS.tar {local} --platform {platform}",
                )
            )
            found = None
    else:
        found, why = _base_on_engine(engine, reference, os_lock.pin if os_lock else None, pull)
    if found is None and platform == native:
        if override is not None:
            blockers.append(
                Blocker(
                    what=f"its stand-in base {reference} ({OVERRIDES}) is not on the engine",
                    fix=f"accelenv base make {env.id} (or accelenv base drop {env.id} to use the real base)",
                )
            )
        else:
            reason = (why or "").removeprefix(f"pull of {reference} failed: ")
            detail = f" and could not be pulled: {reason}" if why and not why.startswith("not pulled") else ""
            blockers.append(
                Blocker(
                    what=f"its base image {reference} is not on the engine{detail}",
                    fix=f"accelenv build {env.id} pulls it where its registry can be reached; if none can be, "
                    f"build on a local stand-in: accelenv base make {env.id} ({NO_REGISTRY_HELP})"
                    if why and why.startswith("not pulled")
                    else f"docker pull {reference} where its registry can be reached (or docker load a saved "
                    f"copy); if none can be, build on a local stand-in: accelenv base make {env.id} "
                    f"({NO_REGISTRY_HELP})",
                )
            )
    if found is None and os_blocker is not None and os_blocker.fix == f"accelenv lock {env.id}{lock_option}":
        os_blocker = Blocker(
            what=os_blocker.what, fix=f"accelenv lock {env.id}{lock_option}, once the base is on the engine"
        )
    if os_blocker is not None:
        blockers.append(os_blocker)
    if push and override is not None:
        blockers.append(
            Blocker(
                what=f"--push: it would be built on the local stand-in {override.base}, not its real base",
                fix=f"push only images of the real base: build without --push, or accelenv base drop {env.id}",
            )
        )
    if blockers or found is None:
        return blockers
    try:
        return plan_build(
            view,
            env,
            matrix_text=matrix_text,
            lock=read_text(lock_path(repo, env.id), what="lock file"),
            image_lock=read_text(image_lock_path(repo), what="lock file"),
            accelenv_source=source_digest,
            base=BaseImage(id=found.id, digest=found.digests[0] if found.digests else None, created=found.created),
            os_lock=os_lock,
            os_lock_text=os_text,
            repository=repository,
            platform=platform,
            native=platform == native,
        )
    except BuildError as error:
        return [Blocker(what=str(error).removeprefix(f"{env.id}: "), fix="")]


def image_blockers(repo: Path, matrix: Matrix) -> dict[str, Unavailable | None]:
    """Per environment, why `accelenv build ENV` would refuse now from this checkout (None: it builds, pulling
    its base from the registry the matrix names): a lock that is not current, an OS package lock that is missing
    or stale where the base lacks the environment's Python, or a stand-in's lock in the committed place."""
    from accelenv.build.overrides import committed_standin_lock
    from accelenv.plan.lock import OS_LOCK_NAME, LockState, glibc_of, lock_state, os_lock_state
    from accelenv.plan.render import os_packages
    from accelenv.plan.start import Unavailable

    found: dict[str, Unavailable | None] = {}
    for env in matrix.envs.values():
        reasons = []
        state = lock_state(repo, env, glibc_of(matrix, env))
        if state is not LockState.CURRENT:
            reasons.append("it has no lock" if state is LockState.UNLOCKED else "its lock is stale")
        if committed_standin_lock(repo, env.id):
            reasons.append(f"its {OS_LOCK_NAME} was made against a local stand-in base")
        packages = os_packages(matrix, env)
        if packages:
            base = matrix.runtimes[env.runtime].base_images[env.os].reference
            os_state = os_lock_state(repo, env.id, base, packages)
            if os_state is not LockState.CURRENT:
                what = "has no" if os_state is LockState.UNLOCKED else "has a stale"
                reasons.append(f"its base {base} lacks Python {env.python} and it {what} {OS_LOCK_NAME}")
        found[env.id] = (
            Unavailable(why=f"accelenv build refuses it now: {'; '.join(reasons)}", fix=f"accelenv lock {env.id}")
            if reasons
            else None
        )
    return found
