"""Commands about the matrix itself: validate, list, show, schema, add, attach, detach."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from accelenv import records
from accelenv.cli.common import Command, matrix_of, repo_of, sync_file
from accelenv.cli.output import dump_json, table
from accelenv.errors import AccelenvError, UsageError
from accelenv.matrix.load import find_matrix

if TYPE_CHECKING:
    import argparse

    from accelenv.matrix.model import Matrix
    from accelenv.matrix.problems import Problem

SCHEMA_DIR = Path("schema")
SCHEMA_NAMES = (
    "check.schema.json",
    "cluster.schema.json",
    "inspect.schema.json",
    "matrix.schema.json",
    "result.schema.json",
)  # tests: equal to plan.schemas.SCHEMAS (kept here so `schema --help` needs no schema code)


# ---------------------------------------------------------------------------------------------------- validate


def validate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", nargs="?", help="matrix file (default: the one --matrix or the folder names)")
    p.add_argument("--json", action="store_true", help="print the problems as a JSON list")
    level = p.add_mutually_exclusive_group()
    level.add_argument(
        "--strict",
        action="store_true",
        help="treat the warnings a matrix change can fix (unused sources, SKUs in no environment) as errors: "
        "what a vendor's pull request must pass",
    )
    level.add_argument(
        "--release",
        action="store_true",
        help="treat every warning as an error, also those that need registry or index access to fix "
        "(unpinned base images: `accelenv pin`; missing or stale locks: `accelenv lock`): before a release",
    )
    p.add_argument(
        "--verbose", action="store_true", help="every registry warning on its own line (default: one line per kind)"
    )


def validate(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.matrix.load import validate_file
    from accelenv.matrix.problems import Category, Severity

    path = find_matrix(args.path or args.matrix)
    validation = validate_file(path)
    problems = list(validation.problems)
    if validation.matrix is not None:
        problems += _lock_problems(validation.matrix, path.parent)
    if args.strict or args.release:
        problems = [
            records.replace(p, severity=Severity.ERROR) if args.release or p.category is Category.CHANGE else p
            for p in problems
        ]
    errors = sum(1 for p in problems if p.is_error)
    if args.json:
        dump_json([p.as_json() for p in problems], out)
        return 1 if errors else 0
    from accelenv.cli.problems_text import problem_lines

    warnings = len(problems) - errors
    registry = sum(1 for p in problems if not p.is_error and p.category is Category.REGISTRY)
    counts = f"{warnings} warning(s)" + (f", {registry} of them need registry access (--release)" if registry else "")
    m = validation.matrix
    if errors:
        summary = f"{validation.source}: invalid: {errors} error(s), {counts}"
    elif m is None:  # cannot happen: no errors means the model was built
        raise AccelenvError(f"{validation.source}: the matrix could not be read")
    else:
        summary = (
            f"{validation.source}: valid: {len(m.families)} families, {len(m.skus)} SKUs, {len(m.runtimes)} "
            f"runtimes, {len(m.envs)} environments; {counts}"
        )
    for line in problem_lines(problems, validation.source, summary, verbose=args.verbose):
        out.write(line + "\n")
    return 1 if errors else 0


def _lock_problems(matrix: Matrix, repo: Path) -> list[Problem]:
    """Environments without a current lock, as warnings: their sessions and builds cannot run until locked. That
    is the requirements lock, and the OS-package lock where the base image lacks the environment's Python. An
    OS-package lock made against a local stand-in base in envs/<env>/ is an error."""
    from accelenv.build.overrides import committed_standin_lock
    from accelenv.matrix.paths import lock_path
    from accelenv.matrix.problems import Problem, Severity
    from accelenv.plan.audit import provenance_problems
    from accelenv.plan.lock import LockState, glibc_of, lock_state, os_lock_defect, os_lock_path, os_lock_state
    from accelenv.plan.render import os_packages

    problems = []
    for env in matrix.envs.values():
        state = lock_state(repo, env, glibc_of(matrix, env))
        if state is LockState.CURRENT:
            problems += provenance_problems(repo, env)
        else:
            rel = lock_path(repo, env.id).relative_to(repo)
            what = "has no lock file" if state is LockState.UNLOCKED else "has a stale lock file"
            problems.append(
                Problem(
                    path=f"envs.{env.id}",
                    message=f"{what} ({rel}); run `accelenv lock {env.id}` where its indexes are reachable",
                    severity=Severity.WARNING,
                    rule="lock",
                )
            )
        if standin := committed_standin_lock(repo, env.id):  # never the real base's lock
            problems.append(Problem(path=f"envs.{env.id}", message=f"{standin}; delete it", rule="lock"))
        runtime = matrix.runtimes.get(env.runtime)
        if runtime is None or env.os not in runtime.base_images:  # an error `validate` already reports
            continue
        packages = os_packages(matrix, env)
        if not packages:  # the base ships the environment's Python: no OS packages to lock
            continue
        base = runtime.base_images[env.os].reference
        os_state = os_lock_state(repo, env.id, base, packages)
        if os_state is LockState.CURRENT:
            continue
        rel = os_lock_path(repo, env.id).relative_to(repo)
        defect = os_lock_defect(repo, env.id) if os_state is LockState.STALE else None
        what = (
            "has no OS-package lock"
            if os_state is LockState.UNLOCKED
            else f"has an OS-package lock that does not read ({defect})"
            if defect
            else "has a stale OS-package lock"
        )
        problems.append(
            Problem(
                path=f"envs.{env.id}",
                message=f"{what} ({rel}), needed because the matrix records no Python {env.python} in its base "
                f"{base}; run `accelenv lock {env.id}` where the base can be pulled (builds refuse it until then)",
                severity=Severity.WARNING,
                rule="lock",
            )
        )
    return problems


# ---------------------------------------------------------------------------------------------------- list


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


def list_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--family", metavar="F", help="only environments of family F (nvidia, amd, tpu, ...)")
    p.add_argument("--json", action="store_true", help="print a JSON list (id, family, runtime, python, skus, ...)")


def list_envs(args: argparse.Namespace, out: TextIO) -> int:
    matrix = matrix_of(args)
    if args.family and args.family not in matrix.families:
        raise UsageError(f"no family '{args.family}'; families are: {', '.join(matrix.families)}")
    rows = [env_summary(matrix, e) for e, env in matrix.envs.items() if args.family in (None, env.family)]
    if args.json:
        dump_json(rows, out)
        return 0
    table(
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


# ---------------------------------------------------------------------------------------------------- show


def show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("env", metavar="ENV", nargs="?", help="environment id, or a family session name for its default")
    p.add_argument("--json", action="store_true", help="print the resolved environment as JSON")
    p.add_argument(
        "--plugins", action="store_true", help="list the family plugins installed here, and why any is not used"
    )


def show(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.matrix.paths import lock_path
    from accelenv.matrix.resolve import get_env, resolve

    if args.plugins or args.env is None:
        return _show_plugins(args, out)
    matrix = matrix_of(args)
    data = resolve(matrix, get_env(matrix, args.env))
    if args.json:
        dump_json(data, out)
        return 0
    lock = lock_path(repo_of(args), data["id"])
    shown = os.path.relpath(lock) if lock.is_file() else None  # the command runs where `show` was asked
    out.write("\n".join(_show_lines(data, shown)) + "\n")
    return 0


def _show_plugins(args: argparse.Namespace, out: TextIO) -> int:
    """The installed family plugins (`accelenv.families`): loaded ones with their family and backend, failed ones
    with the reason; exit 1 when one failed, so nothing is dropped silently."""
    from accelenv.plugins import plugin_rows

    if args.env is None and not args.plugins:
        raise UsageError("give an environment (accelenv show ENV), or --plugins to list the family plugins")
    rows = plugin_rows()
    if args.json:
        dump_json(rows, out)
    elif not rows:
        out.write("no family plugin installed (accelenv.families entry points)\n")
    else:
        cells = [
            [r["package"], r["version"], r["family"] or "-", r["backend"] or "-", r["state"], r["why"]] for r in rows
        ]
        table(cells, ["PLUGIN", "VERSION", "FAMILY", "BACKEND", "STATE", "WHY NOT USED"], out)
    return 1 if any(r["state"] == "failed" for r in rows) else 0


def _show_lines(data: dict[str, Any], lock: str | None = None) -> list[str]:
    rt, image, fam = data["runtime"], data["base_image"], data["family"]
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
    lines += [f"    {name:<14}{version}" for name, version in rt["components"].items()]
    lines.append(f"  archs       {', '.join(rt['architectures'])}")
    for i, text in enumerate(_driver_lines(rt["driver"]) or ["no driver rule (the runtime needs no host driver)"]):
        lines.append(("  driver      " if i == 0 else "              ") + text)
    pin = "" if image["pinned"] else "   (not pinned by digest)"
    lines.append(f"  base image  {image['reference']}{pin}")
    lines.append("  skus")
    width = max((len(sku["id"]) for sku in data["skus"]), default=0) + 2
    for sku in data["skus"]:
        extra = ""
        if sku["driver_raised"]:  # the SKU's own floor decides, not the runtime's (the one check applies)
            extra = f", needs driver >= {sku['driver_runs_from']}"
            if sku["driver_floor"] != sku["driver_runs_from"]:
                extra += f" ({sku['driver_floor']} for the full feature set)"
        if sku["ray_accelerator_type"]:
            extra += ", Ray: " + "/".join(sorted(set(sku["ray_accelerator_type"].values())))
        lines.append(f"    {sku['id']:<{width}}{sku['name']} ({sku['arch']}{extra})")
    lines.append("  requirements")
    lines += [f"    {p}" for p in data["requirements"]["packages"]]
    lines += [
        f"    from {url}"
        for url in [data["requirements"]["index_url"], *data["requirements"]["extra_index_urls"]]
        if url
    ]
    lines.append(f"  tests       {' '.join(data['tests'])}")
    lines.append("  reproduce by hand (`accelenv build` and `accelenv run` do this in a locked image)")
    lines += [f"    {line}" for line in by_hand(data, lock)]
    if data["sources"]:
        lines.append("  sources")
        lines += [f"    {s['id']}: {s['title']} <{s['url'] or s['where']}>" for s in data["sources"]]
    return lines


def by_hand(data: dict[str, Any], lock: str | None) -> list[str]:
    """The shell commands that give the environment without accelenv: the base image started the way `accelenv
    run` starts images (the family's devices, groups, container runtime and variables, its /dev/shm and IPC
    namespace, the working tree at /workspace), then the environment's Python and its pins (from the lock when
    there is one)."""
    from accelenv.build.images import shm_and_ipc

    container = data["family"]["container"]
    shm, ipc = shm_and_ipc(container["ipc"], container["shm_size"])
    flags = ["--rm", "-it"]
    if container["gpus"]:
        flags += ["--gpus", "all"]
    if container["runtime"]:
        flags += ["--runtime", container["runtime"]]
    for node in container["devices"]:
        # a glob (/dev/neuron[0-9]*) is expanded by the shell into one --device per match
        flags.append(f"$(printf -- '--device %s ' {node})" if set(node) & set("*?[") else f"--device {node}")
    flags += [f"--group-add {group}" for group in container["groups"]]
    flags += [f"-e {shlex.quote(f'{key}={value}')}" for key, value in sorted(container["env"].items())]
    flags += [f"--ipc {ipc}"] if ipc else []
    flags += [f"--shm-size {shm}"] if shm else []
    flags += ['-v "$PWD":/workspace', "-w /workspace", data["base_image"]["reference"]]
    python = f"python{data['python']}"
    lines = ["docker run " + " ".join(flags)]
    if container.get("cdi_kind"):  # what accelenv run asks for first (build/wiring.py)
        legacy = (
            "--gpus all"
            if container["gpus"]
            else f"--runtime {container['runtime']}"
            if container["runtime"]
            else "the --device flags"
        )
        lines.append(
            f"# with CDI (Docker 28.2+, Podman 4.1+) and a {container['cdi_kind']} spec in /etc/cdi or "
            f"/var/run/cdi, as accelenv run does: --device {container['cdi_kind']}=all (a spec without `all`: one "
            f"--device {container['cdi_kind']}=NAME per device it lists) instead of {legacy}"
        )
    lines.append("# then, inside the container:")
    if data["base_image"]["python"] != data["python"]:
        lines.append(
            f"apt-get update && apt-get install -y --no-install-recommends {python} {python}-venv"
            f"  # the base has no Python {data['python']}; {data['os_base']['name']} provides it"
        )
    lines.append(f"{python} -m venv --system-site-packages /opt/venv  # keeps what the base image installed")
    if lock is not None:
        lines.append(f"/opt/venv/bin/pip install --require-hashes --no-deps -r {shlex.quote(lock)}")
    else:
        pip = shlex.split(data["install"])[3:]  # `pythonX.Y -m pip install ...`, from its `install` onwards
        lines.append(shlex.join(["/opt/venv/bin/pip", *pip]) + "  # not locked: pins only")
    return lines


def _driver_lines(driver: dict[str, Any]) -> list[str]:
    lines = []
    if driver["min"] or driver["max"]:
        floor = f">= {driver['min']}" if driver["min"] else "any"
        lines.append(floor + (f" (< {driver['max']})" if driver["max"] else ""))
    if driver["compat_min"]:
        lines.append(f">= {driver['compat_min']} in compatibility mode (reduced features; see notes)")
    if driver["accepted"]:
        lines.append(f"known good: {', '.join(driver['accepted'])}")
    if driver["releases"]:
        documented = ", ".join(f"{r['release']} (reports {r['reported_as']})" for r in driver["releases"])
        lines.append(f"documented: {documented}")
    if driver["notes"]:
        lines.append(driver["notes"])
    return lines


# ---------------------------------------------------------------------------------------------------- schema


def schema_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", default="matrix.schema.json", choices=SCHEMA_NAMES, help="schema to print")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write every schema file that changed")
    group.add_argument("--check", action="store_true", help="exit 1 if a schema file is out of date")
    p.add_argument("-o", "--output", metavar="DIR", help="schema folder (default: schema/ beside the matrix)")


def schema(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.plan.schemas import schema_files

    files = schema_files()
    if not (args.check or args.write):
        out.write(files[args.name])
        return 0
    folder = Path(args.output) if args.output else find_matrix(args.matrix).parent / SCHEMA_DIR
    stale = [
        name
        for name, text in files.items()
        if sync_file(
            folder / name, text, check=args.check, regenerate="accelenv schema --write", out=out, inside=folder.parent
        )
    ]
    return 1 if stale and args.check else 0


# ---------------------------------------------------------------------------------------------------- add


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=("sku", "runtime", "env", "family", "os", "source"))
    p.add_argument("id", metavar="ID")
    p.add_argument("assignments", nargs="*", metavar="KEY=VALUE")
    p.add_argument(
        "--from",
        dest="template",
        metavar="ID",
        help="start from the shared facts of this entry (a SKU's family, arch, host_arch; never its name, ids, "
        "memory, driver floor or sources); the command says what it copied",
    )
    p.add_argument(
        "--env",
        dest="envs",
        metavar="ENV",
        nargs="+",
        default=[],
        help="also put the new SKU in these environments (as `accelenv attach` does)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the diff; write nothing")


def add(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.matrix.edit import add_to_file, diff

    path = find_matrix(args.matrix)
    _refuse_if_pending(path, args.dry_run)
    assignments = [*args.assignments, *(e for e in args.envs if "=" in e)]  # `--env A B key=value`
    envs = [e for e in args.envs if "=" not in e]
    old, edit = add_to_file(path, args.kind, args.id, assignments, args.template, dry_run=args.dry_run, envs=envs)
    if args.dry_run:
        out.write(diff(old, edit.text, path.name))
    if edit.copied or edit.not_copied:
        out.write(f"copied from {args.template}: {', '.join(edit.copied) or 'nothing'}\n")
        if edit.not_copied:
            out.write(f"not copied (facts of {args.template} itself; give them): {', '.join(edit.not_copied)}\n")
    if edit.unset:
        out.write(f"unset: {', '.join(edit.unset)}\n")
    _tell_warnings(edit.warnings, path, out)
    if args.dry_run:
        return 0
    also = f" and put it in {', '.join(edit.attached)}" if edit.attached else ""
    next_step = "`accelenv render` (and `accelenv lock` for an env)"
    out.write(f"{path}: added {args.kind} {args.id}{also}; run {next_step}\n")
    return 0


def _refuse_if_pending(path: Path, dry_run: bool) -> None:
    if not dry_run:
        from accelenv.changeset import refuse_if_pending

        refuse_if_pending(path.parent)  # an interrupted refresh is finished or undone first


def _tell_warnings(warnings: tuple[Problem, ...], path: Path, out: TextIO) -> None:
    for problem in warnings:
        out.write(problem.render(str(path)) + "\n")


# ---------------------------------------------------------------------------------------------------- attach


def attach_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("sku", metavar="SKU", help="SKU id (under [skus])")
    p.add_argument("envs", metavar="ENV", nargs="+", help="environment ids whose `skus` list takes it")
    p.add_argument("--dry-run", action="store_true", help="print the diff; write nothing")


def attach(args: argparse.Namespace, out: TextIO) -> int:
    return _attach(args, out, detach=False)


def detach(args: argparse.Namespace, out: TextIO) -> int:
    return _attach(args, out, detach=True)


def _attach(args: argparse.Namespace, out: TextIO, *, detach: bool) -> int:
    from accelenv.matrix.edit import attach_to_file, diff

    path = find_matrix(args.matrix)
    _refuse_if_pending(path, args.dry_run)
    old, edit = attach_to_file(path, args.sku, args.envs, detach=detach, dry_run=args.dry_run)
    if args.dry_run and edit.attached:
        out.write(diff(old, edit.text, path.name))
    if edit.unchanged:
        state = "does not list" if detach else "already lists"
        for env in edit.unchanged:
            out.write(f"{path}: envs.{env} {state} {args.sku}; nothing to do there\n")
    _tell_warnings(edit.warnings, path, out)
    if edit.attached and not args.dry_run:
        verb = "took" if detach else "put"
        where = "out of" if detach else "in"
        out.write(f"{path}: {verb} {args.sku} {where} {', '.join(edit.attached)}; run `accelenv render`\n")
    return 0


COMMANDS = {
    "validate": Command(
        epilog="examples:\n  accelenv validate\n"
        "  accelenv validate --strict    # a vendor's change: no warning the change itself can fix\n"
        "  accelenv validate --release   # before a release: also digests pinned and every environment locked\n"
        "  accelenv validate path/to/matrix.toml --json | jq '.[] | .path'\n\n"
        "Each problem has a category: `change` (the matrix edit fixes it) or `registry` (needs a registry or\n"
        "package index: `accelenv pin`, `accelenv lock`), shown as `warning (registry)`.\n"
        "exit status: 0 valid (warnings allowed), 1 invalid, 2 usage error",
        arguments=validate_arguments,
        run=validate,
    ),
    "list": Command(
        epilog="examples:\n  accelenv list\n  accelenv list --family amd --json",
        arguments=list_arguments,
        run=list_envs,
    ),
    "show": Command(
        epilog="examples:\n  accelenv show gpu-nvidia-cu132\n  accelenv show gpu-amd --json   # a session name picks "
        "the family's default\n  accelenv show --plugins   # the family plugins installed here; why one is not used",
        arguments=show_arguments,
        run=show,
    ),
    "schema": Command(
        epilog="examples:\n  accelenv schema > matrix.schema.json\n  accelenv schema check.schema.json\n"
        "  accelenv schema --check    # CI: the committed schemas match this version",
        arguments=schema_arguments,
        run=schema,
    ),
    "add": Command(
        epilog="examples:\n"
        "  accelenv add sku h100-pcie-94gb --from h100-nvl name='\"NVIDIA H100 NVL 94GB\"' memory_mib=95830\n"
        "  accelenv add sku mi350p family=amd name='\"AMD Instinct MI350P\"' arch=gfx950 \\\n"
        "      product_names='[\"*MI350P*\"]' pci_device_ids='[\"0x75a8\"]' driver_min='\"6.14.14\"' \\\n"
        "      sources='[\"rocm-docs-gpus\"]'\n"
        "  accelenv add sku mi350p ... --env gpu-amd-rocm100 gpu-amd-rocm714   # and put it in two environments\n"
        "  accelenv add env gpu-nvidia-cu132-py313 --from gpu-nvidia-cu132 python='\"3.13\"' --dry-run\n\n"
        "Values are TOML, typed by the schema: a string key takes the text as written (driver_min=570), a list\n"
        "is written as one (pci_device_ids='[\"0x75a8\"]'); dotted keys reach nested tables (driver.min=...);\n"
        "KEY= with nothing after it unsets KEY. --from copies only shared facts and says which.\n"
        "Nothing is written when the new matrix would not validate.",
        arguments=add_arguments,
        run=add,
        takes_assignments=True,
    ),
    "attach": Command(
        epilog="examples:\n  accelenv attach mi350p gpu-amd-rocm100 gpu-amd-rocm714\n"
        "  accelenv attach b200 gpu-nvidia-cu132 --dry-run\n\n"
        "Adds the SKU to each environment's `skus` list, layout kept. An environment that already lists it is\n"
        "left as it is (and named). Nothing is written when the result would not validate (say, the runtime\n"
        "has no code for the SKU's architecture).",
        arguments=attach_arguments,
        run=attach,
    ),
    "detach": Command(
        epilog="examples:\n  accelenv detach mi100 gpu-amd-rocm100\n\n"
        "Removes the SKU from each environment's `skus` list; an environment that does not list it is named.",
        arguments=attach_arguments,
        run=detach,
    ),
}
