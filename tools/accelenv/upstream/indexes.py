"""Package indexes as accelenv reads them: PyPI's JSON API and the simple API (PEP 691 JSON, PEP 503 HTML).

`IndexClient` is the edge: one GET per (index, project), through `accelenv.netio` and the session it is given (a
`requests.Session`, or a fake in tests), each bounded in time and size, every failure turned into a `_Failure` with
one line of reason, never an exception. The parsers are pure: an answer in, the releases that are not wholly
yanked out, each with its Requires-Python.
"""

from __future__ import annotations

import html.parser
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit
from urllib.request import url2pathname

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from accelenv.records import frozen
from accelenv.redact import redact_text

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from accelenv.netio import Answer, Transport

PYPI_URL = "https://pypi.org"
PYPI_SIMPLE = "https://pypi.org/simple"
_PYPI_SIMPLE_ALIASES = frozenset({PYPI_SIMPLE, "https://pypi.python.org/simple"})
SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
_SIMPLE_ACCEPT = f"{SIMPLE_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
# download.pytorch.org (an S3 bucket behind a CDN) may answer 403 rather than 404 for a project it does not host;
# there, a 403 means "not here" and the next index is asked. Anywhere else a 403 is a problem to report.
_FORBIDDEN_MEANS_MISSING = frozenset({"download.pytorch.org"})
# An index page or a JSON document: PyPI's JSON for a project of thousands of releases is a few MiB, a PEP 503
# page of every nightly wheel some tens; past this an answer is refused, not read on (it once took 1.8 GiB).
MAX_PAGE = 64 * 2**20

# ---- what an index says ------------------------------------------------------------------------------------------


@frozen
class Releases:
    """One index's releases of one project: versions not wholly yanked, and each one's Requires-Python."""

    index: str
    versions: tuple[str, ...]
    requires_python: Mapping[str, str | None]


class UnusableAnswer(Exception):
    """An index answered something accelenv cannot read. Internal: `IndexClient` turns it into a `Problem`."""


def parse_pypi_json(data: object, *, index: str) -> Releases:
    """PyPI's JSON API (`/pypi/<name>/json`): `releases` keys, skipping releases whose files are all yanked."""
    releases = data.get("releases") if isinstance(data, dict) else None
    if not isinstance(releases, dict):
        raise UnusableAnswer("the JSON has no 'releases' object")
    versions: list[str] = []
    requires: dict[str, str | None] = {}
    for version, listed in releases.items():
        files = [f for f in listed if isinstance(f, dict)] if isinstance(listed, list) else []
        if files and all(f.get("yanked") for f in files):
            continue
        versions.append(str(version))
        requires[str(version)] = next((str(f["requires_python"]) for f in files if f.get("requires_python")), None)
    return Releases(index=index, versions=tuple(versions), requires_python=requires)


def parse_simple_json(data: object, *, project: str, index: str) -> Releases:
    """A PEP 691 project page: versions from `versions` (API 1.1) or the file names, `requires-python`, `yanked`."""
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(files, list):
        raise UnusableAnswer("the JSON has no 'files' list (not a PEP 691 project page)")
    entries = [
        (str(f.get("filename", "")), f.get("requires-python"), bool(f.get("yanked")))
        for f in files
        if isinstance(f, dict)
    ]
    listed = data.get("versions")
    return _collect(entries, project=project, index=index, listed=listed if isinstance(listed, list) else None)


def parse_simple_html(text: str, *, project: str, index: str) -> Releases:
    """A PEP 503 project page: one anchor per file, `data-requires-python` (HTML-unescaped) and `data-yanked`."""
    parser = _Anchors()
    parser.feed(text)
    parser.close()
    return _collect(parser.files, project=project, index=index, listed=None)


class _Anchors(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.files: list[tuple[str, object, bool]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag != "a":
            return
        attributes = dict(attrs)
        href = attributes.get("href") or ""
        filename = unquote(urlsplit(href).path.rsplit("/", 1)[-1])
        self.files.append((filename, attributes.get("data-requires-python"), "data-yanked" in attributes))


def _collect(
    entries: Iterable[tuple[str, object, bool]], *, project: str, index: str, listed: list[Any] | None
) -> Releases:
    files: dict[str, list[tuple[object, bool]]] = {}
    for filename, requires, yanked in entries:
        version = _file_version(filename, project)
        if version is not None:
            files.setdefault(version, []).append((requires, yanked))
    names = [str(v) for v in listed] if listed is not None else list(files)
    versions: list[str] = []
    requires_python: dict[str, str | None] = {}
    for version in names:
        own = files.get(_normalized(version), [])
        if own and all(yanked for _, yanked in own):
            continue
        versions.append(version)
        requires_python[version] = next((str(r) for r, _ in own if isinstance(r, str) and r), None)
    return Releases(index=index, versions=tuple(versions), requires_python=requires_python)


def _normalized(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def _file_version(filename: str, project: str) -> str | None:
    """The version in a wheel or sdist file name of `project`, or None for anything else."""
    try:
        if filename.endswith(".whl"):
            name, version, _, _ = parse_wheel_filename(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename):
        return None
    return str(version) if name == canonicalize_name(project) else None


# ---- asking the indexes (the edge) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Failure:
    message: str


class IndexClient:
    """Asks indexes for a project's releases, once per (index, project): PyPI through its JSON API at `pypi_url`,
    any other index through the simple API (PEP 691 JSON, or PEP 503 HTML when that is what comes back).
    `timeout` bounds connecting and each read; a whole exchange may take `netio.DEADLINE_FACTOR` times that."""

    def __init__(self, session: Transport, *, pypi_url: str = PYPI_URL, timeout: float = 15.0) -> None:
        self.session = session
        self.pypi_url = pypi_url.rstrip("/")
        self.timeout = timeout
        self._cache: dict[tuple[str, str], Releases | _Failure | None] = {}
        self._slow: dict[str, str] = {}  # host -> why it is not asked again: it trickled past a deadline

    def releases(self, index: str, project: str) -> Releases | _Failure | None:
        """What `index` holds of `project`: its releases, None when it does not have it, or why it cannot say."""
        key = (index.rstrip("/"), canonicalize_name(project))
        if key not in self._cache:
            self._cache[key] = self._ask(*key)
        return self._cache[key]

    def _ask(self, index: str, project: str) -> Releases | _Failure | None:
        pypi = index in _PYPI_SIMPLE_ALIASES
        url = f"{self.pypi_url}/pypi/{project}/json" if pypi else f"{index}/{project}/"
        headers = {"Accept": "application/json"} if pypi else {"Accept": _SIMPLE_ACCEPT}
        if index.startswith("file:"):
            return _local_index(index, project)
        response = self._get(url, headers["Accept"], "an index page")
        if isinstance(response, _Failure):
            return response
        status = response.status_code
        if status == 404 or (status == 403 and urlsplit(index).hostname in _FORBIDDEN_MEANS_MISSING):
            return None
        if status != 200:
            return _status_failure(url, response)
        try:
            if pypi:
                return parse_pypi_json(response.json(), index=index)
            content_type = response.headers.get("Content-Type", "")
            if "json" in content_type:
                return parse_simple_json(response.json(), project=project, index=index)
            return parse_simple_html(response.text, project=project, index=index)
        except (ValueError, UnusableAnswer) as error:  # json.JSONDecodeError is a ValueError
            return _Failure(f"GET {redact_text(url)} answered something unreadable: {_one_line(error)}")

    def text(self, url: str, *, max_bytes: int = MAX_PAGE, what: str = "a document") -> str | _Failure:
        """A text document from `url` (a README, a feed), or why it could not be had."""
        response = self._get(url, "text/plain, */*", what, max_bytes)
        if isinstance(response, _Failure):
            return response
        if response.status_code != 200:
            return _status_failure(url, response)
        return response.text

    def json(self, url: str, *, max_bytes: int = MAX_PAGE, what: str = "a JSON document") -> object | _Failure:
        """A JSON document from `url` (a release manifest, an API answer), or why it could not be had."""
        response = self._get(url, "application/json", what, max_bytes)
        if isinstance(response, _Failure):
            return response
        if response.status_code != 200:
            return _status_failure(url, response)
        try:
            data: object = response.json()
        except ValueError as error:
            return _Failure(f"GET {redact_text(url)} answered something unreadable: {_one_line(error)}")
        return data

    def _get(self, url: str, accept: str, what: str, max_bytes: int = MAX_PAGE) -> Answer | _Failure:
        """One GET within this client's limits; a failure (unreachable, too slow, too large) as a _Failure."""
        from accelenv import netio
        from accelenv.errors import DeadlineExceededError, NetworkError

        host = urlsplit(url).netloc
        if host in self._slow:  # one deadline per slow host, not one per page: the command ends in bounded time
            return _Failure(self._slow[host])
        bounds = netio.limits(what, max_bytes=max_bytes, timeout=self.timeout)
        try:
            return netio.exchange(self.session, "GET", url, bounds, headers={"Accept": accept})
        except DeadlineExceededError as error:
            self._slow[host] = f"{error} ({redact_text(host)} is not asked again in this run)"
            return _Failure(self._slow[host])
        except NetworkError as error:
            return _Failure(str(error))


def _status_failure(url: str, response: Answer) -> _Failure:
    """Why a GET that answered something other than 200 gives nothing: a rate limit says when to retry."""
    status = response.status_code
    shown = redact_text(url)
    if status == 429:
        wait = response.headers.get("Retry-After")
        after = f"; the index asks to retry after {wait} s" if wait else ""
        return _Failure(f"GET {shown} was rate limited (HTTP 429){after}")
    return _Failure(f"GET {shown} answered HTTP {status}")


_MAX_LOCAL_PAGE = 16 * 1024 * 1024


def _local_index(index: str, project: str) -> Releases | _Failure | None:
    """A simple index on disk (`file:///srv/simple`, as pip's and uv's settings allow): the project's folder,
    read through its index.html when it has one, else through the file names in it."""
    folder = Path(url2pathname(urlsplit(index).path)) / project
    if not folder.is_dir():
        return None
    page = folder / "index.html"
    try:
        if page.exists():
            from accelenv.errors import UsageError
            from accelenv.fileio import read_bytes

            try:  # bounded, and a FIFO there is refused rather than waited on
                data = read_bytes(page, limit=_MAX_LOCAL_PAGE, what="index page")
            except UsageError as error:
                return _Failure(str(error))
            return parse_simple_html(data.decode("utf-8", "replace"), project=project, index=index)
        names = [child.name for child in folder.iterdir() if child.is_file()]
    except OSError as error:
        return _Failure(f"{folder} cannot be read: {error.strerror or error}")
    return _collect([(name, None, False) for name in names], project=project, index=index, listed=None)


def _one_line(error: BaseException) -> str:
    """The first line of why an answer could not be read, at most 120 characters."""
    text = str(error).strip() or type(error).__name__
    first = text.splitlines()[0]
    return first if len(first) <= 120 else first[:117] + "..."
