"""The resolver's edge: `uv pip compile` for an environment's lock (once per declared platform) and for the
image lock, in a process group accelenv ends, with the machine's own index settings scrubbed. The plan of what
a lock holds and how its header reads is `plan.lock`.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
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

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.matrix import Environment


@dataclass(frozen=True, kw_only=True)
class Resolution:
    env: str
    text: str | None  # the lock file, or None when resolution failed
    problem: str | None


def _uv() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        return "uv"
    return str(find_uv_bin())


def resolve(env: Environment, *, glibc: str | None = None, timeout: float = 900.0) -> Resolution:
    """Run the resolver for every platform of `env`. Never raises: a failure is a `Resolution` with a problem."""
    requirements = "\n".join(str(r) for r in env.requirements.packages) + "\n"
    results: dict[str, str] = {}
    for platform in sorted(env.platforms):
        argv = [
            _uv(),
            "pip",
            "compile",
            "-",
            "--generate-hashes",
            "--no-header",
            "--quiet",
            "--python-version",
            env.python,
            "--python-platform",
            uv_platform(platform, glibc),
            *index_options(env),
        ]
        try:
            proc = run_uv(argv, requirements, timeout)
        except FileNotFoundError:
            return Resolution(env=env.id, text=None, problem="uv is not installed (pip install uv)")
        except subprocess.TimeoutExpired:
            return Resolution(env=env.id, text=None, problem=f"the resolver did not finish within {timeout:g} s")
        if proc.returncode != 0:
            return Resolution(env=env.id, text=None, problem=_explain(proc.stderr, env, platform))
        results[platform] = proc.stdout
    return Resolution(env=env.id, text=render_lock(env, merge_platforms(results), glibc), problem=None)


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


def resolve_image_lock(requirements: tuple[str, ...], *, timeout: float = 900.0) -> Resolution:
    argv = [
        _uv(), "pip", "compile", "-", "--universal", "--generate-hashes", "--no-header", "--quiet",
        "--python-version", IMAGE_LOCK_PYTHON,
    ]  # fmt: skip
    try:
        proc = run_uv(argv, "\n".join(requirements) + "\n", timeout)
    except FileNotFoundError:
        return Resolution(env=IMAGE_LOCK_NAME, text=None, problem="uv is not installed (pip install uv)")
    except subprocess.TimeoutExpired:
        return Resolution(env=IMAGE_LOCK_NAME, text=None, problem=f"the resolver did not finish within {timeout:g} s")
    if proc.returncode != 0:
        detail = " ".join(proc.stderr.strip().splitlines()[-4:])[:600]
        return Resolution(env=IMAGE_LOCK_NAME, text=None, problem=f"no resolution: {detail}")
    header = [
        HEADER.format(env="").rstrip() + " (accelenv's own dependencies inside every image)",
        INPUT_LINE.format(digest=image_input_digest(requirements)),
        f"# universal: Python >= {IMAGE_LOCK_PYTHON}, every platform; requirements: {' '.join(requirements)}",
    ]
    return Resolution(env=IMAGE_LOCK_NAME, text="\n".join([*header, "", proc.stdout.strip("\n"), ""]), problem=None)
