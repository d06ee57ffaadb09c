"""NVIDIA's data-center driver branches, from the releases.json NVIDIA publishes beside its supported-drivers page.

`https://docs.nvidia.com/datacenter/tesla/drivers/releases.json` ("the release information can be scraped by
automation tools by parsing releases.json", NVIDIA's supported-drivers page) maps each branch number ("580") to
its designation (`type`: "lts branch", "production branch", "new feature branch") and its releases
(`driver_info`, each with a `release_version`). A long-term support or production branch newer than every branch
the matrix's CUDA runtimes name is news: CUDA's `driver.min`, and the SKU floors by branch
(`matrix/driver_branches.py`), may need a look. New feature branches are short-lived and not reported.

The flow: JSON from the edge (`IndexClient.json`) -> `parse_releases` (pure; what is not shaped like that file
is refused) -> `Finding`s, or a `Problem` when the file cannot be had or read.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from accelenv.records import frozen
from accelenv.upstream.indexes import _Failure
from accelenv.upstream.outdated import Finding, Problem

if TYPE_CHECKING:
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.upstream.indexes import IndexClient

NVIDIA_RELEASES_URL = "https://docs.nvidia.com/datacenter/tesla/drivers/releases.json"
MAX_RELEASES = 8 * 1024 * 1024  # some hundred KiB today
SUPPORTED = ("lts branch", "production branch")
_BRANCH = re.compile(r"\A[0-9]{3,4}\Z")


class UnreadableReleases(ValueError):
    """The answer is not shaped like NVIDIA's releases.json."""


@frozen
class Branch:
    """One driver branch: its number, designation and newest release."""

    number: int
    designation: str
    newest: str | None


def parse_releases(data: object) -> list[Branch]:
    """The branches of a releases.json answer, by number. Raises `UnreadableReleases`."""
    if not isinstance(data, dict):
        raise UnreadableReleases("not a JSON object of branches")
    branches = []
    for key, value in data.items():
        if not (isinstance(key, str) and _BRANCH.match(key) and isinstance(value, dict)):
            continue
        designation = value.get("type")
        if not isinstance(designation, str):
            continue
        versions = []
        for info in value.get("driver_info") or ():
            release = info.get("release_version") if isinstance(info, dict) else None
            try:
                versions.append((Version(str(release)), str(release)))
            except InvalidVersion:
                continue
        newest = max(versions)[1] if versions else None
        branches.append(Branch(number=int(key), designation=designation.strip().lower(), newest=newest))
    if not branches:
        raise UnreadableReleases("no branch with a 'type' (expected keys such as \"580\")")
    return sorted(branches, key=lambda b: b.number)


def driver_branch_news(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, url: str = NVIDIA_RELEASES_URL
) -> list[Finding | Problem]:
    """A supported NVIDIA branch newer than every branch the matrix's CUDA runtimes name."""
    runtimes = [
        matrix.runtimes[e.runtime]
        for e in chosen
        if e.runtime in matrix.runtimes and matrix.runtimes[e.runtime].family == "nvidia"
    ]
    floors = [(r.driver.min, r) for r in runtimes if r.driver.min is not None]
    if not floors:
        return []
    data = client.json(url, max_bytes=MAX_RELEASES, what="NVIDIA's releases.json")
    if isinstance(data, _Failure):
        return [Problem(env="nvidia", name="NVIDIA driver branches", index=url, message=data.message)]
    try:
        branches = parse_releases(data)
    except UnreadableReleases as error:
        message = f"GET {url} answered {error}"
        return [Problem(env="nvidia", name="NVIDIA driver branches", index=url, message=message)]
    floor, owner = max(floors, key=lambda pair: pair[0])
    return [
        Finding(
            kind="runtime",
            env=owner.id,
            name="driver branch",
            current=f"R{floor.major}",
            latest=f"R{b.number}",
            index=url,
            note=f"NVIDIA's releases.json lists R{b.number} ({b.designation}"
            + (f", newest release {b.newest})" if b.newest else ")")
            + f", newer than R{floor.major} ({owner.name}'s driver.min {floor}): look at the runtimes' driver "
            "floors and the SKU floors by branch (matrix/driver_branches.py)",
        )
        for b in branches
        if b.designation in SUPPORTED and b.number > floor.major
    ]
