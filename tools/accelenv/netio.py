"""Every network exchange accelenv makes goes through here: one request and its answer, bounded in time and size.

The index and registry clients (`upstream/`), the OCI index publisher (`build/index.py`), the .deb downloads
(`build/context.py`) and the GCE metadata fetch (`host/metadata.py`) ask through `exchange` (the answer whole, as
bytes) or `stream` (the body chunk by chunk, for a download written as it comes). Each exchange has `Limits`:
- `timeout`: connecting, and each read (requests' own timeout): it ends a server that says nothing;
- `deadline`: the whole exchange (connecting, sending, the headers and the body together), by default
  `DEADLINE_FACTOR` times the timeout: it ends a server that trickles bytes, each well within the timeout. A
  watchdog timer shuts the exchange's sockets down at the deadline, which wakes the read blocked on them (a blocked
  read would not notice a flag, and closing a socket another thread reads does not wake it);
- `max_bytes`: the body, counted as it is read (after decompression): past it the connection is closed.
A failure is a `NetworkError` (`DeadlineExceededError`, `AnswerTooLargeError`) that names the method, the URL (its
credentials redacted), the limit and what to do; the clients turn it into their own failure values.

The watchdog finds the sockets through the connections of the session's adapter: `session()` makes a session with
it, and a plain `requests.Session` handed to `exchange` is fitted with it (its http:// and https:// adapters
replaced). Each connection reports the socket it opens, or reuses, to the exchange running in its thread. The
adapter also never reads a redirect's body (requests would read it whole): only its Location matters. Through a
SOCKS proxy the connections are SOCKS's own, and only the timeout and the size cap hold.
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import json
import re
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Protocol

import requests
import requests.adapters
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from accelenv.errors import AnswerTooLargeError, DeadlineExceededError, NetworkError
from accelenv.records import frozen
from accelenv.redact import redact_text

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

DEADLINE_FACTOR = 4.0  # a whole exchange may take this many timeouts: a slow but steady answer still arrives
CHUNK = 64 * 1024


@frozen
class Limits:
    """What one exchange may take; `what` names the answer in messages ("an index page", "a token answer").
    `min_rate` (bytes/s), for a download whose size is not known in advance: once `timeout` has passed, a body
    that has averaged less (`rate_slack` bytes of slack) is cut off like one past its deadline."""

    what: str
    max_bytes: int
    timeout: float
    deadline: float
    min_rate: float | None = None
    rate_slack: int = 0


def limits(
    what: str,
    *,
    max_bytes: int,
    timeout: float,
    deadline: float | None = None,
    min_rate: float | None = None,
    rate_slack: int = 0,
) -> Limits:
    """`Limits` whose deadline is, unless given, `DEADLINE_FACTOR` times the timeout."""
    whole = DEADLINE_FACTOR * timeout if deadline is None else deadline
    return Limits(
        what=what, max_bytes=max_bytes, timeout=timeout, deadline=whole, min_rate=min_rate, rate_slack=rate_slack
    )


class Response(Protocol):
    """What `stream` needs of a `requests.Response`; tests' fakes have it too."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    def iter_content(self, chunk_size: int) -> Iterator[bytes]: ...
    def close(self) -> None: ...


class Transport(Protocol):
    """What the clients are given to ask through: a `requests.Session` (see `session`), or a fake in tests."""

    def request(
        self, method: str, url: str, *, params: Any = ..., data: Any = ..., headers: Any = ..., timeout: Any = ...,
        stream: bool | None = ...,
    ) -> Response: ...  # fmt: skip


@frozen
class Answer:
    """A whole answer: its status, headers and body (at most the exchange's `max_bytes`)."""

    status_code: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def text(self) -> str:
        """The body as text, in the charset its Content-Type names (UTF-8 if none); undecodable bytes replaced."""
        return self.body.decode(_charset(self.headers.get("Content-Type", "")), "replace")

    def json(self) -> Any:
        """The body as JSON; a ValueError when it is not JSON (or nests too deeply to read)."""
        try:
            return json.loads(self.body)
        except RecursionError:
            raise ValueError("the JSON nests too deeply") from None


def exchange(
    transport: Transport,
    method: str,
    url: str,
    bounds: Limits,
    *,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    data: bytes | None = None,
) -> Answer:
    """One request and its whole answer, within `bounds`; any status is an answer. Raises `NetworkError`."""
    with stream(transport, method, url, bounds, headers=headers, params=params, data=data) as answer:
        body = b"".join(answer.chunks())
        return Answer(status_code=answer.status_code, headers=answer.headers, body=body)


@contextlib.contextmanager
def stream(
    transport: Transport,
    method: str,
    url: str,
    bounds: Limits,
    *,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    data: bytes | None = None,
) -> Iterator[Body]:
    """One request, its body read in `chunks` inside the `with` block; the deadline covers the whole block.
    Raises `NetworkError`."""
    where = f"{method} {redact_text(url)}"
    _fit(transport)
    watch = _Watch(bounds.deadline)
    if bounds.min_rate is not None:
        watch.floor(bounds.min_rate, grace=bounds.timeout, slack=bounds.rate_slack)
    token = _CURRENT.set(watch)
    response: Response | None = None
    try:
        watch.start()
        try:
            response = transport.request(
                method, url, params=params, data=data, headers=headers, timeout=bounds.timeout, stream=True
            )
        except OSError as error:  # requests' errors are OSErrors
            raise _failure(where, bounds, watch, error) from None
        yield Body(response, watch=watch, where=where, bounds=bounds)
    finally:
        watch.stop()
        _CURRENT.reset(token)
        if response is not None:
            response.close()  # a body not read to its end closes the connection rather than reuse it


class Body:
    """An answer whose body is read as it comes, within the exchange's limits."""

    def __init__(self, response: Response, *, watch: _Watch, where: str, bounds: Limits) -> None:
        self.status_code = response.status_code
        self.headers = response.headers
        self.received = 0
        self._response = response
        self._watch = watch
        self._where = where
        self._bounds = bounds

    def chunks(self) -> Iterator[bytes]:
        """The body's chunks. Raises `AnswerTooLargeError` past `max_bytes`, `DeadlineExceededError` past the
        deadline (a socket cut off reads as the end of the body, so the end is checked too), else `NetworkError`."""
        try:
            for chunk in self._response.iter_content(CHUNK):
                self.received += len(chunk)
                self._watch.received = self.received
                if self.received > self._bounds.max_bytes:
                    self._response.close()
                    raise AnswerTooLargeError(
                        f"{self._where} answered more than {_size(self._bounds.max_bytes)}, the most accelenv reads "
                        f"for {self._bounds.what}; it stopped reading there: check that the address serves what it "
                        "should"
                    )
                yield chunk
        except OSError as error:
            raise _failure(self._where, self._bounds, self._watch, error) from None
        if self._watch.expired.is_set():
            raise _failure(self._where, self._bounds, self._watch, None)


@contextlib.contextmanager
def deadline(where: str, bounds: Limits) -> Iterator[None]:
    """An exchange another client makes (docker-py's, through `build/engine_deadline.py`) inside the `with` block,
    within `bounds.deadline` as a whole: the sockets its connections report (`adopt`) are shut down at the deadline.
    Raises `DeadlineExceededError` when it was cut off (whatever the client made of the shut socket)."""
    watch = _Watch(bounds.deadline)
    token = _CURRENT.set(watch)
    watch.start()
    try:
        yield
    except OSError as error:  # requests' and urllib3's errors on a socket shut underneath them
        if watch.expired.is_set():
            raise _failure(where, bounds, watch, error) from None
        raise
    finally:
        watch.stop()
        _CURRENT.reset(token)
    if watch.expired.is_set():
        raise _failure(where, bounds, watch, None)


def adopt(sock: socket.socket) -> None:
    """Put `sock` under the deadline of the exchange running in this thread (none: nothing happens)."""
    _adopt(sock)


def fit(transport: object) -> None:
    """Give a requests session (docker-py's client over TCP) the watched connections of its http(s) adapters."""
    _fit(transport)


def session() -> requests.Session:
    """A requests session whose connections the exchanges can watch (and cut off at their deadlines)."""
    made = requests.Session()
    _fit(made)
    return made


def _failure(where: str, bounds: Limits, watch: _Watch, error: OSError | None) -> NetworkError:
    if watch.slow:
        return DeadlineExceededError(
            f"{where} sent {watch.received} bytes in {watch.elapsed():.0f} s, slower than "
            f"{(bounds.min_rate or 0) / 2**10:g} KiB/s on average, the least accelenv waits on for {bounds.what}: "
            "try again later, or from another mirror"
        )
    if watch.expired.is_set() or error is None:
        return DeadlineExceededError(
            f"{where} did not finish within {bounds.deadline:g} s, its deadline for {bounds.what} (connecting, "
            "headers and body together): the server sends too slowly or stalls; try again later"
        )
    reason = short_reason(error)
    if reason == "timed out":
        reason = f"timed out (nothing came for {bounds.timeout:g} s)"
    return NetworkError(f"{where} failed: {reason}", reason=reason)


def _size(limit: int) -> str:
    return f"{limit / 2**20:g} MiB" if limit >= 2**20 else f"{limit / 2**10:g} KiB"


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset":
            try:
                return codecs.lookup(value.strip().strip("\"'")).name
            except LookupError:
                break
    return "utf-8"


# ---- the watchdog ------------------------------------------------------------------------------------------------


class _Watch:
    """One exchange's deadline and the sockets it uses: at the deadline every one of them is shut down. It holds
    duplicates of the sockets (closed when the exchange ends), so a TLS socket that wraps the connection's first
    socket is still reached, and no file descriptor number is ever reused underneath it."""

    def __init__(self, deadline: float) -> None:
        self.expired = threading.Event()
        self.slow = False  # cut off for its rate, not its deadline
        self.received = 0  # bytes of the body read so far (kept by `Body`)
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(deadline, self._expire)
        self._timer.daemon = True
        self._started = time.monotonic()
        self._done = threading.Event()
        self._floor: tuple[float, float, int] | None = None

    def floor(self, min_rate: float, *, grace: float, slack: int) -> None:
        """Also cut the exchange off once, past `grace` seconds, it has averaged less than `min_rate` bytes/s."""
        self._floor = (min_rate, grace, slack)

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def start(self) -> None:
        self._started = time.monotonic()
        self._timer.start()
        if self._floor is not None:
            threading.Thread(target=self._check_rate, args=self._floor, daemon=True).start()

    def _check_rate(self, min_rate: float, grace: float, slack: int) -> None:
        while not self._done.wait(0.5):
            late = self.elapsed() - grace
            if late > 0 and self.received < late * min_rate - slack:
                self.slow = True
                self._expire()
                return

    def adopt(self, sock: socket.socket) -> None:
        try:
            twin = socket.fromfd(sock.fileno(), sock.family, sock.type)
        except OSError:  # closed meanwhile: nothing to watch
            return
        with self._lock:
            self._sockets.append(twin)
            if self.expired.is_set():  # a connection opened after the deadline (a redirect, a retry)
                _shut(twin)

    def _expire(self) -> None:
        with self._lock:
            self.expired.set()
            for sock in self._sockets:
                _shut(sock)

    def stop(self) -> None:
        self._done.set()
        self._timer.cancel()
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()


def _shut(sock: socket.socket) -> None:
    """Shut the socket down, which wakes a read blocked on it in another thread (closing would not)."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


_CURRENT: contextvars.ContextVar[_Watch | None] = contextvars.ContextVar("accelenv_netio_watch", default=None)


def _adopt(sock: socket.socket) -> None:
    watch = _CURRENT.get()
    if watch is not None:
        watch.adopt(sock)


class _WatchedConnection(HTTPConnection):
    """urllib3's connection, reporting its socket to the exchange that uses it: when it opens one (before TLS, so
    a trickled handshake is cut off too), and when it sends a request on one kept alive."""

    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _adopt(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        if self.sock is not None:
            _adopt(self.sock)
        super().request(*args, **kwargs)


class _WatchedTLSConnection(_WatchedConnection, HTTPSConnection):
    pass


class _Pool(HTTPConnectionPool):
    ConnectionCls = _WatchedConnection


class _TLSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedTLSConnection


_POOLS: dict[str, type[HTTPConnectionPool]] = {"http": _Pool, "https": _TLSPool}


class _Adapter(requests.adapters.HTTPAdapter):
    """requests' adapter with watched connections, that leaves a redirect's body unread."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        if not proxy.lower().startswith("socks"):
            manager.pool_classes_by_scheme = _POOLS
        return manager

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> requests.Response:
        response = super().send(request, *args, **kwargs)
        if response.is_redirect:  # requests reads a redirect's body whole before it follows: an endless one too
            response.raw.close()
            response._content = b""  # what `Response.content` gives, as if it had been read
        return response


def _fit(transport: object) -> None:
    """Give a requests session the watched adapter, unless it has it already."""
    if not isinstance(transport, requests.Session):
        return
    for prefix in ("https://", "http://"):
        if not isinstance(transport.adapters.get(prefix), _Adapter):
            transport.mount(prefix, _Adapter())


_REASONS = (
    (
        re.compile(r"NameResolution|Name or service not known|Failed to resolve|nodename nor servname|getaddrinfo"),
        "cannot resolve the host name",
    ),
    (re.compile(r"Connection refused|ECONNREFUSED"), "connection refused"),
    (re.compile(r"timed out|Timeout", re.IGNORECASE), "timed out"),
    (re.compile(r"CERTIFICATE|SSLError|SSL:", re.IGNORECASE), "TLS error (certificate or handshake)"),
    (re.compile(r"ProxyError|Tunnel connection failed"), "the proxy refused or failed"),
    (re.compile(r"Network is unreachable|No route to host"), "network unreachable"),
    (re.compile(r"Connection reset|RemoteDisconnected|Connection aborted"), "connection reset"),
)


def short_reason(error: BaseException) -> str:
    """One short line for a failed request: what happened, not the client library's nested repr (redacted)."""
    text = str(error).strip() or type(error).__name__
    for pattern, reason in _REASONS:
        if pattern.search(text):
            return reason
    first = redact_text(text.splitlines()[0])
    return first if len(first) <= 120 else first[:117] + "..."
