"""The container engine behind one small `Engine` protocol; `DockerEngine` is docker-py against the Docker Engine
API (and so Podman's Docker-compatible socket through DOCKER_HOST).

`connect()` checks the engine up front and names the API version accelenv needs and the one it found. Every
docker-py error becomes an `EngineError` with a message a user can act on.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any, Protocol

from packaging.version import InvalidVersion, Version

from accelenv.build import engine_answers as answers
from accelenv.errors import AccelenvError, NetworkError
from accelenv.records import field, frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from accelenv.build.wiring import EngineCaps

MIN_API = "1.41"  # device requests (GPUs), build labels and platforms; Docker 20.10 speaks it
SAVE_TIMEOUT = 3600.0  # seconds until `docker save` answers: the engine writes the whole archive first (~5 s/GB)


class EngineError(AccelenvError):
    """The engine is missing, too old, or refused an operation."""


@frozen
class EngineInfo:
    host: str
    api_version: str
    server_version: str
    os: str
    arch: str
    product: str = "Docker"  # Podman when its version answer names the Podman Engine component


@frozen
class ImageInfo:
    id: str
    tags: tuple[str, ...]
    labels: dict[str, str]
    size: int
    layers: tuple[str, ...]  # RootFS layer digests (diff_ids), to count what images share and compare builds
    digests: tuple[str, ...] = ()  # repository@sha256:... of a pulled image (none for one built or imported here)
    created: str = ""  # RFC 3339; a reproducible image's is its SOURCE_DATE_EPOCH, not the time it was built
    last_tagged: str = ""  # RFC 3339: when this engine last tagged it (a build made or confirmed it); "" if never
    architecture: str = ""  # what its config states (amd64, arm64): the platform its programs are for


@frozen
class RunSpec:
    """How to start a container: the family's device wiring is data from the matrix."""

    image: str
    command: list[str]
    environment: dict[str, str] = field(default_factory=dict)
    volumes: dict[str, str] = field(default_factory=dict)  # host path -> container path (read-write)
    devices: list[str] = field(default_factory=list)  # /dev/kfd and the like, present on the host
    group_add: list[str] = field(default_factory=list)
    gpus: bool = False  # NVIDIA: a device request for every GPU
    cdi_devices: list[str] = field(default_factory=list)  # CDI names (nvidia.com/gpu=all), see build/wiring.py
    runtime: str | None = None  # Gaudi: habana
    user: str | None = None
    workdir: str | None = None
    shm_size: str | None = None  # /dev/shm of the container (docker's default 64 MiB starves NCCL and DataLoader)
    ipc_mode: str | None = None  # host: the host's IPC namespace and /dev/shm (Gaudi's HCCL needs it)


class Engine(Protocol):
    def info(self) -> EngineInfo: ...

    def image(self, reference: str) -> ImageInfo | None: ...

    def build(
        self,
        context: str,
        *,
        tag: str | None,
        nocache: bool,
        on_line: Callable[[str], None],
        buildargs: dict[str, str] | None = None,
        platform: str | None = None,
    ) -> str: ...  # the image id; the build's network is off

    def labelled(self, label: str) -> list[ImageInfo]: ...  # every image carrying this label

    def image_config(self, image_id: str) -> bytes: ...  # the config as the engine keeps it: its sha256 is the id

    def load_config(self, config: bytes) -> str: ...  # an image from its config, on layers the engine has; its id

    def tag(self, image_id: str, reference: str) -> None: ...

    def remove(self, reference: str) -> None: ...

    def run(
        self, spec: RunSpec, on_line: Callable[[str], None], on_error: Callable[[str], None] | None = None
    ) -> int: ...

    def push(self, reference: str, on_line: Callable[[str], None]) -> None: ...

    def registry_has(self, reference: str) -> bool: ...

    def pull(self, reference: str, on_line: Callable[[str], None]) -> None: ...  # by digest where it has one


class DockerEngine:
    """docker-py's low-level API client, created by `connect()`."""

    def __init__(self, client: Any, info: EngineInfo) -> None:
        self._client = client
        self._info = info

    def info(self) -> EngineInfo:
        return self._info

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> DockerEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def image(self, reference: str) -> ImageInfo | None:
        import docker.errors

        try:
            data = self._client.inspect_image(reference)
        except docker.errors.ImageNotFound:
            return None
        except docker.errors.APIError as error:
            raise EngineError(f"cannot inspect {reference}: {_explain(error)}") from error
        try:
            return _image_info(data, f"the engine's answer for {reference}")
        except answers.BadAnswer as error:
            raise EngineError(f"{error}: that is not an image the Engine API describes") from error

    def labelled(self, label: str) -> list[ImageInfo]:
        """Every image carrying `label` (any value), inspected."""
        import docker.errors

        try:
            listed = self._client.images(filters={"label": label})
        except docker.errors.APIError as error:
            raise EngineError(f"cannot list images: {_explain(error)}") from error
        try:
            ids = [answers.text(entry, "Id", "an image listed", required=True) for entry in answers.entries(listed, "")]
        except answers.BadAnswer as error:
            raise EngineError(f"the engine's list of images is not one: {error}") from error
        found = [self.image(image_id) for image_id in ids]
        return [info for info in found if info is not None]

    def build(
        self,
        context: str,
        *,
        tag: str | None,
        nocache: bool,
        on_line: Callable[[str], None],
        buildargs: dict[str, str] | None = None,
        platform: str | None = None,
    ) -> str:
        """Build without a tag (the caller tags only after success: a failed build leaves no tag behind), with
        the network off: everything the build needs is in its context."""
        import docker.errors

        image_id: str | None = None
        try:
            stream: Iterator[dict[str, Any]] = self._client.build(
                path=context,
                tag=tag,
                nocache=nocache,
                rm=True,
                forcerm=True,
                decode=True,
                pull=False,
                network_mode="none",
                buildargs=buildargs or {},
                platform=platform,
            )
            for chunk in stream:
                if "stream" in chunk:
                    for line in str(chunk["stream"]).splitlines():
                        if line.strip():
                            on_line(line)
                if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                    image_id = str(chunk["aux"]["ID"])
                if "error" in chunk:
                    detail = str(chunk.get("errorDetail", {}).get("message") or chunk["error"]).strip()
                    raise EngineError(_build_failure(detail))
        except docker.errors.APIError as error:
            raise EngineError(_build_failure(_explain(error))) from error
        if image_id is None:
            raise EngineError("the engine finished the build without reporting an image id")
        return image_id

    def image_config(self, image_id: str) -> bytes:
        """The config of image `image_id`, byte for byte (its sha256 is the id), taken from the image's `docker
        save` archive as it streams by: the layers pass through unread and nothing but the config is kept. The
        engine writes the whole archive to its own disk before the first byte (about 5 s per GB here)."""
        import docker.errors

        from accelenv.build.image_config import config_from_archive

        previous, self._client.timeout = self._client.timeout, SAVE_TIMEOUT  # applies until the answer starts
        try:
            chunks = self._client.get_image(image_id, chunk_size=1 << 20)
        finally:
            self._client.timeout = previous
        try:
            return config_from_archive(chunks, image_id)
        except ValueError as error:
            raise EngineError(f"cannot read the config of {image_id}: {error}") from error
        except (docker.errors.DockerException, OSError) as error:  # requests' errors are OSErrors
            raise EngineError(f"cannot save {image_id}: {_explain(error)}") from error
        finally:
            with contextlib.suppress(docker.errors.DockerException, OSError):
                for _ in chunks:  # the rest of the archive, so the connection ends cleanly
                    pass

    def load_config(self, config: bytes) -> str:
        """Load the image with this config from an archive without layers (`config_archive`): the engine must have
        every layer the config names, as it does after building them. The image's id."""
        import docker.errors

        from accelenv.build.image_config import config_archive, image_id

        expected = image_id(config)
        try:
            for chunk in self._client.load_image(config_archive(config), quiet=True):
                if isinstance(chunk, dict) and "error" in chunk:
                    detail = str((chunk.get("errorDetail") or {}).get("message") or chunk["error"])
                    raise EngineError(f"the engine did not load {expected}: {' '.join(detail.split())[:500]}")
        except ValueError as error:
            raise EngineError(f"cannot load {expected}: {error}") from error
        except (docker.errors.DockerException, OSError) as error:
            raise EngineError(f"the engine did not load {expected}: {_explain(error)}") from error
        if self.image(expected) is None:
            raise EngineError(f"the engine reported no error loading {expected}, but has no such image")
        return expected

    def tags(self, repository: str) -> list[str]:
        """Every tag of `repository` on the engine."""
        return sorted(t for image in self._client.images(name=repository) for t in image.get("RepoTags") or ())

    def tag(self, image_id: str, reference: str) -> None:
        repository, _, tag = reference.rpartition(":")
        self._client.tag(image_id, repository, tag)

    def remove(self, reference: str) -> None:
        import docker.errors

        try:
            self._client.remove_image(reference, noprune=False)
        except docker.errors.ImageNotFound:
            return
        except docker.errors.APIError as error:  # a container uses it (409), or the engine refused
            raise EngineError(f"cannot remove {reference}: {_explain(error)}") from error

    def unique_sizes(self) -> dict[str, int]:
        """Image id -> the bytes of its layers no other image shares (the engine's disk usage, as in `docker system
        df -v`)."""
        import docker.errors

        try:
            usage = self._client.df()
        except docker.errors.APIError as error:
            raise EngineError(f"cannot read the engine's disk usage: {_explain(error)}") from error
        try:
            images = answers.entries(answers.mapping(usage, "/system/df").get("Images"), "/system/df Images")
            return {
                answers.text(i, "Id", "an image", required=True): answers.count(i, "Size", "an image")
                - answers.count(i, "SharedSize", "an image")
                for i in images
            }
        except answers.BadAnswer as error:
            raise EngineError(f"the engine's disk usage is not what the Engine API describes: {error}") from error

    def containers_by_image(self) -> dict[str, list[str]]:
        """Image id -> the names of the containers (running or stopped) made from it."""
        import docker.errors

        try:
            listed = self._client.containers(all=True)
        except docker.errors.APIError as error:
            raise EngineError(f"cannot list containers: {_explain(error)}") from error
        found: dict[str, list[str]] = {}
        try:
            for container in answers.entries(listed, "/containers/json"):
                names = [n.lstrip("/") for n in answers.texts(container, "Names", "a container")]
                names = names or [answers.text(container, "Id", "a container", required=True)[:12]]
                found.setdefault(answers.text(container, "ImageID", "a container"), []).extend(names)
        except answers.BadAnswer as error:
            raise EngineError(f"the engine's list of containers is not one: {error}") from error
        return found

    def run(self, spec: RunSpec, on_line: Callable[[str], None], on_error: Callable[[str], None] | None = None) -> int:
        """Run the container to its end, passing its standard output to `on_line` and its standard error to
        `on_error` (to `on_line` when not given), line by line as they come; the container's exit status."""
        import docker.errors
        import docker.types
        import docker.utils.socket

        requests = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if spec.gpus else []
        devices = [f"{d}:{d}:rwm" for d in spec.devices]
        if spec.cdi_devices:  # Docker's CLI sends --device vendor/class=name as this request
            requests.append(docker.types.DeviceRequest(driver="cdi", device_ids=list(spec.cdi_devices)))
        host_config = self._client.create_host_config(
            binds={host: {"bind": target, "mode": "rw"} for host, target in spec.volumes.items()},
            devices=devices,
            group_add=spec.group_add or None,
            device_requests=requests or None,
            runtime=spec.runtime,
            shm_size=spec.shm_size,
            ipc_mode=spec.ipc_mode,
        )
        try:
            if spec.cdi_devices and self._info.product == "Podman":
                container = self._create_libpod(spec)
            else:
                container = self._client.create_container(
                    spec.image,
                    command=spec.command,
                    environment=spec.environment,
                    host_config=host_config,
                    user=spec.user,
                    working_dir=spec.workdir,
                )
        except docker.errors.ImageNotFound as error:
            raise EngineError(f"no image {spec.image}: build it first (accelenv build)") from error
        except docker.errors.APIError as error:
            raise EngineError(f"cannot create a container from {spec.image}: {_explain(error)}") from error
        cid = _created_id(container)
        streams = {1: on_line, 2: on_error or on_line}  # the engine's stream ids: 1 stdout, 2 stderr
        pending = {1: "", 2: ""}
        try:
            # attached before the start, as `docker run` does: a command that ends at once loses nothing, and the
            # stream ends when the container does
            sock = self._client.attach_socket(cid, params={"stdout": 1, "stderr": 1, "stream": 1, "logs": 1})
            try:
                self._client.start(cid)
                for stream, data in docker.utils.socket.frames_iter(sock, tty=False):
                    which = 2 if stream == 2 else 1
                    *lines, pending[which] = (pending[which] + data.decode("utf-8", errors="replace")).split("\n")
                    for line in lines:
                        streams[which](line)
            finally:
                _close_attached(sock)
            for which, rest in pending.items():
                if rest:
                    streams[which](rest)
            return int(self._client.wait(cid)["StatusCode"])
        except docker.errors.APIError as error:
            raise EngineError(f"the container of {spec.image} failed to run: {_explain(error)}") from error
        finally:
            self._client.remove_container(cid, force=True)

    def _create_libpod(self, spec: RunSpec) -> dict[str, Any]:
        """Create the container through Podman's own API: its Docker-compatible API takes CDI names neither as
        devices (it stats them as paths) nor as `cdi` device requests (it drops them: a container without the
        device); its libpod API resolves them as `podman run --device nvidia.com/gpu=all` does."""
        import docker.utils

        body: dict[str, Any] = {
            "image": spec.image,
            "command": spec.command,
            "env": spec.environment,
            "mounts": [
                {"destination": target, "source": host, "type": "bind", "options": ["rbind", "rw"]}
                for host, target in spec.volumes.items()
            ],
            "devices": [{"path": path} for path in [*spec.devices, *spec.cdi_devices]],
            "groups": spec.group_add,
            "user": spec.user or "",
            "work_dir": spec.workdir or "",
        }
        if spec.shm_size:
            body["shm_size"] = docker.utils.parse_bytes(spec.shm_size)
        if spec.ipc_mode:
            body["ipcns"] = {"nsmode": spec.ipc_mode}
        if spec.runtime:
            body["oci_runtime"] = spec.runtime
        response = self._client.post(f"{self._client.base_url}/v4.0.0/libpod/containers/create", json=body)
        self._client._raise_for_status(response)  # docker-py's own error mapping: an APIError
        return {"Id": _created_id(response.json())}

    def capabilities(self) -> EngineCaps:
        """What the engine says it can give containers: CDI (and its spec folders), its OCI runtimes."""
        import docker.errors

        from accelenv.build.wiring import EngineCaps
        from accelenv.host.cdi import SPEC_DIRS

        try:
            data = self._client.info()
        except (docker.errors.DockerException, OSError) as error:
            raise EngineError(f"cannot read the engine's configuration: {_explain(error)}") from error
        runtimes = data.get("Runtimes") if isinstance(data, dict) else None
        dirs = data.get("CDISpecDirs") if isinstance(data, dict) else None
        podman = self._info.product == "Podman"
        return EngineCaps(
            host=self._info.host,
            product=self._info.product,
            version=self._info.server_version,
            # Podman reads the CDI default folders (containers.conf cdi_spec_dirs) and reports none in /info
            cdi_spec_dirs=tuple(str(d) for d in dirs) if isinstance(dirs, list) else (SPEC_DIRS if podman else ()),
            runtimes=tuple(sorted(str(r) for r in runtimes)) if isinstance(runtimes, dict) else (),
        )

    def push(self, reference: str, on_line: Callable[[str], None]) -> None:
        repository, _, tag = reference.rpartition(":")
        for chunk in self._client.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise EngineError(f"push of {reference} failed: {chunk['error']}")
            if chunk.get("status") and chunk.get("id") is None:
                on_line(str(chunk["status"]))

    def pull(self, reference: str, on_line: Callable[[str], None]) -> None:
        """Pull `reference` (`repo:tag`, `repo@sha256:...` or `repo:tag@sha256:...`: then by the digest alone), with
        a line for each layer's change of state (not every byte count) and the registry's last word."""
        import docker.errors

        repository, tag = pull_target(reference)
        states: dict[str, str] = {}
        try:
            for chunk in self._client.pull(repository, tag=tag, stream=True, decode=True):
                if "error" in chunk:
                    detail = str(chunk.get("errorDetail", {}).get("message") or chunk["error"])
                    raise EngineError(f"pull of {reference} failed: {' '.join(detail.split())[:500]}")
                status, layer = str(chunk.get("status") or ""), chunk.get("id")
                if not status:
                    continue
                if layer is None:
                    on_line(status)
                elif states.get(str(layer)) != status:
                    states[str(layer)] = status
                    progress = chunk.get("progressDetail") or {}
                    total = progress.get("total") if isinstance(progress, dict) else None
                    size = f" ({int(total) / 2**20:.1f} MiB)" if isinstance(total, int) and total > 0 else ""
                    on_line(f"{layer}: {status}{size}")
        except docker.errors.APIError as error:
            raise EngineError(f"pull of {reference} failed: {_explain(error)}") from error
        except OSError as error:  # the engine's socket dropped mid-stream
            raise EngineError(f"pull of {reference} failed: {error}") from error

    def import_rootfs(self, tarball: str, reference: str) -> str:
        """`docker import` of a root file system tarball as `reference`; the new image's id."""
        import docker.errors

        repository, _, tag = reference.rpartition(":")
        try:
            answer = self._client.import_image(src=tarball, repository=repository, tag=tag)
        except docker.errors.APIError as error:
            raise EngineError(f"import of {reference} failed: {_explain(error)}") from error
        info = self.image(reference)
        if info is None:
            raise EngineError(f"import of {reference} failed: the engine answered {str(answer)[:300]}")
        return info.id

    def registry_has(self, reference: str) -> bool:
        import docker.errors

        try:
            self._client.inspect_distribution(reference)
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as error:
            if error.response is not None and error.response.status_code in (401, 403, 404):
                return False
            raise EngineError(f"cannot ask the registry about {reference}: {_explain(error)}") from error
        return True


def connect(timeout: float = 10.0) -> DockerEngine:
    """A checked connection to the engine at DOCKER_HOST (default: the local socket)."""
    try:
        import docker
        import docker.errors
    except ImportError as error:  # pragma: no cover - docker-py is a dependency
        raise EngineError("docker-py is not installed (pip install docker)") from error
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://") and not os.path.exists(host.removeprefix("unix://")):  # noqa: PTH110
        raise EngineError(
            f"no container engine answers at {host}: the socket does not exist. Start dockerd (or podman system "
            "service) or set DOCKER_HOST."
        )
    # Speak MIN_API explicitly: version="auto" asks the engine inside the constructor, which leaks the socket when
    # nothing answers. Newer engines (and Podman) serve older API versions.
    client = docker.APIClient(base_url=host if "DOCKER_HOST" in os.environ else None, version=MIN_API, timeout=timeout)
    from accelenv.build.engine_deadline import bound

    bound(client, timeout=timeout)  # each answer read whole within netio's deadline, as every other exchange
    try:
        version = client.version(api_version=False)
    except (docker.errors.DockerException, OSError, ValueError, NetworkError) as error:  # NetworkError: the deadline
        client.close()
        raise EngineError(
            f"no container engine answers at {host}: {_explain(error)}. Start dockerd (or podman system service) or "
            "set DOCKER_HOST."
        ) from error
    try:
        version = answers.mapping(version, "its answer to /version")
        api = answers.text(version, "ApiVersion", "/version", required=True)
        too_old = Version(api) < Version(MIN_API)
    except (answers.BadAnswer, InvalidVersion) as error:
        client.close()
        raise EngineError(f"what answers at {host} is not a container engine: {error}") from error
    if too_old:
        client.close()
        raise EngineError(f"the engine at {host} speaks API {api}; accelenv needs {MIN_API} or newer (Docker 20.10+)")
    return DockerEngine(
        client,
        EngineInfo(
            host=host,
            api_version=api,
            server_version=str(version.get("Version", "?")),
            os=str(version.get("Os", "?")),
            arch=str(version.get("Arch", "?")),
            product="Podman" if _is_podman(version) else "Docker",
        ),
    )


def pull_target(reference: str) -> tuple[str, str]:
    """(repository, tag or digest) for the engine's pull: a pinned reference is pulled by its digest alone, so what
    arrives is exactly the pinned image whatever the tag points at now."""
    name, _, digest = reference.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    repository, tag = (name[:colon], name[colon + 1 :]) if colon > slash else (name, "latest")
    return repository, digest or tag


def _is_podman(version: dict[str, Any]) -> bool:
    components = version.get("Components")
    return isinstance(components, list) and any(
        isinstance(c, dict) and str(c.get("Name", "")).startswith("Podman") for c in components
    )


def _close_attached(sock: Any) -> None:
    """Close an attach socket of docker-py and the HTTP response behind it (docker-py keeps both alive)."""
    response, raw = getattr(sock, "_response", None), getattr(sock, "_sock", None)
    with contextlib.suppress(Exception):
        if response is not None:
            response.close()
    with contextlib.suppress(OSError):
        sock.close()
        if raw is not None:
            raw.close()


def _image_info(data: object, what: str) -> ImageInfo:
    data = answers.mapping(data, what)
    return ImageInfo(
        id=answers.text(data, "Id", what, required=True),
        tags=answers.texts(data, "RepoTags", what),
        labels=answers.labels(data, what),
        size=answers.count(data, "Size", what),
        layers=answers.texts(answers.mapping(data.get("RootFS") or {}, f"{what}.RootFS"), "Layers", what),
        digests=answers.texts(data, "RepoDigests", what),
        created=answers.text(data, "Created", what),
        last_tagged=_tag_time(answers.mapping(data.get("Metadata") or {}, what).get("LastTagTime")),
        architecture=answers.text(data, "Architecture", what),
    )


def _created_id(answer: object) -> str:
    try:
        return answers.text(answers.mapping(answer, "a created container"), "Id", "a created container", required=True)
    except answers.BadAnswer as error:
        raise EngineError(f"the engine's answer to creating a container is not one: {error}") from error


def _tag_time(value: object) -> str:
    """The engine's LastTagTime, or "" for its zero time (never tagged) and anything unreadable."""
    text = str(value or "")
    return "" if not text or text.startswith("0001-01-01") else text


def _explain(error: Exception) -> str:
    text = str(getattr(error, "explanation", None) or error)
    return " ".join(text.split())[:500]


def _build_failure(detail: str) -> str:
    lowered = detail.lower()
    if "no space left on device" in lowered:
        return f"the build ran out of disk space: {detail}. Free space (docker system prune) and build again"
    if "pull access denied" in lowered or ("not found" in lowered and "manifest" in lowered):
        return f"the base image is not available: {detail}. Pull it or build it first"
    return f"the build failed: {detail}"
