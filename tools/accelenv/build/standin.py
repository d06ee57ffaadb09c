"""A stand-in base image made on this machine, for building where no registry can be reached.

The route CI uses: `debootstrap --variant=minbase SUITE ROOTFS MIRROR`, then `docker import` of the tree, named
`accelenv-standin/<os>:<suite>-minbase` (never under the name of the real base it stands in for). It ships no
Python: the environment's Python comes from the OS release's packages, locked against the stand-in by
`accelenv lock ENV` and installed offline by the build (`build.overrides` keeps that lock beside the override).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from accelenv.build.overrides import STANDIN_REPOSITORY
from accelenv.errors import UsageError
from accelenv.host.run import run_in_group
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable

    from accelenv.build.engine import DockerEngine
    from accelenv.matrix.model import Environment, Matrix

DEBOOTSTRAP_TIMEOUT = 1800.0  # seconds: a minbase bookworm is ~200 MB of .debs
# OS id -> (debootstrap suite, mirror). Debian's and Ubuntu's own archives; debootstrap knows both.
SUITES = {
    "debian12": ("bookworm", "http://deb.debian.org/debian"),
    "debian13": ("trixie", "http://deb.debian.org/debian"),
    "ubuntu22.04": ("jammy", "http://archive.ubuntu.com/ubuntu"),
    "ubuntu24.04": ("noble", "http://archive.ubuntu.com/ubuntu"),
}


@frozen
class StandinPlan:
    env: str
    suite: str
    mirror: str
    tag: str  # accelenv-standin/<os>:<suite>-minbase


def plan_standin(matrix: Matrix, env: Environment, *, mirror: str | None = None) -> StandinPlan:
    """What `accelenv base make ENV` makes, or why it cannot: an OS debootstrap cannot make, or an OS release
    whose packages do not provide the environment's Python (a stand-in could not supply it)."""
    suite = SUITES.get(env.os)
    if suite is None:
        raise UsageError(
            f"{env.id}: no stand-in recipe for OS {env.os} (debootstrap makes {', '.join(sorted(SUITES))}); build "
            "it where its real base can be pulled"
        )
    os_python = matrix.os[env.os].python if env.os in matrix.os else None
    if os_python != env.python:
        raise UsageError(
            f"{env.id}: it needs Python {env.python}, but {env.os}'s packages provide "
            f"{os_python or 'no known Python'} (matrix: os.{env.os}.python): a stand-in made from {env.os} cannot "
            "supply it; build it where its real base can be pulled"
        )
    return StandinPlan(
        env=env.id, suite=suite[0], mirror=mirror or suite[1], tag=f"{STANDIN_REPOSITORY}/{env.os}:{suite[0]}-minbase"
    )


def _require_tools() -> None:
    missing = [tool for tool in ("debootstrap", "tar") if shutil.which(tool) is None]
    if missing:
        raise UsageError(f"{' and '.join(missing)} not found: install it (apt-get install debootstrap) and run again")
    if os.geteuid() != 0:
        raise UsageError("debootstrap needs root: run `sudo accelenv base make ENV` (or as root)")


def make_standin(plan: StandinPlan, engine: DockerEngine, say: Callable[[str], None]) -> str:
    """Debootstrap the plan's suite and import it as `plan.tag`; the image's id. The temporary tree is removed
    whatever happens."""
    _require_tools()
    with tempfile.TemporaryDirectory(prefix="accelenv-standin-") as folder:
        rootfs = Path(folder) / "rootfs"
        say(f"debootstrap --variant=minbase {plan.suite} from {plan.mirror} (a few minutes)")
        _run(["debootstrap", "--variant=minbase", plan.suite, str(rootfs), plan.mirror], "debootstrap")
        tarball = Path(folder) / "rootfs.tar"
        say(f"docker import as {plan.tag}")
        _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tarball), "."], "tar")
        return engine.import_rootfs(str(tarball), plan.tag)


def _run(command: list[str], what: str) -> None:
    try:
        proc = run_in_group(command, input_text="", timeout=DEBOOTSTRAP_TIMEOUT)
    except subprocess.TimeoutExpired as error:
        raise UsageError(f"{what} did not finish within {DEBOOTSTRAP_TIMEOUT:g} s") from error
    except OSError as error:
        raise UsageError(f"{what} could not start: {error}") from error
    if proc.returncode != 0:
        detail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])[:800]
        raise UsageError(f"{what} exited {proc.returncode}: {detail}")
