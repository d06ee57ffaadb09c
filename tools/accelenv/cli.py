"""The `accelenv` command line: argument parsing and printing. Everything else lives in the cores.

Exit status: 0 success, 1 a finding (invalid matrix, failed check), 2 a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from accelenv import __version__
from accelenv.errors import AccelenvError, MatrixInvalidError, UsageError
from accelenv.matrix import Matrix, Severity, find_matrix, load_matrix, validate_file
from accelenv.matrix.resolve import get_env, resolve
from accelenv.matrix.schema import schema_text

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

SCHEMA_FILE = Path("schema") / "matrix.schema.json"

MAIN_EPILOG = """\
examples:
  accelenv validate                      check matrix.toml against the schema and the rules
  accelenv list --family nvidia          the NVIDIA environments
  accelenv show gpu-nvidia-cu128         everything needed to reproduce one environment
  accelenv show gpu-nvidia --json        a family's session name picks its default environment

The matrix is ./matrix.toml (or the nearest one in a parent folder), $ACCELENV_MATRIX, or --matrix PATH.
"""


def _dump(data: object, out: TextIO) -> None:
    json.dump(data, out, indent=2, sort_keys=False)
    out.write("\n")


def _table(rows: list[list[str]], headers: list[str], out: TextIO) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    out.write("  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip() + "\n")
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def _matrix(args: argparse.Namespace) -> Matrix:
    return load_matrix(find_matrix(args.matrix))


# ------------------------------------------------------------------------------------------------- validate


def cmd_validate(args: argparse.Namespace, out: TextIO) -> int:
    path = find_matrix(args.path or args.matrix)
    validation = validate_file(path)
    problems = list(validation.problems)
    if args.strict:
        problems = [dataclasses.replace(p, severity=Severity.ERROR) for p in problems]
    errors = sum(1 for p in problems if p.is_error)
    if args.json:
        _dump([p.as_json() for p in problems], out)
        return 1 if errors else 0
    for problem in problems:
        out.write(problem.render(validation.source) + "\n")
    warnings = len(problems) - errors
    if errors:
        out.write(f"{validation.source}: invalid: {errors} error(s), {warnings} warning(s)\n")
        return 1
    m = validation.matrix
    if m is None:  # cannot happen: no errors means the model was built
        raise AccelenvError(f"{validation.source}: the matrix could not be read")
    out.write(
        f"{validation.source}: valid: {len(m.families)} families, {len(m.skus)} SKUs, {len(m.runtimes)} runtimes, "
        f"{len(m.envs)} environments; {warnings} warning(s)\n"
    )
    return 0


# ------------------------------------------------------------------------------------------------- list


def env_summary(matrix: Matrix, env_id: str) -> dict[str, Any]:
    env = matrix.envs[env_id]
    rt = matrix.runtimes[env.runtime]
    return {
        "id": env.id,
        "family": env.family,
        "runtime": {"id": rt.id, "name": rt.name, "version": str(rt.version) if rt.version else None},
        "python": env.python,
        "os": env.os,
        "skus": list(env.skus),
        "default": env.default,
        "tier": str(env.ci_tier),
        "description": env.description,
    }


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    matrix = _matrix(args)
    if args.family and args.family not in matrix.families:
        raise UsageError(f"no family '{args.family}'; families are: {', '.join(matrix.families)}")
    rows = [env_summary(matrix, e) for e, env in matrix.envs.items() if args.family in (None, env.family)]
    if args.json:
        _dump(rows, out)
        return 0
    _table(
        [
            [
                r["id"] + (" *" if r["default"] else ""),
                r["family"],
                f"{r['runtime']['name']}",
                r["python"],
                r["os"],
                r["tier"],
                ", ".join(r["skus"]) or "-",
            ]
            for r in rows
        ],
        ["ENVIRONMENT", "FAMILY", "RUNTIME", "PYTHON", "OS", "TIER", "SKUS"],
        out,
    )
    out.write("* = the family's default environment (what its nox session runs)\n")
    return 0


# ------------------------------------------------------------------------------------------------- show


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    matrix = _matrix(args)
    data = resolve(matrix, get_env(matrix, args.env))
    if args.json:
        _dump(data, out)
        return 0
    rt, image, fam = data["runtime"], data["base_image"], data["family"]
    driver = rt["driver"]
    lines = [
        f"{data['id']}: {data['description']}",
        f"  family      {fam['name']} ({fam['id']}, {fam['maturity']}); session `nox -s {fam['session']}`"
        + (" runs this environment" if data["default"] else ""),
        f"  ci tier     {data['ci_tier']}",
        f"  os          {data['os']} on {', '.join(data['platforms'])}",
        f"  python      {data['python']}",
        f"  runtime     {rt['name']} ({rt['id']}, version {rt['version'] or '-'}"
        + (f", wheels +{rt['wheel_tag']})" if rt["wheel_tag"] else ")"),
    ]
    for name, version in rt["components"].items():
        lines.append(f"    {name:<14}{version}")
    lines.append(f"  archs       {', '.join(rt['architectures'])}")
    floor = driver["min"] or "-"
    lines.append(f"  driver      >= {floor}" + (f" (< {driver['max']})" if driver["max"] else ""))
    if driver["compat_min"]:
        lines.append(f"              >= {driver['compat_min']} in compatibility mode (reduced features; see notes)")
    if driver["accepted"]:
        lines.append(f"              known good: {', '.join(driver['accepted'])}")
    if driver["notes"]:
        lines.append(f"              {driver['notes']}")
    pin = "" if image["pinned"] else "   (not pinned by digest)"
    lines.append(f"  base image  {image['reference']}{pin}")
    lines.append("  skus")
    width = max((len(sku["id"]) for sku in data["skus"]), default=0) + 2
    for sku in data["skus"]:
        extra = f", needs driver >= {sku['driver_floor']}" if sku["driver_min"] else ""
        lines.append(f"    {sku['id']:<{width}}{sku['name']} ({sku['arch']}{extra})")
    lines.append("  requirements")
    lines += [f"    {p}" for p in data["requirements"]["packages"]]
    for url in [data["requirements"]["index_url"], *data["requirements"]["extra_index_urls"]]:
        if url:
            lines.append(f"    from {url}")
    lines.append(f"  tests       {' '.join(data['tests'])}")
    lines.append("  reproduce by hand")
    lines.append(f"    docker run --rm -it {image['reference']}")
    lines.append(f"    {data['install']}")
    if data["sources"]:
        lines.append("  sources")
        lines += [f"    {s['id']}: {s['title']} <{s['url'] or s['where']}>" for s in data["sources"]]
    out.write("\n".join(lines) + "\n")
    return 0


# ------------------------------------------------------------------------------------------------- schema


def cmd_schema(args: argparse.Namespace, out: TextIO) -> int:
    text = schema_text()
    if not (args.check or args.write):
        out.write(text)
        return 0
    target = Path(args.output) if args.output else find_matrix(args.matrix).parent / SCHEMA_FILE
    current = target.read_text(encoding="utf-8") if target.is_file() else None
    if args.check:
        if current == text:
            out.write(f"{target}: up to date\n")
            return 0
        out.write(f"{target}: out of date; run `accelenv schema --write`\n")
        return 1
    if current != text:
        from accelenv.fileio import write_atomic

        write_atomic(target, text)
        out.write(f"{target}: written\n")
    else:
        out.write(f"{target}: unchanged\n")
    return 0


# ------------------------------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="accelenv",
        description="Reproducible accelerator environments from one compatibility matrix.",
        epilog=MAIN_EPILOG,
        formatter_class=formatter,
    )
    parser.add_argument("--version", action="version", version=f"accelenv {__version__}")
    parser.add_argument("--matrix", metavar="PATH", help="the matrix file (default: ./matrix.toml or a parent's)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_text: str, epilog: str, fn: Callable[[argparse.Namespace, TextIO], int]) -> Any:
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=epilog, formatter_class=formatter)
        p.set_defaults(func=fn)
        return p

    p = command(
        "validate",
        "Check a matrix against the schema and the compatibility rules; report every problem at once.",
        "examples:\n  accelenv validate\n  accelenv validate path/to/matrix.toml --json | jq '.[] | .path'\n\n"
        "exit status: 0 valid (warnings allowed), 1 invalid, 2 usage error",
        cmd_validate,
    )
    p.add_argument("path", nargs="?", help="matrix file (default: the one --matrix or the folder names)")
    p.add_argument("--json", action="store_true", help="print the problems as a JSON list")
    p.add_argument("--strict", action="store_true", help="treat warnings (unpinned images, unused sources) as errors")

    p = command(
        "list",
        "List the environments of the matrix.",
        "examples:\n  accelenv list\n  accelenv list --family amd --json",
        cmd_list,
    )
    p.add_argument("--family", metavar="F", help="only environments of family F (nvidia, amd, tpu, ...)")
    p.add_argument("--json", action="store_true", help="print a JSON list (id, family, runtime, python, skus, ...)")

    p = command(
        "show",
        "Show one environment fully resolved: runtime, driver floors, base image, SKUs, pins, sources.",
        "examples:\n  accelenv show gpu-nvidia-cu128\n  accelenv show gpu-amd --json   # a session name picks the "
        "family's default",
        cmd_show,
    )
    p.add_argument("env", metavar="ENV", help="environment id, or a family session name for its default")
    p.add_argument("--json", action="store_true", help="print the resolved environment as JSON")

    p = command(
        "schema",
        "Print the JSON Schema of matrix.toml, or write/check schema/matrix.schema.json.",
        "examples:\n  accelenv schema --check    # CI: the committed schema matches this version",
        cmd_schema,
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write the schema file if it changed")
    group.add_argument("--check", action="store_true", help="exit 1 if the schema file is out of date")
    p.add_argument("-o", "--output", metavar="PATH", help="schema file (default: schema/ beside the matrix)")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    stdout = out or sys.stdout
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        code: int = args.func(args, stdout)
        return code
    except MatrixInvalidError as error:
        for problem in error.problems:
            if problem.is_error:
                sys.stderr.write(problem.render(error.source) + "\n")
        sys.stderr.write(f"accelenv: {error}; run `accelenv validate` for details\n")
        return error.exit_code
    except AccelenvError as error:
        sys.stderr.write(f"accelenv: {error}\n")
        return error.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("accelenv: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as error:  # a bug: say so plainly, keep the traceback for those who ask
        if os.environ.get("ACCELENV_DEBUG"):
            traceback.print_exc()
        sys.stderr.write(
            f"accelenv: internal error: {type(error).__name__}: {error}\n"
            "This is a bug in accelenv; rerun with ACCELENV_DEBUG=1 for the traceback and report it.\n"
        )
        return 3
