"""Local base overrides: an environment built on a stand-in base made on this machine, when the real base's
registry cannot be reached. Never under the real base's name, never committed.

`.accelenv/overrides.toml` (untracked: `.accelenv/` is gitignored) names, per environment, the image to build it
on instead of its runtime's base (`accelenv base make ENV` writes it):

    [envs.cpu-py311]
    base = "accelenv-standin/debian12:bookworm-minbase"   # the stand-in; never a matrix base's repository
    python = "3.11"                                        # optional: the Python the stand-in ships

A stand-in without the environment's Python gets it from its OS release, through an OS package lock made against
the stand-in. That lock lives with the override (`.accelenv/overrides/<env>/os-packages.lock`), never in
`envs/<env>/`, where a lock made against a stand-in is flagged (`committed_standin_lock`): it is not the real
base's lock. Everything here but `load` and `save` is pure.
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import TYPE_CHECKING

from accelenv import records
from accelenv.errors import UsageError
from accelenv.fileio import read_text_if_exists, write_atomic
from accelenv.records import frozen

if TYPE_CHECKING:
    from pathlib import Path

    from accelenv.check.verdict import Finding
    from accelenv.matrix.model import Environment, Matrix

OVERRIDES = ".accelenv/overrides.toml"
STANDIN_REPOSITORY = "accelenv-standin"  # what `accelenv base make` names its images: <this>/<os>:<suite>-minbase
_REFERENCE = re.compile(r"\A[a-z0-9][a-z0-9._/-]{0,200}(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?\Z")
_PYTHON = re.compile(r"\A3\.\d{1,2}\Z")


@frozen
class Override:
    env: str
    base: str  # repository:tag of the stand-in
    python: str | None  # the Python it ships, if any


def overrides_path(repo: Path) -> Path:
    return repo / OVERRIDES


def override_lock_path(repo: Path, env_id: str) -> Path:
    """Where the OS package lock made against an environment's stand-in lives: beside the override."""
    return repo / ".accelenv" / "overrides" / env_id / "os-packages.lock"


def _real_repositories(matrix: Matrix) -> set[str]:
    return {image.repository for rt in matrix.runtimes.values() for image in rt.base_images.values()}


def parse(text: str, matrix: Matrix, *, where: str = OVERRIDES) -> dict[str, Override]:
    """The overrides in `text`; every problem at once, each naming its key path and what to do."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{where}: not TOML: {error}; fix it or delete it (accelenv base drop ENV)") from error
    problems: list[str] = []
    unknown = sorted(set(document) - {"envs"})
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(unknown)}: only [envs.<env>] tables")
    envs = document.get("envs", {})
    if not isinstance(envs, dict):
        raise UsageError(f"{where}: envs: expected a table of environments")
    found: dict[str, Override] = {}
    real = _real_repositories(matrix)
    for env_id, entry in envs.items():
        key = f"{where}: envs.{env_id}"
        if env_id not in matrix.envs:
            problems.append(f"{key}: not an environment of the matrix; remove it (accelenv base drop {env_id})")
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("base"), str):
            problems.append(f'{key}.base: expected a string, e.g. base = "{STANDIN_REPOSITORY}/debian12:bookworm"')
            continue
        base, python = entry["base"], entry.get("python")
        extra = sorted(set(entry) - {"base", "python"})
        if extra:
            problems.append(f"{key}: unknown key(s) {', '.join(extra)}: only base and python")
        if not _REFERENCE.fullmatch(base) or "@" in base:
            problems.append(f"{key}.base: {base!r} is not an image reference repository[:tag]")
        elif base.rpartition(":")[0] in real or base in real:
            problems.append(
                f"{key}.base: {base!r} is the repository of a real base in the matrix; a stand-in must not pass "
                f"for it: name it {STANDIN_REPOSITORY}/..."
            )
        if python is not None and (not isinstance(python, str) or not _PYTHON.fullmatch(python)):
            problems.append(f'{key}.python: expected a version such as "3.11", not {python!r}')
        found[env_id] = Override(env=env_id, base=base, python=python or None)
    if problems:
        raise UsageError("\n".join(problems) if len(problems) == 1 else "\n  ".join(["invalid overrides:", *problems]))
    return found


def load(repo: Path, matrix: Matrix) -> dict[str, Override]:
    """The overrides of this working tree (none when the file does not exist)."""
    text = read_text_if_exists(overrides_path(repo), limit=2**20, what="overrides file")
    return {} if text is None else parse(text, matrix)


def render(overrides: dict[str, Override]) -> str:
    lines = [
        "# Local base overrides of this working tree; never commit (accelenv base make/drop write this file).",
        "# An environment named here is built on the stand-in, with its OS package lock beside this file.",
    ]
    for env_id in sorted(overrides):
        o = overrides[env_id]
        lines += ["", f"[envs.{json.dumps(env_id)}]", f"base = {json.dumps(o.base)}"]
        if o.python:
            lines.append(f"python = {json.dumps(o.python)}")
    return "\n".join(lines) + "\n"


def save(repo: Path, overrides: dict[str, Override]) -> None:
    path = overrides_path(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, render(overrides), inside=repo)


def apply(matrix: Matrix, env: Environment, override: Override | None) -> Matrix:
    """The matrix as `env`'s build sees it: its runtime's base for its OS replaced by the stand-in (the other
    environments of that runtime are not built from this view)."""
    if override is None:
        return matrix
    from accelenv.matrix.model import ImageRef

    runtime = matrix.runtimes[env.runtime]
    repository, _, tag = override.base.rpartition(":") if ":" in override.base else (override.base, "", "latest")
    image = ImageRef(repository=repository, tag=tag, digest=None, python=override.python)
    bases = {**runtime.base_images, env.os: image}
    runtimes = {**matrix.runtimes, env.runtime: records.replace(runtime, base_images=bases)}
    return records.replace(matrix, runtimes=runtimes)


def is_standin(reference: str, overrides: dict[str, Override] | None = None) -> bool:
    """Whether `reference` names a stand-in: accelenv's stand-in repository, or an override's base."""
    name = reference.partition("@")[0]
    if name.startswith(f"{STANDIN_REPOSITORY}/"):
        return True
    return any(name == o.base for o in (overrides or {}).values())


def committed_standin_lock(repo: Path, env_id: str, overrides: dict[str, Override] | None = None) -> str | None:
    """What is wrong when `envs/<env>/os-packages.lock` was made against a stand-in: it cannot be the real
    base's lock, whatever its header says (None when there is no such file, or it names a real base)."""
    from accelenv.plan.lock import os_lock_path, read_lock

    path = os_lock_path(repo, env_id)
    text = read_lock(repo, path, what="OS package lock")
    if text is None:
        return None
    match = re.search(r"^# base: (\S+) pinned \S+\r?$", text, re.MULTILINE)
    if match is None or not is_standin(match.group(1), overrides):
        return None
    rel = path.relative_to(repo)
    return (
        f"{rel} was made against the local stand-in {match.group(1)}, not the real base: it must never be "
        f"committed (stand-in locks live in {override_lock_path(repo, env_id).relative_to(repo)})"
    )


def standin_finding(matrix: Matrix, env: Environment, override: Override) -> Finding:
    """What `verify` adds for an image built on a stand-in: a warning that it is not the matrix's image."""
    from accelenv.check.verdict import Finding, Status

    real = matrix.runtimes[env.runtime].base_images[env.os].reference
    return Finding(
        id="image.base",
        status=Status.WARN,
        expected=real,
        found=f"{override.base} (local override, {OVERRIDES})",
        message="built on a local stand-in base: fine for work here, not a release image (never push it)",
        fix=f"accelenv base drop {env.id}, then build on the real base where its registry can be reached",
    )
