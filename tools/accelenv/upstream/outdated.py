"""Newer releases of what the matrix pins: the pinned packages of every environment, and TPU runtimes.

The flow is the codebase's: the parsed matrix -> one lookup per (index, project) at the edge (`IndexClient` in
`indexes.py`: PyPI's JSON API or a PEP 691 / PEP 503 simple index) -> the pure choice of a newer release (`newest`) ->
`Finding`s and `Problem`s -> rendered for a terminal or as issue-ready Markdown. An index that cannot be asked
(connection refused, timeout, 404 on every index, 429, a page that does not parse) becomes a `Problem`, never an
exception, so one report says everything at once.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from accelenv.errors import UsageError
from accelenv.upstream.indexes import (
    PYPI_SIMPLE,
    PYPI_URL,
    IndexClient,
    Session,
    _Failure,
)

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping

    from accelenv.matrix.model import Environment, Matrix

NO_MACHINE_READABLE_SOURCE: Mapping[str, str] = MappingProxyType(
    {
        "nvidia": "CUDA releases are read from NVIDIA's runtime wheels on PyPI (nvidia-cuda-runtime-cu12 for 12.x, "
        "nvidia-cuda-runtime for 13.x and later): new minor releases are reported, but driver floors, cuDNN and "
        "NCCL versions still come from the HTML release notes, which accelenv does not read.",
        "amd": "ROCm releases are git tags and an apt repository (repo.radeon.com); checking them would need the "
        "GitHub releases API or the repository's directory listing, which accelenv does not read.",
        "gaudi": "Intel Gaudi software releases are an HTML support matrix (docs.habana.ai) and image tags on "
        "vault.habana.ai; checking them would need that registry's tag list, which accelenv does not read.",
        "neuron": "Neuron SDK releases are listed in the release manifest n2-manifest.json on GitHub "
        "(aws-neuron/aws-neuron-sdk, src/helperscripts/); it is not reachable from here.",
    }
)
"""Runtime families whose releases `check_matrix` cannot check, and what it would take. TPU runtimes are checked
through PyPI (libtpu and jax); the CPU runtime has no version to track."""


# ---- the pure core ----------------------------------------------------------------------------------------------


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


# ---- what comes out ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Finding:
    """A newer release than the matrix pins: a package of an environment, or a component of a runtime."""

    kind: Literal["package", "runtime"]
    env: str  # the environment id, or the runtime id for kind "runtime"
    name: str
    current: str
    latest: str
    index: str
    note: str = ""
    held: str = ""  # the matrix's reason for staying (runtimes.<id>.hold): news, not a lag

    @property
    def key(self) -> str:
        """The dotted matrix key to change."""
        if self.kind == "package":
            return f"envs.{self.env}.requirements.packages"
        if self.name == "libtpu":
            return f"runtimes.{self.env}.version"
        if self.name.startswith("CUDA "):
            return "runtimes (a new entry beside runtimes." + self.env + ")"
        return f"runtimes.{self.env}.components.{self.name}"

    def as_json(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "env": self.env,
            "name": self.name,
            "current": self.current,
            "latest": self.latest,
            "index": self.index,
            "key": self.key,
            "note": self.note,
            "held": self.held,
        }


@dataclass(frozen=True, kw_only=True)
class Problem:
    """A pin that could not be checked, and why (the index could not be asked, or nothing knows the package)."""

    env: str
    name: str
    index: str
    message: str

    def as_json(self) -> dict[str, str]:
        return {"env": self.env, "name": self.name, "index": self.index, "message": self.message}


# ---- the check ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Pin:
    """One pinned version to check: where it sits in the matrix and which indexes answer for it, in order."""

    kind: Literal["package", "runtime"]
    owner: str
    name: str
    current: str | None  # None: not pinned with a single `==`
    python: str
    indexes: tuple[str, ...]
    note: str


def check_matrix(
    matrix: Matrix,
    session: Session,
    *,
    envs: Collection[str] | None = None,
    prereleases: bool = False,
    pypi_url: str = PYPI_URL,
) -> tuple[list[Finding], list[Problem]]:
    """Every pinned package of the chosen environments (all by default) and their TPU runtimes, against the
    indexes each environment installs from: extra indexes first, then the main one; the first index that has the
    package answers for it (uv's first-index strategy). Raises `UsageError` only for an unknown env id."""
    client = IndexClient(session, pypi_url=pypi_url)
    findings: list[Finding] = []
    problems: list[Problem] = []
    chosen = _choose(matrix, envs)
    for pin in _pins(matrix, chosen):
        outcome = _check(pin, client, prereleases)
        if isinstance(outcome, Finding):
            findings.append(outcome)
        elif isinstance(outcome, Problem):
            problems.append(outcome)
    for result in _cuda_releases(matrix, chosen, client):
        if isinstance(result, Finding):
            findings.append(result)
        else:
            problems.append(result)
    return [_with_hold(matrix, f) for f in findings], problems


def _with_hold(matrix: Matrix, finding: Finding) -> Finding:
    """The finding, marked held when the matrix says why its runtime stays (runtimes.<id>.hold)."""
    if finding.kind == "runtime":
        runtime = matrix.runtimes.get(finding.env)
        if runtime is not None and runtime.hold is not None:
            return replace(finding, held=runtime.hold.reason)
        return finding
    env = matrix.envs.get(finding.env)
    runtime = matrix.runtimes.get(env.runtime) if env is not None else None
    if runtime is None or runtime.hold is None:
        return finding
    if canonicalize_name(finding.name) in {canonicalize_name(p) for p in runtime.hold.packages}:
        return replace(finding, held=runtime.hold.reason)
    return finding


# CUDA's runtime library ships on PyPI per major release; its version's major.minor is the CUDA release.
CUDA_RUNTIME_WHEELS = {12: "nvidia-cuda-runtime-cu12", 13: "nvidia-cuda-runtime"}


def _cuda_releases(matrix: Matrix, chosen: list[Environment], client: IndexClient) -> list[Finding | Problem]:
    """A newer CUDA minor release (same major) than the newest CUDA runtime of the matrix, per major release, and a
    newer major release than any in the matrix, from NVIDIA's runtime wheels on PyPI."""
    used = {e.runtime for e in chosen}
    runtimes = [r for r in matrix.runtimes.values() if r.family == "nvidia" and r.version is not None and r.id in used]
    if not runtimes:
        return []
    out: list[Finding | Problem] = []
    newest_in_matrix = max(r.version for r in runtimes if r.version is not None)
    majors = sorted({r.version.major for r in runtimes if r.version is not None})
    for major in [*majors, newest_in_matrix.major + 1]:
        if major < 12:
            continue  # no runtime wheels of their own before CUDA 12
        name = CUDA_RUNTIME_WHEELS.get(major, CUDA_RUNTIME_WHEELS[13])  # 13 and later share one name
        answer = client.releases(PYPI_SIMPLE, name)
        if answer is None:
            continue
        if isinstance(answer, _Failure):
            out.append(Problem(env="nvidia", name=name, index=PYPI_SIMPLE, message=answer.message))
            continue
        releases = [Version(v) for v in answer.versions if _is_final(v) and Version(v).major == major]
        if not releases:
            continue
        top = max(releases)
        in_matrix = [r for r in runtimes if r.version is not None and r.version.major == major]
        have = max((r.version for r in in_matrix if r.version is not None), default=None)
        if have is None or (top.major, top.minor) > (have.major, have.minor):
            owner = max(in_matrix, key=lambda r: r.version or Version("0")).id if in_matrix else runtimes[0].id
            current = f"{have.major}.{have.minor}" if have is not None else f"none of CUDA {major}.x"
            out.append(
                Finding(
                    kind="runtime",
                    env=owner,
                    name=f"CUDA {major}.x",
                    current=current,
                    latest=f"{top.major}.{top.minor}",
                    index=PYPI_SIMPLE,
                    note=f"{name} {top} is on PyPI: a new CUDA release means a new [runtimes.*] entry "
                    "(its driver floor from the release notes)",
                )
            )
    return out


def _is_final(version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return not (parsed.is_prerelease or parsed.is_devrelease)


def _choose(matrix: Matrix, envs: Collection[str] | None) -> list[Environment]:
    if envs is None:
        return list(matrix.envs.values())
    unknown = [e for e in envs if e not in matrix.envs]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(matrix.envs), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UsageError(f"no environment {', '.join(unknown)} in {matrix.path}{hint}")
    return [e for e in matrix.envs.values() if e.id in envs]


_TPU_NOTES = {
    "libtpu": "jax[tpu] pins libtpu exactly: a newer pair is usually a new [runtimes.*] entry, not an edit",
    "jax": "newest jax for Python {python}; its jax[tpu] extra names the libtpu it needs",
}


def _pins(matrix: Matrix, chosen: list[Environment]) -> list[_Pin]:
    """The environments' packages in file order, then the TPU runtimes they use (libtpu, then jax, on PyPI)."""
    pins = []
    for env in chosen:
        indexes = (*env.requirements.extra_index_urls, env.requirements.index_url or PYPI_SIMPLE)
        for requirement in env.requirements.packages:
            specs = list(requirement.specifier)
            pinned = len(specs) == 1 and specs[0].operator == "==" and not specs[0].version.endswith(".*")
            current = specs[0].version if pinned else None
            local = Version(current).local if current else None
            note = f"newest for Python {env.python}" + (f" among +{local} builds" if local else "")
            pins.append(
                _Pin(
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
                    _Pin(
                        kind="runtime",
                        owner=runtime.id,
                        name=name,
                        current=current,
                        python=python,
                        indexes=(PYPI_SIMPLE,),
                        note=note,
                    )
                )
    return pins


def _check(pin: _Pin, client: IndexClient, prereleases: bool) -> Finding | Problem | None:
    key = f"envs.{pin.owner}.requirements.packages" if pin.kind == "package" else f"runtimes.{pin.owner}"
    if pin.current is None:
        message = f"{pin.name} is not pinned with a single == ({key})"
        return Problem(env=pin.owner, name=pin.name, index=pin.indexes[-1], message=message)
    for index in pin.indexes:
        answer = client.releases(index, pin.name)
        if answer is None:
            continue
        if isinstance(answer, _Failure):
            return Problem(env=pin.owner, name=pin.name, index=index, message=answer.message)
        latest = newest(
            list(answer.versions),
            current=pin.current,
            python=pin.python,
            requires_python=dict(answer.requires_python),
            allow_prereleases=prereleases,
        )
        if latest is None:
            return None
        return Finding(
            kind=pin.kind, env=pin.owner, name=pin.name, current=pin.current, latest=latest, index=index, note=pin.note
        )
    message = f"no index has {pin.name} (asked {', '.join(pin.indexes)})"
    return Problem(env=pin.owner, name=pin.name, index=pin.indexes[-1], message=message)


# ---- rendering ---------------------------------------------------------------------------------------------------


def render_github(findings: Iterable[Finding]) -> str:
    """One issue-ready Markdown section per finding: what is newer, where it was found, which key to change.
    Releases held back by the matrix's support window are listed after them, with the reason, not as issues."""
    findings = list(findings)
    sections = []
    for f in (f for f in findings if not f.held):
        where = f"environment `{f.env}`" if f.kind == "package" else f"runtime `{f.env}`"
        change = (
            f"`{f.name}=={f.current}` → `{f.name}=={f.latest}`"
            if f.kind == "package"
            else f"`{f.current}` → `{f.latest}`"
        )
        lines = [
            f"### {f.name} {f.latest} is out ({where} pins {f.current})",
            "",
            "| current | latest | index |",
            "| --- | --- | --- |",
            f"| `{f.current}` | `{f.latest}` | {f.index} |",
            "",
            f"Change `{f.key}` in `matrix.toml`: {change}.",
        ]
        if f.note:
            lines += ["", f"Note: {f.note}."]
        sections.append("\n".join(lines) + "\n")
    held = [f for f in findings if f.held]
    if held:
        lines = [
            "### Held back by the support window",
            "",
            "| what | pinned | newer | why it stays |",
            "| --- | --- | --- | --- |",
        ]
        lines += [f"| {f.name} (`{f.env}`) | `{f.current}` | `{f.latest}` | {f.held} |" for f in held]
        sections.append("\n".join(lines) + "\n")
    if not sections:
        return "No newer releases found.\n"
    if not any(not f.held for f in findings):
        sections.insert(0, "Nothing to update: every newer release found is held back by the support window.\n")
    return "\n".join(sections)


def render_table(findings: Iterable[Finding], problems: Iterable[Problem]) -> str:
    """Findings as aligned columns, then the problems, then the runtime families nothing here can check."""
    findings = list(findings)
    rows = [("KIND", "ENV", "NAME", "CURRENT", "LATEST", "INDEX")]
    rows += [(f.kind, f.env, f.name, f.current, f.latest, f.index) for f in findings if not f.held]
    lines = []
    if len(rows) > 1:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines += ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]) for row in rows]
    else:
        lines.append("every pinned package and runtime checked is current, or held back by the support window")
    held = [f for f in findings if f.held]
    if held:
        lines += ["", f"{len(held)} held back by the support window (news, not a lag):"]
        lines += [f"  {f.env}: {f.name} {f.current} -> {f.latest}: {f.held}" for f in held]
    problems = list(problems)
    if problems:
        lines += ["", f"{len(problems)} could not be checked:"]
        lines += [f"  {p.env}: {p.name}: {p.message}" for p in problems]
    unchecked = [family for family in NO_MACHINE_READABLE_SOURCE if family != "nvidia"]
    lines += ["", f"runtimes not checked (no machine-readable release source): {', '.join(unchecked)}"]
    return "\n".join(lines) + "\n"


def as_json(findings: Iterable[Finding], problems: Iterable[Problem]) -> str:
    """The whole report as JSON, deterministic (sorted keys), for `accelenv outdated --json`."""
    document = {
        "findings": [f.as_json() for f in findings],
        "problems": [p.as_json() for p in problems],
        "not_checked": dict(NO_MACHINE_READABLE_SOURCE),
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
