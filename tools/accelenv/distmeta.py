"""Installed-package metadata read the way every host file is read: bounded, never blocking, any encoding.

A `*.dist-info/METADATA`, `*.egg-info/PKG-INFO` or `entry_points.txt` on the Python path is untrusted: it may be
a FIFO (which `open` would wait on forever), endless, or written in Latin-1. Each is opened without blocking,
refused unless it is a regular file, read up to `MAX_METADATA` bytes, and decoded as UTF-8 or else Latin-1
(which decodes any bytes). What cannot be read is None: that distribution is left out, the run goes on.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from accelenv.errors import AccelenvError
from accelenv.fileio import read_bytes
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

MAX_METADATA = 1024 * 1024  # METADATA holds the long description too; the fields come first
_FIELD = re.compile(r"^(Name|Version):[ \t]*(\S[^\r\n]{0,200}?)[ \t]*\r?$", re.MULTILINE)


def read_metadata_file(path: Path) -> str | None:
    """The text of one metadata file, or None when it is missing, not a regular file, or too large."""
    try:
        data = read_bytes(path, limit=MAX_METADATA, what="package metadata")
    except AccelenvError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def name_and_version(folder: Path) -> tuple[str, str] | None:
    """Name and version from a distribution's metadata (`.dist-info/METADATA`, `.egg-info/PKG-INFO`, or an
    `.egg-info` file itself), from its header only (up to the first empty line)."""
    candidates = (folder / "METADATA", folder / "PKG-INFO") if folder.is_dir() else (folder,)
    for candidate in candidates:
        text = read_metadata_file(candidate)
        if text is None:
            continue
        header = re.split(r"\r?\n\r?\n", text, maxsplit=1)[0]
        fields: dict[str, str] = {}
        for match in _FIELD.finditer(header):
            fields.setdefault(match[1], match[2])
        if "Name" in fields and "Version" in fields:
            return fields["Name"], fields["Version"]
    return None


@frozen
class DeclaredEntryPoint:
    """One entry point as a distribution's `entry_points.txt` declares it (read bounded, never through
    `importlib.metadata`, which would read every distribution's files unbounded: a FIFO there would hang it)."""

    name: str
    value: str  # "module:attribute"
    group: str
    dist: str  # the distribution's name (its METADATA), else the folder's
    version: str

    def load(self) -> object:
        import importlib

        module, _, attribute = self.value.partition(":")
        target: object = importlib.import_module(module.strip())
        for part in filter(None, attribute.strip().split(".")):
            target = getattr(target, part)
        return target


_SECTION = re.compile(r"\A\[([^\]\s]{1,200})\]\Z")
_ENTRY = re.compile(r"\A([A-Za-z0-9_.-][^=]{0,199}?)\s*=\s*([A-Za-z0-9_.]+(?:\s*:\s*[A-Za-z0-9_.]+)?)\s*(?:\[.*\])?\Z")


def declared_entry_points(group: str, paths: Iterable[str]) -> list[DeclaredEntryPoint]:
    """The entry points of `group` the distributions in `paths` declare, each distribution once (the first on the
    path, as Python would import it), in path order."""
    import os
    from pathlib import Path as _Path

    found: list[DeclaredEntryPoint] = []
    seen: set[str] = set()
    for folder in paths:
        try:
            with os.scandir(folder or ".") as listing:  # closed also when a read fails midway
                children = sorted(listing, key=lambda c: c.name)
        except OSError:
            continue
        for child in children:
            if not child.name.endswith((".dist-info", ".egg-info")):
                continue
            text = read_metadata_file(_Path(child.path, "entry_points.txt"))
            if text is None or f"[{group}]" not in text:
                continue
            named = name_and_version(_Path(child.path))
            dist, version = named or (child.name.split("-")[0], "?")
            key = re.sub(r"[-_.]+", "-", dist).lower()
            if key in seen:
                continue
            seen.add(key)
            section = None
            for raw in text.splitlines():
                line = raw.strip()
                if (header := _SECTION.match(line)) is not None:
                    section = header.group(1)
                elif section == group and (entry := _ENTRY.match(line)) is not None:
                    found.append(
                        DeclaredEntryPoint(
                            name=entry.group(1).strip(), value=entry.group(2), group=group, dist=dist, version=version
                        )
                    )
    return found


def declares_entry_points(group: str, paths: Iterable[str]) -> bool:
    """Whether a distribution in one of `paths` declares entry points of `group`: a quick look at the
    `entry_points.txt` files."""
    return bool(declared_entry_points(group, paths))
