"""The release sources with modules of their own, asked by `survey.check_matrix` after the package indexes:
vendors' release feeds (`feeds.py`), pci.ids (`pciids.py`), NVIDIA's driver branches (`nvidia_branches.py`) and
registries' tag lists (`registry_tags.py`). Each answers `Finding`s and `Problem`s, never raises."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.upstream.feeds import FeedUrls, feed_releases
from accelenv.upstream.nvidia_branches import driver_branch_news
from accelenv.upstream.pciids import pci_id_news
from accelenv.upstream.registry_tags import base_image_news

if TYPE_CHECKING:
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.upstream.indexes import IndexClient
    from accelenv.upstream.outdated import Finding, Problem, ReleaseSourceUrls


def release_sources(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, urls: ReleaseSourceUrls
) -> list[Finding | Problem]:
    """What every source with a module of its own says, in a stable order."""
    return [
        *feed_releases(matrix, chosen, client, FeedUrls(rocm=urls.rocm_feed, neuron=urls.neuron_feed)),
        *pci_id_news(matrix, chosen, client, urls.pci_ids),
        *driver_branch_news(matrix, chosen, client, urls.nvidia_releases),
        *base_image_news(matrix, chosen, client.session, registry=urls.registry, timeout=client.timeout),
    ]
