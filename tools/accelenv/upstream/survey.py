"""The survey behind `accelenv outdated` and `accelenv refresh`: every pin of the chosen environments asked of the
indexes it installs from, and every release source asked about the runtimes they use; findings and problems
collected into one report (`outdated.py`), each finding marked held where the matrix says why its runtime stays.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

from accelenv.errors import UsageError
from accelenv.records import replace
from accelenv.upstream.indexes import PYPI_URL, IndexClient
from accelenv.upstream.nvidia_devices import nvidia_devices
from accelenv.upstream.outdated import Finding, Problem, ReleaseSourceUrls
from accelenv.upstream.packages import check_pin, pins
from accelenv.upstream.release_lines import cuda_releases, framework_lines, neuron_releases, rocm_releases
from accelenv.upstream.settings import IndexSettings

if TYPE_CHECKING:
    from collections.abc import Collection

    from accelenv.matrix.model import Environment, Matrix
    from accelenv.netio import Transport


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
    for pin in pins(matrix, chosen, settings):
        finding, trouble = check_pin(pin, client, prereleases, settings.strategy)
        if finding is not None:
            findings.append(finding)
        problems += trouble
    urls = sources or ReleaseSourceUrls()
    for result in [
        *cuda_releases(matrix, chosen, client, settings),
        *framework_lines(matrix, chosen, client, settings),
        *nvidia_devices(matrix, chosen, client, urls),
        *rocm_releases(matrix, chosen, client, settings),
        *neuron_releases(matrix, chosen, client, urls),
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


def _choose(matrix: Matrix, envs: Collection[str] | None) -> list[Environment]:
    if envs is None:
        return list(matrix.envs.values())
    unknown = [e for e in envs if e not in matrix.envs]
    if unknown:
        close = difflib.get_close_matches(unknown[0], list(matrix.envs), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise UsageError(f"no environment {', '.join(unknown)} in {matrix.path}{hint}")
    return [e for e in matrix.envs.values() if e.id in envs]
