"""A server on 127.0.0.1 that misbehaves on purpose, for the tests of accelenv's network exchanges.

Every request whose `hostile(method, path)` is true (by default: a path with an `h` segment, `/h/...`) gets one of
the behaviours below; every other request gets a friendly answer of a small registry (a bearer challenge under
`/v2/t/`, manifests, a tag list, a token), and 404 elsewhere. The server counts what it sent to hostile requests
and notes when the client hung up on one, so a test can tell that the client stopped reading and closed the
connection rather than merely returned. After `give_up` seconds a hostile answer ends (the server hangs up), so a
client that is never cut off fails its test rather than holding it.

- `trickle-headers`: the status line and then an endless header, one byte at a time;
- `trickle-body`: the headers at once, then the body one byte at a time;
- `endless`: the headers, then a body that never ends, as fast as the client takes it;
- `hang`: the headers (a body of 1 MiB announced), then nothing;
- `endless-redirect`: a redirect to `/doc.json` (friendly: `{"ok": true}`) whose body never ends.
"""

from __future__ import annotations

import http.server
import json
import select
import threading
import time
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import socketserver
    from collections.abc import Callable
    from io import BufferedIOBase

Behaviour = Literal["trickle-headers", "trickle-body", "endless", "hang", "endless-redirect"]
BEHAVIOURS: tuple[Behaviour, ...] = ("trickle-headers", "trickle-body", "endless", "hang")  # what every client meets
TRICKLE = 0.03  # seconds between bytes: well within any read timeout the tests use
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": []}).encode()
SHUTDOWN_POLL = 0.02  # seconds between a serving loop's looks for shutdown(): socketserver's default, 0.5 s, added
# a quarter of a second on average to every test that stopped a server


def serving(server: socketserver.BaseServer) -> threading.Thread:
    """A daemon thread, not yet started, that serves `server` until `server.shutdown()`, which returns at once."""
    return threading.Thread(target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL}, daemon=True)


def segment_h(method: str, path: str) -> bool:
    """The default: hostile where the path has an `h` segment (`/h/doc`, `/v2/h/a/manifests/1`)."""
    return "h" in path.split("?", maxsplit=1)[0].split("/")


class HostileServer:
    """The server; use it as a context manager (it serves on a thread of its own until the block ends)."""

    def __init__(self, behaviour: Behaviour, *, give_up: float = 30.0) -> None:
        self.behaviour = behaviour
        self.give_up = give_up
        self.hostile: Callable[[str, str], bool] = segment_h
        self.asked: list[tuple[str, str]] = []  # hostile requests, (method, path)
        self.sent = 0  # bytes of hostile answers, headers included
        self.hung_up = threading.Event()  # a client closed a hostile exchange's connection
        self.stop = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else each friendly answer waits out the client's delayed ACK (40 ms)

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server._answer(self)

            def do_HEAD(self) -> None:
                server._answer(self)

            def do_PUT(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                server._answer(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"
        self.url = f"http://{self.host}"
        self._thread = serving(self.httpd)

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    # ---- answering

    def _answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        method, path = handler.command, handler.path
        headers_only = method == "HEAD" and self.behaviour != "trickle-headers"  # a HEAD answer has no body
        if self.hostile(method, path) and not headers_only:
            self.asked.append((method, path))
            try:
                hung_up = self._misbehave(handler)
            except OSError:  # a write to a connection the client closed
                hung_up = True
            if hung_up:
                self.hung_up.set()
            handler.close_connection = True
            return
        status, headers, body = self._friendly(method, path)
        handler.send_response(status)
        for key, value in {"Content-Length": str(len(body)), **headers}.items():
            handler.send_header(key, value)
        handler.end_headers()
        if method != "HEAD":
            handler.wfile.write(body)

    def _friendly(self, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        if path.startswith("/v2/t/"):  # a registry that wants a token, from a hostile token service
            challenge = f'Bearer realm="{self.url}/h/token",service="loopback"'
            return 401, {"WWW-Authenticate": challenge}, b""
        if path.startswith("/v2/") and "/manifests/" in path:
            if method == "PUT":
                return 201, {}, b""
            if method == "HEAD":  # no digest: the client GETs the manifest and hashes it
                return 200, {"Content-Type": OCI_MANIFEST}, MANIFEST
            if path.endswith("/multi"):  # the multi-platform tag: no index under it yet
                return 404, {}, b"{}"
            return 200, {"Content-Type": OCI_MANIFEST}, MANIFEST
        if path.startswith("/v2/") and "/tags/list" in path:
            return 200, {"Content-Type": "application/json"}, b'{"tags": []}'
        if path == "/doc.json":
            return 200, {"Content-Type": "application/json"}, b'{"ok": true}'
        if path == "/tags.json":  # NVIDIA's open kernel modules: one release tag
            return 200, {"Content-Type": "application/json"}, b'[{"name": "610.57.04"}]'
        return 404, {}, b"not here"

    def _misbehave(self, handler: http.server.BaseHTTPRequestHandler) -> bool:
        """Answer as the behaviour says; whether the client hung up (False: the server gave up, or the test ended)."""
        out = handler.wfile
        end = time.monotonic() + self.give_up
        if self.behaviour == "trickle-headers":
            self._trickle(out, b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * (1 << 20), end)
            return False
        status = "302 Found\r\nLocation: /doc.json" if self.behaviour == "endless-redirect" else "200 OK"
        length = "Content-Length: 1048576" if self.behaviour in ("trickle-body", "hang") else "Connection: close"
        self._write(out, f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\n{length}\r\n\r\n".encode())
        if self.behaviour == "trickle-body":
            self._trickle(out, b"x" * (1 << 20), end)
        elif self.behaviour in ("endless", "endless-redirect"):
            chunk = b"x" * 65536
            while not self.stop.is_set() and time.monotonic() < end:
                self._write(out, chunk)
        else:  # hang: nothing more, until the client hangs up (its socket reads as the end) or the test ends
            while not self.stop.is_set() and time.monotonic() < end:
                readable, _, _ = select.select([handler.connection], [], [], 0.05)
                if readable and not handler.connection.recv(1):
                    return True
        return False

    def _trickle(self, out: BufferedIOBase, data: bytes, end: float) -> None:
        for byte in data:
            if self.stop.wait(TRICKLE) or time.monotonic() > end:
                return
            self._write(out, bytes([byte]))

    def _write(self, out: BufferedIOBase, data: bytes) -> None:
        out.write(data)
        out.flush()
        self.sent += len(data)
