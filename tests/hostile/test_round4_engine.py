"""Issue 41, the engine: whatever answers at DOCKER_HOST is untrusted. An engine that trickles its answer one byte at
a time (each within docker-py's per-read timeout) is cut off at netio's whole-exchange deadline, over TCP and over
a Unix socket; answers of the wrong shape (`/version` as a list, an image without `Id`, a size that is not a number)
are an `EngineError` naming what was wrong. The engines here are small HTTP servers of our own, on loopback or a
socket in tmp."""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import time
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
from netkit import serving

from accelenv.build import engine as engine_module
from accelenv.build.engine import EngineError, connect
from accelenv.errors import DeadlineExceededError

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

VERSION = {"ApiVersion": "1.47", "Version": "27.3.1", "Os": "linux", "Arch": "amd64", "Components": []}
IMAGE = {"Id": "sha256:" + "a" * 64, "RepoTags": ["x:1"], "Size": 10, "Config": {"Labels": {}}, "RootFS": {}}


class _Engine(socketserver.BaseRequestHandler):
    """Answers each request with the JSON its path maps to; `trickle` sends every answer a byte at a time."""

    answers: ClassVar[dict[str, object]] = {}
    trickle: ClassVar[float] = 0.0

    def handle(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = self.request.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                path = head.split(b" ", 2)[1].decode().split("?")[0]
                key = next((k for k in self.answers if path.endswith(k)), "")
                body = json.dumps(self.answers[key] if key else {"message": "no"}).encode()
                status = b"200 OK" if key else b"404 Not Found"
                answer = b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\nContent-Length: "
                answer += str(len(body)).encode() + b"\r\n\r\n" + body
                if self.trickle:
                    for byte in answer:
                        self.request.sendall(bytes([byte]))
                        time.sleep(self.trickle)
                else:
                    self.request.sendall(answer)


class _TCP(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Unix(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


@contextlib.contextmanager
def engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answers: dict[str, object], *, trickle: float = 0.0, unix: bool
) -> Iterator[None]:
    handler = type("Handler", (_Engine,), {"answers": answers, "trickle": trickle})
    server: socketserver.BaseServer
    if unix:
        path = tmp_path / "engine.sock"
        server = _Unix(str(path), handler)
        monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    else:
        server = _TCP(("127.0.0.1", 0), handler)
        monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{server.server_address[1]}")
    thread = serving(server)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("unix", [True, False], ids=["unix", "tcp"])
def test_an_engine_that_trickles_is_cut_off_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, unix: bool
) -> None:
    """Each byte comes within the 1 s timeout; the whole answer would take about 60 s; the deadline is 4 s."""
    with engine(monkeypatch, tmp_path, {"/version": VERSION}, trickle=0.25, unix=unix):
        started = time.monotonic()
        with pytest.raises(EngineError) as caught:
            connect(timeout=1.0)
        took = time.monotonic() - started
    assert "did not finish within 4 s" in str(caught.value)
    assert isinstance(caught.value.__cause__, DeadlineExceededError)
    assert took < 30  # the answer whole would take a minute; the bound is the deadline, with room for a busy machine


def test_a_prompt_engine_answers_within_the_deadline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with engine(monkeypatch, tmp_path, {"/version": VERSION, "/json": IMAGE}, unix=True), connect(timeout=2.0) as found:
        assert found.info().api_version == "1.47"
        image = found.image("x:1")
        assert image is not None
        assert image.size == 10


GARBAGE_VERSIONS: list[object] = [["1.47"], "1.47", None, {"ApiVersion": ["1.47"]}, {"ApiVersion": "not-a-version"}]


@pytest.mark.parametrize("answer", GARBAGE_VERSIONS, ids=repr)
def test_a_version_answer_of_another_shape_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answer: object
) -> None:
    with (
        engine(monkeypatch, tmp_path, {"/version": answer}, unix=True),
        pytest.raises(EngineError, match="not a container engine"),
    ):
        connect(timeout=2.0)


GARBAGE_IMAGES: list[dict[str, Any]] = [
    {k: v for k, v in IMAGE.items() if k != "Id"},
    {**IMAGE, "Id": 7},
    {**IMAGE, "Size": "lots"},
    {**IMAGE, "Size": -1},
    {**IMAGE, "Size": True},
    {**IMAGE, "RepoTags": "x:1"},
    {**IMAGE, "Config": {"Labels": ["a"]}},
    {**IMAGE, "Config": "x"},
    {**IMAGE, "RootFS": {"Layers": [1]}},
]


@pytest.mark.parametrize("answer", GARBAGE_IMAGES, ids=lambda a: json.dumps(a)[:60])
def test_an_image_answer_of_another_shape_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answer: dict[str, Any]
) -> None:
    with (
        engine(monkeypatch, tmp_path, {"/version": VERSION, "/json": answer}, unix=True),
        connect(timeout=2.0) as found,
        pytest.raises(EngineError, match="not an image the Engine API describes"),
    ):
        found.image("x:1")


def test_the_engine_module_reads_answers_only_through_the_validators() -> None:
    """Enumerates the engine module: no answer is indexed with `["Id"]`-style subscripts or turned into a number
    with int(...) on an answer field; each goes through build/engine_answers.py."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(engine_module))
    offenders = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value in ("Id", "Size")
        )
        or (isinstance(node, ast.Call) and ast.unparse(node.func) == "int" and "get(" in ast.unparse(node))
    ]
    assert offenders == []


def test_the_socket_stand_in_is_the_socket_module_otherwise() -> None:
    from accelenv.build.engine_deadline import _ReportingSockets

    stand_in: Any = _ReportingSockets()
    assert stand_in.AF_UNIX == socket.AF_UNIX
    made = stand_in.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    made.close()
