"""The judging job's first step: take only the records this run's own jobs produced.

Each session job uploads its evidence in an artifact named for it (plan/ci.py `Job.artifact`); the judging job
downloads its run's artifacts into one folder, one subfolder per artifact. A record counts only when it lies in
the subfolder of a job the plan scheduled, names that job's environment, and carries a run URL of this run: a
record committed to the tree, uploaded under another name, or made by another run (a fork's pull request) proves
nothing here, and is named. A scheduled job whose artifact holds no record is a finding too: it ran and left no
proof, or never ran. Whether a record is valid, passed or regressed is `accelenv results`' judgement, not this one.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from accelenv.errors import UsageError
from accelenv.fileio import read_bytes
from accelenv.host.run_url import in_run
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

SUFFIX = ".result.json"  # as results/record.py writes them
MAX_RECORD = 8 << 20
ARTIFACT = re.compile(r"accelenv-session-[a-z0-9][a-z0-9_.-]{0,80}")


@frozen
class Expected:
    artifact: str
    env: str


@frozen
class Collected:
    accepted: tuple[tuple[str, str, str], ...]  # (artifact, file name, the record's text as read)
    problems: tuple[str, ...]  # each fails the judging job
    ignored: tuple[str, ...]  # folders no job of this run uploaded: named, never read


def parse_expected(values: Iterable[str]) -> list[Expected]:
    """`ARTIFACT=ENV` pairs (`accelenv ci` writes them into the judging step) as `Expected`."""
    out = []
    for value in values:
        artifact, sep, env = value.partition("=")
        if not sep or not ARTIFACT.fullmatch(artifact) or not env:
            raise UsageError(
                f"--expect {value!r}: expected ARTIFACT=ENV with ARTIFACT an accelenv-session-... artifact name "
                "(as `accelenv ci` writes it)"
            )
        out.append(Expected(artifact=artifact, env=env))
    return out


def expected_from_plan(data: object, where: str) -> list[Expected]:
    """The `expected` list of `accelenv ci --format github` output."""
    rows = data.get("expected") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UsageError(f"{where}: no `expected` list; write it with `accelenv ci --format github`")
    return parse_expected(f"{r.get('artifact')}={r.get('env')}" for r in rows)


def collect(folder: Path, expected: list[Expected], *, run: str) -> Collected:
    """The records under `folder/<artifact>/` of each expected job that name its environment and a job of `run`."""
    accepted: list[tuple[str, str, str]] = []
    problems: list[str] = []
    names = {e.artifact for e in expected}
    ignored = sorted(p.name for p in (folder.iterdir() if folder.is_dir() else ()) if p.name not in names)
    for job in expected:
        where = folder / job.artifact
        files = sorted(where.rglob("*" + SUFFIX)) if where.is_dir() and not where.is_symlink() else []
        kept = 0
        for path in files:
            got = _read(path, job, run)
            if isinstance(got, Problem):
                problems.append(f"{path.relative_to(folder)}: {got.why}")
            else:
                accepted.append((job.artifact, path.name, got))
                kept += 1
        if not kept:
            problems.append(
                f"{job.artifact}: the job scheduled for {job.env} left no record of this run"
                + ("" if where.is_dir() else " (no artifact: it did not run, or failed before uploading)")
            )
    return Collected(accepted=tuple(accepted), problems=tuple(problems), ignored=tuple(ignored))


@frozen
class Problem:
    why: str


def _read(path: Path, job: Expected, run: str) -> str | Problem:
    """The record's text when it counts for `job` of `run`, else why not."""
    if path.is_symlink():
        return Problem(why="a symlink, not a record")
    try:
        text = read_bytes(path, limit=MAX_RECORD, what="result record").decode("utf-8")
        data = json.loads(text)
    except (UsageError, ValueError) as error:
        return Problem(why=f"not a readable JSON record ({str(error)[:200]})")
    env = data.get("env") if isinstance(data, dict) else None
    env_id = env.get("id") if isinstance(env, dict) else None
    if env_id != job.env:
        return Problem(why=f"names environment {str(env_id)[:80]!r}, but its job ran {job.env}: not counted")
    url = data.get("run_url") if isinstance(data, dict) else None
    if not isinstance(url, str) or not in_run(url, run):
        return Problem(why=f"made by another run ({str(url)[:200]}), not {run}: not counted")
    return text
