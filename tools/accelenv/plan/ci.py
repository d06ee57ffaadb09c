"""CI fan-out: which jobs a run schedules, and what it cannot schedule and why.

Pure: the matrix (and, for --changed, the previous matrix) and the tree's readiness (plan/readiness.py) in, a
`Plan` out. Runner labels and queues are data in the matrix (families, overridable per environment); tiers nest:
a nightly run includes the pr environments, a release run includes everything. With changed files, only the
affected environments run.

Two kinds of job, apart so that one never blocks the other: an image job builds and verifies an environment's
image; a session job runs its nox session. A framework from the lock is tested on the runner, so the session job
runs whether or not the image can be built; a framework from the base image is tested inside the image, which
the session job builds itself, on the same runner (no registry between two machines). A default environment
with no session job is an error unless the matrix says why (`envs.<env>.ci_unschedulable`). Each session job's
evidence travels in an artifact whose name is bound to the job (`artifact`); the plan lists them (`expected`) so
the judging job knows which records its run must have produced (plan/ci_collect.py).

The documents (GitHub matrix JSON, Buildkite pipeline, text) are in plan/ci_outputs.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from accelenv.check.runner_labels import verdict_label
from accelenv.matrix.model import CiTier, FrameworkSource
from accelenv.matrix.resolve import resolve
from accelenv.plan.codeowners import env_owners
from accelenv.plan.render import human_tag
from accelenv.records import frozen, replace

if TYPE_CHECKING:
    from accelenv.matrix import Environment, Matrix
    from accelenv.plan.readiness import Readiness

ORDER = {CiTier.PR: 0, CiTier.NIGHTLY: 1, CiTier.RELEASE: 2}
# Files whose change can affect every environment (the tool itself, its sessions, its packaging).
EVERYTHING = ("tools/", "noxfile.py", "pyproject.toml", ".ci/", "schema/")
# The gate every CI run passes before any environment job: the matrix is valid and the generated files are current.
GATE = ("accelenv validate", "accelenv render --check", "accelenv lock --check")
SELF_HOSTED = "self-hosted"

JobKind = Literal["session", "image"]


@frozen
class Job:
    kind: JobKind
    env: str
    family: str
    tier: str
    runs_on: tuple[str, ...]
    queue: str
    session: str
    image: str
    platform: str = "linux/amd64"
    builds_image: bool = False  # a session job that builds its image first (its framework is the base image's)
    agent_tags: tuple[tuple[str, str], ...] = ()  # Buildkite agent tags beyond the queue (a node's verdict)
    owners: tuple[str, ...] = ()  # who answers for the environment (matrix: its own, else its family's)

    @property
    def arch(self) -> str:
        return self.platform.rpartition("/")[2]

    @property
    def name(self) -> str:
        """env, and the architecture when it is not amd64: unique among the jobs of one kind."""
        return self.env if self.platform == "linux/amd64" else f"{self.env}-{self.arch}"

    @property
    def artifact(self) -> str:
        """The job's artifact (and Buildkite step key): bound to its kind, environment and architecture."""
        return f"accelenv-{self.kind}-{self.env}-{self.arch}"

    def as_github(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "env": self.env,
            "family": self.family,
            "tier": self.tier,
            "runs-on": list(self.runs_on),
            "session": self.session,
            "image": self.image,
            "platform": self.platform,
            "arch": self.arch,  # for names that cannot hold a slash (artifacts)
            "artifact": self.artifact,
            "build": self.builds_image,
            "owners": list(self.owners),
        }


@frozen
class Unscheduled:
    """A job the tier would run that cannot run: `why` from the tree, `recorded` from the matrix."""

    kind: JobKind
    env: str
    platform: str
    why: str
    recorded: str | None = None

    @property
    def target(self) -> str:
        where = "" if self.platform == "linux/amd64" else f" ({self.platform})"
        return f"{self.env}{where} {self.kind}"

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "env": self.env,
            "platform": self.platform,
            "why": self.why,
            "recorded": self.recorded,
        }


@frozen
class Plan:
    tier: str
    sessions: tuple[Job, ...]
    images: tuple[Job, ...]
    unscheduled: tuple[Unscheduled, ...]
    errors: tuple[str, ...]  # a default environment with no session job and no recorded reason
    notes: tuple[str, ...]  # a recorded reason that no longer applies

    def expected(self) -> list[dict[str, str]]:
        """The records this run must produce: one artifact per session job."""
        return [
            {"artifact": job.artifact, "env": job.env, "platform": job.platform, "arch": job.arch}
            for job in self.sessions
        ]

    def as_json(self) -> dict[str, object]:
        return {
            "tier": self.tier,
            "sessions": {"include": [job.as_github() for job in self.sessions]},
            "images": {"include": [job.as_github() for job in self.images]},
            "expected": self.expected(),
            "not_scheduled": [u.as_json() for u in self.unscheduled],
            "errors": list(self.errors),
            "notes": list(self.notes),
        }


def effective_tier(matrix: Matrix, env: Environment) -> CiTier:
    family_tier = matrix.families[env.family].ci_tier
    return max(env.ci_tier, family_tier, key=ORDER.__getitem__)


def affected(matrix: Matrix, changed: list[str], previous: Matrix | None) -> set[str]:
    """Environments a change touches. matrix.toml: those whose resolved form differs from the previous matrix's,
    and every environment of a family whose SKUs changed (a SKU added, removed or edited: the family's jobs prove
    it) (all of them when no previous matrix is given); envs/<env>/ and images/<env>/: that env; a family's device
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
            families = _changed_sku_families(matrix, previous)
            hit |= {e.id for e in matrix.envs.values() if e.family in families}
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


def _changed_sku_families(matrix: Matrix, previous: Matrix) -> set[str]:
    """Families with a SKU that is new, gone or different between `previous` and `matrix`."""
    out = set()
    for sku_id in set(matrix.skus) | set(previous.skus):
        now, before = matrix.skus.get(sku_id), previous.skus.get(sku_id)
        if now != before:
            out |= {s.family for s in (now, before) if s is not None}
    return out


def _selected(matrix: Matrix, *, tier: CiTier, changed: list[str] | None, previous: Matrix | None) -> list[Environment]:
    selected = affected(matrix, changed, previous) if changed is not None else set(matrix.envs)
    return [
        env for env in matrix.envs.values() if env.id in selected and ORDER[effective_tier(matrix, env)] <= ORDER[tier]
    ]


def _runners(matrix: Matrix, env: Environment) -> dict[str, tuple[tuple[str, ...], str]]:
    """platform -> (runs-on labels, Buildkite queue) for every platform the family has runners of."""
    family = matrix.families[env.family]
    queue = env.ci_queue or family.ci_queue or env.family
    runners = {"linux/amd64": (env.ci_runner or family.ci_runner, queue)}
    for platform, (labels, platform_queue) in family.ci_platforms.items():
        runners[platform] = (labels, platform_queue or f"{queue}-{platform.rpartition('/')[2]}")
    return runners


def plan(
    matrix: Matrix,
    *,
    tier: CiTier,
    changed: list[str] | None = None,
    previous: Matrix | None = None,
    ready: Readiness | None = None,
) -> Plan:
    """The jobs of `tier` (of the environments `changed` affects), and what cannot run (`ready`: everything can
    when None). A session job on a self-hosted runner also asks for the node's passing verdict on its environment
    (the `accelenv-env-<env>` label `accelenv labels --format github-runner` gives; the agent tag of that name
    `--format buildkite-tags` gives, = pass)."""
    sessions: list[Job] = []
    images: list[Job] = []
    unscheduled: list[Unscheduled] = []
    errors: list[str] = []
    notes: list[str] = []
    for env in _selected(matrix, tier=tier, changed=changed, previous=previous):
        runners = _runners(matrix, env)
        from_image = env.framework is not None and env.framework.source is FrameworkSource.BASE_IMAGE
        scheduled = False
        blocked_any = False
        for platform in (p for p in env.platforms if p in runners):
            labels, queue = runners[platform]
            base = Job(
                kind="session",
                env=env.id,
                family=env.family,
                tier=str(effective_tier(matrix, env)),
                runs_on=labels,
                queue=queue,
                session=env.id,
                image=human_tag("accelenv", matrix, env),
                platform=platform,
                owners=env_owners(matrix, env),
            )
            key = (env.id, platform)
            why = ready.sessions.get(key) if ready else None
            if why is None:
                gated = SELF_HOSTED in labels
                verdict = verdict_label(env.id)
                sessions.append(
                    replace(
                        base,
                        builds_image=from_image,
                        runs_on=(*labels, verdict) if gated else labels,
                        agent_tags=((verdict, "pass"),) if gated else (),
                    )
                )
                scheduled = True
            else:
                blocked_any = True
                unscheduled.append(_unscheduled("session", env, platform, why))
            if from_image:
                continue  # its image is built by its session job, on the runner that tests it
            image_why = ready.images.get(key) if ready else None
            if image_why is None:
                images.append(replace(base, kind="image"))
            else:
                blocked_any = True
                unscheduled.append(_unscheduled("image", env, platform, image_why))
        if env.default and not scheduled and env.ci_unschedulable is None:
            errors.append(
                f"{env.id} is its family's default environment and CI can schedule no session of it; make it "
                f"runnable (see why above), or record why it cannot run in matrix.toml: "
                f'envs.{env.id}.ci_unschedulable = "..."'
            )
        if env.ci_unschedulable is not None and not blocked_any:
            notes.append(
                f"envs.{env.id}.ci_unschedulable no longer applies: every job of {env.id} is scheduled; remove it"
            )
    return Plan(
        tier=str(tier),
        sessions=tuple(sessions),
        images=tuple(images),
        unscheduled=tuple(unscheduled),
        errors=tuple(errors),
        notes=tuple(notes),
    )


def _unscheduled(kind: JobKind, env: Environment, platform: str, why: str) -> Unscheduled:
    return Unscheduled(kind=kind, env=env.id, platform=platform, why=why, recorded=env.ci_unschedulable)


def jobs(
    matrix: Matrix,
    *,
    tier: CiTier,
    changed: list[str] | None = None,
    previous: Matrix | None = None,
    ready: Readiness | None = None,
) -> list[Job]:
    """The session jobs of `tier` (see `plan`)."""
    return list(plan(matrix, tier=tier, changed=changed, previous=previous, ready=ready).sessions)
