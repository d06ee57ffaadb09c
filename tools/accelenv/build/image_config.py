"""An image's config made canonical, and the archives that carry a config from and to the engine. Pure: bytes in,
bytes out; `engine.py` does the talking.

Docker 20.10's classic builder (the one docker-py drives) writes into an image's config what differs on every
build: the time of the build and of each step (`created`, `history[].created`), the container of the last step
(`container`, and `container_config`, whose `Hostname` is that container's id), the intermediate image that step
ran on (`config.Image`) and the engine's version (`docker_version`). The image id is the sha256 of the config, so
identical layers still got a new id each time. `normalise` rewrites the config the way BuildKit writes one with
`SOURCE_DATE_EPOCH` set: the image's time and every later history time clamped to the epoch, no build container,
no intermediate image, no engine version. Everything that describes the image is kept as it was: `config` (user,
environment, working directory, command, labels), `rootfs` (the layers), `history` (each step and whether it made
a layer), `os`, `architecture`.

The canonical config reaches the engine as a `docker load` archive that holds only the config and a manifest
(`config_archive`): the engine looks each layer up by its chain id before it opens the layer's file, and it has
every layer of an image it has just built, so no layer is saved, copied or held anywhere.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from typing import TYPE_CHECKING, Any

from accelenv.timestamps import rfc3339, rfc3339_seconds

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

MAX_CONFIG = 16 * 2**20  # an image config is a few KiB; this bounds what is read from the engine's archive
DROPPED = ("container", "container_config", "docker_version")  # the build's container and engine, not the image's
_DIGEST = re.compile(r"\Asha256:([0-9a-f]{64})\Z")


def image_id(config: bytes) -> str:
    """The id the engine gives the image with this config."""
    return "sha256:" + hashlib.sha256(config).hexdigest()


def normalise(config: bytes, *, epoch: int) -> bytes:
    """The canonical config of an image built at `epoch` (SOURCE_DATE_EPOCH): `created` is the epoch; a history
    entry later than the epoch (a build step) gets the epoch, an earlier one (the base image's) keeps its time;
    `container`, `container_config` and `docker_version` are dropped and `config.Image` emptied. Written with
    sorted keys and no spaces, so equal images give equal bytes. Idempotent. Raises ValueError when `config` is
    not an image config."""
    try:
        document = json.loads(config)
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"the image config is not JSON: {error}") from error
    except RecursionError as error:
        raise ValueError("the image config is not JSON an engine writes: values nested too deeply") from error
    if not isinstance(document, dict) or not isinstance(document.get("rootfs"), dict):
        raise ValueError("the image config has no rootfs: not an image config")
    history = document.get("history", [])
    if not isinstance(history, list) or not all(isinstance(entry, dict) for entry in history):
        raise ValueError("the image config's history is not a list of entries")
    stamp = rfc3339(epoch)
    canonical: dict[str, Any] = {key: value for key, value in document.items() if key not in DROPPED}
    canonical["created"] = stamp
    if "history" in document:
        canonical["history"] = [_clamped(entry, epoch, stamp) for entry in history]
    settings = document.get("config")
    if isinstance(settings, dict) and "Image" in settings:
        canonical["config"] = {**settings, "Image": ""}
    return json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def with_architecture(config: bytes, architecture: str, variant: str) -> bytes:
    """The config with `architecture` (and `variant`, or none) stated, written as `normalise` writes: for a root
    file system imported from another platform, whose config carries the importing engine's architecture.
    Raises ValueError when `config` is not an image config."""
    try:
        document = json.loads(config)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise ValueError(f"the image config is not JSON an engine writes: {error}") from error
    if not isinstance(document, dict) or not isinstance(document.get("rootfs"), dict):
        raise ValueError("the image config has no rootfs: not an image config")
    document["architecture"] = architecture
    document.pop("variant", None)
    if variant:
        document["variant"] = variant
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _clamped(entry: dict[str, Any], epoch: int, stamp: str) -> dict[str, Any]:
    if "created" not in entry:
        return entry
    seconds = rfc3339_seconds(str(entry["created"]))
    return entry if seconds is not None and seconds <= epoch else {**entry, "created": stamp}


_LONG_HEADERS = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE, tarfile.GNUTYPE_LONGNAME,
                 tarfile.GNUTYPE_LONGLINK)  # fmt: skip


class _BoundedInfo(tarfile.TarInfo):
    """A member header whose extension (a pax header, a GNU long name) is read into memory only when it is at
    most MAX_CONFIG bytes: tarfile itself would read one of any size the archive claims (a tar bomb)."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _LONG_HEADERS and self.size > MAX_CONFIG:
            raise tarfile.ReadError(f"a {self.size} B extended header (at most {MAX_CONFIG} B is read)")
        info: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]
        return info


class _Chunks(io.RawIOBase):
    """A readable file over an iterator of byte strings (docker-py's stream of an archive)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def config_from_archive(chunks: Iterable[bytes], image: str) -> bytes:
    """The config of `image` (its id) from its `docker save` archive, read as it streams: the members before it
    are skipped, nothing else is kept, and reading stops at the config (the caller drains the rest). The config
    must be the regular file `<hex of the id>.json` of at most MAX_CONFIG bytes whose sha256 is the id. Raises
    ValueError otherwise."""
    match = _DIGEST.fullmatch(image)
    if match is None:
        raise ValueError(f"{image!r} is not an image id (sha256:<64 hex digits>)")
    name = f"{match[1]}.json"
    reader = io.BufferedReader(_Chunks(iter(chunks)), buffer_size=1 << 20)
    try:
        with tarfile.open(fileobj=reader, mode="r|", tarinfo=_BoundedInfo) as archive:
            for member in archive:
                if member.name.removeprefix("./") != name:
                    continue
                if not member.isreg() or member.size > MAX_CONFIG:
                    raise ValueError(f"{name} in the archive of {image} is not a config file of at most {MAX_CONFIG} B")
                content = archive.extractfile(member)
                config = content.read() if content is not None else b""
                if image_id(config) != image:
                    raise ValueError(f"{name} in the archive of {image} has another sha256: {image_id(config)}")
                return config
    except tarfile.TarError as error:
        raise ValueError(f"the archive of {image} is not a readable tar: {error}") from error
    raise ValueError(f"the archive of {image} holds no {name}")


def config_archive(config: bytes) -> bytes:
    """A `docker load` archive of the image with this config, without its layers: `<hex of the id>.json` and a
    `manifest.json` naming one layer file per diff_id. The engine skips the file of a layer it has, so it loads
    this where it has every layer (after the build that made them) and refuses it elsewhere. Deterministic."""
    document = json.loads(config)
    rootfs = document.get("rootfs") if isinstance(document, dict) else None
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(diff_ids, list) or not all(isinstance(d, str) and _DIGEST.fullmatch(d) for d in diff_ids):
        raise ValueError("the image config's rootfs.diff_ids is not a list of sha256 digests")
    config_name = f"{image_id(config).removeprefix('sha256:')}.json"
    layers = [f"{diff_id.removeprefix('sha256:')}/layer.tar" for diff_id in diff_ids]
    manifest = [{"Config": config_name, "RepoTags": None, "Layers": layers}]
    members = {config_name: config, "manifest.json": json.dumps(manifest, separators=(",", ":")).encode()}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as archive:
        for member_name, data in sorted(members.items()):
            info = tarfile.TarInfo(member_name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()
