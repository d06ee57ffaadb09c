"""Engine traffic under the same whole-exchange deadline as every other exchange (`netio`): an engine, or whatever
listens at DOCKER_HOST, that sends its answer one byte at a time, each well within docker-py's per-read timeout,
is cut off at `netio.DEADLINE_FACTOR` times that timeout instead of holding the command forever.

docker-py's client is a requests session. Over TCP its http(s) adapters get `netio`'s watched connections; over
the Unix socket, docker-py's own connection makes the socket, so the module it makes it with is given a stand-in
whose `socket()` reports each new socket to the running exchange (and does nothing when none runs). Answers read
as a stream (build output, a container's output, `docker save`, pulls) are long by nature and stay under the
per-read timeout alone, as are uploads (`docker import` of a root file system); every other exchange is read
whole inside the deadline.
"""

from __future__ import annotations

import socket
from typing import Any

from accelenv import netio


class _ReportingSockets:
    """The `socket` module as docker-py's Unix connection sees it: a new socket is reported to the exchange."""

    def __getattr__(self, name: str) -> Any:
        return getattr(socket, name)

    def socket(self, *args: Any, **kwargs: Any) -> socket.socket:
        made = socket.socket(*args, **kwargs)
        netio.adopt(made)
        return made


def bound(client: Any, *, timeout: float) -> None:
    """Put every exchange of docker-py's `client` that is read whole under the deadline."""
    from docker.transport import unixconn

    if not isinstance(unixconn.socket, _ReportingSockets):
        unixconn.socket = _ReportingSockets()
    netio.fit(client)
    bounds = netio.limits("an engine answer", max_bytes=0, timeout=timeout)  # the size: docker-py reads the body
    send = client.send

    def bounded_send(request: Any, **kwargs: Any) -> Any:
        if kwargs.get("stream") or _uploads(request.body):
            return send(request, **kwargs)
        with netio.deadline(f"{request.method} {request.path_url}", bounds):
            return send(request, **kwargs)

    client.send = bounded_send


MAX_SMALL_BODY = 1 << 20  # a request body up to this is a parameter document; beyond, or a file, an upload


def _uploads(body: object) -> bool:
    """Whether a request sends a payload whose transfer takes as long as it is large (`docker import` of a root
    file system, a loaded archive): not held to a deadline made for answers."""
    return body is not None and not (isinstance(body, bytes | str) and len(body) <= MAX_SMALL_BODY)
