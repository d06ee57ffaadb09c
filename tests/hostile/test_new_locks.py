"""envs/<env>/os-packages.lock and envs/accelenv-image.lock as untrusted files, and the .debs an OS lock names
fetched from a hostile archive on loopback: every bad lock or download is a clean error naming the file (and
line), a URL's password never shows, and no partial .deb is left in the build context."""

from __future__ import annotations

import hashlib
import http.server
import os
import shutil
import threading
import time
from typing import TYPE_CHECKING

import pytest
from hostilekit import accelenv, assert_clean_error
from netkit import serving

from accelenv.build.context import MAX_DEB, BuildError, fetch_debs
from accelenv.errors import UsageError
from accelenv.plan.lock import (
    LockState,
    OsLock,
    OsPackage,
    image_lock_path,
    os_lock_path,
    os_lock_state,
    parse_os_lock,
    render_os_lock,
)
from accelenv.redact import REDACTED

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

ENV = "gpu-amd-rocm64"
BASE = "rocm/dev-ubuntu-24.04:6.4.1"
REQUESTED = ("python3.12", "python3.12-venv", "ca-certificates")
PASSWORD = "s3cr3t-pa55"  # noqa: S105 - the leak the tests look for
DEB = b"!<arch>\n" + b"debian-binary " * 40


def _package(url: str, *, data: bytes = DEB, size: int | None = None, sha256: str | None = None) -> OsPackage:
    return OsPackage(
        name="python3.12",
        version="3.12.3-1ubuntu0.1",
        architecture="amd64",
        size=len(data) if size is None else size,
        sha256=sha256 or hashlib.sha256(data).hexdigest(),
        url=url,
    )


def _lock(*packages: OsPackage) -> OsLock:
    return OsLock(base=BASE, pin="sha256:" + "b" * 64, architecture="amd64", packages=packages)


def _lock_text(url: str = "http://archive.example/pool/p/python3.12.deb") -> str:
    return render_os_lock(ENV, REQUESTED, _lock(_package(url)))


@pytest.fixture
def os_lock(matrix: Path) -> Path:
    path = os_lock_path(matrix.parent, ENV)
    path.parent.mkdir(parents=True)
    path.write_text(_lock_text())
    return path


# ---------------------------------------------------------------------------------------------------- the file


def test_a_crlf_lock_is_current_not_stale(os_lock: Path) -> None:
    """Before: a lock checked out with CRLF line endings read as stale ("the base or its packages changed")."""
    os_lock.write_bytes(os_lock.read_bytes().replace(b"\n", b"\r\n"))
    assert os_lock_state(os_lock.parents[2], ENV, BASE, REQUESTED) is LockState.CURRENT
    lock = parse_os_lock(os_lock.read_text(), where="x")
    assert lock.pin == "sha256:" + "b" * 64
    assert [p.name for p in lock.packages] == ["python3.12"]


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()


def _huge(path: Path) -> None:
    path.write_bytes(b"")
    os.truncate(path, 65 * 2**20)  # sparse: costs no disk


def _not_utf8(path: Path) -> None:
    path.write_bytes(b"\xff\xfe# lock\n")


def _outside(path: Path) -> None:
    secret = path.parents[3] / "netrc"
    secret.write_text(f"machine example login bot password {PASSWORD}\n")
    path.symlink_to(secret)


def _folder_outside(path: Path) -> None:
    elsewhere = path.parents[3] / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / path.name).write_text(_lock_text())
    shutil.rmtree(path.parent)
    path.parent.symlink_to(elsewhere)


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (_fifo, "the OS package lock is a FIFO (named pipe), not a regular file"),
        (_folder, "the OS package lock is a folder, not a regular file"),
        (_huge, "the OS package lock is larger than 64 MiB; accelenv refuses to read it"),
        (_not_utf8, "the OS package lock is not UTF-8 text"),
        (_outside, "the OS package lock leads through a symlink to"),
        (_folder_outside, "outside the repository"),
    ],
    ids=["fifo", "folder", "huge", "not-utf8", "symlink-out", "folder-symlink-out"],
)
@pytest.mark.parametrize("argv", [["validate"], ["lock", "--check", ENV]], ids=["validate", "lock-check"])
def test_a_lock_that_is_not_a_lock_file_is_a_clean_error(
    matrix: Path, make: Callable[[Path], None], says: str, argv: list[str]
) -> None:
    path = os_lock_path(matrix.parent, ENV)
    path.parent.mkdir(parents=True)
    make(path)
    result = accelenv("--matrix", str(matrix), *argv, timeout=30)  # a FIFO is never waited on
    assert_clean_error(result, code=2, says=says)
    assert PASSWORD not in result.stdout + result.stderr


@pytest.mark.parametrize("kind", ["symlink-out", "fifo"])
def test_the_image_lock_is_read_as_carefully(matrix: Path, kind: str) -> None:
    path = image_lock_path(matrix.parent)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        secret = matrix.parent.parent / "netrc"
        secret.write_text(f"password {PASSWORD}\n")
        path.symlink_to(secret)
    result = accelenv("--matrix", str(matrix), "lock", "--check", timeout=30)
    assert_clean_error(result, code=2, says=str(path))
    assert PASSWORD not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text.replace(" http://", " ftp://"),  # a package line that no longer reads
        lambda text: text + "python3.12 3.12.3-1ubuntu0.1 amd64 1 sha256:" + "c" * 64 + " http://x.example/a.deb\n",
    ],
    ids=["bad-line", "package-twice"],
)
def test_a_lock_whose_body_was_damaged_is_not_current(
    os_lock: Path, matrix: Path, damage: Callable[[str], str]
) -> None:
    """Its header still matches the matrix, but a line no longer reads: `lock --check` and `validate` say which
    line, not "current" (which would leave it to `build` to find)."""
    os_lock.write_text(damage(os_lock.read_text()))
    assert os_lock_state(matrix.parent, ENV, BASE, REQUESTED) is LockState.STALE
    check = accelenv("--matrix", str(matrix), "lock", "--check", ENV, timeout=30)
    assert check.returncode == 1, check.stdout + check.stderr
    assert f"stale os-packages.lock: envs/{ENV}/os-packages.lock:" in check.stdout
    assert "Traceback" not in check.stderr
    validate = accelenv("--matrix", str(matrix), "validate", timeout=30)
    assert f"envs.{ENV}: has an OS-package lock that does not read (envs/{ENV}/os-packages.lock:" in validate.stdout


GOOD = "python3.12 3.12.3-1ubuntu0.1 amd64 10 sha256:" + "a" * 64 + " http://archive.example/x.deb"
HEAD = "# base: rocm/dev-ubuntu-24.04:6.4.1 pinned sha256:" + "b" * 64 + "\n# architecture: amd64; requested: x\n"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ("python3.12 3.12 amd64 10 sha256:abc http://a/x.deb", ":3: not `name version architecture size sha256"),
        ("python3.12\x00 3.12 amd64 10 sha256:" + "a" * 64 + " http://a/x.deb", ":3: not `name version"),
        (GOOD.replace("http://", "ftp://"), ":3: not `name version"),
        (GOOD.replace("http://", "file:///etc/passwd#"), ":3: not `name version"),
        (GOOD.replace("http://", "http://a b/"), ":3: not `name version"),
        (GOOD.replace(" 10 ", " -10 "), ":3: not `name version"),
        (GOOD.replace(" 10 ", " 1" + "0" * 20 + " "), ":3: not `name version"),
        ("../../etc 1 amd64 10 sha256:" + "a" * 64 + " http://a/x.deb", ":3: not `name version"),
        (GOOD + "\n" + GOOD.replace("3.12.3", "3.12.4"), ":4: python3.12 again (first on line 3)"),
        (GOOD + "\n" + GOOD.replace("amd64", "arm64").replace("python3.12", "zlib1g"), "several architectures"),
        (GOOD.replace("http://", f"http://bot:{PASSWORD}@").replace(" 10 ", " x "), ":3: not `name version"),
    ],
    ids=[
        "short-sha",
        "nul",
        "ftp",
        "file",
        "space",
        "negative",
        "huge-size",
        "dotdot",
        "duplicate",
        "two-archs",
        "credentials",
    ],
)
def test_malformed_lock_lines_name_the_file_and_line(body: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"\A") as caught:
        parse_os_lock(HEAD + body + "\n", where="envs/x/os-packages.lock")
    assert says in str(caught.value)
    assert str(caught.value).startswith("envs/x/os-packages.lock")
    assert PASSWORD not in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_lock_without_its_base_line_is_refused() -> None:
    with pytest.raises(ValueError, match=r"envs/x/os-packages.lock: no `# base: ... pinned ...` line"):
        parse_os_lock(GOOD + "\n", where="envs/x/os-packages.lock")


# ---------------------------------------------------------------------------------------------------- downloads


class _Archive:
    """A Debian archive on loopback that answers each path as `routes` says: (status, headers, body)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.trickle: dict[str, float] = {}  # path -> seconds between bytes (the whole body, one byte at a time)
        self.seen: list[tuple[str, str | None]] = []  # (path, Authorization header)
        self.stop = threading.Event()
        archive = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                archive.seen.append((self.path, self.headers.get("Authorization")))
                status, headers, body = archive.routes.get(self.path, (404, {}, b"not here"))
                self.send_response(status)
                headers = {"Content-Length": str(len(body)), **headers}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.path not in archive.trickle:
                    self.wfile.write(body)
                    return
                for byte in body:  # until the client hangs up or the test ends
                    if archive.stop.wait(archive.trickle[self.path]):
                        return
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        return

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = serving(self.httpd)

    def url(self, path: str, *, host: str = "127.0.0.1", userinfo: str = "") -> str:
        return f"http://{userinfo}{host}:{self.port}{path}"


def _serve() -> Iterator[_Archive]:
    archive = _Archive()
    archive.thread.start()
    try:
        yield archive
    finally:
        archive.stop.set()
        archive.httpd.shutdown()
        archive.httpd.server_close()
        archive.thread.join(timeout=5)


@pytest.fixture
def archive(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Archive]:
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    yield from _serve()


@pytest.fixture
def other_host() -> Iterator[_Archive]:
    yield from _serve()


def _fetch(lock: OsLock, folder: Path) -> str:
    with pytest.raises(BuildError) as caught:
        fetch_debs(lock, folder, timeout=5)
    assert list(folder.iterdir()) == []  # no partial .deb left in the context
    message = str(caught.value)
    assert PASSWORD not in message
    return message


def test_a_good_download_lands(archive: _Archive, tmp_path: Path) -> None:
    archive.routes["/p.deb"] = (200, {}, DEB)
    package = _package(archive.url("/p.deb"))
    fetch_debs(_lock(package), tmp_path / "os-packages", timeout=5)
    assert (tmp_path / "os-packages" / package.filename).read_bytes() == DEB


@pytest.mark.parametrize(
    ("served", "says"),
    [
        (DEB + b"trailing bytes", "is larger than the"),
        (DEB[:-5], "bytes with sha256"),
        (DEB[:-1] + b"X", "the archive changed or the download was tampered with"),
    ],
    ids=["more", "fewer", "other-sha256"],
)
def test_a_download_unlike_its_lock_leaves_nothing(archive: _Archive, tmp_path: Path, served: bytes, says: str) -> None:
    archive.routes["/p.deb"] = (200, {}, served)
    package = _package(archive.url("/p.deb", userinfo=f"bot:{PASSWORD}@"))
    message = _fetch(_lock(package), tmp_path / "os-packages")
    assert says in message
    assert message.startswith(f"http://bot:{REDACTED}@127.0.0.1:{archive.port}/p.deb")


def test_a_failed_download_names_the_url_without_its_password(archive: _Archive, tmp_path: Path) -> None:
    package = _package(archive.url("/missing.deb", userinfo=f"bot:{PASSWORD}@"))
    message = _fetch(_lock(package), tmp_path / "os-packages")
    assert message.startswith("cannot download http://bot:")
    assert "404" in message


@pytest.mark.parametrize("protocol", ["HTTP/1.0", "HTTP/1.1"])  # the server closes after the body, or keeps alive
def test_a_server_that_trickles_bytes_is_cut_off(archive: _Archive, tmp_path: Path, protocol: str) -> None:
    """Each byte arrives well within the read timeout, so only a deadline for the whole download ends it: the
    watchdog shuts the socket down at timeout + size / min_rate, and nothing is left in the context."""
    archive.httpd.RequestHandlerClass.protocol_version = protocol  # type: ignore[attr-defined]
    archive.routes["/slow.deb"] = (200, {}, DEB)
    archive.trickle["/slow.deb"] = 0.05  # 20 B/s: the 568-byte .deb would take half a minute
    package = _package(archive.url("/slow.deb", userinfo=f"bot:{PASSWORD}@"))
    folder = tmp_path / "os-packages"
    started = time.monotonic()
    with pytest.raises(BuildError) as caught:
        fetch_debs(_lock(package), folder, timeout=1, min_rate=len(DEB))  # a limit of 2 s
    assert time.monotonic() - started < 10
    assert list(folder.iterdir()) == []
    message = str(caught.value)
    assert f"of {len(DEB)} bytes after 2 s, slower than" in message
    assert PASSWORD not in message


def test_a_size_over_the_limit_is_refused_before_any_download(archive: _Archive, tmp_path: Path) -> None:
    """Before: the download ran up to MAX_DEB, then blamed "the bytes its lock says"."""
    package = _package(archive.url("/p.deb", userinfo=f"bot:{PASSWORD}@"), size=MAX_DEB + 1)
    message = _fetch(_lock(package), tmp_path / "os-packages")
    assert f"its lock says {MAX_DEB + 1} bytes, more than the {MAX_DEB} accelenv downloads for one .deb" in message
    assert archive.seen == []


def test_a_redirect_to_another_host_gets_no_credentials_and_is_checked(
    archive: _Archive, other_host: _Archive, tmp_path: Path
) -> None:
    other_host.routes["/evil.deb"] = (200, {}, DEB[:-1] + b"X")
    archive.routes["/p.deb"] = (302, {"Location": other_host.url("/evil.deb", host="localhost")}, b"")
    package = _package(archive.url("/p.deb", userinfo=f"bot:{PASSWORD}@"))
    message = _fetch(_lock(package), tmp_path / "os-packages")
    assert "the download was tampered with" in message
    assert archive.seen[0][1] is not None  # the archive itself got the credentials
    assert other_host.seen == [("/evil.deb", None)]  # the host it redirected to did not


def test_connection_refused_is_a_clean_error(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    package = _package(f"http://bot:{PASSWORD}@127.0.0.1:{port}/p.deb")
    message = _fetch(_lock(package), tmp_path / "os-packages")
    assert message.startswith("cannot download http://bot:")


def test_build_refuses_a_malformed_lock_with_its_line(os_lock: Path) -> None:
    """What `accelenv build` shows for such a lock (its planner, without an engine)."""
    text = os_lock.read_text().replace(" http://", " gopher://")
    with pytest.raises(ValueError, match=r"\Aenvs/gpu-amd-rocm64/os-packages.lock:8: not `name version"):
        parse_os_lock(text, where="envs/gpu-amd-rocm64/os-packages.lock")
    os_lock.unlink()
    os_lock.symlink_to(os_lock.parents[3] / "nowhere")
    with pytest.raises(UsageError, match="outside the repository"):
        os_lock_state(os_lock.parents[2], ENV, BASE, REQUESTED)
