"""What several command groups share: the command spec, the matrix and repository a command works on, the
host options and the host report they select, and writing a generated file only when it changed."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from accelenv.errors import UsageError
from accelenv.matrix.load import find_matrix, load_matrix

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from accelenv.host.report import HostReport
    from accelenv.matrix.model import Matrix


@dataclass(frozen=True, kw_only=True)
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


def host_options(p: argparse.ArgumentParser, *, snapshot: bool) -> None:
    from accelenv.host.run import DEFAULT_TIMEOUT

    p.add_argument(
        "--root", metavar="DIR", help="read /sys, /proc, /dev, /etc under DIR (default: $ACCELENV_ROOT or /)"
    )
    p.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help="per vendor tool (default %(default)gs)"
    )
    p.add_argument("--metadata", action="store_true", help="ask the GCE metadata server for the TPU type (2 s)")
    if snapshot:
        p.add_argument("--snapshot", metavar="FILE", help="judge a saved snapshot instead of this host")


def host_report(
    args: argparse.Namespace, matrix: Matrix, families: list[str] | None = None, *, topology: bool = True
) -> HostReport:
    """The report to judge: a snapshot when given, else what discovery sees now (through --root and PATH);
    `topology=False` when the caller will not look at the interconnect summary."""
    if getattr(args, "snapshot", None):
        from accelenv.host.snapshot import load_snapshot

        return load_snapshot(Path(args.snapshot))
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout:g}")
    from accelenv.host.discover import discover
    from accelenv.host.root import Root
    from accelenv.host.run import ToolRunner

    fetch = None
    if args.metadata:
        from accelenv.host.metadata import fetch_metadata

        fetch = fetch_metadata
    return discover(
        matrix,
        root=Root.from_option(args.root),
        runner=ToolRunner(timeout=args.timeout),
        environ=os.environ,
        families=families,
        fetch_metadata=fetch,
        topology=topology,
    )


def sync_file(target: Path, text: str, *, check: bool, regenerate: str, out: TextIO) -> bool:
    """Write `text` to `target` when it differs (or, with `check`, only say so). True when the file was stale."""
    current = target.read_text(encoding="utf-8") if target.is_file() else None
    if current == text:
        out.write(f"{target}: up to date\n")
        return False
    if check:
        out.write(f"{target}: out of date; run `{regenerate}`\n")
    else:
        from accelenv.fileio import write_atomic

        write_atomic(target, text)
        out.write(f"{target}: written\n")
    return True
