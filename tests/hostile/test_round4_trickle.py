"""Issue 41, hangs: `outdated` against an index that trickles. Every page from a host that ran past its deadline
once is a failure at once for the rest of the run, so `outdated` gives its result after one deadline per slow host,
not one per page (it asks a page per pin, and more for the release sources). Counted, not timed: the trickling
server counts the requests it is sent."""

from __future__ import annotations

import contextlib
import socketserver
import time
from typing import TYPE_CHECKING, ClassVar

from netkit import serving

from accelenv import netio
from accelenv.upstream.indexes import IndexClient

if TYPE_CHECKING:
    from collections.abc import Iterator


class _Trickle(socketserver.BaseRequestHandler):
    requests: ClassVar[list[bytes]] = []

    def handle(self) -> None:
        with contextlib.suppress(OSError):
            head = self.request.recv(4096)
            self.requests.append(head.split(b"\r\n", 1)[0])
            body = b'{"meta": {"api-version": "1.1"}, "name": "x", "files": []}' * 100
            answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.pypi.simple.v1+json\r\n"
            answer += b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            for byte in answer:  # each byte well within the timeout; the whole, minutes
                self.request.sendall(bytes([byte]))
                time.sleep(0.05)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextlib.contextmanager
def trickling() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback index that trickles every answer, and the request lines it was sent."""
    seen: list[bytes] = []
    server = _Server(("127.0.0.1", 0), type("Handler", (_Trickle,), {"requests": seen}))
    serving(server).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_host_past_its_deadline_is_not_asked_again() -> None:
    projects = [f"project-{n}" for n in range(8)]
    with trickling() as (url, seen), netio.session() as session:
        client = IndexClient(session, pypi_url=url, timeout=0.5)  # deadline: 2 s an exchange
        answers: list[object] = [client.releases(f"{url}/simple", project) for project in projects]
        answers.append(client.text(f"{url}/README.md"))
    messages = [str(getattr(answer, "message", "")) for answer in answers]
    assert all(messages), answers
    assert "did not finish within 2 s" in messages[0]
    assert "not asked again in this run" in messages[-1]
    assert len(seen) == 1, seen  # eight pages and a README: one exchange, one deadline
