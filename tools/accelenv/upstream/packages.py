"""The pinned packages: every pin of an environment (and the libtpu and jax its TPU runtime names) against the
indexes the environment installs from, in the resolver's order (`settings.py`), and the newest release an update
may move to (`newest`, pure).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from accelenv.records import frozen
from accelenv.upstream.indexes import Releases, _Failure
from accelenv.upstream.outdated import Finding, Problem

if TYPE_CHECKING:
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.upstream.indexes import IndexClient
    from accelenv.upstream.settings import IndexSettings, Strategy


def newest(
    versions: list[str],
    *,
    current: str,
    python: str,
    requires_python: dict[str, str | None],
    allow_prereleases: bool,
) -> str | None:
    """The newest release in `versions` newer than `current` that an update may move to, or None.

    A candidate must be a valid PEP 440 version; not a pre or dev release unless `allow_prereleases` or `current`
    is one itself; admitted by its Requires-Python (`requires_python[candidate]`, missing or None admits every
    Python; an invalid one is ignored, as pip does) for `python`; and in the pin's local label family: a pin
    `2.9.1+cu128` moves only to `+cu128` builds, a pin without a label only to builds without one.
    """
    pinned = Version(current)
    prereleases = allow_prereleases or pinned.is_prerelease
    best: tuple[Version, str] | None = None
    for text in versions:
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if version <= pinned or version.local != pinned.local:
            continue
        if version.is_prerelease and not prereleases:
            continue
        if not _admits(requires_python.get(text), python):
            continue
        if best is None or version > best[0]:
            best = (version, text)
    return None if best is None else best[1]


def _admits(requires_python: str | None, python: str) -> bool:
    if not requires_python:
        return True
    try:
        return SpecifierSet(requires_python).contains(python, prereleases=True)
    except InvalidSpecifier:
        return True


@frozen
class Pin:
    """One pinned version to check: where it sits in the matrix and which indexes answer for it, in order."""

    kind: Literal["package", "runtime"]
    owner: str
    name: str
    current: str | None  # None: not pinned with a single `==`
    python: str
    indexes: tuple[str, ...]
    note: str


_TPU_NOTES = {
    "libtpu": "jax[tpu] pins libtpu exactly: a newer pair is usually a new [runtimes.*] entry, not an edit",
    "jax": "newest jax for Python {python}; its jax[tpu] extra names the libtpu it needs",
}


def pins(matrix: Matrix, chosen: list[Environment], settings: IndexSettings) -> list[Pin]:
    """The environments' packages in file order, then the TPU runtimes they use (libtpu, then jax)."""
    pins = []
    for env in chosen:
        indexes = settings.indexes_for(env.requirements.index_url, env.requirements.extra_index_urls)
        for requirement in env.requirements.packages:
            specs = list(requirement.specifier)
            pinned = len(specs) == 1 and specs[0].operator == "==" and not specs[0].version.endswith(".*")
            current = specs[0].version if pinned else None
            local = Version(current).local if current else None
            note = f"newest for Python {env.python}" + (f" among +{local} builds" if local else "")
            pins.append(
                Pin(
                    kind="package",
                    owner=env.id,
                    name=requirement.name,
                    current=current,
                    python=env.python,
                    indexes=indexes,
                    note=note,
                )
            )
    used = {env.runtime for env in chosen}
    for runtime in matrix.runtimes.values():
        if runtime.id not in used or runtime.family != "tpu" or "jax" not in runtime.components:
            continue
        python = max((e.python for e in chosen if e.runtime == runtime.id), key=Version)
        versions = {"libtpu": str(runtime.version) if runtime.version else None, "jax": runtime.components["jax"]}
        for name, current in versions.items():
            if current is not None:
                note = _TPU_NOTES[name].format(python=python)
                pins.append(
                    Pin(
                        kind="runtime",
                        owner=runtime.id,
                        name=name,
                        current=current,
                        python=python,
                        indexes=settings.indexes_for(None, ()),
                        note=note,
                    )
                )
    return pins


def check_pin(
    pin: Pin, client: IndexClient, prereleases: bool, strategy: Strategy
) -> tuple[Finding | None, list[Problem]]:
    """The newer release of one pin, if any, and what got in the way. With the first-index strategy (uv) the
    first index that has the project answers; with best-version (pip) every index that has it does."""
    key = f"envs.{pin.owner}.requirements.packages" if pin.kind == "package" else f"runtimes.{pin.owner}"
    if pin.current is None:
        message = f"{pin.name} is not pinned with a single == ({key})"
        return None, [Problem(env=pin.owner, name=pin.name, index=pin.indexes[-1], message=message)]
    failed: list[tuple[str, str]] = []
    answers: list[Releases] = []
    for index in pin.indexes:
        answer = client.releases(index, pin.name)
        if answer is None:
            continue
        if isinstance(answer, _Failure):
            failed.append((index, answer.message))
            continue
        answers.append(answer)
        if strategy == "first-index":
            break
    if not answers:
        if failed:
            return None, [Problem(env=pin.owner, name=pin.name, index=i, message=m) for i, m in failed]
        message = f"no index has {pin.name} (asked {', '.join(pin.indexes)})"
        return None, [Problem(env=pin.owner, name=pin.name, index=pin.indexes[-1], message=message)]
    rest = "the next index answered instead" if strategy == "first-index" else "the other indexes answered"
    problems = [Problem(env=pin.owner, name=pin.name, index=i, message=f"{m}; {rest}") for i, m in failed]
    best: tuple[Version, str, str] | None = None
    for answer in answers:
        latest = newest(
            list(answer.versions),
            current=pin.current,
            python=pin.python,
            requires_python=dict(answer.requires_python),
            allow_prereleases=prereleases,
        )
        if latest is not None and (best is None or Version(latest) > best[0]):
            best = (Version(latest), latest, answer.index)
    if best is None:
        return None, problems
    finding = Finding(
        kind=pin.kind, env=pin.owner, name=pin.name, current=pin.current, latest=best[1], index=best[2], note=pin.note
    )
    return finding, problems
