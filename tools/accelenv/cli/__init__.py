"""The `accelenv` command line: the table of commands, and the entry point that runs one of them.

Each command group is a module beside this one (`matrix`, `host`, `lock`, `generate`, `images`, `upstream`) that
declares its commands' arguments next to their handlers. The table below names each command's module and
one-line summary, so `accelenv --help` lists every command and `accelenv check` imports only the host group:
start-up time matters for a command that runs before every test session.

Exit status: 0 success, 1 a finding (invalid matrix, failed check), 2 a usage error, 3 a bug, 130 interrupted;
`run`: the command's own, or 125 when the container was refused before it started (as `docker run`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
from typing import TYPE_CHECKING, NamedTuple, TextIO, cast

from accelenv import __version__
from accelenv.errors import AccelenvError, MatrixInvalidError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from accelenv.cli.common import Command


class Entry(NamedTuple):
    group: str  # the module under accelenv.cli that declares and runs the command
    summary: str


COMMANDS: dict[str, Entry] = {
    # the matrix: accelenv.cli.matrix
    "validate": Entry(
        "matrix", "Check a matrix against the schema and the compatibility rules; report every problem at once."
    ),
    "list": Entry("matrix", "List the environments of the matrix."),
    "show": Entry(
        "matrix", "Show one environment fully resolved: runtime, driver floors, base image, SKUs, pins, sources."
    ),
    "add": Entry(
        "matrix", "Add a SKU, runtime or environment (or family, os, source) to matrix.toml, validated, layout kept."
    ),
    "attach": Entry("matrix", "Put a SKU in environments (their `skus` lists), validated, layout kept."),
    "detach": Entry("matrix", "Take a SKU out of environments (their `skus` lists), validated, layout kept."),
    "schema": Entry(
        "matrix", "Print a JSON Schema (matrix.toml, inspect --json, check --json), or write/check the schema/ files."
    ),
    # the host: accelenv.cli.host
    "inspect": Entry(
        "host", "Show what this host is: OS, Python, accelerators (PCI, modules, device nodes, vendor tools), limits."
    ),
    "check": Entry("host", "Check that this host (or a snapshot) is the environment ENV declares; one line per check."),
    "snapshot": Entry(
        "host", "Save what inspect sees (parsed facts and raw tool outputs) so a verdict can be replayed elsewhere."
    ),
    "which": Entry("host", "List the environments this host can run, best match first."),
    "labels": Entry(
        "labels", "Node labels for Ray and Kubernetes: what this host is, and check's verdict on each environment."
    ),
    "metrics": Entry(
        "labels", "Prometheus metrics of check's verdicts, devices, driver and the newest record's figures."
    ),
    # generated files: accelenv.cli.lock, accelenv.cli.generate
    "lock": Entry("lock", "Resolve each environment's pins with uv into envs/<env>/requirements.lock, with hashes."),
    "render": Entry(
        "generate",
        "Write images/<env>/Dockerfile and envs/<env>/env.json for every environment; remove those of gone ones.",
    ),
    "report": Entry(
        "generate",
        "The compatibility report: families, runtimes, environments, and which environments run on each SKU.",
    ),
    "ci": Entry(
        "ci", "Fan CI out: image and session jobs per environment, as GitHub Actions JSON or a Buildkite pipeline."
    ),
    "collect": Entry("ci", "Keep the result records a CI run's own jobs uploaded; name each job that left none."),
    "codeowners": Entry("ci", "The CODEOWNERS section of the owners matrix.toml names, per family and environment."),
    "hook": Entry(
        "ci", "Write the gate a CI node runs before every job: its own accelenv check of the job's environment."
    ),
    "k8s": Entry(
        "k8s", "Kubernetes objects of ENV: DRA DeviceClass and claim template, KubeRay cluster and job, NFD rule."
    ),
    # images: accelenv.cli.images
    "build": Entry(
        "images",
        "Build environment images with the container engine: content-addressed, hermetic, tagged only on success.",
    ),
    "verify": Entry(
        "images",
        "Start ENV's image, run accelenv check inside it, and compare its labels and distributions with the matrix.",
    ),
    "run": Entry(
        "images", "Run a command in ENV's image with the working tree at /workspace and the family's devices wired in."
    ),
    "prune": Entry(
        "images", "Remove accelenv images beyond the newest N per environment, or that the matrix no longer builds."
    ),
    "base": Entry(
        "bases", "Make a local stand-in base (debootstrap) and point an environment at it, where no registry answers."
    ),
    # conformance evidence: accelenv.cli.results
    "results": Entry(
        "results",
        "Merge conformance result records, flag performance regressions, name what no recent record proves.",
    ),
    # upstream: accelenv.cli.upstream
    "outdated": Entry(
        "upstream",
        "Report newer upstream releases of the pinned packages (PyPI JSON API, PEP 691 indexes) and of runtimes.",
    ),
    "refresh": Entry(
        "upstream",
        "Write what outdated found into the matrix (bumped pins, new TPU lines), re-lock, render; print a PR body.",
    ),
    "pin": Entry(
        "upstream",
        "Pin base images by digest: ask each registry for the digest of the tag and write it into matrix.toml.",
    ),
}

MAIN_EPILOG = """\
examples:
  accelenv validate                      check matrix.toml against the schema and the rules
  accelenv list --family nvidia          the NVIDIA environments
  accelenv show gpu-nvidia-cu132         everything needed to reproduce one environment
  accelenv show gpu-nvidia --json        a family's session name picks its default environment

The matrix is ./matrix.toml (or the nearest one in a parent folder), $ACCELENV_MATRIX, or --matrix PATH.
"""


def command_spec(name: str) -> Command:
    """The declaration of command `name`, importing its group (and nothing else)."""
    module = importlib.import_module(f"accelenv.cli.{COMMANDS[name].group}")
    spec: Command = module.COMMANDS[name]
    return spec


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, sized as argparse sizes it ($COLUMNS, else the terminal's width, else 80; less 2), but
    without `shutil`, which argparse imports for that (with bz2 and lzma: 3 ms of every command's start-up, and
    argparse makes a formatter for each argument it declares, not only for --help)."""

    def __init__(
        self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None
    ) -> None:
        if width is None:
            width = _columns() - 2
        super().__init__(prog, indent_increment, max_help_position, width)


def _columns() -> int:
    asked = os.environ.get("COLUMNS", "")
    if asked.isdigit() and int(asked) > 0:
        return int(asked)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


def build_parser(selected: str | None = None) -> argparse.ArgumentParser:
    """The parser of command `selected`, with its arguments: the one command a command line names needs no other
    (an unknown or missing command gets them all, listed by name only and not imported, for `accelenv --help`
    and the error that names the choices). `build_parser("*")` declares every command, for documentation and
    tests."""
    formatter = _Formatter
    parser = argparse.ArgumentParser(
        prog="accelenv",
        description="Reproducible accelerator environments from one compatibility matrix.",
        epilog=MAIN_EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"accelenv {__version__}")
    parser.add_argument("--matrix", metavar="PATH", help="the matrix file (default: ./matrix.toml or a parent's)")
    sub = parser.add_subparsers(dest="command_name", metavar="COMMAND", required=True)
    for name, entry in COMMANDS.items():
        if selected in (name, "*"):
            spec = command_spec(name)
            p = sub.add_parser(
                name, help=entry.summary, description=entry.summary, epilog=spec.epilog, formatter_class=formatter
            )
            spec.arguments(p)
            p.set_defaults(spec=spec, command_parser=p)  # its own usage for what it refuses
        elif selected not in COMMANDS:
            sub.add_parser(name, help=entry.summary, add_help=False, formatter_class=formatter)
    return parser


def _selected(words: list[str]) -> str | None:
    """The command the words name: the first word that is a command, after the global options."""
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == "--matrix":
            skip = True
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    from accelenv.cli.output import safe_text

    target = out or sys.stdout
    if target is None:  # started with standard output closed (`accelenv list >&-`)
        _say("accelenv: standard output is closed; give the command somewhere to write (e.g. >/dev/null)\n")
        return 2
    stdout = safe_text(target, "standard output")
    real_stderr = sys.stderr
    if real_stderr is not None:
        sys.stderr = safe_text(real_stderr, "standard error", quiet=True)
    previous = _terminate_as_interrupt()
    try:
        return _finish(stdout, target, _run(argv, stdout))
    except _Terminated:  # unwound (child groups ended); now end the way SIGTERM ends a process
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        previous = None
        os.kill(os.getpid(), signal.SIGTERM)
        return 143
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if real_stderr is not None:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            sys.stderr = real_stderr


def _run(argv: Sequence[str] | None, stdout: TextIO) -> int:
    """Parse the command line, run the command, and turn every error into its message and exit code."""
    words = list(sys.argv[1:] if argv is None else argv)
    trailing: list[str] | None = None
    if "--" in words:
        cut = words.index("--")
        words, trailing = words[:cut], words[cut + 1 :]
    if "--json" in words and _selected(words) in JSON_ON_ERROR:  # stdout is one JSON document, whatever happens
        return _json_on_error(words, trailing, stdout)
    return _dispatch(words, trailing, stdout)


JSON_ON_ERROR = frozenset({"build"})  # commands whose --json document stands also for a refusal or an error


def _json_on_error(words: list[str], trailing: list[str] | None, stdout: TextIO) -> int:
    """`_dispatch`, except that a run which ends in an error or a refused command line still prints one JSON
    document on stdout: {"ok": false, "error": ..., "exit_code": ...} (the message also goes to stderr)."""
    import io

    from accelenv.cli.output import dump_json

    buffer = io.StringIO()
    captured = _Tee(sys.stderr)
    previous, sys.stderr = sys.stderr, cast("TextIO", captured)
    try:
        code = _dispatch(words, trailing, buffer)
    except SystemExit as exit_:  # argparse refused the command line (or --help)
        code = exit_.code if isinstance(exit_.code, int) else 2
        if code == 0:
            stdout.write(buffer.getvalue())
            raise
    finally:
        sys.stderr = previous
    text = buffer.getvalue()
    if code == 0 or text.strip().startswith("{"):
        stdout.write(text)
        return code
    said = [line.removeprefix("accelenv: ") for line in captured.lines if line.startswith("accelenv")]
    document = {"ok": False, "error": " ".join(said)[-2000:] or f"exit {code}", "exit_code": code}
    dump_json({**document, "results": [], "not_built": [], "pulled": []}, stdout)
    return code


class _Tee:
    """Standard error as it is, keeping what was written (the error message for the JSON document)."""

    def __init__(self, target: TextIO | None) -> None:
        self.target = target
        self.lines: list[str] = []

    def write(self, text: str) -> int:
        self.lines.extend(text.splitlines())
        del self.lines[:-40]
        if self.target is not None:
            self.target.write(text)
        return len(text)

    def flush(self) -> None:
        if self.target is not None:
            self.target.flush()

    def __getattr__(self, name: str) -> object:
        return getattr(self.target, name)


def _dispatch(words: list[str], trailing: list[str] | None, stdout: TextIO) -> int:
    try:
        parser = build_parser(_selected(words))
        args, extra = parser.parse_known_args(words)
        spec: Command = args.spec
        if extra:  # KEY=VALUE after an option (`add env X --from Y key=value`): argparse leaves them over
            if spec.takes_assignments and all("=" in e and not e.startswith("-") for e in extra):
                args.assignments = [*args.assignments, *extra]
            else:
                args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if trailing is not None:
            if not spec.takes_command:
                args.command_parser.error("`--` only goes with `accelenv run ENV -- COMMAND`")
            args.command = trailing
        if spec.takes_command:  # `accelenv run`: the command's own output, colours included, passes through
            stdout = getattr(stdout, "target", stdout)
        return spec.run(args, stdout)
    except MatrixInvalidError as error:
        for problem in error.problems:
            if problem.is_error:
                _say(problem.render(error.source) + "\n")
        _say(f"accelenv: {error}" + (f"; {error.hint}" if error.hint else "") + "\n")
        return error.exit_code
    except AccelenvError as error:
        _say(f"accelenv: {error}\n")
        return error.exit_code
    except _Terminated:
        raise
    except KeyboardInterrupt:
        _say("accelenv: interrupted\n")
        return 130
    except OSError as error:  # a file or stream the command used failed underneath it: say which, and why
        where = f"{error.filename}: " if error.filename else ""
        _say(f"accelenv: {where}{error.strerror or error}\n")
        return 1
    except Exception as error:  # a bug: say so plainly, keep the traceback for those who ask
        if missing := _missing_dependency(error):
            # accelenv runs from a checkout (PYTHONPATH=tools) in a Python without its dependencies
            _say(
                f"accelenv: the Python package '{missing}' is not installed in {sys.executable}; install accelenv "
                "with its dependencies (`pip install -e .` in the checkout), or run it with a Python that has them\n"
            )
            return 2
        if os.environ.get("ACCELENV_DEBUG"):
            import traceback

            traceback.print_exc()
        _say(
            f"accelenv: internal error: {type(error).__name__}: {error}\n"
            "This is a bug in accelenv; rerun with ACCELENV_DEBUG=1 for the traceback and report it.\n"
        )
        return 3


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is so that `finally` blocks and child groups are ended."""


def _terminate_as_interrupt() -> signal._HANDLER | None:
    """SIGTERM unwinds like Ctrl-C: the child process groups accelenv waits on (uv) are ended on the way out,
    and nothing is left half-written (writes are atomic). Returns the handler it replaced; None where no handler
    can be set (a thread other than the main one runs `main`, as tests do)."""

    def interrupted(signum: int, frame: object) -> None:
        raise _Terminated

    try:
        return signal.signal(signal.SIGTERM, interrupted)
    except ValueError:  # "signal only works in main thread of the main interpreter"
        return None


def _finish(stdout: TextIO, target: TextIO, code: int) -> int:
    """Flush what the command printed; a stream that cannot take it is an error (rc 1); a closed pipe keeps the
    command's own status (its verdict). Either way the stream is pointed at /dev/null, so the interpreter's own
    last flush stays quiet."""
    from accelenv.cli.output import OutputFailedError

    if getattr(stdout, "failed", False):  # the command's own write failed, and it said so
        _silence(target)
        return code
    try:
        stdout.flush()
    except OutputFailedError as error:
        _silence(target)
        _say(f"accelenv: {error}\n")
        return error.exit_code
    if getattr(stdout, "failed", False):  # the reader closed the pipe during the last flush
        _silence(target)
    return code


def _silence(stream: TextIO) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)


def _say(message: str) -> None:
    """Write to standard error, which may itself be closed or full: then there is nowhere to say it."""
    with contextlib.suppress(Exception):
        if sys.stderr is not None:
            sys.stderr.write(message)
            sys.stderr.flush()


def _missing_dependency(error: Exception) -> str | None:
    """The top-level name of a third-party package that could not be imported (not accelenv's own module)."""
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return None
    top = error.name.split(".")[0]
    return None if top == "accelenv" else top
