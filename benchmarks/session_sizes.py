"""What each environment's session downloads and unpacks: the wheels of its lock that pip fetches on linux/amd64.

The download is the sum of the sizes PyPI's JSON index pages (PEP 691) give for exactly the files whose sha256
the lock names (files from another index, such as a vendor's, are counted as not known). The unpacked size is the
sum of the uncompressed sizes in each wheel's zip directory, read with HTTP range requests (the end of each file,
not the whole of it). The disk a session takes is that plus the session's own virtualenv (nox, accelenv and its
dependencies) and uv's cache of the downloads; measure one with `du -sh .nox/<session>*`.

    python benchmarks/session_sizes.py [ENV ...]      # default: every environment with a lock

Prints one line per environment: the files counted, download and unpacked totals in GB (10^9 bytes), and what was
not known.
"""

from __future__ import annotations

import io
import re
import sys
import zipfile
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\]+)")
_HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
_OTHER_MACHINES = ("aarch64", "arm64", "ppc64le", "s390x", "win", "macosx", "i686", "armv7l")


def pins(lock: Path) -> list[tuple[str, str, set[str], str]]:
    """(name, version, sha256s, index) of every pin of a lock file."""
    found: list[tuple[str, str, set[str], str]] = []
    for line in lock.read_text(encoding="utf-8").splitlines():
        if match := _PIN.match(line):
            found.append((match.group(1), match.group(2), set(), "https://pypi.org/simple"))
        elif found and (digest := _HASH.search(line)):
            found[-1][2].add(digest.group(1))
        elif found and line.strip().startswith("# from "):
            found[-1] = (*found[-1][:3], line.strip().removeprefix("# from "))
    return found


class RemoteFile(io.RawIOBase):
    """A file on a server that answers range requests, read only where `zipfile` seeks (the zip directory)."""

    def __init__(self, session: requests.Session, url: str, size: int) -> None:
        self.session, self.url, self.size, self.at = session, url, size, 0

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.at

    def seek(self, offset: int, whence: int = 0) -> int:
        self.at = {0: offset, 1: self.at + offset, 2: self.size + offset}[whence]
        return self.at

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        want = min(len(buffer), self.size - self.at)
        if want <= 0:
            return 0
        headers = {"Range": f"bytes={self.at}-{self.at + want - 1}"}
        data = self.session.get(self.url, headers=headers, timeout=120).content[:want]
        buffer[: len(data)] = data
        self.at += len(data)
        return len(data)


def unpacked_bytes(session: requests.Session, url: str, size: int) -> int:
    """The sum of the uncompressed sizes of a wheel's files, from its zip directory."""
    with zipfile.ZipFile(io.BufferedReader(RemoteFile(session, url, size), buffer_size=1 << 20)) as wheel:
        return sum(info.file_size for info in wheel.infolist())


def wheel_file(session: requests.Session, name: str, hashes: set[str]) -> tuple[str, int] | None:
    """The URL and size of the largest file of `name` on PyPI (its PEP 691 JSON page) that the lock names and pip
    on linux/amd64 would take (another machine's wheel left out); None when PyPI has none of the lock's files."""
    answer = session.get(
        f"https://pypi.org/simple/{name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}, timeout=60
    )
    if answer.status_code != 200:
        return None
    files = [
        (str(f["url"]), int(f["size"]))
        for f in answer.json().get("files", [])
        if f.get("hashes", {}).get("sha256") in hashes and not any(m in f["filename"] for m in _OTHER_MACHINES)
    ]
    return max(files, key=lambda found: found[1]) if files else None


def main(argv: list[str]) -> int:
    envs = argv or sorted(p.parent.name for p in (REPO / "envs").glob("*/requirements.lock"))
    with requests.Session() as session:
        for env in envs:
            total, unpacked, counted, unknown = 0, 0, 0, []
            for name, version, hashes, index in pins(REPO / "envs" / env / "requirements.lock"):
                found = wheel_file(session, name, hashes) if "pypi.org" in index else None
                if found is None:
                    unknown.append(f"{name}=={version} ({index})")
                    continue
                url, size = found
                total, counted = total + size, counted + 1
                unpacked += unpacked_bytes(session, url, size) if url.endswith(".whl") else size
            rest = f"; not known: {', '.join(unknown)}" if unknown else ""
            print(f"{env}: {counted} files, {total / 1e9:.2f} GB to download, {unpacked / 1e9:.2f} GB unpacked{rest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
