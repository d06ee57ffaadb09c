"""`accelenv labels --metadata` against stand-ins for the clouds' metadata servers on 127.0.0.1 (Google Cloud, AWS
IMDSv2 with its session token, Azure IMDS) that answer, refuse, stall and lie; each source is pointed at the
stand-in by the variable the cloud's own SDK reads (GCE_METADATA_HOST, AWS_EC2_METADATA_SERVICE_ENDPOINT,
AZURE_POD_IDENTITY_AUTHORITY_HOST), or found by the host's DMI fields. A host of no cloud asks nobody, no credential
path is ever asked, and every source is reported."""

from __future__ import annotations

import http.server
import io
import json
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest

from accelenv.cli import main
from accelenv.host import metadata

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
TOKEN = "AQAEAFakeSessionToken=="  # noqa: S105 - the stand-in's session token
AZURE_COMPUTE = {
    "vmSize": "Standard_ND96isr_H100_v5",
    "zone": "2",
    "location": "eastus",
    "platformFaultDomain": "1",
    "platformUpdateDomain": "4",
    "placementGroupId": "0d3a1c4e-7d44-4b57-9a39-6b2f0f3d9a11",
    "name": "node-7",
    "subscriptionId": "never-a-label",
}
TRUE_ANSWERS = {
    "/computeMetadata/v1/instance/machine-type": "projects/123/machineTypes/a3-megagpu-8g",
    "/computeMetadata/v1/instance/zone": "projects/123/zones/us-central1-a",
    "/latest/meta-data/instance-type": "p5.48xlarge",
    "/latest/meta-data/placement/availability-zone": "us-east-1a",
    "/latest/meta-data/placement/group-name": "train-cluster",
    "/latest/meta-data/placement/partition-number": "3",
    "/metadata/instance/compute": json.dumps(AZURE_COMPUTE),
}


class Server(http.server.BaseHTTPRequestHandler):
    asked: ClassVar[list[tuple[str, str, dict[str, str]]]] = []
    mode: ClassVar[str] = "answer"  # answer, refuse (403 everywhere), stall, lie
    answers: ClassVar[dict[str, str]] = dict(TRUE_ANSWERS)

    def _reply(self, method: str) -> None:
        type(self).asked.append((method, self.path, dict(self.headers.items())))
        if self.mode == "stall":
            time.sleep(3.0)
        path = self.path.split("?")[0]
        if method == "PUT":
            ok = path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            return self._send(200 if ok and self.mode != "refuse" else 403, TOKEN if ok else "")
        if self.mode == "refuse":
            return self._send(403, "")
        if path.startswith("/latest/") and self.headers.get("X-aws-ec2-metadata-token") != TOKEN:
            return self._send(401, "")  # IMDSv2: no token, no answer
        if path.startswith("/computeMetadata/") and self.headers.get("Metadata-Flavor") != "Google":
            return self._send(403, "")
        if path.startswith("/metadata/") and self.headers.get("Metadata") != "true":
            return self._send(400, "")
        body = self.answers.get(path)
        return self._send(404, "") if body is None else self._send(200, body)

    def _send(self, code: int, body: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body.encode())))
        if self.path.startswith("/computeMetadata/"):
            self.send_header("Metadata-Flavor", "Google")
        self.end_headers()
        self.wfile.write(body.encode())

    def do_GET(self) -> None:
        self._reply("GET")

    def do_PUT(self) -> None:
        self._reply("PUT")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    Server.asked, Server.mode, Server.answers = [], "answer", dict(TRUE_ANSWERS)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Server)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    for variable in (*metadata.OVERRIDES.values(), "ACCELENV_FACTS", "ACCELENV_POD_LABELS"):
        monkeypatch.delenv(variable, raising=False)
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def labels(tmp_path: Path, *extra: str, root: Path | None = None) -> tuple[dict[str, str], str]:
    out = io.StringIO()
    args = ["--matrix", str(REPO / "matrix.toml"), "labels", "--env", "cpu-py311", "--metadata", *extra]
    if root is not None:
        args += ["--root", str(root)]
    import contextlib

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(args, out=out) == 0
    found: dict[str, str] = json.loads(out.getvalue())["labels"]
    return found, err.getvalue()


def point(monkeypatch: pytest.MonkeyPatch, address: str, *clouds: str) -> None:
    for cloud in clouds:
        value = address if cloud == "gce" else f"http://{address}"
        monkeypatch.setenv(metadata.OVERRIDES[cloud], value)  # type: ignore[index]


@pytest.mark.parametrize(
    ("cloud", "expected"),
    [
        ("gce", {"instance-type": "a3-megagpu-8g", "zone": "us-central1-a", "cloud": "gce"}),
        (
            "aws",
            {
                "instance-type": "p5.48xlarge",
                "zone": "us-east-1a",
                "placement-group": "train-cluster",
                "partition": "3",
            },
        ),
        (
            "azure",
            {
                "instance-type": "Standard_ND96isr_H100_v5",
                "zone": "2",
                "region": "eastus",
                "fault-domain": "1",
                "update-domain": "4",
                "placement-group": "0d3a1c4e-7d44-4b57-9a39-6b2f0f3d9a11",
            },
        ),
    ],
)
def test_each_cloud_answers_with_its_facts(
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch, cloud: str, expected: dict[str, str]
) -> None:
    point(monkeypatch, server, cloud)
    found, err = labels(tmp_path)
    for name, value in expected.items():
        if name != "cloud":  # the cloud fact comes from DMI, which this host has not
            assert found[f"accelenv.io/{name}"] == value
    assert f"platform source {cloud}: answered" in err
    assert "never-a-label" not in json.dumps(found)  # only the listed keys are read
    paths = [path for _, path, _ in Server.asked]
    assert not [p for p in paths if "credential" in p or "identity" in p or "service-accounts" in p]
    if cloud == "aws":  # IMDSv2: the token first, then every GET carries it
        assert Server.asked[0][:2] == ("PUT", "/latest/api/token")
        assert all(h.get("X-aws-ec2-metadata-token") == TOKEN for m, _, h in Server.asked[1:])


def test_a_host_of_no_cloud_asks_nobody(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from accelenv import netio

    calls: list[str] = []
    monkeypatch.setattr(netio, "exchange", lambda *a, **k: calls.append(a[2]))  # would fail on use
    root = tmp_path / "root"
    (root / "sys/class/dmi/id").mkdir(parents=True)
    (root / "sys/class/dmi/id/sys_vendor").write_text("Supermicro\n")
    found, err = labels(tmp_path, root=root)
    assert calls == []
    assert "accelenv.io/zone" not in found
    assert "platform source aws: not-asked (DMI names no cloud (sys_vendor 'Supermicro'))" in err


def test_dmi_finds_the_cloud_without_a_variable(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metadata, "AWS_DEFAULT", f"http://{server}")  # the link-local address, moved to loopback
    root = tmp_path / "root"
    (root / "sys/class/dmi/id").mkdir(parents=True)
    (root / "sys/class/dmi/id/sys_vendor").write_text("Amazon EC2\n")
    (root / "sys/class/dmi/id/product_name").write_text("p5.48xlarge\n")
    found, err = labels(tmp_path, root=root)
    assert found["accelenv.io/cloud"] == "aws"
    assert found["accelenv.io/placement-group"] == "train-cluster"
    assert "platform source gce: not-asked (not this host's cloud" in err


def test_a_refusing_server_is_said(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    Server.mode = "refuse"
    point(monkeypatch, server, "gce", "aws", "azure")
    found, err = labels(tmp_path)
    assert "accelenv.io/instance-type" not in found
    assert "platform source gce: refused (instance/machine-type: HTTP 403)" in err
    assert "platform source aws: refused (the IMDSv2 session token was refused (HTTP 403))" in err
    assert "platform source azure: refused (metadata/instance/compute: HTTP 403)" in err


def test_no_server_is_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    point(monkeypatch, f"127.0.0.1:{port}", "aws")
    _, err = labels(tmp_path)
    assert "platform source aws: refused (connection refused)" in err


def test_a_stalling_server_costs_the_timeout(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    Server.mode = "stall"
    monkeypatch.setattr(metadata, "TIMEOUT", 0.3)  # a silent server: cut at 0.3 s (the deadline is 1.2 s)
    point(monkeypatch, server, "gce", "aws", "azure")
    start = time.monotonic()
    found, err = labels(tmp_path)
    assert time.monotonic() - start < 3 * 0.3 + 2.5  # one exchange per source, each cut at 0.3 s, plus the run
    for cloud in ("gce", "aws", "azure"):
        assert f"platform source {cloud}: no-answer" in err
    assert "accelenv.io/zone" not in found


@pytest.mark.parametrize(
    ("path", "lie", "rejected"),
    [
        ("/latest/meta-data/instance-type", "<html><body>login</body></html>", "instance-type"),
        ("/latest/meta-data/placement/availability-zone", "us-east-1a\nx-evil: 1", "zone"),
        ("/latest/meta-data/placement/group-name", "a" * 5000, "placement-group"),
        ("/metadata/instance/compute", json.dumps({**AZURE_COMPUTE, "zone": {"nested": 1}}), "zone"),
        ("/computeMetadata/v1/instance/zone", 'projects/1/zones/"us"', "zone"),
    ],
)
def test_a_lying_server_is_refused_fact_by_fact(  # noqa: PLR0917 - pytest's fixtures and parameters
    tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch, path: str, lie: str, rejected: str
) -> None:
    Server.answers[path] = lie
    point(monkeypatch, server, {"/la": "aws", "/me": "azure", "/co": "gce"}[path[:3]])
    found, err = labels(tmp_path)
    assert f"accelenv.io/{rejected}" not in found
    assert f"rejected {rejected}" in err
    assert "instance-type" in json.dumps(found) or rejected == "instance-type"  # the other facts stay


@pytest.mark.parametrize("body", ["not json", "[1, 2]", "{" * 200000])
def test_azure_garbage_is_a_bad_answer(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    Server.answers["/metadata/instance/compute"] = body
    point(monkeypatch, server, "azure")
    _, err = labels(tmp_path)
    assert "platform source azure: " in err
    assert "platform source azure: answered" not in err


def test_the_operator_and_kubernetes_come_first(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    facts = tmp_path / "facts.toml"
    facts.write_text('[facts]\nrack = "r12"\nblock = "b3"\nzone = "hall-2"\n')
    pod = tmp_path / "labels"
    pod.write_text('app="x"\ntopology.kubernetes.io/zone="us-east-1b"\ntopology.kubernetes.io/region="us-east-1"\n')
    monkeypatch.setenv("ACCELENV_FACTS", str(facts))
    monkeypatch.setenv("ACCELENV_POD_LABELS", str(pod))
    monkeypatch.setenv("ACCELENV_FACT_POD", "pod-4")
    point(monkeypatch, server, "aws")
    found, _ = labels(tmp_path)
    assert found["accelenv.io/rack"] == "r12"
    assert found["accelenv.io/block"] == "b3"
    assert found["accelenv.io/pod"] == "pod-4"
    assert found["accelenv.io/zone"] == "hall-2"  # the operator's word first
    assert found["accelenv.io/region"] == "us-east-1"  # Kubernetes'
    assert found["accelenv.io/placement-group"] == "train-cluster"  # the cloud's
    assert "accelenv.io/app" not in found


def test_a_snapshot_keeps_the_platform(tmp_path: Path, server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    point(monkeypatch, server, "aws")
    target = tmp_path / "snap.json"
    assert (
        main(["--matrix", str(REPO / "matrix.toml"), "snapshot", "--metadata", "-o", str(target)], out=io.StringIO())
        == 0
    )
    data: Any = json.loads(target.read_text())
    assert data["report"]["platform"]["facts"]["placement-group"] == "train-cluster"
    assert TOKEN not in target.read_text()
    monkeypatch.delenv(metadata.OVERRIDES["aws"])
    asked = len(Server.asked)
    out = io.StringIO()
    args = ["--matrix", str(REPO / "matrix.toml"), "labels", "--env", "cpu-py311", "--snapshot", str(target)]
    assert main(args, out=out) == 0
    assert json.loads(out.getvalue())["labels"]["accelenv.io/placement-group"] == "train-cluster"
    assert len(Server.asked) == asked  # replayed, not asked again
