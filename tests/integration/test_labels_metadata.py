"""`accelenv labels --metadata` against a stand-in for the GCE metadata server on 127.0.0.1: the instance type
and zone become labels, the request carries the header GCE requires, and a server that never answers costs the
timeout, not the run."""

from __future__ import annotations

import http.server
import io
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from accelenv.check.node_labels import cloud_metadata
from accelenv.cli import main
from accelenv.host import metadata

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
ANSWERS = {
    "/computeMetadata/v1/instance/machine-type": "projects/123/machineTypes/a3-megagpu-8g",
    "/computeMetadata/v1/instance/zone": "projects/123/zones/us-central1-a",
}


class Metadata(http.server.BaseHTTPRequestHandler):
    asked: list[tuple[str, str | None]] = []  # noqa: RUF012 - shared by the server's handler instances
    delay = 0.0

    def do_GET(self) -> None:
        type(self).asked.append((self.path, self.headers.get("Metadata-Flavor")))
        time.sleep(self.delay)
        body = ANSWERS.get(self.path)
        if body is None or self.headers.get("Metadata-Flavor") != "Google":
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Metadata]]:
    Metadata.asked = []
    Metadata.delay = 0.0
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Metadata)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(metadata, "METADATA_URL", f"http://127.0.0.1:{httpd.server_address[1]}/computeMetadata/v1/")
    try:
        yield Metadata
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_metadata_labels(server: type[Metadata]) -> None:
    out = io.StringIO()
    code = main(["--matrix", str(REPO / "matrix.toml"), "labels", "--env", "cpu-py311", "--metadata"], out=out)
    assert code == 0
    import json

    found = json.loads(out.getvalue())["labels"]
    assert found["accelenv.io/instance-type"] == "a3-megagpu-8g"
    assert found["accelenv.io/zone"] == "us-central1-a"
    assert {flavor for _, flavor in server.asked} == {"Google"}


def test_a_silent_metadata_server_costs_the_timeout(server: type[Metadata], monkeypatch: pytest.MonkeyPatch) -> None:
    server.delay = 3.0
    monkeypatch.setattr(metadata, "TIMEOUT", 0.5)
    start = time.monotonic()
    assert cloud_metadata(metadata.fetch_metadata) == {}
    assert time.monotonic() - start < 2.5  # two keys, each cut at 0.5 s
