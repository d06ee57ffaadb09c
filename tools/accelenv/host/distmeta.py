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

if TYPE_CHECKING:
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
