"""`accelenv pin`: base images by digest, asked of their registries with the OCI distribution API.

For every base image of the matrix that has a tag but no digest (or, with --check, a digest that may have moved),
ask the registry for the digest of the tag's manifest (the multi-architecture index when there is one), with
token authentication the way Docker Hub, NGC and others do it. Writing goes through tomlkit, so comments and
layout stay, and the whole file is validated before it is written atomically.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Any

import tomlkit
import tomlkit.exceptions

from accelenv.matrix import validate_text
from accelenv.records import frozen

if TYPE_CHECKING:
    from pathlib import Path

    from accelenv.matrix import Matrix
    from accelenv.netio import Answer, Limits, Transport

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
DOCKER_HUB = "registry-1.docker.io"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")  # matched whole (fullmatch)
MAX_MANIFEST = 4 * 1024 * 1024  # the OCI distribution spec lets registries refuse manifests over 4 MiB
MAX_TOKEN_ANSWER = 64 * 1024
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


@frozen
class ImageName:
    registry: str
    repository: str
    tag: str

    @property
    def base_url(self) -> str:
        loopback = self.registry.split(":")[0] in ("localhost", "127.0.0.1")
        return f"{'http' if loopback else 'https'}://{self.registry}"


def parse_reference(repository: str, tag: str) -> ImageName:
    """`nvidia/cuda` -> registry-1.docker.io, nvidia/cuda; `python` -> library/python; `host:5000/a/b` -> host."""
    first, _, rest = repository.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return ImageName(registry=first, repository=rest, tag=tag)
    return ImageName(registry=DOCKER_HUB, repository=repository if rest else f"library/{repository}", tag=tag)


@frozen
class Resolved:
    runtime: str
    os: str
    reference: str
    digest: str | None
    problem: str | None


def resolve_digest(session: Transport, image: ImageName, *, timeout: float = 10.0) -> tuple[str | None, str | None]:
    """(digest, None) or (None, problem). Never raises. `timeout` bounds connecting and each read; each exchange
    may take `netio.DEADLINE_FACTOR` times that."""
    from accelenv import netio
    from accelenv.errors import NetworkError

    url = f"{image.base_url}/v2/{image.repository}/manifests/{image.tag}"
    headers = {"Accept": MANIFEST_TYPES}
    manifest = netio.limits("a manifest", max_bytes=MAX_MANIFEST, timeout=timeout)
    try:
        response = netio.exchange(session, "HEAD", url, manifest, headers=headers)
        if response.status_code == 401:
            token_limits = netio.limits("a token answer", max_bytes=MAX_TOKEN_ANSWER, timeout=timeout)
            token, problem = _token(session, response.headers.get("WWW-Authenticate", ""), image, token_limits)
            if problem:
                return None, problem
            headers["Authorization"] = f"Bearer {token}"
            response = netio.exchange(session, "HEAD", url, manifest, headers=headers)
        digest = response.headers.get("Docker-Content-Digest")
        if response.status_code == 200 and not digest:  # some registries answer HEAD without it
            response = netio.exchange(session, "GET", url, manifest, headers=headers)
            digest = response.headers.get("Docker-Content-Digest")
            if response.status_code == 200 and not digest:
                digest = "sha256:" + hashlib.sha256(response.body).hexdigest()
    except NetworkError as error:  # unreachable, too slow, too large: the message says which and where
        return None, str(error)
    return _outcome(response, digest, image)


def _outcome(response: Answer, digest: str | None, image: ImageName) -> tuple[str | None, str | None]:
    status = response.status_code
    if status == 200 and digest and DIGEST.fullmatch(digest):
        return digest, None
    if status == 200:
        return None, f"{image.registry} answered without a sha256 digest ({digest!r})"
    if status == 404:
        return None, f"{image.repository}:{image.tag} does not exist on {image.registry} (404)"
    if status == 429:
        wait = response.headers.get("Retry-After")
        return None, f"{image.registry} rate-limits this client (429)" + (f"; retry after {wait} s" if wait else "")
    if status in (401, 403):
        return None, f"{image.registry} refused access to {image.repository} ({status}): log in or check the name"
    return None, f"{image.registry} answered {status}"


def _token(session: Transport, challenge: str, image: ImageName, bounds: Limits) -> tuple[str | None, str | None]:
    """A bearer token for pulling `image`, from the realm the registry's challenge names. Raises `NetworkError`."""
    from accelenv import netio

    if not challenge.lower().startswith("bearer"):
        return (
            None,
            f"{image.registry} asks for {challenge.split(' ', maxsplit=1)[0] or 'unknown'} authentication, not a token",
        )
    params = dict(_CHALLENGE.findall(challenge))
    realm = params.pop("realm", None)
    if not realm:
        return None, f"{image.registry} sent a token challenge without a realm"
    params.setdefault("scope", f"repository:{image.repository}:pull")
    response = netio.exchange(session, "GET", realm, bounds, params=params)
    service = f"the token service of {image.registry}"
    if response.status_code != 200:
        return None, f"{service} answered {response.status_code}"
    try:
        data = response.json()
    except ValueError:
        return None, f"{service} answered something that is not JSON"
    token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
    if not isinstance(token, str) or not token:
        return None, f"{service} returned no token (expected a JSON object with a 'token' string)"
    return token, None


# ---------------------------------------------------------------------------------------------------- plan


def targets(matrix: Matrix, runtimes: list[str] | None) -> list[tuple[str, str, ImageName, str | None]]:
    """(runtime id, OS label, image, digest in the matrix) for every base image in scope."""
    found = []
    for runtime in matrix.runtimes.values():
        if runtimes and runtime.id not in runtimes:
            continue
        for os_label, image in runtime.base_images.items():
            found.append((runtime.id, os_label, parse_reference(image.repository, image.tag), image.digest))
    return found


@frozen
class PinResult:
    runtime: str
    os: str
    image: str
    state: str  # pinned, unchanged, moved, unpinned, error
    digest: str | None
    previous: str | None
    message: str

    def as_json(self) -> dict[str, Any]:
        return dict(vars(self))


def pin(
    matrix: Matrix, path: Path, session: Transport, *, runtimes: list[str] | None, check: bool, refresh: bool
) -> list[PinResult]:
    """Pin (or with `check`, compare) every base image in scope. The registries are asked first, without holding
    anything; then the matrix is read again under its lock, the digests go into that text (an entry someone
    changed meanwhile is left alone and reported), and it is written once, validated, atomically."""
    results = []
    for runtime_id, os_label, image, current in targets(matrix, runtimes):
        name = f"{image.registry}/{image.repository}:{image.tag}"
        if current and not check and not refresh:
            results.append(PinResult(runtime=runtime_id, os=os_label, image=name, state="unchanged",
                                     digest=current, previous=current, message="already pinned"))  # fmt: skip
            continue
        digest, problem = resolve_digest(session, image)
        if digest is None:
            results.append(PinResult(runtime=runtime_id, os=os_label, image=name, state="error", digest=None,
                                     previous=current, message=problem or "no digest"))  # fmt: skip
            continue
        if check:
            state = "unpinned" if current is None else ("unchanged" if current == digest else "moved")
            message = {
                "unpinned": f"not pinned; the tag points at {digest}",
                "unchanged": "the tag still points at the pinned digest",
                "moved": f"the tag was re-pushed: it now points at {digest}",
            }[state]
            results.append(PinResult(runtime=runtime_id, os=os_label, image=name, state=state, digest=digest,
                                     previous=current, message=message))  # fmt: skip
            continue
        state = "unchanged" if current == digest else "pinned"
        results.append(PinResult(runtime=runtime_id, os=os_label, image=name, state=state, digest=digest,
                                 previous=current, message="pinned by digest"))  # fmt: skip
    if not check and any(r.state == "pinned" for r in results):
        from accelenv.fileio import update_text

        wanted = {(r.runtime, r.os): r for r in results if r.state == "pinned"}
        moved: list[tuple[str, str]] = []
        update_text(path, lambda text: _with_digests(text, str(path), wanted, moved), what="matrix")
        results = [_changed_meanwhile(r) if (r.runtime, r.os) in moved else r for r in results]
    return results


def _with_digests(
    text: str, source: str, wanted: dict[tuple[str, str], PinResult], moved: list[tuple[str, str]]
) -> str:
    """`text` (the matrix as it is now) with the digests of `wanted` written in, validated. An image whose entry
    changed since the registries were asked (another repository or tag, or gone) is left out, into `moved`."""
    try:
        document = tomlkit.parse(text)
    except (tomlkit.exceptions.TOMLKitError, RecursionError) as error:
        raise ValueError(f"{source} no longer parses ({error}); nothing written: fix it and run pin again") from error
    for (runtime_id, os_label), result in wanted.items():
        entry = document.get("runtimes", {}).get(runtime_id, {}).get("base_images", {}).get(os_label)
        if entry is None or _name_of(entry) != result.image:
            moved.append((runtime_id, os_label))
            continue
        entry["digest"] = result.digest
    new = tomlkit.dumps(document)
    validation = validate_text(new, source=source)
    errors = [p.render(source) for p in validation.problems if p.is_error]
    if errors:  # never write a matrix that would not validate
        raise ValueError("the pinned matrix would not validate: " + "; ".join(errors[:3]))
    return new


def _name_of(entry: Any) -> str | None:
    repository, tag = entry.get("repository"), entry.get("tag")
    if not isinstance(repository, str) or not isinstance(tag, str):
        return None
    image = parse_reference(repository, tag)
    return f"{image.registry}/{image.repository}:{image.tag}"


def _changed_meanwhile(result: PinResult) -> PinResult:
    return PinResult(
        runtime=result.runtime,
        os=result.os,
        image=result.image,
        state="error",
        digest=None,
        previous=result.previous,
        message="its entry in the matrix changed while the registry was asked; nothing written: run pin again",
    )
