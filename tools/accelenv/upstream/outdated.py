"""Newer releases of what the matrix pins: the pinned packages of every environment, and TPU runtimes.

The flow is the codebase's: the parsed matrix -> one lookup per (index, project) at the edge (`IndexClient` in
`indexes.py`: PyPI's JSON API or a PEP 691 / PEP 503 simple index) -> the pure choice of a newer release (`newest`) ->
`Finding`s and `Problem`s -> rendered for a terminal or as issue-ready Markdown. An index that cannot be asked
(connection refused, timeout, 404 on every index, 429, a page that does not parse) becomes a `Problem`, never an
exception, so one report says everything at once.
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
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
    Releases,
    _Failure,
)
from accelenv.upstream.settings import IndexSettings, Strategy

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Mapping

    from accelenv.matrix.model import Environment, Matrix, Runtime
    from accelenv.netio import Transport

RELEASE_SOURCES: Mapping[str, str] = MappingProxyType(
    {
        "nvidia": "CUDA release lines from NVIDIA's runtime wheels on PyPI (nvidia-cuda-runtime-cu12, "
        "nvidia-cuda-runtime); new device ids from the supported-GPU table of the newest release of NVIDIA's open "
        "kernel modules (GitHub) and from pci.ids releases; driver branches from NVIDIA's releases.json. Driver "
        "floors, cuDNN and NCCL come from HTML release notes, not read.",
        "amd": "ROCm release lines from TheRock's GitHub release feed and from JAX's ROCm plugins on PyPI "
        "(jax-rocm<major>-plugin names the ROCm it is built against). AMD's driver lists per release are HTML and "
        "YAML docs, not read.",
        "tpu": "libtpu and jax releases on PyPI.",
        "neuron": "Neuron SDK releases from AWS's release manifest n2-manifest.json and aws-neuron-sdk's GitHub "
        "release feed.",
    }
)
"""Where each family's releases are read from (`check_matrix`)."""

NO_MACHINE_READABLE_SOURCE: Mapping[str, str] = MappingProxyType(
    {
        "gaudi": "Intel Gaudi software releases are an HTML support matrix (docs.habana.ai) and image tags on "
        "vault.habana.ai, whose tag list needs that registry's API: no machine-readable release list to read.",
    }
)
"""Runtime families whose releases `check_matrix` cannot check, and why."""

NEURON_MANIFEST_URL = (
    "https://raw.githubusercontent.com/aws-neuron/aws-neuron-sdk/master/src/helperscripts/n2-manifest.json"
)
NVIDIA_TAGS_URL = "https://api.github.com/repos/NVIDIA/open-gpu-kernel-modules/tags?per_page=100"
NVIDIA_README_URL = "https://raw.githubusercontent.com/NVIDIA/open-gpu-kernel-modules/{tag}/README.md"
MAX_SOURCE = 8 * 1024 * 1024  # the release manifest, the tag list, the README: some hundred KiB today


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

    kind: Literal["package", "runtime", "sku", "framework"]
    env: str  # the environment id; the runtime id for kind "runtime"; the family for kind "sku"
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
        if self.kind == "sku":
            return "skus (a new entry)"
        if self.kind == "framework":
            return "envs (a new entry for its runtime line)"
        if self.name == "libtpu":
            return f"runtimes.{self.env}.version"
        if self.name == "driver branch":  # a newer NVIDIA driver branch (nvidia_branches.py)
            return f"runtimes.{self.env}.driver"
        if self.name.startswith("base image "):  # a newer tag of a base image (registry_tags.py)
            return f"runtimes.{self.env}.base_images"
        if self.name.endswith(".x"):  # a new release line: CUDA 13.x, ROCm 10.x, Neuron SDK 2.x
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
    session: Transport,
    *,
    envs: Collection[str] | None = None,
    prereleases: bool = False,
    pypi_url: str = PYPI_URL,
    settings: IndexSettings | None = None,
    sources: ReleaseSourceUrls | None = None,
    timeout: float = 15.0,
) -> tuple[list[Finding], list[Problem]]:
    """Every pinned package of the chosen environments (all by default), their runtimes' releases where a
    machine-readable source exists, against the indexes each environment installs from in the resolver's order
    (`settings`: this machine's pip or uv index settings; default PyPI alone). An index that cannot be asked is
    a `Problem` and the next one is asked; what it would have answered is said to be unknown. `timeout` bounds
    connecting and each read of every source; a whole exchange may take `netio.DEADLINE_FACTOR` times that. Raises
    `UsageError` only for an unknown env id."""
    settings = settings or IndexSettings()
    client = IndexClient(session, pypi_url=pypi_url, timeout=timeout)
    findings: list[Finding] = []
    problems: list[Problem] = []
    chosen = _choose(matrix, envs)
    for pin in _pins(matrix, chosen, settings):
        finding, trouble = _check(pin, client, prereleases, settings.strategy)
        if finding is not None:
            findings.append(finding)
        problems += trouble
    urls = sources or ReleaseSourceUrls()
    for result in [
        *_cuda_releases(matrix, chosen, client, settings),
        *_framework_lines(matrix, chosen, client, settings),
        *_nvidia_devices(matrix, chosen, client, urls),
        *_rocm_releases(matrix, chosen, client, settings),
        *_neuron_releases(matrix, chosen, client, urls),
        *_more_sources(matrix, chosen, client, urls),
    ]:
        if isinstance(result, Finding):
            if not any(
                (f.kind, f.env, f.name, f.latest) == (result.kind, result.env, result.name, result.latest)
                for f in findings
            ):  # one new line, whichever of its sources said it first
                findings.append(result)
        else:
            problems.append(result)
    return [_with_hold(matrix, f) for f in findings], problems


def _more_sources(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, urls: ReleaseSourceUrls
) -> list[Finding | Problem]:
    from accelenv.upstream.sources import release_sources  # the sources with modules of their own

    return release_sources(matrix, chosen, client, urls)


def _with_hold(matrix: Matrix, finding: Finding) -> Finding:
    """The finding, marked held when the matrix says why its runtime stays (runtimes.<id>.hold)."""
    if finding.kind == "runtime" and (finding.name == "driver branch" or finding.name.endswith("(same line)")):
        return finding  # a runtime's hold is about later lines, not its drivers or a newer tag of its own line
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


def _cuda_releases(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, settings: IndexSettings
) -> list[Finding | Problem]:
    """A newer CUDA minor release (same major) than the newest CUDA runtime of the matrix, per major release, and a
    newer major release than any in the matrix, from NVIDIA's runtime wheels on PyPI. Every runtime of the matrix
    counts, whichever environments were chosen: a line the matrix already has is never news."""
    if not any(matrix.runtimes[e.runtime].family == "nvidia" for e in chosen if e.runtime in matrix.runtimes):
        return []
    runtimes = [(r.version, r) for r in matrix.runtimes.values() if r.family == "nvidia" and r.version is not None]
    if not runtimes:
        return []
    out: list[Finding | Problem] = []
    newest_in_matrix = max(v for v, _ in runtimes)
    for major in [*sorted({v.major for v, _ in runtimes}), newest_in_matrix.major + 1]:
        if major < 12:
            continue  # no runtime wheels of their own before CUDA 12
        name = CUDA_RUNTIME_WHEELS.get(major, CUDA_RUNTIME_WHEELS[13])  # 13 and later share one name
        index = settings.main or PYPI_SIMPLE
        answer = client.releases(index, name)
        if answer is None:
            continue
        if isinstance(answer, _Failure):
            out.append(Problem(env="nvidia", name=name, index=index, message=answer.message))
            continue
        releases = [Version(v) for v in answer.versions if _is_final(v) and Version(v).major == major]
        if not releases:
            continue
        top = max(releases)
        finding = _new_line(
            runtimes,
            major,
            top,
            label="CUDA",
            index=index,
            note=f"{name} {top} is on PyPI: a new CUDA release means a new [runtimes.*] entry "
            "(its driver floor from the release notes)",
        )
        if finding is not None:
            out.append(finding)
    return out


def _new_line(
    runtimes: list[tuple[Version, Runtime]], major: int, top: Version, *, label: str, index: str, note: str
) -> Finding | None:
    """A finding when `top` is a newer release line (major.minor) than every runtime of `major` in the matrix."""
    in_matrix = [(v, r) for v, r in runtimes if v.major == major]
    have = max((v for v, _ in in_matrix), default=None)
    if have is not None and (top.major, top.minor) <= (have.major, have.minor):
        return None
    owner = max(in_matrix or runtimes, key=lambda pair: pair[0])[1].id
    return Finding(
        kind="runtime",
        env=owner,
        name=f"{label} {major}.x",
        current=f"{have.major}.{have.minor}" if have is not None else f"none of {label} {major}.x",
        latest=f"{top.major}.{top.minor}",
        index=index,
        note=note,
    )


_ROCM_IN_SUMMARY = re.compile(r"ROCm:\s*([0-9]+\.[0-9]+(?:\.[0-9]+)?)")


def _rocm_releases(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, settings: IndexSettings
) -> list[Finding | Problem]:
    """A newer ROCm release line, read from JAX's ROCm plugins on PyPI (jax-rocm<major>-plugin): each release
    names the ROCm it was built against in its summary ("JAX Plugin for AMD GPUs (ROCm:10.1.0)")."""
    if not any(matrix.runtimes[e.runtime].family == "amd" for e in chosen if e.runtime in matrix.runtimes):
        return []
    if settings.main:
        message = "ROCm lines are read from PyPI's JSON API (project summaries); a mirror replaces PyPI here"
        return [Problem(env="amd", name="jax-rocm plugins", index=settings.main, message=message)]
    runtimes = [(r.version, r) for r in matrix.runtimes.values() if r.family == "amd" and r.version is not None]
    if not runtimes:
        return []
    out: list[Finding | Problem] = []
    top_major = max(v for v, _ in runtimes).major
    # ROCm numbers majors with gaps (7.14 was followed by 10.0): a few majors past the newest are asked too
    for major in sorted({v.major for v, _ in runtimes} | set(range(top_major + 1, top_major + 5))):
        project = f"jax-rocm{major}-plugin"
        url = f"{client.pypi_url}/pypi/{project}/json"
        data = client.json(url, what="a PyPI project page")
        if isinstance(data, _Failure):
            if "HTTP 404" not in data.message:
                out.append(Problem(env="amd", name=project, index=PYPI_SIMPLE, message=data.message))
            continue
        info = data.get("info") if isinstance(data, dict) else None
        summary = str(info.get("summary") or "") if isinstance(info, dict) else ""
        match = _ROCM_IN_SUMMARY.search(summary)
        if match is None:
            continue  # an older plugin that does not say ("ROCm:unknown")
        top = Version(match.group(1))
        version = str(info.get("version")) if isinstance(info, dict) else "?"
        finding = _new_line(
            runtimes,
            top.major,
            top,
            label="ROCm",
            index=PYPI_SIMPLE,
            note=f"{project} {version} is built against ROCm {top} (its PyPI summary): a new ROCm line means a "
            "new [runtimes.*] entry, its driver list from AMD's compatibility matrix",
        )
        if finding is not None:
            out.append(finding)
    return out


_CUDA_PIN = re.compile(r"^(?:cuda-toolkit|nvidia-cuda-runtime(?:-cu\d+)?)(?:\[[^\]]*\])?\s*==\s*([0-9.]+)")


def _framework_lines(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, settings: IndexSettings
) -> list[Finding | Problem]:
    """A framework release on PyPI newer than every pin of it in the matrix, for frameworks the matrix pins as
    vendor builds (`torch==2.9.1+cu128`): news of its own, not a bump of any one pin (PyPI's torch is one CUDA
    build, named from its wheel's requirements)."""
    labelled: dict[str, list[Version]] = {}
    for env in matrix.envs.values():
        for name, version in env.requirements.pins:
            with contextlib.suppress(InvalidVersion):
                labelled.setdefault(canonicalize_name(name), []).append(Version(version))
    frameworks = {
        name
        for env in chosen
        for name, version in env.requirements.pins
        if "+" in version and canonicalize_name(name) in labelled
    }
    out: list[Finding | Problem] = []
    index = settings.main or PYPI_SIMPLE  # the main index: PyPI, or the mirror that replaces it
    for name in sorted(canonicalize_name(n) for n in frameworks):
        answer = client.releases(index, name)
        if answer is None:
            continue
        if isinstance(answer, _Failure):
            out.append(Problem(env="frameworks", name=name, index=index, message=answer.message))
            continue
        finals = [Version(v) for v in answer.versions if _is_final(v)]
        have = max(Version(v.base_version) for v in labelled[name])
        top = max(finals, default=None)
        if top is None or top <= have:
            continue
        build = _cuda_build(client, name, str(top)) if index == PYPI_SIMPLE else None  # PyPI's JSON API only
        out.append(
            Finding(
                kind="framework",
                env="frameworks",
                name=name,
                current=str(have),
                latest=str(top),
                index=index,
                note=f"PyPI's {name} {top} is newer than every {name} the matrix pins"
                + (f"; it is a CUDA {build} build (its wheels require it)" if build else "")
                + ": an environment for it means its runtime line too",
            )
        )
    return out


def _cuda_build(client: IndexClient, name: str, version: str) -> str | None:
    """The CUDA release a PyPI wheel requires (cuda-toolkit==13.2.2, nvidia-cuda-runtime-cu12==12.8.90), if any."""
    requires = None
    for url in (f"{client.pypi_url}/pypi/{name}/json", f"{client.pypi_url}/pypi/{name}/{version}/json"):
        # the project's page describes its newest release; older ones have their own
        data = client.json(url, what="a PyPI project page")
        info = data.get("info") if isinstance(data, dict) else None
        if isinstance(info, dict) and str(info.get("version")) == version:
            requires = info.get("requires_dist")
            break
    for requirement in requires if isinstance(requires, list) else []:
        match = _CUDA_PIN.match(str(requirement))
        if match:
            return match.group(1)
    return None


@dataclass(frozen=True, kw_only=True)
class ReleaseSourceUrls:
    """Where the release sources outside the package indexes are asked (tests point them at loopback)."""

    neuron_manifest: str = NEURON_MANIFEST_URL
    nvidia_tags: str = NVIDIA_TAGS_URL
    nvidia_readme: str = NVIDIA_README_URL  # with {tag}
    rocm_feed: str = "https://github.com/ROCm/TheRock/releases.atom"
    neuron_feed: str = "https://github.com/aws-neuron/aws-neuron-sdk/releases.atom"
    pci_ids: str = "https://raw.githubusercontent.com/pciutils/pciids/master/pci.ids"
    nvidia_releases: str = "https://docs.nvidia.com/datacenter/tesla/drivers/releases.json"
    registry: str | None = None  # replaces every base image's registry (tests: a loopback registry)


def _uses(matrix: Matrix, chosen: list[Environment], family: str) -> bool:
    return any(matrix.runtimes[e.runtime].family == family for e in chosen if e.runtime in matrix.runtimes)


def _neuron_releases(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, urls: ReleaseSourceUrls
) -> list[Finding | Problem]:
    """A newer Neuron SDK release line than the matrix has, from AWS's release manifest."""
    if not _uses(matrix, chosen, "neuron"):
        return []
    runtimes = [(r.version, r) for r in matrix.runtimes.values() if r.family == "neuron" and r.version is not None]
    data = client.json(urls.neuron_manifest, max_bytes=MAX_SOURCE, what="a release manifest")
    if isinstance(data, _Failure) and data.message.endswith("HTTP 404"):
        return []  # nothing there: a source that says nothing, as an index without the project
    if isinstance(data, _Failure):
        return [
            Problem(env="neuron", name="Neuron SDK release manifest", index=urls.neuron_manifest, message=data.message)
        ]
    text = str(data.get("manifest_version", "")) if isinstance(data, dict) else ""
    try:
        top = Version(text)
    except InvalidVersion:
        message = f"the manifest names no release (manifest_version {text[:40]!r})"
        return [Problem(env="neuron", name="Neuron SDK release manifest", index=urls.neuron_manifest, message=message)]
    finding = _new_line(
        runtimes,
        top.major,
        top,
        label="Neuron SDK",
        index=urls.neuron_manifest,
        note=f"AWS's release manifest names Neuron {top}: a new release line means a new [runtimes.*] entry "
        "(its packages and driver from the manifest's neuron_releases)",
    )
    return [finding] if finding is not None else []


_README_ROW = re.compile(r"^\|\s*(?P<name>[^|]{3,80}?)\s*\|\s*(?P<id>[0-9A-Fa-f]{4})(?:\s+[0-9A-Fa-f]{4}){0,2}\s*\|")
# names shaped like data-center and professional products (H100, GB300, RTX PRO 6000, L40S, A10G, T4 ...):
# the README lists every GeForce too, which the matrix does not track
_DATA_CENTER_NAME = re.compile(r"^(?:NVIDIA (?:[A-Z]{1,2}\d{1,3}[A-Z]?\b|RTX PRO \d+|RTX \d+ Ada)|Tesla )")


def _nvidia_devices(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, urls: ReleaseSourceUrls
) -> list[Finding | Problem]:
    """Device ids that the newest release of NVIDIA's open kernel modules lists and no SKU of the matrix has:
    new hardware a vendor may want to add (names shaped like data-center products only)."""
    if not _uses(matrix, chosen, "nvidia"):
        return []
    source = "NVIDIA open kernel modules"
    tags = client.json(urls.nvidia_tags, max_bytes=MAX_SOURCE, what="a tag list")
    if isinstance(tags, _Failure) and tags.message.endswith("HTTP 404"):
        return []  # nothing there: a source that says nothing, as an index without the project
    if isinstance(tags, _Failure):
        return [Problem(env="nvidia", name=source, index=urls.nvidia_tags, message=tags.message)]
    releases = []
    for tag in tags if isinstance(tags, list) else []:
        name = tag.get("name") if isinstance(tag, dict) else None
        try:
            releases.append((Version(str(name)), str(name)))
        except InvalidVersion:
            continue
    if not releases:
        return [Problem(env="nvidia", name=source, index=urls.nvidia_tags, message="no release tags in the answer")]
    newest_tag = max(releases)[1]
    url = urls.nvidia_readme.format(tag=newest_tag)
    readme = client.text(url, max_bytes=MAX_SOURCE, what="a README")
    if isinstance(readme, _Failure):
        return [Problem(env="nvidia", name=source, index=url, message=readme.message)]
    known = {d.lower() for sku in matrix.skus.values() if sku.family == "nvidia" for d in sku.pci_device_ids}
    seen: dict[str, str] = {}
    for line in readme.splitlines():
        match = _README_ROW.match(line)
        if match and _DATA_CENTER_NAME.match(match.group("name")):
            device = f"0x{match.group('id').lower()}"
            if device not in known:
                seen.setdefault(device, match.group("name"))
    return [
        Finding(
            kind="sku",
            env="nvidia",
            name=f"{name} ({device})",
            current="not in the matrix",
            latest=f"listed by {newest_tag}",
            index=url,
            note=f"driver {newest_tag} lists PCI id {device} ({name}); add a [skus.*] entry if users run it",
        )
        for device, name in sorted(seen.items())
    ]


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


def _pins(matrix: Matrix, chosen: list[Environment], settings: IndexSettings) -> list[_Pin]:
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
                        indexes=settings.indexes_for(None, ()),
                        note=note,
                    )
                )
    return pins


def _check(
    pin: _Pin, client: IndexClient, prereleases: bool, strategy: Strategy
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


# ---- rendering ---------------------------------------------------------------------------------------------------


_GET = re.compile(r"^GET (\S+) ")


def problem_lines(problems: Iterable[Problem]) -> list[str]:
    """One short line per (environment, index, reason): the pins an index could not answer for, grouped, the
    per-project URL replaced by the index it belongs to."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for p in problems:
        match = _GET.match(p.message)
        rest = p.message[match.end() :].removeprefix("failed: ") if match else ""
        text = f"{p.index}: {rest}" if match and match.group(1).startswith(p.index) else p.message
        grouped.setdefault((p.env, text), []).append(p.name)
    return [f"{env}: {', '.join(dict.fromkeys(names))}: {text}" for (env, text), names in grouped.items()]


def render_github(findings: Iterable[Finding], problems: Iterable[Problem] = ()) -> str:
    """One issue-ready Markdown section per finding: what is newer, where it was found, which key to change.
    Releases held back by the matrix's support window are listed after them, with the reason, not as issues;
    pins that could not be checked close the report, one line each."""
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
    trouble = problem_lines(problems)
    if trouble:
        lines = ["### Could not be checked", "", *(f"- {line}" for line in trouble)]
        sections.append("\n".join(lines) + "\n")
    if not any(not f.held for f in findings):
        head = (
            "Nothing to update: every newer release found is held back by the support window."
            if held
            else "No newer releases found."
        )
        if trouble:
            head += f" {len(trouble)} line(s) below could not be checked, so this is not the whole answer."
        sections.insert(0, head + "\n")
    return "\n".join(sections)


def render_table(findings: Iterable[Finding], problems: Iterable[Problem]) -> str:
    """Findings as aligned columns, then the held ones, then what could not be checked, then the runtime
    families nothing here can check."""
    findings = list(findings)
    problems = list(problems)
    rows = [("KIND", "ENV", "NAME", "CURRENT", "LATEST", "INDEX")]
    rows += [(f.kind, f.env, f.name, f.current, f.latest, f.index) for f in findings if not f.held]
    lines = []
    if len(rows) > 1:
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines += ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]) for row in rows]
    elif problems:
        lines.append("no newer release found among what could be checked; some pins could not be (below)")
    else:
        lines.append("every pinned package and runtime checked is current, or held back by the support window")
    held = [f for f in findings if f.held]
    if held:
        lines += ["", f"{len(held)} held back by the support window (news, not a lag):"]
        lines += [f"  {f.env}: {f.name} {f.current} -> {f.latest}: {f.held}" for f in held]
    trouble = problem_lines(problems)
    if trouble:
        lines += ["", f"{len(problems)} could not be checked:"]
        lines += [f"  {line}" for line in trouble]
    lines += ["", f"runtimes not checked (no machine-readable release source): {', '.join(NO_MACHINE_READABLE_SOURCE)}"]
    return "\n".join(lines) + "\n"


def as_json(findings: Iterable[Finding], problems: Iterable[Problem], *, settings: IndexSettings | None = None) -> str:
    """The whole report as JSON, deterministic (sorted keys), for `accelenv outdated --json`."""
    settings = settings or IndexSettings()
    document = {
        "findings": [f.as_json() for f in findings],
        "problems": [p.as_json() for p in problems],
        "not_checked": dict(NO_MACHINE_READABLE_SOURCE),
        "release_sources": dict(RELEASE_SOURCES),
        "indexes": {
            "main": settings.main,
            "extra": list(settings.extra),
            "strategy": settings.strategy,
            "origin": settings.origin,
        },
    }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
