"""Where a CI job's log is: the run URL a result record carries, and the run a judging job accepts records from.

Pure: the environment in, a URL or None out. `ACCELENV_RUN_URL` wins (`accelenv run` passes it into the image, so
a suite run inside it records the job that started it); else GitHub Actions' run (GITHUB_SERVER_URL,
GITHUB_REPOSITORY, GITHUB_RUN_ID), or Buildkite's job (BUILDKITE_BUILD_URL, and BUILDKITE_JOB_ID as its anchor,
where the build page opens that job). Anything that is not a plain https URL is dropped, never recorded.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

RUN_URL_ENV = "ACCELENV_RUN_URL"
_URL = re.compile(r"https://[A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=%-]{1,2000}")
_JOB_ID = re.compile(r"[A-Za-z0-9-]{1,100}")


def _plain(url: str | None) -> str | None:
    return url if url and _URL.fullmatch(url) else None


def build_url(environ: Mapping[str, str]) -> str | None:
    """The URL of the run (GitHub) or build (Buildkite) the current job belongs to, or None outside CI."""
    if environ.get("GITHUB_RUN_ID"):
        server, repo = environ.get("GITHUB_SERVER_URL", ""), environ.get("GITHUB_REPOSITORY", "")
        return _plain(f"{server}/{repo}/actions/runs/{environ['GITHUB_RUN_ID']}")
    return _plain(environ.get("BUILDKITE_BUILD_URL"))


def run_url(environ: Mapping[str, str]) -> str | None:
    """The URL a record of the current job carries: $ACCELENV_RUN_URL, else the GitHub run, else the Buildkite
    job (its build URL with the job id as anchor); None when none is known or the value is not a plain URL."""
    if environ.get(RUN_URL_ENV):
        return _plain(environ[RUN_URL_ENV])
    if environ.get("GITHUB_RUN_ID"):
        return build_url(environ)
    build = build_url(environ)
    job = environ.get("BUILDKITE_JOB_ID", "")
    if build is not None and _JOB_ID.fullmatch(job):
        return f"{build}#{job}"
    return build


def in_run(url: str | None, run: str) -> bool:
    """Whether a record's `url` is a job of `run` (the run itself, or one of its jobs: `run#job`)."""
    return url is not None and (url == run or url.startswith(run + "#"))
