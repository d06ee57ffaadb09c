"""Container platforms: which ones an environment is built for, whether this machine can run a foreign one, and
where the engine keeps a base image of each.

An environment declares its platforms (`platforms = ["linux/amd64", "linux/arm64"]`); `accelenv build --platform`
picks one, `all` every one it declares, and by default the engine's own. A foreign platform's build steps run
through QEMU user emulation, which the kernel starts through `binfmt_misc`: the interpreter must be registered
with the `F` flag (the kernel opens it once, at registration, so it also works inside a container's root). That
is a host fact, read here from `/proc/sys/fs/binfmt_misc`.

An engine keeps one image per tag, so the base image of a foreign platform cannot sit under the matrix's
reference beside the native one. accelenv looks for it under `accelenv-platform/<repository>:<tag>-<arch>` (a name
in accelenv's own namespace, never one that pretends to be an upstream tag); `accelenv build` puts a base it pulls
for a foreign platform there, and `set_platform` gives an image made by `docker import` (which cannot say its
architecture on Docker 20.10) the platform its files are for.
"""

from __future__ import annotations

import platform as _platform
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from accelenv.errors import UsageError
from accelenv.matrix.model import PLATFORM_MACHINES

if TYPE_CHECKING:
    from accelenv.build.engine import DockerEngine, Engine, ImageInfo
    from accelenv.matrix import Environment

# linux/<platform> -> the architecture (and variant) an image config states
CONFIG_ARCHITECTURES = {"linux/amd64": ("amd64", ""), "linux/arm64": ("arm64", "v8")}
# linux/<platform> -> the binfmt_misc entry of Debian's qemu-user-static that runs it
QEMU_ENTRIES = {"linux/amd64": "qemu-x86_64", "linux/arm64": "qemu-aarch64"}
BINFMT = Path("/proc/sys/fs/binfmt_misc")
PLATFORM_NAMESPACE = "accelenv-platform"
EMULATION_SETUP = (
    "apt-get install qemu-user-static binfmt-support; "
    "mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc (if it is not mounted); "
    "update-binfmts --enable {entry}"
)


def host_platform(machine: str | None = None) -> str:
    """The container platform this machine runs natively (`uname -m`); linux/amd64 when it is none of ours."""
    machine = machine or _platform.machine()
    aliases = {"amd64": "x86_64", "arm64": "aarch64"}
    machine = aliases.get(machine, machine)
    for name, known in PLATFORM_MACHINES.items():
        if known == machine:
            return name
    return "linux/amd64"


def arch_of(platform: str) -> str:
    """The short name of a platform in tags and file names: amd64, arm64."""
    return CONFIG_ARCHITECTURES[platform][0]


def platforms_for(env: Environment, requested: str | None, *, native: str) -> list[str]:
    """The platforms to build `env` for: `requested` (a platform or `all`), or the engine's own. UsageError when
    the environment does not declare the one asked for."""
    if requested is None:
        return [native] if native in env.platforms else [env.platforms[0]]
    if requested == "all":
        return sorted(env.platforms, key=lambda p: (p != native, p))
    if requested not in PLATFORM_MACHINES:
        raise UsageError(
            f"--platform {requested}: not a platform accelenv builds; use one of {', '.join(PLATFORM_MACHINES)} or all"
        )
    if requested not in env.platforms:
        raise UsageError(
            f"{env.id} is not built for {requested}: envs.{env.id}.platforms declares "
            f"{', '.join(env.platforms)} (its lock covers only those); add {requested} there and run "
            f"`accelenv lock {env.id}` if its vendor ships {requested} packages"
        )
    return [requested]


def emulation_problem(platform: str, *, native: str, binfmt: Path = BINFMT) -> str | None:
    """Why this machine cannot run `platform`'s programs (None when it can: natively, or through a registered
    QEMU interpreter with the F flag), with the setup step."""
    if platform == native:
        return None
    entry = QEMU_ENTRIES[platform]
    setup = EMULATION_SETUP.format(entry=entry)
    path = binfmt / entry
    from accelenv.errors import UsageError as Unreadable
    from accelenv.fileio import read_bytes

    try:
        text = read_bytes(path, limit=4096, what="binfmt_misc entry").decode("utf-8", "replace")
    except Unreadable:
        return f"{platform} needs QEMU user emulation on this {native} machine, and {path} is not registered: {setup}"
    lines = text.splitlines()
    if not lines or lines[0].strip() != "enabled":
        return f"{platform} needs QEMU user emulation, and {path} is disabled: {setup}"
    flags = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("flags:")), "")
    if "F" not in flags:
        return (
            f"{platform} needs QEMU user emulation that works inside containers: {path} is registered without the F "
            f"(fix-binary) flag ({flags or 'no flags'}); register Debian's qemu-user-static interpreter, which sets "
            f"it: {setup}"
        )
    return None


def base_reference(reference: str, platform: str, *, native: str) -> str:
    """Where the engine keeps the base image `reference` of `platform`: the reference itself for the engine's own
    platform, else accelenv's per-platform name for it."""
    if platform == native:
        return reference
    if "@" in reference:  # by digest: the digest (of the index, for every platform) names it
        repository, _, digest = reference.partition("@")
        tag = digest.replace(":", "-")[:40]
    else:
        repository, _, tag = reference.rpartition(":")
    return f"{PLATFORM_NAMESPACE}/{repository}:{tag}-{arch_of(platform)}"


def image_platform(info: ImageInfo) -> str | None:
    """The platform an image states (linux/amd64, linux/arm64), or None when it states none of ours."""
    return next((name for name, (arch, _) in CONFIG_ARCHITECTURES.items() if info.architecture == arch), None)


def set_platform(engine: Engine, image_id: str, platform: str) -> str:
    """The image `image_id` with its config stating `platform` (same layers, a new id); its id. For a base made
    with `docker import` from a foreign root file system: the engine stamps its own architecture on it."""
    from accelenv.build.image_config import with_architecture

    arch, variant = CONFIG_ARCHITECTURES[platform]
    return engine.load_config(with_architecture(engine.image_config(image_id), arch, variant))


def import_root(engine: DockerEngine, archive: str, reference: str, platform: str) -> str:
    """A stand-in base image from a root file system tarball (`debootstrap --arch arm64 ...`, then tar): imported
    as `docker import` does (`DockerEngine.import_rootfs`), given `platform` in its config, tagged `reference`;
    its id. The import under the engine's own architecture is removed."""
    imported = engine.import_rootfs(archive, reference)
    image_id = set_platform(engine, imported, platform)
    engine.tag(image_id, reference)
    if image_id != imported:
        engine.remove(imported)
    return image_id


def main(argv: list[str] | None = None) -> int:
    """`python -m accelenv.build.platforms ROOTFS.tar REFERENCE --platform linux/arm64`: a stand-in base image of a
    foreign platform, for machines that reach no registry (the recipe is in docs/images.md)."""
    import argparse

    from accelenv.build.engine import EngineError, connect

    parser = argparse.ArgumentParser(prog="python -m accelenv.build.platforms", description=main.__doc__)
    parser.add_argument("archive", help="a tar of the root file system")
    parser.add_argument("reference", help="the name to give it, e.g. accelenv-platform/debian:bookworm-arm64")
    parser.add_argument("--platform", required=True, choices=sorted(CONFIG_ARCHITECTURES))
    args = parser.parse_args(argv)
    try:
        with connect(timeout=600) as engine:
            image_id = import_root(engine, str(Path(args.archive).resolve()), args.reference, args.platform)
    except (EngineError, OSError) as error:
        sys.stderr.write(f"accelenv: {error}\n")
        return 1
    sys.stdout.write(f"{args.reference}: {image_id} ({args.platform})\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
