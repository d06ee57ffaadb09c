"""What several command groups share: the command spec, the matrix and repository a command works on, the
host options and the host report they select, and writing a generated file only when it changed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from accelenv.errors import UsageError
from accelenv.matrix.load import find_matrix, load_matrix
from accelenv.records import frozen

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from accelenv.host.interpreter import OwnPython
    from accelenv.host.report import HostReport
    from accelenv.matrix.model import Environment, Matrix


MAX_SECONDS = 86400.0  # the longest timeout a command accepts (a day)
MAX_SNAPSHOT = 256 * 1024 * 1024  # tools' outputs are capped at 8 MiB a stream; no real snapshot comes near


@frozen
class Command:
    """One command of a group: its help epilog, the arguments it declares and the handler that runs it.
    Its one-line summary lives in the command table (`accelenv.cli.COMMANDS`), so `accelenv --help` can list
    every command without importing any group."""

    epilog: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, TextIO], int]
    takes_command: bool = False  # `accelenv run ENV -- COMMAND`: everything after `--` is the command
    takes_assignments: bool = False  # `accelenv add ... --from X key=value`: KEY=VALUE words after options


def matrix_of(args: argparse.Namespace) -> Matrix:
    return load_matrix(find_matrix(args.matrix))


def repo_of(args: argparse.Namespace) -> Path:
    """The repository a command writes generated files into: the folder of the matrix."""
    return find_matrix(args.matrix).parent


def seconds(text: str) -> float:
    """An argparse type: a finite, positive number of seconds (not nan, not inf, not 0)."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0 or value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0 and at most {MAX_SECONDS:g}")
    return value


def count(text: str) -> int:
    """An argparse type: a whole number, 0 or more (every numeric option is `seconds`, `count`, `fraction` or
    `days`)."""
    import argparse

    if not (text.isascii() and text.isdigit()) or len(text) > 9:  # below a billion
        raise argparse.ArgumentTypeError(f"expected a whole number, 0 or more, not {text!r}")
    return int(text)


def fraction(text: str) -> float:
    """An argparse type: a finite fraction from 0 up to (not including) 1."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a fraction from 0 up to (not including) 1, e.g. 0.1")
    return value


def shm_size(text: str) -> str:
    """An argparse type: a /dev/shm size as the matrix writes one (`container_shm_size`): 512m, 16g."""
    import argparse
    import re

    from accelenv.schema_values import SHM_SIZE

    if not re.fullmatch(SHM_SIZE, text):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a size: give a number and k, m or g, e.g. 16g")
    return text


DURATION_UNITS = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60}


def duration(text: str) -> float:
    """An argparse type: seconds from `7d`, `12h`, `30m`, `2w`, or a bare number of days; above 0, at most a
    hundred years."""
    import argparse
    import math

    number, unit = (text[:-1], text[-1]) if text[-1:] in DURATION_UNITS else (text, "d")
    try:
        value = float(number) * DURATION_UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: give e.g. 7d, 12h, 30m or 2w") from None
    if not math.isfinite(value) or not 0 < value <= 36500 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r}: give a duration above 0, e.g. 7d")
    return value


def days(text: str) -> float:
    """An argparse type: a finite number of days above 0, at most a hundred years."""
    import argparse
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days") from None
    if not math.isfinite(value) or not 0 < value <= 36500:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of days above 0")
    return value


def host_options(p: argparse.ArgumentParser, *, snapshot: bool) -> None:
    from accelenv.host.run import DEFAULT_TIMEOUT

    p.add_argument(
        "--root", metavar="DIR", help="read /sys, /proc, /dev, /etc under DIR (default: $ACCELENV_ROOT or /)"
    )
    p.add_argument(
        "--timeout", type=seconds, default=DEFAULT_TIMEOUT, metavar="S", help="per vendor tool (default %(default)gs)"
    )
    p.add_argument(
        "--metadata",
        action="store_true",
        help="also ask the metadata server of the cloud the host is on (DMI; GCE, AWS IMDSv2, Azure IMDS: instance "
        "type, zone, placement; 1 s a request); a host of no cloud asks nobody",
    )
    if snapshot:
        p.add_argument("--snapshot", metavar="FILE", help="judge a saved snapshot instead of this host")


def host_report(
    args: argparse.Namespace,
    matrix: Matrix,
    families: list[str] | None = None,
    *,
    topology: bool = True,
    platform: bool = False,
) -> HostReport:
    """The report to judge: a snapshot when given, else what discovery sees now (through --root and PATH);
    `topology=False` when the caller will not look at the interconnect summary; `platform=True` to read what only
    the platform knows (the operator's facts, Kubernetes' labels, and with --metadata the cloud's server)."""
    if getattr(args, "snapshot", None):
        from accelenv.host.snapshot import load_snapshot

        return load_snapshot(snapshot_file(Path(args.snapshot)))
    from accelenv.host.discover import discover
    from accelenv.host.root import Root
    from accelenv.host.run import ToolRunner

    root = Root.from_option(args.root)
    fetch = None
    if args.metadata:
        from accelenv.host.metadata import clouds_to_ask, fetch_metadata
        from accelenv.host.platform import dmi_fields, identify

        cloud, _ = identify(dmi_fields(root), root.read_value("/sys/hypervisor/uuid"))
        fetch = fetch_metadata if "gce" in clouds_to_ask(cloud, os.environ) else None  # no cloud: nobody asked
    report = discover(
        matrix,
        root=root,
        runner=ToolRunner(timeout=args.timeout),
        environ=os.environ,
        families=families,
        fetch_metadata=fetch,
        topology=topology,
    )
    if not platform:
        return report
    from accelenv import records
    from accelenv.host.metadata import gather

    tpu_here = report.accelerator("tpu")
    tpu = tpu_here is not None and bool(tpu_here.devices)
    return records.replace(report, platform=gather(root, os.environ, clouds=bool(args.metadata), tpu=tpu))


def own_pythons(args: argparse.Namespace, matrix: Matrix, envs: list[Environment]) -> dict[str, OwnPython | None]:
    """Each environment's own interpreter on this host (check.subject: what `which` and `labels` judge); None for
    every one when judging a snapshot (it recorded only the Python that took it)."""
    if getattr(args, "snapshot", None):
        return dict.fromkeys((e.id for e in envs), None)
    import os

    from accelenv.host.interpreter import own_python
    from accelenv.host.run import ToolRunner
    from accelenv.plan.interpreters import find_interpreter

    runner, repo = ToolRunner(timeout=args.timeout), repo_of(args)
    return {e.id: own_python(matrix, e, repo, runner, python_here=find_interpreter, environ=os.environ) for e in envs}


def host_words(args: argparse.Namespace, report: HostReport) -> str:
    """The machine a verdict judged, in words: the snapshot's file, or this host with its root."""
    return f"snapshot {args.snapshot}" if getattr(args, "snapshot", None) else f"host (root {report.root})"


def snapshot_file(path: Path) -> Path:
    """`path`, when it can be a snapshot: a regular file of at most MAX_SNAPSHOT bytes (a FIFO or /dev/zero
    would block or never end)."""
    import stat

    from accelenv.fileio import kind_of

    try:
        info = path.stat()
    except OSError as error:
        raise UsageError(f"{path}: cannot read the snapshot: {error.strerror}") from error
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{path}: the snapshot is {kind_of(info.st_mode)}, not a regular file")
    if info.st_size > MAX_SNAPSHOT:
        raise UsageError(f"{path}: {info.st_size} bytes is too large for a snapshot (at most {MAX_SNAPSHOT})")
    return path


def sync_file(
    target: Path, text: str, *, check: bool, regenerate: str, out: TextIO, inside: Path | None = None
) -> bool:
    """Write `text` to `target` when it differs (or, with `check`, only say so). True when the file was stale.
    `target` must be a regular file or a new path; with `inside`, one reached through real folders of it."""
    from accelenv.fileio import read_text_if_exists

    current = read_text_if_exists(target, what="output file")
    if current == text:
        out.write(f"{target}: up to date\n")
        return False
    if check:
        out.write(f"{target}: out of date; run `{regenerate}`\n")
    else:
        from accelenv.fileio import write_atomic

        write_atomic(target, text, inside=inside)
        out.write(f"{target}: written\n")
    return True
