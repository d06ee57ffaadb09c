"""Release feeds: the Atom feed GitHub publishes of a repository's releases, read for the runtime lines whose
vendors release there.

`https://github.com/<owner>/<repo>/releases.atom` lists the newest releases, each `<entry>` with a `<link>` to
`.../releases/tag/<tag>` and a `<title>`. AMD publishes every ROCm Core SDK release in TheRock's repository, and
AWS every Neuron SDK release in aws-neuron-sdk's; both are read here, beside `release_lines.py`'s sources (PyPI's
ROCm plugins, which lag AMD's releases; AWS's release manifest). A feed that cannot be read is a `Problem`.

The flow: text from the edge (`IndexClient.text`) -> `parse_feed` (pure; refuses what is not an Atom feed, and
any DTD, so no entity is ever expanded) -> the newest final release per feed -> a `Finding` for a new line.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from accelenv.records import frozen
from accelenv.upstream.indexes import _Failure
from accelenv.upstream.outdated import Finding, Problem, new_line

if TYPE_CHECKING:
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.upstream.indexes import IndexClient

ROCM_FEED = "https://github.com/ROCm/TheRock/releases.atom"
NEURON_FEED = "https://github.com/aws-neuron/aws-neuron-sdk/releases.atom"
MAX_FEED = 4 * 1024 * 1024  # GitHub's feeds hold the 10 newest releases: some hundred KiB

_ATOM = "{http://www.w3.org/2005/Atom}"
_TAG_IN_LINK = re.compile(r"/releases/tag/([^/?#\s]{1,100})\Z")
_VERSION = re.compile(r"(?<![0-9.])v?([0-9]{1,4}\.[0-9]{1,4}(?:\.[0-9]{1,6}){0,2})(?![0-9.])")
_NOT_FINAL = re.compile(r"(?i)(?:rc|alpha|beta|preview|nightly|dev|pre)(?![a-z])")


class UnreadableFeed(ValueError):
    """The answer is not an Atom feed this module can read."""


@frozen
class FeedEntry:
    """One release of a feed: its tag, title and version (None when neither names one)."""

    tag: str
    title: str
    version: Version | None
    final: bool


def parse_feed(text: str) -> list[FeedEntry]:
    """The releases an Atom feed lists, newest first as the feed orders them. Raises `UnreadableFeed`."""
    if len(text) > MAX_FEED:
        raise UnreadableFeed(f"the feed is larger than {MAX_FEED // (1024 * 1024)} MiB")
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise UnreadableFeed("the feed declares a DTD, which no release feed needs")
    try:
        root = ET.fromstring(text)  # noqa: S314 (no DTD, checked above: no entity can be declared or expanded)
    except ET.ParseError as error:
        raise UnreadableFeed(f"not XML ({error})") from None
    if root.tag != f"{_ATOM}feed":
        raise UnreadableFeed(f"not an Atom feed (root element {root.tag[:60]!r})")
    entries = []
    for entry in root.iter(f"{_ATOM}entry"):
        title = " ".join((entry.findtext(f"{_ATOM}title") or "").split())[:200]
        tag = ""
        for link in entry.iter(f"{_ATOM}link"):
            match = _TAG_IN_LINK.search(link.get("href", ""))
            if match:
                tag = match.group(1)
                break
        entries.append(
            FeedEntry(tag=tag, title=title, version=_version(tag) or _version(title), final=_final(tag, title))
        )
    return entries


def _version(text: str) -> Version | None:
    found = _VERSION.findall(text)
    if not found:
        return None
    try:
        return Version(found[-1])
    except InvalidVersion:
        return None


def _final(tag: str, title: str) -> bool:
    return not (_NOT_FINAL.search(tag) or _NOT_FINAL.search(title))


def newest_final(entries: list[FeedEntry]) -> FeedEntry | None:
    """The feed's newest final release by version (feeds order by date, and a patch of an old line may be last)."""
    final = [e for e in entries if e.final and e.version is not None]
    return max(final, key=lambda e: e.version or Version("0")) if final else None


@frozen
class FeedUrls:
    """Where the feeds are asked (tests point them at loopback)."""

    rocm: str = ROCM_FEED
    neuron: str = NEURON_FEED


_FEEDS = {
    "amd": ("rocm", "ROCm", "TheRock's release feed (AMD's ROCm Core SDK releases)"),
    "neuron": ("neuron", "Neuron SDK", "aws-neuron-sdk's release feed (AWS's Neuron SDK releases)"),
}


def feed_releases(
    matrix: Matrix, chosen: list[Environment], client: IndexClient, urls: FeedUrls | None = None
) -> list[Finding | Problem]:
    """A newer release line than the matrix has, for each family with a release feed that a chosen env uses."""
    urls = urls or FeedUrls()
    used = {matrix.runtimes[e.runtime].family for e in chosen if e.runtime in matrix.runtimes}
    out: list[Finding | Problem] = []
    for family, (attr, label, what) in _FEEDS.items():
        if family not in used:
            continue
        url: str = getattr(urls, attr)
        name = f"{label} release feed"
        text = client.text(url, max_bytes=MAX_FEED, what="a release feed")
        if isinstance(text, _Failure):
            out.append(Problem(env=family, name=name, index=url, message=text.message))
            continue
        try:
            top = newest_final(parse_feed(text))
        except UnreadableFeed as error:
            out.append(Problem(env=family, name=name, index=url, message=f"GET {url} answered {error}"))
            continue
        if top is None or top.version is None:
            message = f"GET {url} answered a feed with no final release that names a version"
            out.append(Problem(env=family, name=name, index=url, message=message))
            continue
        runtimes = [(r.version, r) for r in matrix.runtimes.values() if r.family == family and r.version is not None]
        finding = new_line(
            runtimes,
            top.version.major,
            top.version,
            label=label,
            index=url,
            note=f"{what} names {label} {top.version} (tag {top.tag or '?'}, {top.title!r}): a new release line "
            "means a new [runtimes.*] entry, with its driver and framework image from the vendor's notes",
        )
        if finding is not None:
            out.append(finding)
    return out
