"""One multi-platform tag: an OCI image index over per-platform images, written through the registry API.

`accelenv build --platform all --push REGISTRY` pushes each platform's image under its own tags (the content tag,
which names the platform, and `<human tag>-<arch>`), then publishes the plain human tag as an OCI image index
that lists each platform's manifest: `docker pull REGISTRY/accelenv:<human tag>` then gives every machine its own
platform. Docker 20.10 cannot make an index itself (no `docker manifest` without the experimental CLI, no
BuildKit multi-platform push through docker-py), so accelenv writes it with the OCI distribution API: it reads
each pushed manifest's digest, size and media type, builds the index, and PUTs it, unless the registry's index
under that tag already lists exactly these manifests.

`plan_index` is pure; `publish_index` talks to the registry, with token authentication (Docker Hub, NGC, Harbor)
and the credentials `docker login` saved in ~/.docker/config.json. Every exchange goes through `accelenv.netio`:
bounded in size, with a timeout for each read and a deadline for the whole.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from accelenv.build.engine import EngineError
from accelenv.build.platforms import CONFIG_ARCHITECTURES
from accelenv.records import frozen
from accelenv.upstream.pin import MANIFEST_TYPES, MAX_MANIFEST, MAX_TOKEN_ANSWER, ImageName, parse_reference

if TYPE_CHECKING:
    from accelenv.netio import Answer, Transport

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_DIGEST = re.compile(r"\Asha256:[0-9a-f]{64}\Z")
_SINGLE = ("application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json")


@frozen
class Manifest:
    """One platform's pushed image, as the registry has it."""

    platform: str
    media_type: str
    digest: str
    size: int


def plan_index(manifests: list[Manifest]) -> bytes:
    """The OCI image index over `manifests`, one entry per platform in platform order; deterministic bytes."""
    entries = []
    for manifest in sorted(manifests, key=lambda m: m.platform):
        os_name, _, _ = manifest.platform.partition("/")
        architecture, variant = CONFIG_ARCHITECTURES[manifest.platform]
        platform: dict[str, str] = {"architecture": architecture, "os": os_name}
        if variant:
            platform["variant"] = variant
        entries.append(
            {"mediaType": manifest.media_type, "digest": manifest.digest, "size": manifest.size, "platform": platform}
        )
    document = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def listed_digests(body: bytes) -> set[str] | None:
    """The manifest digests an index lists, or None when `body` is not an index."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    entries = document.get("manifests") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        return None
    return {str(e.get("digest")) for e in entries if isinstance(e, dict)}


class Registry:
    """The OCI distribution API of one repository, for reading manifests and writing an index. `timeout` bounds
    connecting and each read; each exchange may take `netio.DEADLINE_FACTOR` times that."""

    def __init__(self, session: Transport, name: ImageName, *, timeout: float = 30.0) -> None:
        self._session = session
        self._name = name
        self._timeout = timeout
        self._auth: dict[str, str] = {}

    def _url(self, reference: str) -> str:
        return f"{self._name.base_url}/v2/{self._name.repository}/manifests/{reference}"

    def _request(self, method: str, reference: str, *, headers: dict[str, str], data: bytes | None = None) -> Answer:
        """One exchange about the manifest under `reference`, authorised when the registry asks (once)."""
        url = self._url(reference)
        answer = self._exchange(method, url, "a manifest", headers={**headers, **self._auth}, data=data)
        if answer.status_code == 401 and not self._auth:
            self._auth = self._authorise(answer.headers.get("WWW-Authenticate", ""))
            answer = self._exchange(method, url, "a manifest", headers={**headers, **self._auth}, data=data)
        return answer

    def _exchange(
        self,
        method: str,
        url: str,
        what: str,
        *,
        max_bytes: int = MAX_MANIFEST,
        headers: dict[str, str],
        data: bytes | None = None,
        params: dict[str, str] | None = None,
    ) -> Answer:
        """One exchange within this registry's limits (a manifest, or a token answer); a failure as an EngineError."""
        from accelenv import netio
        from accelenv.errors import NetworkError

        bounds = netio.limits(what, max_bytes=max_bytes, timeout=self._timeout)
        try:
            return netio.exchange(self._session, method, url, bounds, headers=headers, data=data, params=params)
        except NetworkError as error:  # unreachable, too slow, too large: the message says which and where
            raise EngineError(str(error)) from None

    def manifest(self, reference: str) -> tuple[str, str, bytes] | None:
        """(media type, digest, body) of the manifest under `reference`, or None when the registry has none."""
        response = self._request("GET", reference, headers={"Accept": MANIFEST_TYPES})
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise EngineError(f"{self._name.registry} answered {response.status_code} for {self._where(reference)}")
        digest = "sha256:" + hashlib.sha256(response.body).hexdigest()
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip()
        return media_type, digest, response.body

    def put_index(self, tag: str, body: bytes) -> str:
        """PUT the index under `tag`; its digest."""
        response = self._request("PUT", tag, data=body, headers={"Content-Type": OCI_INDEX})
        if response.status_code not in (200, 201):
            raise EngineError(
                f"{self._name.registry} refused the index for {self._where(tag)} ({response.status_code}): log in "
                "with push rights (docker login), or use a registry that takes OCI image indexes"
            )
        return "sha256:" + hashlib.sha256(body).hexdigest()

    def _where(self, reference: str) -> str:
        return f"{self._name.registry}/{self._name.repository}:{reference}"

    def _authorise(self, challenge: str) -> dict[str, str]:
        """The Authorization header the registry's challenge asks for: Basic from the saved credentials, or a
        bearer token for pull and push from the realm it names."""
        saved = _saved_auth(self._name.registry)
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if saved is None:
                raise EngineError(f"{self._name.registry} asks for a login: docker login {self._name.registry}")
            return {"Authorization": f"Basic {saved}"}
        if scheme != "bearer":
            raise EngineError(f"{self._name.registry} asks for {scheme or 'unknown'} authentication, not a token")
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm.startswith(("https://", "http://")):
            raise EngineError(f"{self._name.registry} sent a token challenge without a usable realm")
        params.setdefault("scope", f"repository:{self._name.repository}:pull,push")
        headers = {"Authorization": f"Basic {saved}"} if saved else {}
        response = self._exchange(
            "GET", realm, "a token answer", max_bytes=MAX_TOKEN_ANSWER, headers=headers, params=params
        )
        try:
            data = response.json() if response.status_code == 200 else None
        except ValueError:
            data = None
        token = (data.get("token") or data.get("access_token")) if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise EngineError(f"the token service of {self._name.registry} gave no token ({response.status_code})")
        return {"Authorization": f"Bearer {token}"}


def _saved_auth(registry: str) -> str | None:
    """The base64 user:password `docker login` saved for `registry`, if any (credential helpers are not asked)."""
    folder = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    from accelenv.errors import UsageError
    from accelenv.fileio import read_bytes

    try:
        data = json.loads(read_bytes(folder / "config.json", limit=1 << 20, what="docker config"))
    except (UsageError, ValueError):
        return None
    auths = data.get("auths") if isinstance(data, dict) else None
    if not isinstance(auths, dict):
        return None
    for key in (registry, f"https://{registry}", f"http://{registry}"):
        entry = auths.get(key)
        auth = entry.get("auth") if isinstance(entry, dict) else None
        if isinstance(auth, str) and auth:
            try:
                base64.b64decode(auth, validate=True)
            except ValueError:
                return None
            return auth
    return None


def publish_index(
    session: Transport, remote: str, platform_tags: dict[str, str], *, timeout: float = 30.0
) -> tuple[str, bool]:
    """Publish `remote` (registry/repository:tag) as the index over the images pushed under `platform_tags`
    (platform -> tag in the same repository). (the index digest, whether it was written): an index that lists the
    same manifests is left as it is."""
    repository, _, tag = remote.rpartition(":")
    registry = Registry(session, parse_reference(repository, tag), timeout=timeout)
    manifests = []
    for platform, platform_tag in sorted(platform_tags.items()):
        found = registry.manifest(platform_tag)
        if found is None:
            raise EngineError(f"{repository}:{platform_tag} is not in the registry: push the {platform} image first")
        media_type, digest, _ = found
        if media_type not in _SINGLE or not _DIGEST.fullmatch(digest):
            raise EngineError(f"{repository}:{platform_tag} is a {media_type or 'manifest of no type'}, not one image")
        manifests.append(Manifest(platform=platform, media_type=media_type, digest=digest, size=len(found[2])))
    body = plan_index(manifests)
    existing = registry.manifest(tag)
    if existing is not None and listed_digests(existing[2]) == {m.digest for m in manifests}:
        return existing[1], False
    return registry.put_index(tag, body), True
