"""`accelenv.netio` with hand-written fake sessions: the size cap, the deadline, and the messages that name the URL
(redacted) and the limit. The real sockets and servers are in tests/hostile/test_network_exchanges.py."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pytest
import requests

from accelenv import netio
from accelenv.errors import AnswerTooLargeError, DeadlineExceededError, NetworkError

if TYPE_CHECKING:
    from collections.abc import Iterator

URL = "https://bot:s3cr3t@index.example/simple/torch/"
SHOWN = "https://bot:<redacted>@index.example/simple/torch/"


@dataclass
class FakeResponse:
    chunks: list[bytes]
    pause: float = 0.0  # seconds before each chunk
    status_code: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    closed: bool = False

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        for chunk in self.chunks:
            time.sleep(self.pause)
            yield chunk

    def close(self) -> None:
        self.closed = True


@dataclass
class FakeSession:
    answer: FakeResponse | OSError
    asked: list[dict[str, object]] = field(default_factory=list)

    def request(self, method: str, url: str, **kwargs: object) -> FakeResponse:
        self.asked.append({"method": method, "url": url, **kwargs})
        if isinstance(self.answer, OSError):
            raise self.answer
        return self.answer


def test_the_deadline_is_a_few_timeouts_unless_given() -> None:
    assert netio.limits("a page", max_bytes=1, timeout=15.0).deadline == 15.0 * netio.DEADLINE_FACTOR
    assert netio.limits("a page", max_bytes=1, timeout=15.0, deadline=3.0).deadline == 3.0


def test_every_request_streams_with_the_timeout() -> None:
    session = FakeSession(FakeResponse([b"ok"]))
    answer = netio.exchange(session, "GET", URL, netio.limits("a page", max_bytes=2, timeout=7.0), headers={"A": "b"})
    assert (answer.status_code, answer.body) == (200, b"ok")
    assert session.asked == [
        {
            "method": "GET",
            "url": URL,
            "params": None,
            "data": None,
            "headers": {"A": "b"},
            "timeout": 7.0,
            "stream": True,
        }
    ]


@pytest.mark.parametrize(
    ("chunks", "cap", "body"),
    [
        ([b"abc", b"def"], 6, b"abcdef"),
        ([b"abc", b"defg"], 6, None),
        ([b"x" * 65536] * 17, 2**20, None),
        ([], 0, b""),
    ],
)
def test_a_body_past_its_cap_is_refused_and_the_connection_closed(
    chunks: list[bytes], cap: int, body: bytes | None
) -> None:
    response = FakeResponse(chunks)
    bounds = netio.limits("an index page", max_bytes=cap, timeout=1.0)
    if body is not None:
        assert netio.exchange(FakeSession(response), "GET", URL, bounds).body == body
    else:
        with pytest.raises(AnswerTooLargeError) as caught:
            netio.exchange(FakeSession(response), "GET", URL, bounds)
        size = f"{cap / 2**20:g} MiB" if cap >= 2**20 else f"{cap / 2**10:g} KiB"
        assert str(caught.value) == (
            f"GET {SHOWN} answered more than {size}, the most accelenv reads for an index page; it stopped reading "
            "there: check that the address serves what it should"
        )
    assert response.closed


REFUSED = "HTTPSConnectionPool(...): [Errno 111] Connection refused"
READ_TIMEOUT = "HTTPSConnectionPool(...): Read timed out. (read timeout=2)"


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (requests.ConnectionError(REFUSED), "connection refused"),
        (requests.ReadTimeout(READ_TIMEOUT), "timed out (nothing came for 2 s)"),
        (requests.ConnectionError(f"url: {URL} (boom)"), f"url: {SHOWN} (boom)"),
        (ConnectionResetError(104, "Connection reset by peer"), "connection reset"),
    ],
)
def test_a_failed_exchange_names_the_url_without_its_password(error: OSError, reason: str) -> None:
    with pytest.raises(NetworkError) as caught:
        netio.exchange(FakeSession(error), "HEAD", URL, netio.limits("a manifest", max_bytes=1, timeout=2.0))
    assert type(caught.value) is NetworkError
    assert (str(caught.value), caught.value.reason) == (f"HEAD {SHOWN} failed: {reason}", reason)


def test_a_body_that_comes_too_slowly_is_cut_off_at_the_deadline() -> None:
    """A fake has no socket to shut down: what the deadline does to it is to refuse the answer once it ends."""
    response = FakeResponse([b"a", b"b", b"c"], pause=0.05)
    bounds = netio.limits("a release feed", max_bytes=10, timeout=0.01)
    with pytest.raises(DeadlineExceededError) as caught:
        netio.exchange(FakeSession(response), "GET", URL, bounds)
    assert str(caught.value) == (
        f"GET {SHOWN} did not finish within 0.04 s, its deadline for a release feed (connecting, headers and body "
        "together): the server sends too slowly or stalls; try again later"
    )
    assert response.closed


@pytest.mark.parametrize(
    ("content_type", "body", "text"),
    [
        ("text/html", "café".encode(), "café"),
        ("text/html; charset=ISO-8859-1", "café".encode("latin-1"), "café"),
        ('text/plain; charset="utf-8"', b"ok", "ok"),
        ("text/plain; charset=no-such-codec", "café".encode(), "café"),
        ("text/plain", b"\xff\xfe ok", "\ufffd\ufffd ok"),
    ],
)
def test_an_answer_as_text_in_its_charset(content_type: str, body: bytes, text: str) -> None:
    answer = netio.Answer(status_code=200, headers={"Content-Type": content_type}, body=body)
    assert answer.text == text


@pytest.mark.parametrize(
    ("body", "says"),
    [(b"{not json", "Expecting property name"), (b"[" * 100_000 + b"]" * 100_000, "the JSON nests too deeply")],
)
def test_an_answer_that_is_not_json_is_a_value_error(body: bytes, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        netio.Answer(status_code=200, headers={}, body=body).json()
