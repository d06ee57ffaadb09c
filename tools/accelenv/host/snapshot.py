"""Snapshots: a saved HostReport with the raw tool outputs behind it. `check ENV --snapshot FILE` replays the
verdict of another machine, which is how a CI failure reaches a maintainer's laptop."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from accelenv import __version__
from accelenv.errors import UsageError
from accelenv.fileio import read_text, write_atomic
from accelenv.host.report import HostReport
from accelenv.redact import redact_json

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

SNAPSHOT_FORMAT = 1


def snapshot_json(report: HostReport) -> dict[str, Any]:
    return {
        "accelenv_snapshot": SNAPSHOT_FORMAT,
        "accelenv_version": __version__,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "report": redact_json(report.as_json(raw=True)),  # tools echo tokens and credentialed URLs
    }


def save_snapshot(report: HostReport, path: Path, *, inside: Path | None = None) -> None:
    write_atomic(path, json.dumps(snapshot_json(report), indent=2, sort_keys=True) + "\n", inside=inside)


def load_snapshot(path: Path) -> HostReport:
    """The report inside a snapshot file; a clear usage error for anything else."""
    text = read_text(path, what="snapshot")  # a FIFO, a device or an endless file is refused, not waited on
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise UsageError(f"{path}: not a snapshot (not JSON: {error})") from error
    form = data.get("accelenv_snapshot") if isinstance(data, dict) else None
    if not isinstance(data, dict) or type(form) is not int or form != SNAPSHOT_FORMAT:  # `true == 1` is no format
        raise UsageError(f"{path}: not an accelenv snapshot (write one with `accelenv snapshot -o FILE`)")
    problems = snapshot_problems(data)
    if problems:
        shown = "".join(f"\n  {problem}" for problem in problems[:MAX_PROBLEMS])
        more = f"\n  ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
        raise UsageError(
            f"{path}: the snapshot is damaged: {len(problems)} problem(s) against schema/inspect.schema.json"
            f"{shown}{more}\n(write a new one with `accelenv snapshot -o FILE` on the host)"
        )
    try:
        return HostReport.from_json(data["report"])
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise UsageError(
            f"{path}: the snapshot's report is incomplete or damaged ({type(error).__name__}: {error})"
        ) from error


MAX_PROBLEMS = 20
MAX_MESSAGE = 160


def snapshot_problems(data: dict[str, Any]) -> list[str]:
    """Every way `data` (a loaded snapshot) departs from the snapshot format, each with its dotted key path
    (`report.python.distributions.torch: '2.9.1' is not of type 'array'`), in path order. The report must fit the
    published schema of `inspect --json` (schema/inspect.schema.json), raw tool outputs included."""
    from accelenv.host.schema import inspect_schema
    from accelenv.matrix.schema_check import strict_validator  # patterns match whole strings, as ECMA-262

    envelope = {
        "type": "object",
        "required": ["accelenv_snapshot", "report"],
        "properties": {
            "accelenv_snapshot": {"const": SNAPSHOT_FORMAT},
            "accelenv_version": {"type": "string"},
            "created": {"type": "string"},
            "hostname": {"type": "string"},
            "report": inspect_schema(),
        },
    }
    validator = strict_validator(envelope)
    found = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_key_path(error.absolute_path)}: {_short(error.message)}" for error in found]


def _key_path(parts: Iterable[str | int]) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(the document)"


def _short(message: str) -> str:
    flat = " ".join(message.split())
    return flat if len(flat) <= MAX_MESSAGE else flat[: MAX_MESSAGE - 3] + "..."
