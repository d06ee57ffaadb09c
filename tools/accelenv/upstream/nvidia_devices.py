"""New NVIDIA devices: the PCI ids that the newest release of NVIDIA's open kernel modules lists (its README's
supported-GPU table) and no SKU of the matrix has, for names shaped like data-center products: hardware a vendor
may want to add.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from accelenv.upstream.indexes import _Failure
from accelenv.upstream.outdated import MAX_SOURCE, Finding, Problem
from accelenv.upstream.release_lines import uses

if TYPE_CHECKING:
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.upstream.indexes import IndexClient
    from accelenv.upstream.outdated import ReleaseSourceUrls


_README_ROW = re.compile(r"^\|\s*(?P<name>[^|]{3,80}?)\s*\|\s*(?P<id>[0-9A-Fa-f]{4})(?:\s+[0-9A-Fa-f]{4}){0,2}\s*\|")
# names shaped like data-center and professional products (H100, GB300, RTX PRO 6000, L40S, A10G, T4 ...):
# the README lists every GeForce too, which the matrix does not track
_DATA_CENTER_NAME = re.compile(r"^(?:NVIDIA (?:[A-Z]{1,2}\d{1,3}[A-Z]?\b|RTX PRO \d+|RTX \d+ Ada)|Tesla )")


def nvidia_devices(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, urls: ReleaseSourceUrls
) -> list[Finding | Problem]:
    """Device ids that the newest release of NVIDIA's open kernel modules lists and no SKU of the matrix has:
    new hardware a vendor may want to add (names shaped like data-center products only)."""
    if not uses(matrix, chosen, "nvidia"):
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
