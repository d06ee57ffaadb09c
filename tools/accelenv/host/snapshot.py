"""Snapshots: a saved HostReport with the raw tool outputs behind it. `check ENV --snapshot FILE` replays the
verdict of another machine, which is how a CI failure reaches a maintainer's laptop."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from accelenv import __version__
from accelenv.errors import UsageError
from accelenv.fileio import write_atomic
from accelenv.host.report import HostReport

if TYPE_CHECKING:
    from pathlib import Path

SNAPSHOT_FORMAT = 1


def snapshot_json(report: HostReport) -> dict[str, Any]:
    return {
        "accelenv_snapshot": SNAPSHOT_FORMAT,
        "accelenv_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "report": report.as_json(raw=True),
    }


def save_snapshot(report: HostReport, path: Path) -> None:
    write_atomic(path, json.dumps(snapshot_json(report), indent=2, sort_keys=True) + "\n")


def load_snapshot(path: Path) -> HostReport:
    """The report inside a snapshot file; a clear usage error for anything else."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UsageError(f"{path}: cannot read the snapshot: {error.strerror}") from error
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UsageError(f"{path}: not a snapshot (not JSON: {error})") from error
    if not isinstance(data, dict) or data.get("accelenv_snapshot") != SNAPSHOT_FORMAT:
        raise UsageError(f"{path}: not an accelenv snapshot (write one with `accelenv snapshot -o FILE`)")
    try:
        return HostReport.from_json(data["report"])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise UsageError(
            f"{path}: the snapshot's report is incomplete or damaged ({type(error).__name__}: {error})"
        ) from error
