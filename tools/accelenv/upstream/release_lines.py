"""New release lines of the runtimes and frameworks the matrix uses: CUDA from NVIDIA's runtime wheels on PyPI,
ROCm from JAX's ROCm plugins on PyPI (their summaries name the ROCm they are built against), the Neuron SDK from
AWS's release manifest, and frameworks the matrix pins as vendor builds (`torch==2.9.1+cu128`) from PyPI. A line
the matrix already has is never news.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from accelenv.upstream.indexes import PYPI_SIMPLE, _Failure
from accelenv.upstream.outdated import MAX_SOURCE, Finding, Problem, new_line

if TYPE_CHECKING:
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.upstream.indexes import IndexClient
    from accelenv.upstream.outdated import ReleaseSourceUrls
    from accelenv.upstream.settings import IndexSettings


# CUDA's runtime library ships on PyPI per major release; its version's major.minor is the CUDA release.
CUDA_RUNTIME_WHEELS = {12: "nvidia-cuda-runtime-cu12", 13: "nvidia-cuda-runtime"}


def cuda_releases(
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
        finding = new_line(
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


_ROCM_IN_SUMMARY = re.compile(r"ROCm:\s*([0-9]+\.[0-9]+(?:\.[0-9]+)?)")


def rocm_releases(
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
        finding = new_line(
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


def uses(matrix: Matrix, chosen: list[Environment], family: str) -> bool:
    return any(matrix.runtimes[e.runtime].family == family for e in chosen if e.runtime in matrix.runtimes)


def neuron_releases(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, urls: ReleaseSourceUrls
) -> list[Finding | Problem]:
    """A newer Neuron SDK release line than the matrix has, from AWS's release manifest."""
    if not uses(matrix, chosen, "neuron"):
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
    finding = new_line(
        runtimes,
        top.major,
        top,
        label="Neuron SDK",
        index=urls.neuron_manifest,
        note=f"AWS's release manifest names Neuron {top}: a new release line means a new [runtimes.*] entry "
        "(its packages and driver from the manifest's neuron_releases)",
    )
    return [finding] if finding is not None else []


_CUDA_PIN = re.compile(r"^(?:cuda-toolkit|nvidia-cuda-runtime(?:-cu\d+)?)(?:\[[^\]]*\])?\s*==\s*([0-9.]+)")


def framework_lines(
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


def _is_final(version: str) -> bool:
    try:
        parsed = Version(version)
    except InvalidVersion:
        return False
    return not (parsed.is_prerelease or parsed.is_devrelease)
