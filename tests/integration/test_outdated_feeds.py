"""`accelenv outdated` against stand-in release feeds on loopback: GitHub's Atom feeds of AWS's and AMD's releases
announcing Neuron 2.34.0 and ROCm 10.1.0, and a pci.ids release newer than the one the matrix cites that lists a
new device id of a chip the matrix has (GB110, the B300's). The feeds have GitHub's shape (an `<entry>` per
release, its `<link>` to `/releases/tag/<tag>`); the matrix is the shipped one, so this is what the scheduled
refresh would report today."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from hostkit import LoopbackServer

from accelenv.matrix import load_matrix
from accelenv.upstream.outdated import ReleaseSourceUrls, render_github
from accelenv.upstream.survey import check_matrix

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

ENTRY = """  <entry>
    <id>tag:github.com,2008:Repository/1/{tag}</id>
    <updated>{date}T17:00:00Z</updated>
    <link rel="alternate" type="text/html" href="https://github.com/{repo}/releases/tag/{tag}"/>
    <title>{title}</title>
    <content type="html">&lt;p&gt;Release notes&lt;/p&gt;</content>
    <author><name>release-bot</name></author>
  </entry>
"""


def atom(repo: str, releases: list[tuple[str, str, str]]) -> str:
    entries = "".join(ENTRY.format(repo=repo, tag=t, title=title, date=d) for t, title, d in releases)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<feed xmlns="http://www.w3.org/2005/Atom" xml:lang="en-US">\n'
        f"  <id>tag:github.com,2008:https://github.com/{repo}/releases</id>\n"
        f'  <link type="text/html" rel="alternate" href="https://github.com/{repo}/releases"/>\n'
        f"  <title>Release notes from {repo.split('/')[1]}</title>\n"
        "  <updated>2026-11-30T17:00:00Z</updated>\n"
        f"{entries}</feed>\n"
    )


PCI_IDS = """#
#\tList of PCI ID's
#
#\tVersion: 2026.11.28
#\tDate:    2026-11-28 03:15:02
#
10de  NVIDIA Corporation
\t2901  GB100 [B200]
\t3180  GB110 [Reserved Dev ID A]
\t3182  GB110 [B300 SXM6 AC]
\t3185  GB110 [Stand-in Board]
\t31c2  GB110 [GB300]
\t1e2d  TU102 [GeForce RTX 2080 Ti Rev. A]
1d0f  Amazon.com, Inc.
\t7364  NeuronDevice (Trainium2)
\tec20  Elastic Network Adapter (ENA)
C 00  Unclassified device
"""


# the tags a stand-in registry lists, two pages each, behind Docker Hub's token flow
REGISTRY_TAGS = {
    "nvidia/cuda": [
        "13.2.1-base-ubuntu24.04",
        "13.2.2-base-ubuntu24.04",
        "13.2.2-base-ubuntu22.04",  # another OS: not the base's
        "13.2.2-runtime-ubuntu24.04",  # another flavour
        "13.4.2-base-ubuntu24.04",
        "13.5.0-base-ubuntu24.04",
        "latest",
    ],
    "rocm/pytorch": [
        "rocm10.0_ubuntu24.04_py3.12_pytorch_release_2.13.0",
        "rocm10.1.0_ubuntu24.04_py3.12_pytorch_release_2.14.0",
        "rocm10.1.0_ubuntu22.04_py3.10_pytorch_release_2.14.0",
        "rocm7.14.1_ubuntu24.04_py3.12_pytorch_release_2.12.0",
    ],
}


class _Registry(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/token":
            scope = parse_qs(url.query).get("scope", [""])[0]
            self._json(200, {"token": f"pull:{scope}"})
            return
        repo = url.path.removeprefix("/v2/").removesuffix("/tags/list")
        if repo not in REGISTRY_TAGS:
            self._json(404, {"errors": [{"code": "NAME_UNKNOWN"}]})
            return
        if self.headers.get("Authorization") != f"Bearer pull:repository:{repo}:pull":
            realm = f"http://{self.headers['Host']}/token"
            self._json(401, {}, {"WWW-Authenticate": f'Bearer realm="{realm}",service="stand-in"'})
            return
        tags = REGISTRY_TAGS[repo]
        half = len(tags) // 2
        if "last=" in url.query:
            self._json(200, {"name": repo, "tags": tags[half:]})
        else:
            self._json(
                200, {"name": repo, "tags": tags[:half]}, {"Link": f'</v2/{repo}/tags/list?n=1000&last=x>; rel="next"'}
            )

    def _json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def registry() -> Iterator[str]:
    """A stand-in OCI registry on loopback: its host:port."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def served(tmp_path: Path) -> Path:
    root = tmp_path / "www"
    (root / "neuron").mkdir(parents=True)
    (root / "rocm").mkdir()
    neuron = [
        ("v2.34.0", "Neuron SDK Release - November 30, 2026", "2026-11-30"),
        ("v2.33.0", "Neuron SDK Release - October 19, 2026", "2026-10-19"),
        ("v2.31.1", "Neuron SDK Release - August 12, 2026", "2026-08-12"),
    ]
    rocm = [
        ("therock-10.2.0rc1", "ROCm 10.2.0 release candidate 1", "2026-11-20"),  # not final: not news
        ("therock-7.14.2", "ROCm 7.14.2", "2026-11-10"),  # a patch of the old line, newest by date
        ("therock-10.1.0", "ROCm 10.1.0", "2026-10-05"),
        ("therock-10.0.0", "ROCm 10.0.0", "2026-08-26"),
    ]
    (root / "neuron" / "releases.atom").write_text(atom("aws-neuron/aws-neuron-sdk", neuron), encoding="utf-8")
    (root / "rocm" / "releases.atom").write_text(atom("ROCm/TheRock", rocm), encoding="utf-8")
    (root / "pci.ids").write_text(PCI_IDS, encoding="utf-8")
    # NVIDIA's releases.json, its shape; the release numbers of this stand-in are made up
    branches = {
        "580": {"type": "lts branch", "driver_info": [{"release_version": "580.95.05"}]},
        "595": {"type": "production branch", "driver_info": [{"release_version": "595.71.05"}]},
        "620": {"type": "lts branch", "driver_info": [{"release_version": "620.1.1"}, {"release_version": "620.2.1"}]},
        "625": {"type": "new feature branch", "driver_info": [{"release_version": "625.1.1"}]},
    }
    (root / "releases.json").write_text(json.dumps(branches), encoding="utf-8")
    return root


def test_outdated_reports_neuron_rocm_and_a_new_pci_id_from_stand_in_feeds(served: Path, registry: str) -> None:
    matrix = load_matrix(REPO / "matrix.toml")
    with LoopbackServer(served) as server, requests.Session() as session:
        urls = ReleaseSourceUrls(
            neuron_manifest=f"{server.url}/missing/n2-manifest.json",
            nvidia_tags=f"{server.url}/missing/tags",
            neuron_feed=f"{server.url}/neuron/releases.atom",
            rocm_feed=f"{server.url}/rocm/releases.atom",
            pci_ids=f"{server.url}/pci.ids",
            nvidia_releases=f"{server.url}/releases.json",
            registry=registry,
        )
        envs = ["neuron-2-33", "gpu-amd-rocm100", "gpu-nvidia-cu132"]
        findings, problems = check_matrix(matrix, session, envs=envs, pypi_url=server.url, sources=urls)
    news = {(f.kind, f.env, f.name, f.current, f.latest, f.index) for f in findings}
    assert ("runtime", "neuron-2-33", "Neuron SDK 2.x", "2.33", "2.34", urls.neuron_feed) in news
    assert ("runtime", "rocm-10-0", "ROCm 10.x", "10.0", "10.1", urls.rocm_feed) in news
    branch = [f for f in findings if f.name == "driver branch"]
    assert [(f.env, f.current, f.latest, f.key, f.held) for f in branch] == [
        ("cuda-13-2", "R595", "R620", "runtimes.cuda-13-2.driver", "")
    ]
    assert "NVIDIA's releases.json lists R620 (lts branch, newest release 620.2.1)" in branch[0].note
    images = sorted((f.env, f.name, f.current, f.latest, bool(f.held)) for f in findings if f.name.startswith("base"))
    assert images == [
        (
            "cuda-13-2",
            "base image ubuntu24.04 (later line)",
            "13.2.1-base-ubuntu24.04",
            "13.5.0-base-ubuntu24.04",
            True,
        ),
        (
            "cuda-13-2",
            "base image ubuntu24.04 (same line)",
            "13.2.1-base-ubuntu24.04",
            "13.2.2-base-ubuntu24.04",
            False,
        ),
        (
            "rocm-10-0",  # AMD's image for ROCm 10.1: what the hold on 10.0 waits for
            "base image ubuntu24.04 (later line)",
            "rocm10.0_ubuntu24.04_py3.12_pytorch_release_2.13.0",
            "rocm10.1.0_ubuntu24.04_py3.12_pytorch_release_2.14.0",
            True,
        ),
    ]
    pci = [f for f in findings if f.kind == "sku"]
    assert [(f.env, f.name, f.latest) for f in pci] == [
        ("nvidia", "GB110 [Stand-in Board] (10de:3185)", "pci.ids 2026.11.28")
    ]
    assert "a GB110 like skus.b300" in pci[0].note
    assert "(the matrix cites 2026.10.24)" in pci[0].note
    assert not [p for p in problems if p.env in {"pci-ids", "amd", "neuron"} and "feed" in p.name + p.index]
    report = render_github(findings, problems)
    assert "Neuron SDK 2.x" in report
    assert "ROCm 10.x" in report


def test_a_feed_that_cannot_be_read_is_a_loud_problem(served: Path, registry: str) -> None:
    matrix = load_matrix(REPO / "matrix.toml")
    (served / "rocm" / "releases.atom").write_text("<html><body>rate limited</body></html>", encoding="utf-8")
    with LoopbackServer(served) as server, requests.Session() as session:
        urls = ReleaseSourceUrls(
            neuron_feed=f"{server.url}/neuron/nothing.atom",
            rocm_feed=f"{server.url}/rocm/releases.atom",
            pci_ids=f"{server.url}/pci.ids",
            neuron_manifest=f"{server.url}/missing/n2-manifest.json",
            registry=f"{registry}/missing",
        )
        _, problems = check_matrix(
            matrix, session, envs=["neuron-2-33", "gpu-amd-rocm100"], pypi_url=server.url, sources=urls
        )
    by_name = {p.name: p.message for p in problems}
    assert by_name["Neuron SDK release feed"] == f"GET {urls.neuron_feed} answered HTTP 404"
    assert by_name["ROCm release feed"] == (f"GET {urls.rocm_feed} answered not an Atom feed (root element 'html')")
    assert by_name["rocm/pytorch tags"] == (
        f"GET http://{registry}/v2/missing/rocm/pytorch/tags/list?n=1000 answered HTTP 404"
    )
    report = render_github([], problems)
    assert "### Could not be checked" in report
