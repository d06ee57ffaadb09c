"""CI fan-out: one job per environment, for GitHub Actions (strategy.matrix JSON) or Buildkite (pipeline YAML).

Pure: the matrix (and, for --changed, the previous matrix) in, job rows out. Runner labels and queues are data
in the matrix (families, overridable per environment); tiers nest: a nightly run includes the pr environments,
a release run includes everything. With changed files, only the affected environments run.
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from accelenv.matrix.model import CiTier
from accelenv.matrix.resolve import resolve
from accelenv.plan.render import human_tag
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.matrix import Environment, Matrix

ORDER = {CiTier.PR: 0, CiTier.NIGHTLY: 1, CiTier.RELEASE: 2}
# Files whose change can affect every environment (the tool itself, its sessions, its packaging).
EVERYTHING = ("tools/", "noxfile.py", "pyproject.toml", ".ci/", "schema/")


@frozen
class Job:
    env: str
    family: str
    tier: str
    runs_on: tuple[str, ...]
    queue: str
    session: str
    image: str
    platform: str = "linux/amd64"

    def as_github(self) -> dict[str, object]:
        return {
            "env": self.env,
            "family": self.family,
            "tier": self.tier,
            "runs-on": list(self.runs_on),
            "session": self.session,
            "image": self.image,
            "platform": self.platform,
            "arch": self.platform.rpartition("/")[2],  # for names that cannot hold a slash (artifacts)
        }


def effective_tier(matrix: Matrix, env: Environment) -> CiTier:
    family_tier = matrix.families[env.family].ci_tier
    return max(env.ci_tier, family_tier, key=ORDER.__getitem__)


def affected(matrix: Matrix, changed: list[str], previous: Matrix | None) -> set[str]:
    """Environments a change touches. matrix.toml: those whose resolved form differs from the previous matrix's
    (all of them when no previous matrix is given); envs/<env>/ and images/<env>/: that env; a family's device
    tests: its envs; the tool itself: everything; anything else (docs): nothing."""
    hit: set[str] = set()
    for path in changed:
        if path.startswith(EVERYTHING):
            return set(matrix.envs)
        if path == "matrix.toml":
            if previous is None:
                return set(matrix.envs)
            hit |= {
                e.id
                for e in matrix.envs.values()
                if e.id not in previous.envs or resolve(previous, previous.envs[e.id]) != resolve(matrix, e)
            }
        elif path.startswith(("envs/", "images/")):
            parts = path.split("/")
            if len(parts) > 1 and parts[1] in matrix.envs:
                hit.add(parts[1])
        elif path.startswith("tests/devices/"):
            name = path.rsplit("/", 1)[-1]
            if name.startswith("test_") and name.endswith("_devices.py"):
                family = name[len("test_") : -len("_devices.py")]
                hit |= {e.id for e in matrix.envs.values() if e.family == family}
            else:  # conftest and shared support: every family
                return set(matrix.envs)
    return hit


def jobs(
    matrix: Matrix,
    *,
    tier: CiTier,
    changed: list[str] | None = None,
    previous: Matrix | None = None,
    blocked: Mapping[str, str] | None = None,
    blocked_platforms: Mapping[tuple[str, str], str] | None = None,
) -> list[Job]:
    """The jobs of `tier`; an environment in `blocked`, or an (environment, platform) in `blocked_platforms` (see
    plan/readiness.py), is not scheduled."""
    out = []
    for env in _selected(matrix, tier=tier, changed=changed, previous=previous):
        env_tier = effective_tier(matrix, env)
        if blocked and env.id in blocked:
            continue
        family = matrix.families[env.family]
        queue = env.ci_queue or family.ci_queue or env.family
        runners = {"linux/amd64": (env.ci_runner or family.ci_runner, queue)}
        for platform, (labels, platform_queue) in family.ci_platforms.items():
            runners[platform] = (labels, platform_queue or f"{queue}-{platform.rpartition('/')[2]}")
        # one job per platform the environment declares and the family has runners of
        for platform in (p for p in env.platforms if p in runners):
            if blocked_platforms and (env.id, platform) in blocked_platforms:
                continue
            labels, job_queue = runners[platform]
            out.append(
                Job(
                    env=env.id,
                    family=env.family,
                    tier=str(env_tier),
                    runs_on=labels,
                    queue=job_queue,
                    session=env.id,
                    image=human_tag("accelenv", matrix, env),
                    platform=platform,
                )
            )
    return out


def _selected(matrix: Matrix, *, tier: CiTier, changed: list[str] | None, previous: Matrix | None) -> list[Environment]:
    selected = affected(matrix, changed, previous) if changed is not None else set(matrix.envs)
    return [
        env for env in matrix.envs.values() if env.id in selected and ORDER[effective_tier(matrix, env)] <= ORDER[tier]
    ]


def not_scheduled(
    matrix: Matrix,
    *,
    tier: CiTier,
    blocked: Mapping[str, str],
    changed: list[str] | None = None,
    previous: Matrix | None = None,
    blocked_platforms: Mapping[tuple[str, str], str] | None = None,
) -> list[tuple[str, str]]:
    """(env, why) for each environment the tier would run but that cannot run, in matrix order; ("env (platform)",
    why) for each platform of one that cannot run there."""
    out = []
    for env in _selected(matrix, tier=tier, changed=changed, previous=previous):
        if env.id in blocked:
            out.append((env.id, blocked[env.id]))
            continue
        out += [
            (f"{env.id} ({platform})", why)
            for (env_id, platform), why in (blocked_platforms or {}).items()
            if env_id == env.id
        ]
    return out


def github(rows: list[Job]) -> str:
    """strategy.matrix JSON: {"include": [...]} (GitHub refuses an empty include: then {"include": []} and the
    workflow skips the job on `fromJSON(...).include[0] == null`)."""
    return json.dumps({"include": [job.as_github() for job in rows]}, indent=2) + "\n"


def _yaml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid YAML scalar


def buildkite(rows: list[Job], skipped: list[tuple[str, str]] | None = None) -> str:
    """A pipeline for `buildkite-agent pipeline upload`: build the image on the family's queue, then run the
    environment's session there. An environment that cannot run gets one soft-failing step that says why,
    visible on the build, never a job that would pretend to test it."""
    lines = ["# generated by accelenv ci --format buildkite", "steps:"]
    for env_id, why in skipped or []:
        say = shlex.quote(f"{env_id} not scheduled: {why}")
        lines += [
            f"  - label: {_yaml(f':warning: {env_id} not scheduled')}",
            f"    command: {_yaml(f'echo {say}; exit 1')}",
            "    soft_fail: true",
        ]
    for job in rows:
        suffix = "" if job.platform == "linux/amd64" else f"-{job.platform.rpartition('/')[2]}"
        name = job.env + suffix
        lines += [
            f"  - label: {_yaml(f':docker: {name}')}",
            f"    key: {_yaml('image-' + name)}",
            f"    command: {_yaml(f'accelenv build {job.env} --platform {job.platform}')}",
            "    agents:",
            f"      queue: {_yaml(job.queue)}",
            f"  - label: {_yaml(f':test_tube: {name}')}",
            f"    depends_on: {_yaml('image-' + name)}",
            f"    command: {_yaml(f'nox -s {job.session}')}",
            "    agents:",
            f"      queue: {_yaml(job.queue)}",
            "    env:",
            f"      ACCELENV_ENV: {_yaml(job.env)}",
        ]
    if not rows and not skipped:
        lines.append('  - label: "no environment is affected"')
        lines.append('    command: "true"')
    return "\n".join(lines) + "\n"
