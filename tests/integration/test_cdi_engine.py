"""`accelenv run` against a stand-in engine API: the CDI request path, which Debian's Docker 20.10 cannot take.

A small HTTP server on a unix socket in a temporary folder answers what docker-py asks on the way to a container
(/version, /info, the image's inspect, create, attach, start, wait, remove) as Docker 28.2 or Podman 4.3.1
answer it, and records the create request. The host the run reads is a temporary tree (`--root`) holding a real
nvidia-ctk spec (tests/unit/data/cdi) and every path it mounts, or not. Each case pins the request: CDI names
with a spec on a CDI engine, the older wiring without, and a refusal (exit 3, nothing created) where neither
can give the devices.
"""

from __future__ import annotations

import json
import shutil
import socketserver
import struct
import tempfile
import threading
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from accelenv.cli import main
from accelenv.host.cdi_yaml import loads
from accelenv.matrix import load_matrix
from accelenv.plan.render import LABEL_PREFIX, env_hash

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
SPEC = REPO / "tests/unit/data/cdi/nvidia-575.64.03.yaml"
IMAGE = "accelenv:stand-in"


class Engine:
    """What the stand-in answers, and what it was asked."""

    def __init__(self, *, version: dict[str, Any], info: dict[str, Any], labels: dict[str, str]) -> None:
        self.version, self.info, self.labels = version, info, labels
        self.created: list[dict[str, Any]] = []
        self.paths: list[str] = []  # the create endpoint each container was made through
        self.started = threading.Event()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    engine: ClassVar[Engine]

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: object = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path.endswith("/version"):
            self._send(200, self.engine.version)
        elif path.endswith("/info"):
            self._send(200, self.engine.info)
        elif path.endswith(f"/images/{IMAGE}/json"):
            self._send(200, {"Id": "sha256:" + "1" * 64, "Config": {"Labels": self.engine.labels}, "Size": 1})
        else:
            self._send(404, {"message": f"no such thing: {path}"})

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if path.endswith("/containers/create"):
            self.engine.created.append(json.loads(body))
            self.engine.paths.append(path)
            self._send(201, {"Id": "c0ffee", "Warnings": []})
        elif path.endswith("/attach"):  # the raw stream: one stdout frame, then the end
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.docker.raw-stream")
            self.end_headers()
            self.wfile.flush()
            self.engine.started.wait(10)  # output comes once the container runs, as from a real engine
            self.wfile.write(struct.pack(">BxxxL", 1, 3) + b"ok\n")
            self.close_connection = True
        elif path.endswith("/start"):
            self.engine.started.set()
            self._send(204)
        elif path.endswith("/wait"):
            self.engine.started.clear()
            self._send(200, {"StatusCode": 0})
        else:
            self._send(404, {"message": f"no such thing: {path}"})

    def do_DELETE(self) -> None:
        self._send(204)


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


DOCKER_28 = {
    "Version": "28.2.2",
    "ApiVersion": "1.50",
    "Os": "linux",
    "Arch": "amd64",
    "Components": [{"Name": "Engine"}],
}
PODMAN = {
    "Version": "4.3.1",
    "ApiVersion": "1.41",
    "Os": "linux",
    "Arch": "amd64",
    "Components": [{"Name": "Podman Engine"}],
}
CDI_ON = {"ServerVersion": "28.2.2", "Runtimes": {"runc": {}}, "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"]}
TOOLKIT = {"ServerVersion": "28.2.2", "Runtimes": {"runc": {}, "nvidia": {}}, "CDISpecDirs": []}
BARE = {"ServerVersion": "20.10.24", "Runtimes": {"runc": {}}}


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A short folder for the stand-ins' sockets: a unix socket's path must fit in 107 bytes, and pytest's
    temporary folders (a worker's under pytest-xdist) can be longer."""
    folder = Path(tempfile.mkdtemp(prefix="accelenv-engine-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def stand_in(sockets: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """start(version, info, env=...) -> the Engine record; DOCKER_HOST points at it (sockets/engine<n>.sock)."""
    servers: list[Server] = []

    def start(
        version: dict[str, Any], info: dict[str, Any], env: str = "gpu-nvidia-cu132", *, stale: bool = False
    ) -> Engine:
        matrix = load_matrix(REPO / "matrix.toml")
        label = "sha256:" + ("0" * 64 if stale else env_hash(matrix, matrix.envs[env]))
        engine = Engine(version=version, info=info, labels={f"{LABEL_PREFIX}.env-hash": label})
        Handler.engine = engine
        socket_path = sockets / f"engine{len(servers)}.sock"
        server = Server(str(socket_path), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        monkeypatch.setenv("DOCKER_HOST", f"unix://{socket_path}")
        return engine

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def host(tmp_path: Path, *, spec: bool, nodes: tuple[str, ...] = ()) -> Path:
    """A host tree: the real spec at /etc/cdi/nvidia.yaml with every path it names, and `nodes`."""
    base = tmp_path / "host"
    base.mkdir(parents=True, exist_ok=True)
    paths = list(nodes)
    if spec:
        (base / "etc/cdi").mkdir(parents=True)
        (base / "etc/cdi/nvidia.yaml").write_text(SPEC.read_text())
        document: Any = loads(SPEC.read_text())
        for edit in [document["containerEdits"], *(d["containerEdits"] for d in document["devices"])]:
            for entry in [*edit.get("mounts", []), *edit.get("deviceNodes", []), *edit.get("hooks", [])]:
                paths.append(entry.get("hostPath") or entry["path"])
    for path in paths:
        (base / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (base / path.lstrip("/")).touch()
    return base


def run(root: Path, env: str = "gpu-nvidia-cu132", *extra: str) -> int:
    return main(
        ["--matrix", str(REPO / "matrix.toml"), "run", env, "--image", IMAGE, "--root", str(root), *extra, "--", "true"]
    )


def test_docker_with_cdi_and_a_spec_asks_for_cdi_devices(
    stand_in: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = stand_in(DOCKER_28, CDI_ON)
    assert run(host(tmp_path, spec=True)) == 0
    out, err = capsys.readouterr()
    assert out == "ok\n"
    assert "engine: Docker 28.2.2 at unix://" in err
    assert "devices: CDI nvidia.com/gpu=all from /etc/cdi/nvidia.yaml, as cdi device requests" in err
    (created,) = engine.created
    assert created["HostConfig"]["DeviceRequests"] == [
        {"Driver": "cdi", "Count": 0, "DeviceIDs": ["nvidia.com/gpu=all"], "Capabilities": [], "Options": {}}
    ]
    assert created["HostConfig"].get("Runtime") is None

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # visible devices narrow the request
    assert run(tmp_path / "host") == 0
    assert engine.created[1]["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == ["nvidia.com/gpu=0"]


def test_without_a_spec_the_toolkit_wiring_is_used(
    stand_in: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = stand_in(DOCKER_28, TOOLKIT)
    assert run(host(tmp_path, spec=False)) == 0
    err = capsys.readouterr().err
    assert "devices: the --gpus all device request (NVIDIA container toolkit) (no CDI: Docker 28.2.2 does not" in err
    (created,) = engine.created
    assert created["HostConfig"]["DeviceRequests"] == [
        {"Driver": "", "Count": -1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}
    ]


def test_cdi_on_but_no_spec_uses_the_toolkit_and_says_why(
    stand_in: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in(DOCKER_28, {**CDI_ON, "Runtimes": {"runc": {}, "nvidia": {}}})
    assert run(host(tmp_path, spec=False)) == 0
    assert "(no CDI: no nvidia.com/gpu CDI spec; nvidia-ctk cdi generate" in capsys.readouterr().err


def test_no_wiring_path_refuses_before_anything_is_created(
    stand_in: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = stand_in({**DOCKER_28, "Version": "20.10.24", "ApiVersion": "1.41"}, BARE)
    assert run(host(tmp_path, spec=True)) == 125  # a spec, but an engine without CDI and without the toolkit
    err = capsys.readouterr().err
    assert "the container cannot get its NVIDIA GPU devices: no CDI: Docker 20.10.24 does not report it" in err
    assert "install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`" in err
    assert engine.created == []
    assert run(tmp_path / "host", "gpu-nvidia-cu132", "--no-devices") == 0  # asked for: started, and said so
    assert "devices: none: --no-devices" in capsys.readouterr().err
    assert engine.created[0]["HostConfig"].get("DeviceRequests") is None


def test_gaudi_without_its_runtime_refuses_and_tpu_needs_its_nodes(
    stand_in: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = stand_in(DOCKER_28, TOOLKIT, env="gaudi-1-23")
    assert run(host(tmp_path, spec=False), "gaudi-1-23") == 125
    assert "the engine has no habana runtime (it has nvidia, runc)" in capsys.readouterr().err
    tpu_env = next(e.id for e in load_matrix(REPO / "matrix.toml").envs.values() if e.family == "tpu")
    engine = stand_in(DOCKER_28, TOOLKIT, env=tpu_env)
    assert run(tmp_path / "host", tpu_env) == 125
    assert "this host has no /dev/vfio/[0-9]* or /dev/vfio/vfio or /dev/accel[0-9]*" in capsys.readouterr().err
    assert engine.created == []
    assert run(host(tmp_path / "tpu", spec=False, nodes=("/dev/vfio/0", "/dev/vfio/vfio")), tpu_env) == 0
    assert "device nodes /dev/vfio/0, /dev/vfio/vfio (Google Cloud TPU has no CDI spec kind" in capsys.readouterr().err
    assert [d["PathOnHost"] for d in engine.created[0]["HostConfig"]["Devices"]] == ["/dev/vfio/0", "/dev/vfio/vfio"]


def test_podman_gets_cdi_names_as_devices(stand_in: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    engine = stand_in(PODMAN, {"Runtimes": {"crun": {}}})
    assert run(host(tmp_path, spec=True)) == 0
    assert (
        "devices: CDI nvidia.com/gpu=all from /etc/cdi/nvidia.yaml, as devices (Podman's syntax)"
        in capsys.readouterr().err
    )
    (created,) = engine.created  # through Podman's own (libpod) API, which resolves CDI names
    assert engine.paths[0].endswith("/libpod/containers/create")
    assert [d["path"] for d in created["devices"]] == ["nvidia.com/gpu=all"]
    assert "HostConfig" not in created  # no Docker-style device request for Podman to drop


def test_an_image_of_another_matrix_is_refused_unless_stale_ok(
    stand_in: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = stand_in(DOCKER_28, CDI_ON, stale=True)
    root = host(tmp_path, spec=True)
    assert run(root) == 125
    err = capsys.readouterr().err
    assert f"{IMAGE} was built from sha256:{'0' * 64}; the matrix declares gpu-nvidia-cu132 as sha256:" in err
    assert "or pass --stale-ok to run it as it is" in err
    assert engine.created == []
    assert run(root, "gpu-nvidia-cu132", "--stale-ok") == 0
    assert "running it anyway (--stale-ok)" in capsys.readouterr().err
    assert len(engine.created) == 1


def test_inspect_engine_says_which_families_run_can_serve(
    stand_in: Any, sockets: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`inspect --engine` asks the engine DOCKER_HOST reaches (not only the default socket) and judges every family
    as `run` would: the same host tree (--root), the same choice and reason, or the refusal with its fix."""
    stand_in(DOCKER_28, {**CDI_ON, "Runtimes": {"runc": {}, "nvidia": {}}})
    root = host(tmp_path, spec=True)
    inspect = ["--matrix", str(REPO / "matrix.toml"), "inspect", "--engine", "--root", str(root)]
    assert main(inspect) == 0
    lines = capsys.readouterr().out.splitlines()
    (engine,) = [line for line in lines if line.startswith("engine ")]
    assert engine.endswith(
        "Docker 28.2.2 at unix://" + str(sockets / "engine0.sock") + ": CDI on (/etc/cdi, "
        "/var/run/cdi); runtimes nvidia, runc"
    )
    verdicts = {
        line.split()[0]: line.split(None, 1)[1] for line in lines[lines.index(engine) + 1 :] if line[:2] == "  "
    }
    assert verdicts["nvidia"] == "yes: CDI nvidia.com/gpu=all from /etc/cdi/nvidia.yaml, as cdi device requests"
    assert verdicts["tpu"].startswith("no: this host has no /dev/vfio/[0-9]*")
    assert verdicts["gaudi"].startswith("no: no CDI: no intel.com/gaudi CDI spec; intel-cdi-specs-generator gaudi")
    assert "the engine has no habana runtime (it has nvidia, runc)" in verdicts["gaudi"]
    assert set(verdicts) == {"nvidia", "amd", "tpu", "neuron", "gaudi"}

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'nothing.sock'}")  # no engine there: said, not a failure
    assert main(inspect) == 0
    (engine,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("engine ")]
    assert engine.startswith("engine      none: ")
    assert "nothing.sock" in engine
