"""Base image tags from the registry's own tag list: a newer tag of the same shape as a runtime's base image.

The OCI distribution API lists a repository's tags at `/v2/<name>/tags/list` (paginated with `n` and a `Link:
<...>; rel="next"` header), behind the same bearer-token challenge `pin.py` answers. A tag's *shape* is the tag
with its version numbers blanked (`13.2.1-base-ubuntu24.04` -> `#-base-ubuntu#`); a tag of the same shape, the same
OS and Python numbers, and a higher leading version is newer. A newer tag in the same release line (13.2.2-base
beside 13.2.1-base) is news for the base itself; the newest tag of a later line is news held by the runtime's
`hold`, like any new line. This is what tells whether `nvidia/cuda:13.2.2-base-ubuntu24.04` exists before a base
moves, and when AMD publishes a `rocm/pytorch` image for a ROCm line the matrix holds back.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING
from urllib.parse import urlencode, urljoin

from packaging.version import InvalidVersion, Version

from accelenv.records import frozen
from accelenv.upstream.outdated import Finding, Problem
from accelenv.upstream.pin import MAX_TOKEN_ANSWER, parse_reference

if TYPE_CHECKING:
    from accelenv.matrix.model import Environment, Matrix
    from accelenv.netio import Answer, Limits, Transport

MAX_PAGES = 200  # pages of 1000: nvidia/cuda and rocm/pytorch have thousands of tags
MAX_PAGE = 4 * 1024 * 1024
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)*")
_PINNED_WORDS = ("ubuntu", "py", "debian", "rhel", "ubi", "rockylinux")  # numbers that must stay: OS and Python
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


@frozen
class TagShape:
    """A tag read as its shape, its leading version and the numbers that must match (OS, Python)."""

    shape: str
    version: Version
    pinned: tuple[str, ...]


def read_tag(tag: str) -> TagShape | None:
    """The shape of a tag, or None when it carries no version (`latest`)."""
    numbers = list(_NUMBER.finditer(tag))
    if not numbers:
        return None
    try:
        version = Version(numbers[0].group(0))
    except InvalidVersion:
        return None
    pinned = tuple(m.group(0) for m in numbers[1:] if tag[: m.start()].lower().rstrip("._-").endswith(_PINNED_WORDS))
    return TagShape(shape=_NUMBER.sub("#", tag), version=version, pinned=pinned)


def newer_tags(current: str, tags: list[str]) -> tuple[str | None, str | None]:
    """(the newest tag of the same shape in the current release line, the newest of a later line), each None
    when there is none. A release line is major.minor of the leading version."""
    mine = read_tag(current)
    if mine is None:
        return None, None
    line: tuple[Version, str] | None = None
    later: tuple[Version, str] | None = None
    for tag in tags:
        other = read_tag(tag)
        if other is None or (other.shape, other.pinned) != (mine.shape, mine.pinned) or other.version.is_prerelease:
            continue
        if other.version <= mine.version:
            continue
        same = other.version.release[:2] == mine.version.release[:2]
        if same and (line is None or other.version > line[0]):
            line = (other.version, tag)
        if not same and (later is None or other.version > later[0]):
            later = (other.version, tag)
    return (line[1] if line else None), (later[1] if later else None)


class _Unlisted(Exception):
    """The registry's tag list could not be had; the message says why."""


def list_tags(session: Transport, repository: str, *, timeout: float = 15.0) -> list[str]:
    """Every tag of `repository` (`nvidia/cuda`, `host:5000/a/b`), following the registry's pages. `timeout` bounds
    connecting and each read; each page may take `netio.DEADLINE_FACTOR` times that. Raises `_Unlisted` with the
    reason."""
    from accelenv import netio

    page_limits = netio.limits("a tag list page", max_bytes=MAX_PAGE, timeout=timeout)
    token_limits = netio.limits("a token answer", max_bytes=MAX_TOKEN_ANSWER, timeout=timeout)
    image = parse_reference(repository, "latest")
    url: str | None = f"{image.base_url}/v2/{image.repository}/tags/list?n=1000"
    headers = {"Accept": "application/json"}
    tags: list[str] = []
    for _ in range(MAX_PAGES):
        if url is None:
            return tags
        response = _get(session, url, headers, page_limits)
        if response.status_code == 401:
            headers["Authorization"] = "Bearer " + _token(session, response, image.repository, token_limits)
            response = _get(session, url, headers, page_limits)
        if response.status_code != 200:
            raise _Unlisted(f"GET {url} answered HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise _Unlisted(f"GET {url} answered something that is not JSON") from None
        page = data.get("tags") if isinstance(data, dict) else None
        if not isinstance(page, list):
            raise _Unlisted(f"GET {url} answered no 'tags' list")
        tags += [t for t in page if isinstance(t, str)]
        match = _NEXT.search(response.headers.get("Link", ""))
        url = urljoin(url, match.group(1)) if match else None
    raise _Unlisted(f"{repository} has more than {MAX_PAGES} pages of tags")


def _get(session: Transport, url: str, headers: dict[str, str], bounds: Limits) -> Answer:
    from accelenv import netio
    from accelenv.errors import NetworkError

    try:
        return netio.exchange(session, "GET", url, bounds, headers=headers)
    except NetworkError as error:  # unreachable, too slow, too large: the message says which and where
        raise _Unlisted(str(error)) from None


def _token(session: Transport, challenge: Answer, repository: str, bounds: Limits) -> str:
    """A pull token from the realm the registry's `WWW-Authenticate: Bearer realm=...` challenge names."""
    text = challenge.headers.get("WWW-Authenticate", "")
    params = dict(_CHALLENGE.findall(text))
    realm = params.pop("realm", None)
    if not text.lower().startswith("bearer") or not realm:
        raise _Unlisted(f"the registry of {repository} asks for an authentication this client does not do")
    params.setdefault("scope", f"repository:{repository}:pull")
    url = f"{realm}{'&' if '?' in realm else '?'}{urlencode(params)}"
    response = _get(session, url, {"Accept": "application/json"}, bounds)
    try:
        data = response.json() if response.status_code == 200 else None
    except ValueError:
        data = None
    token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
    if not isinstance(token, str) or not token:
        raise _Unlisted(f"the token service of {repository}'s registry gave no token (HTTP {response.status_code})")
    return token


def base_image_news(
    matrix: Matrix,
    chosen: list[Environment],
    session: Transport,
    *,
    registry: str | None = None,
    timeout: float = 15.0,
) -> list[Finding | Problem]:
    """Newer tags of the chosen environments' base images whose tag names the runtime's release line
    (`nvidia/cuda:13.2.1-base-ubuntu24.04` for CUDA 13.2, `rocm/pytorch:rocm10.0_...` for ROCm 10.0). `registry`
    replaces every image's registry (tests); `timeout` is `list_tags`'."""
    seen: set[tuple[str, str]] = set()
    out: list[Finding | Problem] = []
    for env in chosen:
        runtime = matrix.runtimes.get(env.runtime)
        image = runtime.base_images.get(env.os) if runtime is not None else None
        shape = read_tag(image.tag) if image is not None else None
        if runtime is None or image is None or shape is None or (runtime.id, env.os) in seen:
            continue
        if runtime.version is None or shape.version.release[:2] != runtime.version.release[:2]:
            continue  # the tag does not name the runtime's release (python:3.12-slim for libtpu, a torch version)
        seen.add((runtime.id, env.os))
        repository = (
            f"{registry}/{parse_reference(image.repository, image.tag).repository}" if registry else image.repository
        )
        try:
            tags = list_tags(session, repository, timeout=timeout)
        except _Unlisted as error:
            out.append(Problem(env=runtime.id, name=f"{image.repository} tags", index=repository, message=str(error)))
            continue
        line, later = newer_tags(image.tag, tags)
        for tag, what in ((line, "same line"), (later, "later line")):
            if tag is None:
                continue
            out.append(
                Finding(
                    kind="runtime",
                    env=runtime.id,
                    name=f"base image {env.os} ({what})",
                    current=image.tag,
                    latest=tag,
                    index=repository,
                    note=f"{image.repository}:{tag} is in the registry's tag list, beside {image.tag}"
                    + (": move the base (and pin it)" if what == "same line" else ": a later line's image"),
                )
            )
    return out
