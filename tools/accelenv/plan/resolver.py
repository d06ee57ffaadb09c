"""The resolver's edge: `uv pip compile` for an environment's lock (once per declared platform) and for the
image lock, in a process group accelenv ends, with the machine's own index settings scrubbed. The plan of what
a lock holds and how its header reads is `plan.lock`.
"""

from __future__ import annotations

import re
import subprocess
from typing import TYPE_CHECKING

from accelenv.matrix.resolve import index_options
from accelenv.plan.lock import (
    HEADER,
    IMAGE_LOCK_NAME,
    IMAGE_LOCK_PYTHON,
    INPUT_LINE,
    PYPI,
    image_input_digest,
    merge_platforms,
    render_lock,
    uv_platform,
)
from accelenv.plan.provenance import hashes_line
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from accelenv.matrix import Environment
    from accelenv.plan.provenance import LockedFile

    Verify = Callable[[Sequence[LockedFile]], list[str]]  # files -> problems (plan.digests.Verifier)


@frozen
class Resolution:
    env: str
    text: str | None  # the lock file, or None when resolution failed
    problem: str | None
    files: tuple[LockedFile, ...] = ()  # the files the lock's hashes name


def _uv() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        return "uv"
    return str(find_uv_bin())


def resolve(
    env: Environment, *, glibc: str | None = None, timeout: float = 900.0, verify: Verify | None = None
) -> Resolution:
    """Run the resolver for every platform of `env`, keep the hashes of the files those platforms can install,
    and with `verify` check each of them (without, the lock's header says its hashes are unverified). Never
    raises: a failure is a `Resolution` with a problem."""
    requirements = "\n".join(str(r) for r in env.requirements.packages) + "\n"
    results: dict[str, str] = {}
    files: list[LockedFile] = []
    for platform in sorted(env.platforms):
        argv = [
            _uv(), "pip", "compile", "-", "--generate-hashes", "--no-header", "--quiet", "--emit-index-annotation",
            "--python-version", env.python, "--python-platform", uv_platform(platform, glibc), *index_options(env),
        ]  # fmt: skip
        try:
            results[platform], found = _compile(argv, requirements, timeout)
        except _UnresolvedError as error:
            return Resolution(env=env.id, text=None, problem=error.problem or _explain(error.stderr, env, platform))
        files += found

    def render(body: str, verified: bool) -> str:
        return render_lock(env, body, glibc, verified=verified)

    return _checked(env.id, merge_platforms(results), files, verify, render)


class _UnresolvedError(Exception):
    """uv failed: `problem` says why, or (None) its `stderr` does."""

    def __init__(self, problem: str | None, stderr: str = "") -> None:
        super().__init__(problem)
        self.problem = problem
        self.stderr = stderr


def _compile(argv: list[str], requirements: str, timeout: float) -> tuple[str, tuple[LockedFile, ...]]:
    """uv's lock body (each pin with its index), and the files of its pins the target can install: uv again,
    as pylock.toml (answered from uv's cache), which names each file's URL."""
    from accelenv.plan.provenance import parse_pylock

    outputs = []
    for form in ([], ["--format", "pylock.toml"]):
        try:
            proc = run_uv([*argv, *form], requirements, timeout)
        except FileNotFoundError as error:
            raise _UnresolvedError("uv is not installed (pip install uv)") from error
        except subprocess.TimeoutExpired as error:
            raise _UnresolvedError(f"the resolver did not finish within {timeout:g} s") from error
        if proc.returncode != 0:
            raise _UnresolvedError(None, proc.stderr)
        outputs.append(proc.stdout)
    try:
        return outputs[0], parse_pylock(outputs[1])
    except ValueError as error:
        raise _UnresolvedError(str(error)) from error


def _checked(
    name: str, body: str, files: list[LockedFile], verify: Verify | None, render: Callable[[str, bool], str]
) -> Resolution:
    """The lock with only the hashes of `files` kept, each file checked by `verify` (every problem at once)."""
    from accelenv.plan.provenance import keep_installable

    try:
        body, kept = keep_installable(body, files)
    except ValueError as error:
        return Resolution(env=name, text=None, problem=str(error))
    problems = verify(kept) if verify is not None else []
    if problems:
        return Resolution(env=name, text=None, problem="\n    ".join(problems))
    return Resolution(env=name, text=render(body, verify is not None), problem=None, files=kept)


# The machine's own index settings must not reach a lock: a lock is made only from the indexes the matrix
# declares (index_options), so uv is run without these variables and without its configuration files.
SCRUBBED_PREFIXES = ("PIP_", "UV_INDEX", "UV_EXTRA_INDEX", "UV_DEFAULT_INDEX", "UV_FIND_LINKS", "UV_CONFIG_FILE")


def uv_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the index settings of pip and uv, and with uv's configuration files off."""
    kept = {k: v for k, v in environ.items() if not k.upper().startswith(SCRUBBED_PREFIXES)}
    return {**kept, "UV_NO_CONFIG": "1"}


def run_uv(argv: list[str], input_text: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """uv in a process group accelenv ends (on a timeout, SIGTERM or Ctrl-C), with the scrubbed environment."""
    import os

    from accelenv.host.run import run_in_group

    return run_in_group(argv, input_text=input_text, timeout=timeout, env=uv_environment(os.environ))


def _explain(stderr: str, env: Environment, platform: str) -> str:
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    detail = " ".join(lines[-4:])[:600] or "the resolver failed"
    network = re.search(r"(connect|dns|resolve host|timed out|network|Failed to fetch|tls|certificate)", stderr, re.I)
    if network:
        urls = [env.requirements.index_url or PYPI, *env.requirements.extra_index_urls]
        return f"an index could not be reached ({', '.join(urls)}) for {platform}: {detail}"
    return f"no resolution for {platform}: {detail}"


def resolve_image_lock(
    requirements: tuple[str, ...], *, timeout: float = 900.0, verify: Verify | None = None
) -> Resolution:
    """envs/accelenv-image.lock, for every Python and platform (so every file of each pin is kept and checked)."""
    argv = [
        _uv(), "pip", "compile", "-", "--universal", "--generate-hashes", "--no-header", "--quiet",
        "--emit-index-annotation", "--python-version", IMAGE_LOCK_PYTHON,
    ]  # fmt: skip
    try:
        body, files = _compile(argv, "\n".join(requirements) + "\n", timeout)
    except _UnresolvedError as error:
        detail = " ".join(error.stderr.strip().splitlines()[-4:])[:600]
        return Resolution(env=IMAGE_LOCK_NAME, text=None, problem=error.problem or f"no resolution: {detail}")

    def render(body: str, verified: bool) -> str:
        header = [
            HEADER.format(env="").rstrip() + " (accelenv's own dependencies inside every image)",
            INPUT_LINE.format(digest=image_input_digest(requirements)),
            f"# universal: Python >= {IMAGE_LOCK_PYTHON}, every platform; requirements: {' '.join(requirements)}",
            hashes_line("", verified=verified),
        ]
        return "\n".join([*header, "", body.strip("\n"), ""])

    return _checked(IMAGE_LOCK_NAME, body, list(files), verify, render)
