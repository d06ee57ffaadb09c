"""`accelenv lock` downloads every file a new lock names to check its sha256: from a hostile index on loopback,
a file that never ends, claims to be huge, trickles in byte by byte or never answers is cut off, each time with
a message that names the file (without the URL's password), and nothing is held whole in memory; a file whose
content is not what the index advertises is refused; the cache of checked digests is never trusted blindly."""

from __future__ import annotations

import hashlib
import http.server
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest
from netkit import serving

from accelenv.plan.digests import MAX_FILE, FileCheckError, Verifier, sha256_of

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PASSWORD = "s3cr3t-pa55"  # noqa: S105 - the leak the tests look for
WHEEL = b"PK\x03\x04 a wheel, as far as a digest can tell " * 50


class _Index:
    """An index on loopback whose files behave as `kind` says, by path: `/good.whl` the wheel, `/endless.whl`
    bytes without end (no Content-Length), `/claims-huge.whl` a Content-Length of 9 GiB and nothing after,
    `/trickle.whl` one byte every 50 ms, `/silent.whl` no answer at all."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.stop = threading.Event()
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                index.seen.append(self.path)
                if self.path == "/silent.whl":
                    index.stop.wait(30)
                    return
                self.send_response(200 if self.path != "/missing.whl" else 404)
                if self.path == "/claims-huge.whl":
                    self.send_header("Content-Length", str(9 * 2**30))
                elif self.path == "/trickle.whl":
                    self.send_header("Content-Length", str(len(WHEEL)))
                elif self.path == "/endless.whl":
                    self.send_header("Connection", "close")
                else:
                    self.send_header("Content-Length", str(len(WHEEL)))
                self.end_headers()
                try:
                    self._body()
                except OSError:  # the client hung up: what the test wants
                    return

            def _body(self) -> None:
                if self.path == "/endless.whl":
                    while not index.stop.is_set():
                        self.wfile.write(b"\0" * 65536)
                elif self.path == "/trickle.whl":
                    for byte in WHEEL:
                        if index.stop.wait(0.05):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                elif self.path in ("/good.whl", "/missing.whl"):
                    self.wfile.write(WHEEL)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = serving(self.httpd)

    def url(self, path: str) -> str:
        return f"http://bot:{PASSWORD}@127.0.0.1:{self.httpd.server_address[1]}{path}"


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Index]:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    served = _Index()
    served.thread.start()
    try:
        yield served
    finally:
        served.stop.set()
        served.httpd.shutdown()
        served.httpd.server_close()


def _refusal(url: str, **bounds: float) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(FileCheckError) as caught:
        sha256_of(url, size=None, **bounds)  # type: ignore[arg-type]
    message = str(caught.value)
    assert PASSWORD not in message
    assert "\n" not in message
    return message, time.monotonic() - started


def test_a_file_that_never_ends_is_cut_at_the_bound(index: _Index) -> None:
    message, seconds = _refusal(index.url("/endless.whl"), timeout=5, max_bytes=4 * 2**20)
    assert (
        message
        == f"{index.url('/endless.whl').replace(PASSWORD, '<redacted>')} sends more than the 4194304 bytes expected"
    )
    assert seconds < 10


def test_a_file_that_claims_more_than_accelenv_checks_is_refused_before_reading(index: _Index) -> None:
    """The default bound (8 GiB), from the Content-Length alone: nothing of the body is read."""
    message, seconds = _refusal(index.url("/claims-huge.whl"), timeout=5)
    assert message.endswith(f"/claims-huge.whl announces {9 * 2**30} bytes, more than the {MAX_FILE} expected")
    assert seconds < 5


def test_a_size_the_index_states_bounds_the_download(index: _Index) -> None:
    with pytest.raises(FileCheckError, match=f"/good.whl announces {len(WHEEL)} bytes, more than the 100 expected"):
        sha256_of(index.url("/good.whl"), size=100, timeout=5)
    with pytest.raises(FileCheckError, match=r"the index says .* is 9663676416 bytes, more than the 8\.0 GiB"):
        sha256_of(index.url("/good.whl"), size=9 * 2**30, timeout=5)
    assert index.seen == ["/good.whl"]  # the second never downloaded


def test_a_file_that_trickles_in_is_cut_off(index: _Index, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each byte arrives well within the read timeout (50 ms), so only the average rate ends it: 1 s of grace,
    then 1 KiB/s or more (a chunk's worth of slack) or the socket is shut down."""
    from accelenv.plan import digests

    monkeypatch.setattr(digests, "CHUNK", 256)  # the slack, small enough for a test to wait out
    message, seconds = _refusal(index.url("/trickle.whl"), timeout=1, min_rate=1024)
    assert "/trickle.whl to check it: " in message
    assert "slower than 1 KiB/s; try again, or lock with --no-verify (the lock will say so)" in message
    assert seconds < 8


def test_a_server_that_never_answers_is_given_up(index: _Index) -> None:
    message, seconds = _refusal(index.url("/silent.whl"), timeout=1)
    assert message.startswith("cannot download http://bot:<redacted>@127.0.0.1:")
    assert seconds < 8


def test_an_http_error_names_the_file(index: _Index) -> None:
    message, _ = _refusal(index.url("/missing.whl"), timeout=5)
    assert message.startswith("cannot download http://bot:<redacted>@127.0.0.1:")
    assert "404" in message


@dataclass(frozen=True)
class _Pinned:
    url: str
    sha256: str
    name: str = "demo-torch"
    version: str = "2.9.1"
    size: int | None = None

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]


def _file(url: str, sha256: str) -> _Pinned:
    return _Pinned(url=url, sha256=sha256)


def test_a_file_unlike_its_hash_is_refused_and_not_remembered(index: _Index, tmp_path: Path) -> None:
    verifier = Verifier(cache=tmp_path / "cache", timeout=5)
    advertised = "0" * 64
    (problem,) = verifier([_file(index.url("/good.whl"), advertised)])
    assert problem == (
        f"demo-torch==2.9.1: good.whl: the index advertises sha256 {advertised}, but the file it serves ({len(WHEEL)} "
        f"bytes from {index.url('/good.whl').replace(PASSWORD, '<redacted>')}) has sha256 "
        f"{hashlib.sha256(WHEEL).hexdigest()}; the index describes another file than it serves (a broken mirror, or "
        "tampering): nothing was written; tell the index's maintainers, or lock from another index"
    )
    assert not (tmp_path / "cache").exists()


def test_a_checked_file_is_not_downloaded_again(index: _Index, tmp_path: Path) -> None:
    verifier = Verifier(cache=tmp_path / "cache", timeout=5)
    good = _file(index.url("/good.whl"), hashlib.sha256(WHEEL).hexdigest())
    assert verifier([good, good]) == []  # once, though named twice
    assert verifier([good]) == []
    assert index.seen == ["/good.whl"]
    (entry,) = (tmp_path / "cache").iterdir()
    assert PASSWORD not in entry.read_text()
    other = _file(index.url("/good.whl"), "1" * 64)  # the same URL, another hash: not the file checked
    assert len(verifier([other])) == 1
    assert index.seen == ["/good.whl", "/good.whl"]


@pytest.mark.parametrize("kind", ["fifo", "other-digest", "folder"])
def test_a_cache_entry_that_is_not_one_is_not_trusted(index: _Index, tmp_path: Path, kind: str) -> None:
    """A FIFO is not waited on, a folder not read, an entry for another digest not believed: the file is
    downloaded and checked again."""
    verifier = Verifier(cache=tmp_path / "cache", timeout=5)
    good = _file(index.url("/good.whl"), hashlib.sha256(WHEEL).hexdigest())
    assert verifier([good]) == []
    (entry,) = (tmp_path / "cache").iterdir()
    entry.unlink()
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "folder":
        entry.mkdir()
    else:
        entry.write_text(f"{'2' * 64} 1 x\n")
    problems = verifier([good])
    assert index.seen == ["/good.whl", "/good.whl"]
    assert problems == []  # checked again (and, where a folder is in the way, not remembered)
