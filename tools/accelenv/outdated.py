"""Newer releases of what the matrix pins: the pinned packages of every environment, and TPU runtimes.

The flow is the codebase's: the parsed matrix -> one lookup per (index, project) at the edge (`IndexClient`,
PyPI's JSON API or a PEP 691 / PEP 503 simple index) -> the pure choice of a newer release (`newest`) ->
`Finding`s and `Problem`s -> rendered for a terminal or as issue-ready Markdown. An index that cannot be asked
(connection refused, timeout, 404 on every index, 429, a page that does not parse) becomes a `Problem`, never an
exception, so one report says everything at once.
"""

from __future__ import annotations

import difflib
import html.parser
import json
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import unquote, urlsplit

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from accelenv.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping

    from accelenv.matrix.model import Environment, Matrix

PYPI_URL = "https://pypi.org"
PYPI_SIMPLE = "https://pypi.org/simple"
_PYPI_SIMPLE_ALIASES = frozenset({PYPI_SIMPLE, "https://pypi.python.org/simple"})
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
_SIMPLE_ACCEPT = f"{SIMPLE_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
# download.pytorch.org (an S3 bucket behind a CDN) may answer 403 rather than 404 for a project it does not host;
# there, a 403 means "not here" and the next index is asked. Anywhere else a 403 is a problem to report.
_FORBIDDEN_MEANS_MISSING = frozenset({"download.pytorch.org"})

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


# ---- what an index says ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Releases:
    """One index's releases of one project: versions not wholly yanked, and each one's Requires-Python."""

    index: str
    versions: tuple[str, ...]
    requires_python: Mapping[str, str | None]


class UnusableAnswer(Exception):
    """An index answered something accelenv cannot read. Internal: `IndexClient` turns it into a `Problem`."""


def parse_pypi_json(data: object, *, index: str) -> Releases:
    """PyPI's JSON API (`/pypi/<name>/json`): `releases` keys, skipping releases whose files are all yanked."""
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise UnusableAnswer("the JSON has no 'releases' object")
    versions: list[str] = []
    requires: dict[str, str | None] = {}
    for version, listed in releases.items():
        files = [f for f in listed if isinstance(f, dict)] if isinstance(listed, list) else []
        if files and all(f.get("yanked") for f in files):
            continue
        versions.append(str(version))
        requires[str(version)] = next((str(f["requires_python"]) for f in files if f.get("requires_python")), None)
    return Releases(index=index, versions=tuple(versions), requires_python=requires)


def parse_simple_json(data: object, *, project: str, index: str) -> Releases:
    """A PEP 691 project page: versions from `versions` (API 1.1) or the file names, `requires-python`, `yanked`."""
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(files, list):
        raise UnusableAnswer("the JSON has no 'files' list (not a PEP 691 project page)")
    entries = [
        (str(f.get("filename", "")), f.get("requires-python"), bool(f.get("yanked")))
        for f in files
        if isinstance(f, dict)
    ]
    listed = data.get("versions")
    return _collect(entries, project=project, index=index, listed=listed if isinstance(listed, list) else None)


def parse_simple_html(text: str, *, project: str, index: str) -> Releases:
    """A PEP 503 project page: one anchor per file, `data-requires-python` (HTML-unescaped) and `data-yanked`."""
    parser = _Anchors()
    parser.feed(text)
    parser.close()
    return _collect(parser.files, project=project, index=index, listed=None)


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.files: list[tuple[str, object, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        attributes = dict(attrs)
        href = attributes.get("href") or ""
        filename = unquote(urlsplit(href).path.rsplit("/", 1)[-1])
        self.files.append((filename, attributes.get("data-requires-python"), "data-yanked" in attributes))


def _collect(
    entries: Iterable[tuple[str, object, bool]], *, project: str, index: str, listed: list[Any] | None
) -> Releases:
    files: dict[str, list[tuple[object, bool]]] = {}
    for filename, requires, yanked in entries:
        version = _file_version(filename, project)
        if version is not None:
            files.setdefault(version, []).append((requires, yanked))
    names = [str(v) for v in listed] if listed is not None else list(files)
    versions: list[str] = []
    requires_python: dict[str, str | None] = {}
    for version in names:
        own = files.get(_normalized(version), [])
        if own and all(yanked for _, yanked in own):
            continue
        versions.append(version)
        requires_python[version] = next((str(r) for r, _ in own if isinstance(r, str) and r), None)
    return Releases(index=index, versions=tuple(versions), requires_python=requires_python)


def _normalized(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def _file_version(filename: str, project: str) -> str | None:
    """The version in a wheel or sdist file name of `project`, or None for anything else."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return str(version) if name == canonicalize_name(project) else None


# ---- asking the indexes (the edge) -------------------------------------------------------------------------------


class Response(Protocol):
    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


class Session(Protocol):
    """What `IndexClient` needs of a `requests.Session`; tests pass a fake."""

    def get(self, url: str, *, headers: Mapping[str, str], timeout: float) -> Response: ...


@dataclass(frozen=True)
class _Failure:
    message: str


class IndexClient:
    """Asks indexes for a project's releases, once per (index, project): PyPI through its JSON API at `pypi_url`,
    any other index through the simple API (PEP 691 JSON, or PEP 503 HTML when that is what comes back)."""

    def __init__(self, session: Session, *, pypi_url: str = PYPI_URL, timeout: float = 15.0) -> None:
        self.session = session
        self.pypi_url = pypi_url.rstrip("/")
        self.timeout = timeout
        self._cache: dict[tuple[str, str], Releases | _Failure | None] = {}

    def releases(self, index: str, project: str) -> Releases | _Failure | None:
        """What `index` holds of `project`: its releases, None when it does not have it, or why it cannot say."""
        key = (index.rstrip("/"), canonicalize_name(project))
        if key not in self._cache:
            self._cache[key] = self._ask(*key)
        return self._cache[key]

    def _ask(self, index: str, project: str) -> Releases | _Failure | None:
        pypi = index in _PYPI_SIMPLE_ALIASES
        url = f"{self.pypi_url}/pypi/{project}/json" if pypi else f"{index}/{project}/"
        headers = {"Accept": "application/json"} if pypi else {"Accept": _SIMPLE_ACCEPT}
        try:
            response = self.session.get(url, headers=headers, timeout=self.timeout)
        except OSError as error:  # requests' ConnectionError and Timeout are OSErrors too
            return _Failure(f"GET {url} failed: {_first_line(error)}")
        status = response.status_code
        if status == 404 or (status == 403 and urlsplit(index).hostname in _FORBIDDEN_MEANS_MISSING):
            return None
        if status == 429:
            wait = response.headers.get("Retry-After")
            after = f"; the index asks to retry after {wait} s" if wait else ""
            return _Failure(f"GET {url} was rate limited (HTTP 429){after}")
        if status != 200:
            return _Failure(f"GET {url} answered HTTP {status}")
        try:
            if pypi:
                return parse_pypi_json(response.json(), index=index)
            content_type = response.headers.get("Content-Type", "")
            if "json" in content_type:
                return parse_simple_json(response.json(), project=project, index=index)
            return parse_simple_html(response.text, project=project, index=index)
        except (ValueError, UnusableAnswer) as error:  # json.JSONDecodeError is a ValueError
            return _Failure(f"GET {url} answered something unreadable: {_first_line(error)}")


def _first_line(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0]


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
