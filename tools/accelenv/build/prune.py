"""Which of accelenv's images to remove, and removing them.

`plan_prune` is pure: from the images on the engine (id, tags, labels, creation time, sizes, the containers made
from each) it decides, for every content-tagged accelenv image of one repository, whether it goes and why. The
rules, in the words `accelenv prune --help` uses:

- Only images that carry accelenv's environment label (`dev.accelenv.env`) and a content tag
  (`<repository>:<env>-<16 hex>`) in the chosen repository are considered; every other image is left alone. The
  repository is matched under each name an engine gives it (`same_repository`): Podman keeps `accelenv` as
  `docker.io/library/accelenv`, or `localhost/accelenv`, where Docker lists `accelenv`.
- `--keep N` (default 2): per environment, the newest N images stay; the rest go. An image that also carries
  another tag in the repository (the human tag `accelenv run ENV` uses) counts as its environment's newest,
  whatever its creation time: it is what the last build made or confirmed. So it goes only with `--keep 0`.
- `--unused` (with the current matrix, locks and source): also remove the images of environments the matrix no
  longer names, and the images whose content tag is not the one a build would make now, except the human tag's
  target. The image of the current content tag then counts as the newest too. An environment that cannot be
  planned now (a stale lock, a missing base) has no known current tag: only `--keep` judges its images.
- The rules add up: an image stays only when every rule given keeps it.
- An image a container uses (running or stopped) is never removed: it is reported and skipped.

Removing an image removes its tags in the repository (content and human tag); the engine deletes it when no tag
is left. An image still tagged elsewhere (a pushed name) is only untagged and frees nothing. What an image frees is
the engine's own "unique size" (`docker system df -v`): the bytes of layers no other image shares. Layers shared
only among the images removed together are freed too but not counted, so the figure is a lower bound.

`image_records` and `remove` are the edge: they go through the engine adapter.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal, Protocol

from accelenv.build.engine import EngineError
from accelenv.plan.render import LABEL_PREFIX
from accelenv.records import field, frozen
from accelenv.timestamps import rfc3339_nanoseconds

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from accelenv.build.engine import ImageInfo

ENV_LABEL = f"{LABEL_PREFIX}.env"
DEFAULT_KEEP = 2

Action = Literal["remove", "keep", "skip"]


@frozen
class ImageRecord:
    """One image as the engine has it: plain data, so the selection can be tested without an engine."""

    id: str
    tags: tuple[str, ...]
    labels: Mapping[str, str]
    created: str  # RFC 3339, as the engine reports it
    size: int  # the whole image, shared layers included
    unique_size: int  # the bytes of layers no other image shares
    containers: tuple[str, ...] = ()  # names of the containers (any state) made from it
    # when the engine last tagged it (a build made or confirmed it); "" if never. Reproducible builds give every
    # image of an environment on one base the same `created` (the base's time), so this is what orders them.
    last_tagged: str = ""

    @property
    def made(self) -> str:
        return self.last_tagged or self.created


@frozen
class Current:
    """What the matrix says now, for `--unused`: each environment it names, with the content tag a build would
    make (None when it cannot be planned now, with the reason in `unknown`)."""

    content_tags: Mapping[str, str | None]
    unknown: Mapping[str, str] = field(default_factory=dict)


@frozen
class Decision:
    image: str
    env: str
    action: Action
    reasons: tuple[str, ...]
    tags: tuple[str, ...]  # its tags in the repository: what removing it untags
    elsewhere: tuple[str, ...]  # its tags in other repositories: then removing only untags
    created: str
    size: int
    freed: int  # what removing it frees (0 when kept, skipped or tagged elsewhere)

    def as_json(self) -> dict[str, Any]:
        data = dict(vars(self))
        data["reasons"] = list(self.reasons)
        data["tags"] = list(self.tags)
        data["elsewhere"] = list(self.elsewhere)
        return data


@frozen
class PrunePlan:
    repository: str
    keep: int
    unused: bool
    decisions: tuple[Decision, ...]
    unknown: Mapping[str, str]  # environment with images here -> why its current content tag is unknown (--unused)

    @property
    def removals(self) -> list[Decision]:
        return [d for d in self.decisions if d.action == "remove"]

    @property
    def skipped(self) -> list[Decision]:
        return [d for d in self.decisions if d.action == "skip"]

    @property
    def freed(self) -> int:
        return sum(d.freed for d in self.removals)


def plan_prune(
    images: Iterable[ImageRecord], *, repository: str, keep: int = DEFAULT_KEEP, current: Current | None = None
) -> PrunePlan:
    """What to remove of `repository`'s accelenv images, and why (see the module's docstring for the rules).
    `current` given means `--unused`."""
    if keep < 0:
        raise ValueError(f"--keep must be 0 or more, not {keep}")
    by_env: dict[str, list[tuple[ImageRecord, tuple[str, ...], tuple[str, ...]]]] = {}
    seen: set[tuple[str, str]] = set()
    for image in images:
        env = image.labels.get(ENV_LABEL)
        if not env or (image.id, env) in seen:  # an image the engine lists twice is decided (and removed) once
            continue
        seen.add((image.id, env))
        mine = tuple(sorted(t for t in image.tags if same_repository(repository_of(t), repository)))
        content = tuple(t for t in mine if is_content_tag(t, env))
        if content:
            by_env.setdefault(env, []).append((image, mine, content))
    decisions = []
    for env in sorted(by_env):
        now = current.content_tags.get(env) if current else None

        def first(entry: tuple[ImageRecord, tuple[str, ...], tuple[str, ...]], now: str | None = now) -> bool:
            """The human tag's target, and what the matrix builds now: they count as the newest."""
            _, mine, content = entry
            return len(mine) > len(content) or _among(now, content)

        # those first, then the most recently built first; the id breaks ties, so the order is stable
        ranked = sorted(by_env[env], key=lambda e: (not first(e), _negated(e[0].made), e[0].id))
        for rank, (image, mine, content) in enumerate(ranked, start=1):
            decisions.append(
                _decide(image, env, rank, mine, content, repository=repository, keep=keep, current=current)
            )
    return PrunePlan(
        repository=repository,
        keep=keep,
        unused=current is not None,
        decisions=tuple(decisions),
        unknown={env: why for env, why in current.unknown.items() if env in by_env} if current else {},
    )


def _decide(
    image: ImageRecord,
    env: str,
    rank: int,
    mine: tuple[str, ...],
    content: tuple[str, ...],
    *,
    repository: str,
    keep: int,
    current: Current | None,
) -> Decision:
    named = [t for t in mine if t not in content]
    goes, stays = [], []
    if rank > keep:
        goes.append(f"beyond --keep {keep}: the {_ordinal(rank)}newest of {env}")
    else:
        stays.append(f"the {_ordinal(rank)}newest of {env}" + (f" (the target of {', '.join(named)})" if named else ""))
    if current is not None:
        now = current.content_tags.get(env, "")
        if env not in current.content_tags:
            goes.append(f"the matrix no longer names {env}")
        elif now is None:
            stays.append(f"{env}'s current content tag is unknown: only --keep applies")
        elif _among(now, content):
            stays.append("what the matrix builds now")
        elif named:
            stays.append(f"not what the matrix builds now ({now}), but the target of {', '.join(named)}")
        else:
            goes.append(f"not what the matrix builds now ({now})")
    elsewhere = tuple(sorted(t for t in image.tags if not same_repository(repository_of(t), repository)))
    action: Action = "keep"
    reasons = tuple(stays)
    if goes:
        action, reasons = "remove", tuple(goes)
        if image.containers:
            action = "skip"
            reasons = (*goes, f"in use by container {', '.join(image.containers)}: skipped")
        elif elsewhere:
            reasons = (*goes, f"still tagged {', '.join(elsewhere)}: untagged here only")
    return Decision(
        image=image.id,
        env=env,
        action=action,
        reasons=reasons,
        tags=mine,
        elsewhere=elsewhere,
        created=image.created,
        size=_bytes(image.size),
        freed=_bytes(image.unique_size) if action == "remove" and not elsewhere else 0,
    )


def repository_of(tag: str) -> str:
    """`registry:5000/name` of `registry:5000/name:tag` (the tag follows the last colon after the last slash)."""
    name, _, tag_part = tag.rpartition(":")
    return name if "/" not in tag_part else tag


def same_repository(name: str, repository: str) -> bool:
    """Whether `name` is `repository` as an engine spells it. Docker lists a name of its own registry without it
    (`x`, `team/x`); Podman in full (`docker.io/library/x`, `docker.io/team/x`: what its Docker API makes of a tag
    `x`), and under `localhost/` what its own commands name without a registry (`podman tag`, and `podman load` of
    a `docker save`). So on Docker, a tag under a registry named `localhost` without a port counts as the
    repository's too."""
    return _full_name(name) == _full_name(repository)


def _full_name(repository: str) -> str:
    """The repository with its registry, as Docker's reference rules complete it (`pin`'s `parse_reference`:
    `docker.io/library/x` for `x`, `docker.io/team/x` for `team/x`), Podman's `localhost/` read as no registry."""
    from accelenv.upstream.pin import DOCKER_HUB, parse_reference

    name = parse_reference(repository, "")
    registry, path = name.registry, name.repository
    if registry in ("localhost", "docker.io", "index.docker.io"):
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return f"{registry}/{path}"


def _among(tag: str | None, tags: tuple[str, ...]) -> bool:
    """Whether `tag` (a content tag as a plan names it) is one of `tags` (as the engine spells them)."""
    return tag is not None and any(
        t.rpartition(":")[2] == tag.rpartition(":")[2] and same_repository(repository_of(t), repository_of(tag))
        for t in tags
    )


def is_content_tag(tag: str, env: str) -> bool:
    """`<repository>:<env>-<arch>-<16 hex digits>`, the tag `accelenv build` names an image's content by (and
    `<env>-<16 hex digits>`, as builds before per-platform tags named it)."""
    return re.fullmatch(re.escape(env) + r"-(?:amd64-|arm64-)?[0-9a-f]{16}", tag.rpartition(":")[2]) is not None


def _bytes(size: int) -> int:
    """A size the engine reported, as a count of bytes: a negative one (-1: not computed) is 0, and a huge one is
    bounded (2**63 - 1), so sums and human_bytes stay numbers."""
    return min(max(0, size), 2**63 - 1)


def _negated(created: str) -> tuple[int, int]:
    """A sort key for newest first; an unreadable time (month 13, offset +99:00, year 0) sorts last (as the
    oldest)."""
    nanoseconds = rfc3339_nanoseconds(created)
    return (1, 0) if nanoseconds is None else (0, -nanoseconds)


def _ordinal(n: int) -> str:
    if n == 1:
        return ""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix} "


def human_bytes(size: int) -> str:
    """1.2 GiB, 57.0 MiB, 512.0 KiB, 12 B."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


# ---------------------------------------------------------------------------------------------------- the edge


class PruneEngine(Protocol):
    """What pruning needs of the engine (`DockerEngine` has it)."""

    def labelled(self, label: str) -> list[ImageInfo]: ...

    def unique_sizes(self) -> dict[str, int]: ...

    def containers_by_image(self) -> dict[str, list[str]]: ...

    def remove(self, reference: str) -> None: ...


def image_records(engine: PruneEngine) -> list[ImageRecord]:
    """Every image carrying accelenv's environment label, with its unique size and the containers made from it."""
    unique = engine.unique_sizes()
    users = engine.containers_by_image()
    return [
        ImageRecord(
            id=info.id,
            tags=info.tags,
            labels=info.labels,
            created=info.created,
            last_tagged=info.last_tagged,
            size=info.size,
            unique_size=unique.get(info.id, 0),
            containers=tuple(sorted(users.get(info.id, ()))),
        )
        for info in engine.labelled(ENV_LABEL)
    ]


@frozen
class Outcome:
    decision: Decision
    removed: bool
    error: str = ""


def remove(engine: PruneEngine, plan: PrunePlan, on_outcome: Callable[[Outcome], None]) -> list[Outcome]:
    """Untag every image the plan removes (the engine deletes an image with its last tag). A removal the engine
    refuses (a container started since the plan) is an outcome with its error; the others go on."""
    outcomes = []
    for decision in plan.removals:
        try:
            for tag in decision.tags:
                engine.remove(tag)
        except EngineError as error:
            outcome = Outcome(decision=decision, removed=False, error=str(error))
        else:
            outcome = Outcome(decision=decision, removed=True)
        on_outcome(outcome)
        outcomes.append(outcome)
    return outcomes
