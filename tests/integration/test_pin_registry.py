"""`accelenv pin` against a small OCI registry served on loopback by the test: token authentication as Docker Hub
does it, a multi-architecture index, a re-push, a missing tag and a rate limit.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlparse

import pytest
import tomlkit

from accelenv.cli import main

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"


class Registry:
    """Manifests by repository and tag; a token endpoint; counts what clients asked."""

    def __init__(self) -> None:
        self.manifests: dict[tuple[str, str], bytes] = {}
        self.token = "t0k3n"  # noqa: S105 - the loopback registry's test token
        self.rate_limited: set[str] = set()
        self.requests: list[str] = []
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self._serve(body=False)

            def do_GET(self) -> None:
                self._serve(body=True)

            def _serve(self, *, body: bool) -> None:
                url = urlparse(self.path)
                registry.requests.append(f"{self.command} {url.path}")
                if url.path == "/token":
                    scope = parse_qs(url.query).get("scope", [""])[0]
                    assert scope.startswith("repository:"), scope
                    self._reply(200, json.dumps({"token": registry.token}).encode(), "application/json")
                    return
                parts = url.path.split("/manifests/")
                if len(parts) != 2 or not parts[0].startswith("/v2/"):
                    self._reply(404, b"{}", "application/json")
                    return
                repository, tag = parts[0][len("/v2/") :], parts[1]
                if self.headers.get("Authorization") != f"Bearer {registry.token}":
                    realm = f"http://{self.headers['Host']}/token"
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", f'Bearer realm="{realm}",service="loopback"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if repository in registry.rate_limited:
                    self.send_response(429)
                    self.send_header("Retry-After", "30")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                manifest = registry.manifests.get((repository, tag))
                if manifest is None:
                    self._reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', "application/json")
                    return
                assert INDEX_TYPE in self.headers.get("Accept", "")
                self.send_response(200)
                self.send_header("Content-Type", INDEX_TYPE)
                self.send_header("Docker-Content-Digest", "sha256:" + hashlib.sha256(manifest).hexdigest())
                self.send_header("Content-Length", str(len(manifest)))
                self.end_headers()
                if body:
                    self.wfile.write(manifest)

            def _reply(self, status: int, payload: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"

    def push(self, repository: str, tag: str, architectures: list[str]) -> str:
        index = {
            "schemaVersion": 2,
            "mediaType": INDEX_TYPE,
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "platform": {"os": "linux", "architecture": a},
                    "digest": "sha256:" + hashlib.sha256(f"{repository}{tag}{a}".encode()).hexdigest(),
                    "size": 1,
                }
                for a in architectures
            ],
        }
        data = json.dumps(index, sort_keys=True).encode()
        self.manifests[(repository, tag)] = data
        return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture
def registry() -> Iterator[Registry]:
    server = Registry()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def matrix_on(registry: Registry, folder: Path) -> Path:
    """The shipped matrix with the cpu runtime's base image moved to the loopback registry."""
    doc = tomlkit.parse((REPO / "matrix.toml").read_text(encoding="utf-8"))
    doc["runtimes"]["cpu"]["base_images"]["debian12"]["repository"] = f"{registry.host}/library/python"
    folder.mkdir()
    path = folder / "matrix.toml"
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


def test_pin_writes_the_index_digest_and_keeps_the_file(
    registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    digest = registry.push("library/python", "3.11-slim-bookworm", ["amd64", "arm64"])
    path = matrix_on(registry, tmp_path / "repo")
    before = path.read_text()
    assert main(["--matrix", str(path), "pin", "cpu"]) == 0
    after = path.read_text()
    assert f'digest = "{digest}"' in after
    assert "GET /token" in registry.requests  # the client followed the token challenge
    # only that value changed: comments and every other line are untouched
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b]
    assert len(changed) == 1
    assert "# accelenv compatibility matrix: the one file everything reads." in after
    assert main(["--matrix", str(path), "validate"]) == 0
    assert "cpu              debian12     pinned" in capsys.readouterr().out


def test_check_reports_a_re_push_and_writes_nothing(
    registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry.push("library/python", "3.11-slim-bookworm", ["amd64"])
    path = matrix_on(registry, tmp_path / "repo")
    assert main(["--matrix", str(path), "pin", "cpu"]) == 0
    assert main(["--matrix", str(path), "pin", "cpu", "--check"]) == 0
    pinned = path.read_text()
    moved = registry.push("library/python", "3.11-slim-bookworm", ["amd64", "arm64"])  # re-pushed upstream
    capsys.readouterr()
    assert main(["--matrix", str(path), "pin", "cpu", "--check", "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)
    assert result["state"] == "moved"
    assert result["digest"] == moved
    assert path.read_text() == pinned


@pytest.mark.parametrize(
    ("setup", "fragment"),
    [
        ("missing", "does not exist on"),
        ("rate", "rate-limits this client (429); retry after 30 s"),
    ],
)
def test_registry_errors_are_reported_per_image(
    registry: Registry, tmp_path: Path, capsys: pytest.CaptureFixture[str], setup: str, fragment: str
) -> None:
    if setup == "rate":
        registry.push("library/python", "3.11-slim-bookworm", ["amd64"])
        registry.rate_limited.add("library/python")
    path = matrix_on(registry, tmp_path / "repo")
    before = path.read_text()
    assert main(["--matrix", str(path), "pin", "cpu"]) == 1
    out = capsys.readouterr().out
    assert fragment in out
    assert path.read_text() == before


def test_an_unreachable_registry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    doc = tomlkit.parse((REPO / "matrix.toml").read_text(encoding="utf-8"))
    doc["runtimes"]["cpu"]["base_images"]["debian12"]["repository"] = f"127.0.0.1:{port}/library/python"
    path = tmp_path / "matrix.toml"
    path.write_text(tomlkit.dumps(doc))
    assert main(["--matrix", str(path), "pin", "cpu"]) == 1
    out = capsys.readouterr().out
    assert f"HEAD http://127.0.0.1:{port}/v2/library/python/manifests/" in out
    assert "failed: connection refused" in out
