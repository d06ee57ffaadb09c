"""Every file a probe reads goes through one `Root`, so a captured host (a folder) can stand in for a real one.

`Root("/")` is the live host; `Root("/tmp/captured-node")` reads `/tmp/captured-node/sys/...` wherever a probe
asks for `/sys/...`. Reads never raise: a missing or unreadable file is `None`, which probes report as "not
seen" rather than crash.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT_ENV_VAR = "ACCELENV_ROOT"
MAX_READ = 4 * 1024 * 1024  # sysfs and proc files are small; refuse to slurp anything huge
CHUNK = 64 * 1024


@dataclass(frozen=True)
class Root:
    path: Path

    @classmethod
    def from_option(cls, value: str | None) -> Root:
        """`--root DIR`, else $ACCELENV_ROOT, else the live host."""
        chosen = value or os.environ.get(ROOT_ENV_VAR) or "/"
        return cls(Path(chosen))

    @property
    def is_live(self) -> bool:
        return self.path.resolve() == Path("/")

    def resolve(self, host_path: str) -> Path:
        """The real path of `host_path` (an absolute path on the host) under this root."""
        return self.path / host_path.lstrip("/")

    def read_text(self, host_path: str) -> str | None:
        chunks: list[bytes] = []
        size = 0
        try:
            with self.resolve(host_path).open("rb", buffering=0) as handle:
                # small reads: procfs refuses a single multi-megabyte read (ENOMEM)
                while size < MAX_READ and (chunk := handle.read(CHUNK)):
                    chunks.append(chunk)
                    size += len(chunk)
        except OSError:
            return None
        return b"".join(chunks).decode("utf-8", errors="replace")

    def read_value(self, host_path: str) -> str | None:
        """A one-value file (sysfs attribute): stripped, or None when absent or empty."""
        text = self.read_text(host_path)
        if text is None:
            return None
        return text.strip() or None

    def exists(self, host_path: str) -> bool:
        return os.path.lexists(self.resolve(host_path))

    def listdir(self, host_path: str) -> list[str]:
        try:
            return sorted(entry.name for entry in self.resolve(host_path).iterdir())
        except OSError:
            return []

    def link_name(self, host_path: str) -> str | None:
        """The last component of a symlink's target (sysfs `driver` links), or None."""
        try:
            target = self.resolve(host_path).readlink()
        except OSError:
            return None
        return Path(target).name or None

    def glob(self, pattern: str) -> list[str]:
        """Host paths under this root matching a glob such as `/dev/nvidia[0-9]*`."""
        base = self.path
        matches = sorted(base.glob(pattern.lstrip("/")))
        return ["/" + str(m.relative_to(base)) for m in matches]
