"""Every network client of accelenv against servers on 127.0.0.1 that trickle bytes (in the headers, in the body),
send without end, or fall silent after the headers: each exchange is cut off at its deadline, or at its size cap
with the connection closed, and says so with the URL and the limit (issue 14's network class).

The table below is every client that talks to a server: the index client's three kinds of answer, each release
source `outdated` reads, `refresh`'s libtpu line, `pin`'s digest and token, the OCI index publisher's manifest,
token and PUT, the GCE metadata fetch, the AWS and Azure metadata sources and the .deb download.
`test_every_exchange_goes_through_netio` keeps it that way: a request made anywhere else in the package fails it.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

import pytest
from netkit import BEHAVIOURS, Behaviour, HostileServer
from reference import REFERENCE_MATRIX

from accelenv import netio
from accelenv.build.engine import EngineError
from accelenv.matrix import load_matrix

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

    from accelenv.netio import Response

    Ask: TypeAlias = Callable[[HostileServer, float, Path], str | None]  # the client's failure message, if it says one

PACKAGE = Path(__file__).resolve().parents[2] / "tools" / "accelenv"
SLACK = 5.0  # seconds past a deadline that a loaded machine may take to notice it: generous, not tight
IN_FLIGHT = 16 * 2**20  # what socket buffers may hold beyond a size cap when the client stops reading
TIMEOUT: dict[Behaviour, float] = {"trickle-headers": 0.3, "trickle-body": 0.3, "endless": 2.0, "hang": 0.3}
DEB_SIZE = 2**20


class Loopback:
    """A session that sends what would leave the machine (PyPI, a vendor's index, Docker Hub) to the server's
    friendly 404s instead; the exchanges still go through netio and a real requests session."""

    def __init__(self, server: HostileServer) -> None:
        self._server = server
        self._session = netio.session()

    def request(self, method: str, url: str, **kwargs: Any) -> Response:
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "localhost"):
            url = f"{self._server.url}/f/{parts.hostname}{parts.path}"
        return self._session.request(method, url, **kwargs)


# ---- the clients ------------------------------------------------------------------------------------------------


def _index(call: Callable[[Any, str], object]) -> Ask:
    def ask(server: HostileServer, timeout: float, tmp: Path) -> str | None:
        from accelenv.upstream.indexes import IndexClient

        client = IndexClient(Loopback(server), pypi_url=f"{server.url}/h", timeout=timeout)
        return _message(call(client, server.url))

    return ask


def _source(env: str, **urls: str) -> Ask:
    """`outdated`'s whole check of one environment, with one release source at `urls` (`{url}`: the server)."""

    def ask(server: HostileServer, timeout: float, tmp: Path) -> str | None:
        from accelenv.upstream.outdated import ReleaseSourceUrls
        from accelenv.upstream.survey import check_matrix

        where = {k: v.format(url=server.url, host=server.host) for k, v in urls.items()}
        sources = ReleaseSourceUrls(**{"registry": f"{server.host}/friendly", **where})
        matrix = load_matrix(REFERENCE_MATRIX)
        _, problems = check_matrix(matrix, Loopback(server), envs=[env], sources=sources, timeout=timeout)
        said = [p.message for p in problems if "/h/" in p.message]
        assert len(said) == len(server.asked), [p.message for p in problems]
        return said[0] if said else None

    return ask


def _tpu_line(server: HostileServer, timeout: float, tmp: Path) -> str | None:
    from accelenv.upstream.indexes import IndexClient
    from accelenv.upstream.refresh import tpu_line

    line = tpu_line(IndexClient(Loopback(server), pypi_url=f"{server.url}/h", timeout=timeout), "0.8.1")
    return line if isinstance(line, str) else None


def _pin(repository: str) -> Ask:
    def ask(server: HostileServer, timeout: float, tmp: Path) -> str | None:
        from accelenv.upstream.pin import ImageName, resolve_digest

        with netio.session() as session:
            image = ImageName(registry=server.host, repository=repository, tag="1")
            return resolve_digest(session, image, timeout=timeout)[1]

    return ask


def _publish(repository: str, *, put: bool = False) -> Ask:
    def ask(server: HostileServer, timeout: float, tmp: Path) -> str | None:
        from accelenv.build.index import publish_index

        if put:
            server.hostile = lambda method, path: method == "PUT"
        with netio.session() as session:
            try:
                publish_index(session, f"{server.host}/{repository}:multi", {"linux/amd64": "amd"}, timeout=timeout)
            except EngineError as error:
                return str(error)
        return None

    return ask


def _metadata(server: HostileServer, timeout: float, tmp: Path) -> str | None:
    from accelenv.host import metadata

    metadata.METADATA_URL, metadata.TIMEOUT = f"{server.url}/h/", timeout  # restored by the `clients` fixture
    assert metadata.fetch_metadata("instance/zone") is None
    return None


def _cloud(cloud: str) -> Ask:
    """AWS IMDSv2 (its token PUT is the hostile exchange) or Azure IMDS, pointed at the server by the variable the
    cloud's SDK reads: the source says it gave nothing, and why, instead of an error."""

    def ask(server: HostileServer, timeout: float, tmp: Path) -> str | None:
        from accelenv.host import metadata

        metadata.TIMEOUT = timeout  # restored by the `clients` fixture
        answer = metadata.ask(cloud, {metadata.OVERRIDES[cloud]: f"{server.url}/h"})  # type: ignore[arg-type,index]
        assert answer.status in ("no-answer", "refused", "bad-answer"), answer
        assert answer.facts == {}
        return None

    return ask


def _deb(server: HostileServer, timeout: float, tmp: Path) -> str | None:
    from accelenv.build.context import BuildError, fetch_debs
    from accelenv.plan.lock import OsLock, OsPackage

    data = b"x" * DEB_SIZE
    package = OsPackage(
        name="p",
        version="1",
        architecture="amd64",
        size=DEB_SIZE,
        sha256=hashlib.sha256(data).hexdigest(),
        url=f"http://bot:s3cr3t@{server.host}/h/p.deb",
    )
    lock = OsLock(base="b", pin="sha256:" + "b" * 64, architecture="amd64", packages=(package,))
    folder = tmp / "os-packages"
    with pytest.raises(BuildError) as caught:  # a deadline of 4 timeouts, as every other exchange
        fetch_debs(lock, folder, timeout=timeout, min_rate=DEB_SIZE / (3 * timeout))  # timeout + size / min_rate
    assert list(folder.iterdir()) == []
    assert "s3cr3t" not in str(caught.value)
    return str(caught.value)


def _message(outcome: object) -> str | None:
    return outcome if isinstance(outcome, str) else getattr(outcome, "message", None)


@dataclass(frozen=True, kw_only=True)
class Client:
    name: str
    ask: Ask
    cap: int  # bytes: the size cap of its hostile exchange
    says: Literal["netio", "deb", "nothing"] = "netio"  # its words for the limits (metadata says nothing)


MiB = 2**20
CLIENTS = [
    Client(name="index: PyPI JSON API", ask=_index(lambda c, _: c.releases("https://pypi.org/simple", "torch")),
           cap=64 * MiB),
    Client(name="index: simple page", ask=_index(lambda c, url: c.releases(f"{url}/h/simple", "torch")),
           cap=64 * MiB),
    Client(name="index: text", ask=_index(lambda c, url: c.text(f"{url}/h/notes")), cap=64 * MiB),
    Client(name="index: JSON", ask=_index(lambda c, url: c.json(f"{url}/h/doc.json")), cap=64 * MiB),
    Client(name="outdated: ROCm feed", ask=_source("gpu-amd-rocm70", rocm_feed="{url}/h/rocm.atom"), cap=4 * MiB),
    Client(name="outdated: Neuron feed", ask=_source("neuron-2-31", neuron_feed="{url}/h/neuron.atom"), cap=4 * MiB),
    Client(name="outdated: Neuron manifest", ask=_source("neuron-2-31", neuron_manifest="{url}/h/n2.json"),
           cap=8 * MiB),
    Client(name="outdated: pci.ids", ask=_source("gpu-nvidia-cu128", pci_ids="{url}/h/pci.ids"), cap=8 * MiB),
    Client(name="outdated: NVIDIA releases.json",
           ask=_source("gpu-nvidia-cu128", nvidia_releases="{url}/h/releases.json"), cap=8 * MiB),
    Client(name="outdated: NVIDIA tags", ask=_source("gpu-nvidia-cu128", nvidia_tags="{url}/h/tags"), cap=8 * MiB),
    Client(name="outdated: NVIDIA README",
           ask=_source("gpu-nvidia-cu128", nvidia_tags="{url}/tags.json", nvidia_readme="{url}/h/{{tag}}/README.md"),
           cap=8 * MiB),
    Client(name="outdated: registry tag list", ask=_source("gpu-nvidia-cu128", registry="{host}/h"), cap=4 * MiB),
    Client(name="outdated: registry token", ask=_source("gpu-nvidia-cu128", registry="{host}/t"), cap=64 * 1024),
    Client(name="refresh: libtpu line", ask=_tpu_line, cap=64 * MiB),
    Client(name="pin: manifest digest", ask=_pin("h/a"), cap=4 * MiB),
    Client(name="pin: token", ask=_pin("t/a"), cap=64 * 1024),
    Client(name="index publisher: manifest", ask=_publish("h/a"), cap=4 * MiB),
    Client(name="index publisher: token", ask=_publish("t/a"), cap=64 * 1024),
    Client(name="index publisher: PUT", ask=_publish("p/a", put=True), cap=4 * MiB),
    Client(name="metadata", ask=_metadata, cap=64 * 1024, says="nothing"),
    Client(name="metadata: AWS IMDSv2 token", ask=_cloud("aws"), cap=64 * 1024, says="nothing"),
    Client(name="metadata: Azure IMDS", ask=_cloud("azure"), cap=64 * 1024, says="nothing"),
    Client(name="build: .deb download", ask=_deb, cap=DEB_SIZE, says="deb"),
]  # fmt: skip


def expected(client: Client, behaviour: Behaviour, timeout: float) -> str | None:
    """What the client says when `behaviour` ends its exchange."""
    deadline = netio.DEADLINE_FACTOR * timeout
    if client.says == "nothing":
        return None
    if client.says == "deb":
        return {
            "trickle-headers": f"bytes after {deadline:.0f} s, slower than",
            "trickle-body": f"bytes after {deadline:.0f} s, slower than",
            "endless": f"is larger than the {client.cap} bytes its lock says",
            "hang": f"timed out (nothing came for {timeout:g} s)",
        }[behaviour]
    size = f"{client.cap // MiB} MiB" if client.cap >= MiB else f"{client.cap // 1024} KiB"
    return {
        "trickle-headers": f" did not finish within {deadline:g} s, its deadline for ",
        "trickle-body": f" did not finish within {deadline:g} s, its deadline for ",
        "endless": f" answered more than {size}, the most accelenv reads for ",
        "hang": f" failed: timed out (nothing came for {timeout:g} s)",
    }[behaviour]


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """What the clients need around them: no saved registry logins, the metadata server's address restored."""
    from accelenv.host import metadata

    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker"))
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(metadata, "METADATA_URL", metadata.METADATA_URL)
    monkeypatch.setattr(metadata, "TIMEOUT", metadata.TIMEOUT)
    return tmp_path


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
@pytest.mark.parametrize("client", CLIENTS, ids=[c.name for c in CLIENTS])
def test_every_client_is_cut_off_at_its_deadline_and_its_cap(
    client: Client, behaviour: Behaviour, clients: Path
) -> None:
    timeout = TIMEOUT[behaviour]
    deadline = netio.DEADLINE_FACTOR * timeout
    with HostileServer(behaviour, give_up=deadline + 2 * SLACK) as server:
        started = time.monotonic()
        said = client.ask(server, timeout, clients)
        took = time.monotonic() - started
        exchanges = len(server.asked)
        assert exchanges >= 1, "the client never reached the hostile exchange"
        hung_up = server.hung_up.wait(SLACK)
        sent = server.sent
    want = expected(client, behaviour, timeout)
    assert said is None if want is None else (said is not None and want in said), said
    assert hung_up, "the client returned but left the connection open"
    assert took <= exchanges * deadline + SLACK
    if behaviour.startswith("trickle"):  # the deadline ended it, not something sooner
        assert took >= exchanges * deadline * 0.9
    if behaviour == "endless":
        assert sent <= exchanges * (client.cap + IN_FLIGHT)


def test_a_redirect_is_followed_without_reading_its_body(clients: Path) -> None:
    """requests reads a redirect's body whole before it follows the redirect: an endless one held the exchange
    until its deadline, taking memory all the while. Only the Location matters."""
    bounds = netio.limits("a document", max_bytes=MiB, timeout=2.0)
    with HostileServer("endless-redirect") as server, netio.session() as session:
        started = time.monotonic()
        answer = netio.exchange(session, "GET", f"{server.url}/h/doc", bounds)
        took = time.monotonic() - started
        hung_up = server.hung_up.wait(SLACK)
        sent = server.sent
    assert (answer.status_code, answer.json()) == (200, {"ok": True})
    assert hung_up
    assert took < bounds.deadline
    assert sent <= IN_FLIGHT


# ---- the choke point holds --------------------------------------------------------------------------------------

_REQUEST = re.compile(
    r"\brequests\.(?:get|head|post|put|patch|delete|request|Session)\(|\b\w*session\.(?:get|head|post|put|patch|delete|request|send)\(|\.iter_content\(|\burlopen\b"
    r"|^\s*(?:import|from) (?:requests|urllib3|http\.client)\b",
    re.IGNORECASE | re.MULTILINE,
)


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("    response = requests.get(url, timeout=5)", True),
        ("        return self._session.request('GET', url)", True),
        ("    with requests.Session() as s:", True),
        ("    for chunk in answer.iter_content(65536):", True),
        ("    import requests", True),
        ("    from urllib.request import urlopen", True),
        ("    value = environ.get('HOME')", False),
        ("    netio.exchange(session, 'GET', url, bounds)", False),
        ("    from urllib.request import url2pathname", False),
    ],
)
def test_the_guard_sees_a_request(line: str, found: bool) -> None:
    assert bool(_REQUEST.search(line)) is found


def test_every_exchange_goes_through_netio() -> None:
    """A new request anywhere but accelenv/netio.py would have no deadline and no cap: add it to netio's callers
    (`netio.exchange` or `netio.stream`, and to the table above), not beside them."""
    found = [
        f"{path.relative_to(PACKAGE)}:{text[: match.start()].count(chr(10)) + 1}: {match.group(0).strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "netio.py"
        for text in [path.read_text(encoding="utf-8")]
        for match in _REQUEST.finditer(text)
    ]
    assert found == []
    assert _REQUEST.search((PACKAGE / "netio.py").read_text(encoding="utf-8"))  # the pattern sees requests' use
