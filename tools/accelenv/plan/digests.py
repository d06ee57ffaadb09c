"""Checking the files a lock pins: each one downloaded and streamed through sha256, bounded in size and time.

An index describes each file with a sha256 (PEP 691 JSON, or a `#sha256=` URL fragment), and uv pins that
digest as the index gives it, without downloading the file. `Verifier` downloads every file a new lock names
and compares, through `accelenv.netio`. A file is never held whole (read into the digest as it comes), never
larger than `max_bytes` (or than the size the index states), and a download slower than `min_rate` on average,
once `timeout` has passed, is cut off: a server that trickles bytes cannot hold `accelenv lock` for long.

GPU wheels are large (torch, nvidia-*: up to a few GiB each), so a digest once checked is remembered by URL and
sha256 in the user's cache (`$XDG_CACHE_HOME/accelenv/verified-files/`), and a relock downloads only what it has
not checked before. `accelenv lock --no-verify` skips all this, and the lock's header says so.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from accelenv.records import field, frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

MAX_FILE = 8 * 2**30  # the largest file accelenv downloads to check; the largest GPU wheels are about 3 GiB
READ_TIMEOUT = 60.0  # seconds: to connect, for each read, and before the rate is judged
MIN_RATE = 128 * 2**10  # bytes/s on average past READ_TIMEOUT: a slower download is cut off
CHUNK = 2**20
_REPORT_EVERY = 10.0  # seconds between progress lines of one large download
_LARGE = 64 * 2**20  # a download at least this large gets progress lines while it runs


class Pinned(Protocol):
    """A file a lock names (`plan.provenance.LockedFile`): its distribution, where it is, what it should be."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def size(self) -> int | None: ...
    @property
    def filename(self) -> str: ...


class FileCheckError(Exception):
    """A file could not be checked. Internal: `Verifier` turns it into a problem line."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "accelenv" / "verified-files"


@frozen
class Verifier:
    """Downloads and checks files; `cache`: the folder of digests checked before (None: check everything)."""

    cache: Path | None = field(default_factory=cache_dir)
    progress: TextIO | None = None  # where to say what is being downloaded (stderr), or nowhere
    timeout: float = READ_TIMEOUT
    min_rate: float = MIN_RATE
    max_bytes: int = MAX_FILE

    def __call__(self, files: Sequence[Pinned]) -> list[str]:
        """Every problem (the package, the file, the advertised and the real digest, or why it could not be
        downloaded), or [] when every file is what its index says."""
        unique = sorted({(f.url, f.sha256): f for f in files}.values(), key=lambda f: (f.name, f.filename))
        todo = [f for f in unique if not self._cached(f)]
        problems: list[str] = []
        fetched = 0
        for number, file in enumerate(todo, start=1):
            size = f", {_size(file.size)}" if file.size else ""
            self._say(f"  checking {number}/{len(todo)} {file.name}=={file.version}: {file.filename}{size}")
            try:
                digest, received = sha256_of(
                    file.url,
                    size=file.size,
                    timeout=self.timeout,
                    min_rate=self.min_rate,
                    max_bytes=self.max_bytes,
                    report=self._say,
                )
            except FileCheckError as error:
                problems.append(f"{file.name}=={file.version}: {file.filename}: {error}")
                continue
            fetched += received
            if digest != file.sha256:
                problems.append(mismatch(file, digest, received))
                continue
            self._remember(file, received)
        self._say(
            f"  {len(unique)} file(s) checked: {len(todo)} downloaded ({_size(fetched)}), "
            f"{len(unique) - len(todo)} checked before ({self.cache or 'no cache'})"
        )
        return problems

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress.write(line + "\n")
            self.progress.flush()

    def _entry(self, file: Pinned) -> Path | None:
        if self.cache is None:
            return None
        return self.cache / hashlib.sha256(f"{file.url}\n{file.sha256}".encode()).hexdigest()

    def _cached(self, file: Pinned) -> bool:
        from accelenv.errors import AccelenvError
        from accelenv.fileio import read_text_if_exists

        entry = self._entry(file)
        if entry is None:
            return False
        try:
            text = read_text_if_exists(entry, limit=4096, what="verified-digest cache entry")
        except AccelenvError:  # not a regular file, unreadable: check the file again
            return False
        return text is not None and text.startswith(f"{file.sha256} ")

    def _remember(self, file: Pinned, size: int) -> None:
        from accelenv.errors import AccelenvError
        from accelenv.fileio import write_atomic
        from accelenv.redact import redact_text

        entry = self._entry(file)
        if entry is None:
            return
        try:
            entry.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(entry, f"{file.sha256} {size} {redact_text(file.url)}\n", inside=entry.parent)
        except (AccelenvError, OSError) as error:  # a cache that cannot be written costs a download next time
            self._say(f"  (not remembered: {error})")


def mismatch(file: Pinned, digest: str, received: int) -> str:
    from accelenv.redact import redact_text

    return (
        f"{file.name}=={file.version}: {file.filename}: the index advertises sha256 {file.sha256}, but the file it "
        f"serves ({received} bytes from {redact_text(file.url)}) has sha256 {digest}; the index describes another "
        "file than it serves (a broken mirror, or tampering): nothing was written; tell the index's maintainers, or "
        "lock from another index"
    )


def sha256_of(
    url: str,
    *,
    size: int | None,
    timeout: float = READ_TIMEOUT,
    min_rate: float = MIN_RATE,
    max_bytes: int = MAX_FILE,
    report: Callable[[str], None] | None = None,
) -> tuple[str, int]:
    """The sha256 and length of what `url` serves, read as it comes (through `accelenv.netio`). Refused
    (FileCheckError, the URL's password not repeated): more than `size` (when known) or `max_bytes`, slower than
    `min_rate` on average once `timeout` has passed, an HTTP error. `report` gets a progress line every 10 s of a
    large download."""
    from accelenv import netio
    from accelenv.errors import AnswerTooLargeError, DeadlineExceededError, NetworkError
    from accelenv.redact import redact_text

    shown = redact_text(url)
    limit = min(size, max_bytes) if size else max_bytes
    if size and size > max_bytes:
        raise FileCheckError(
            f"the index says {shown} is {size} bytes, more than the {_size(max_bytes)} accelenv downloads to check "
            "one file; lock with --no-verify (the lock will say so)"
        )
    digest = hashlib.sha256()
    # the average rate bounds the time: the deadline only stops a download that keeps the rate for ever
    bounds = netio.limits(
        "a file to check", max_bytes=limit, timeout=timeout, deadline=timeout + limit / min_rate + 60.0,
        min_rate=min_rate, rate_slack=CHUNK,
    )  # fmt: skip
    started = time.monotonic()
    reported = started
    received = 0
    try:
        with netio.session() as session, netio.stream(session, "GET", url, bounds) as answer:
            if answer.status_code >= 400:
                raise FileCheckError(f"cannot download {shown} to check it: HTTP {answer.status_code}")
            announced = _content_length(answer.headers)
            if announced is not None and announced > limit:
                raise FileCheckError(f"{shown} announces {announced} bytes, more than the {limit} expected")
            expected = announced or size
            for chunk in answer.chunks():
                digest.update(chunk)
                received = answer.received
                now = time.monotonic()
                if report and expected and expected >= _LARGE and now - reported >= _REPORT_EVERY:
                    reported = now
                    report(f"    {_size(received)} of {_size(expected)}")
    except AnswerTooLargeError:
        raise FileCheckError(f"{shown} sends more than the {limit} bytes expected") from None
    except DeadlineExceededError:
        raise FileCheckError(
            f"cannot download {shown} to check it: {received} bytes after {time.monotonic() - started:.0f} s, slower "
            f"than {min_rate / 2**10:.0f} KiB/s; try again, or lock with --no-verify (the lock will say so)"
        ) from None
    except NetworkError as error:
        raise FileCheckError(f"cannot download {shown} to check it: {error.reason or error}") from None
    return digest.hexdigest(), received


def _content_length(headers: Mapping[str, str]) -> int | None:
    value = headers.get("Content-Length", "")
    return int(value) if value.isdigit() and len(value) < 20 else None


def _size(count: int | None) -> str:
    if not count:
        return "0 B"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def stderr_verifier() -> Verifier:
    """The verifier `accelenv lock` uses: progress on stderr, the user's cache."""
    return Verifier(progress=sys.stderr)
