"""The `accelenv` command line: argument parsing and printing. Everything else lives in the cores.

Exit status: 0 success, 1 a finding (invalid matrix, failed check), 2 a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from accelenv import __version__
from accelenv.check.checks import check
from accelenv.check.rank import rank_environments
from accelenv.check.verdict import Status, verdict_json
from accelenv.errors import AccelenvError, MatrixInvalidError, UsageError
from accelenv.fileio import write_atomic
from accelenv.host.discover import discover
from accelenv.host.metadata import fetch_metadata
from accelenv.host.root import Root
from accelenv.host.run import DEFAULT_TIMEOUT, ToolRunner
from accelenv.host.snapshot import load_snapshot, save_snapshot
from accelenv.matrix import Matrix, Problem, Severity, find_matrix, load_matrix, validate_file
from accelenv.matrix.resolve import get_env, resolve

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from accelenv.host.report import HostReport

SCHEMA_DIR = Path("schema")
SCHEMA_NAMES = (
    "check.schema.json",
    "cluster.schema.json",
    "inspect.schema.json",
    "matrix.schema.json",
)  # tests: equal to contracts.SCHEMAS

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
    if validation.matrix is not None:
        problems += _lock_problems(validation.matrix, path.parent)
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


def _lock_problems(matrix: Matrix, repo: Path) -> list[Problem]:
    """Environments without a current lock, as warnings: their sessions and builds cannot run until locked."""
    from accelenv.plan.lock import LockState, glibc_of, lock_path, lock_state

    problems = []
    for env in matrix.envs.values():
        state = lock_state(repo, env, glibc_of(matrix, env))
        if state is LockState.CURRENT:
            continue
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
    return problems


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
    driver_lines = []
    if driver["min"] or driver["max"]:
        floor = f">= {driver['min']}" if driver["min"] else "any"
        driver_lines.append(floor + (f" (< {driver['max']})" if driver["max"] else ""))
    if driver["compat_min"]:
        driver_lines.append(f">= {driver['compat_min']} in compatibility mode (reduced features; see notes)")
    if driver["accepted"]:
        driver_lines.append(f"known good: {', '.join(driver['accepted'])}")
    if driver["releases"]:
        documented = ", ".join(f"{r['release']} (reports {r['reported_as']})" for r in driver["releases"])
        driver_lines.append(f"documented: {documented}")
    if driver["notes"]:
        driver_lines.append(driver["notes"])
    for i, text in enumerate(driver_lines or ["no driver rule (the runtime needs no host driver)"]):
        lines.append(("  driver      " if i == 0 else "              ") + text)
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


# ------------------------------------------------------------------------------------------------- host


def _host_report(args: argparse.Namespace, matrix: Matrix, families: list[str] | None = None) -> HostReport:
    """The report to judge: a snapshot when given, else what discovery sees now (through --root and PATH)."""
    if getattr(args, "snapshot", None):
        return load_snapshot(Path(args.snapshot))
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {args.timeout:g}")
    return discover(
        matrix,
        root=Root.from_option(args.root),
        runner=ToolRunner(timeout=args.timeout),
        environ=os.environ,
        families=families,
        fetch_metadata=fetch_metadata if args.metadata else None,
    )


def _mib(value: int | None) -> str:
    return f"{value} MiB" if value is not None else "-"


def cmd_inspect(args: argparse.Namespace, out: TextIO) -> int:
    matrix = _matrix(args)
    report = _host_report(args, matrix, args.family or None)
    if args.json:
        _dump(report.as_json(), out)
        return 0
    o, py = report.os, report.python
    out.write(
        f"os          {o.pretty_name or o.id or '-'} (kernel {o.kernel or '-'}, glibc {o.glibc or '-'}, {o.arch})\n"
    )
    out.write(
        f"python      {py.version} {py.implementation} at {py.executable} ({len(py.distributions)} distributions)\n"
    )
    lim, c = report.limits, report.container
    memlock = "unlimited" if lim.memlock_unlimited else _mib(lim.memlock_bytes // 2**20 if lim.memlock_bytes else None)
    shm = _mib(lim.shm_bytes // 2**20 if lim.shm_bytes else None)
    out.write(f"limits      /dev/shm {shm}, memlock {memlock}\n")
    yes = {True: "yes", False: "no"}
    out.write(
        f"container   {'inside a container' if c.inside_container else 'not in a container'}; docker socket "
        f"{yes[c.docker_socket]}; nvidia container toolkit {yes[c.nvidia_container_toolkit]}"
        f"{'; CDI specs ' + ', '.join(c.cdi_specs) if c.cdi_specs else ''}\n"
    )
    if not report.accelerators:
        out.write(
            "accelerators none found (no PCI function, kernel module, device node or vendor tool of any family)\n"
        )
    for acc in report.accelerators:
        name = matrix.families[acc.family].name if acc.family in matrix.families else acc.family
        out.write(
            f"{acc.family:<11} {name}: driver {acc.driver_version or '-'}, runtime {acc.runtime_version or '-'}, "
            f"{len(acc.devices)} device(s) via {acc.source}\n"
        )
        if acc.shadowed_by:
            out.write(f"            devices are held by {acc.shadowed_by}, not the vendor driver\n")
        rows = [
            [str(d.index), d.name or "-", d.arch or "-", _mib(d.memory_mib), d.pci_bus_id or "-", d.sku or "(unknown)"]
            for d in acc.devices
        ]
        if rows:
            buffer = io.StringIO()
            _table(rows, ["#", "NAME", "ARCH", "MEMORY", "PCI", "SKU"], buffer)
            out.write("".join(f"            {line}\n" for line in buffer.getvalue().splitlines()))
        for error in acc.errors:
            out.write(f"            problem: {error}\n")
    return 0


def cmd_snapshot(args: argparse.Namespace, out: TextIO) -> int:
    matrix = _matrix(args)
    report = _host_report(args, matrix)
    target = Path(args.output)
    save_snapshot(report, target)
    out.write(
        f"{target}: snapshot of {len(report.accelerators)} accelerator famil(ies) and {len(report.raw)} tool run(s)\n"
    )
    return 0


_MARK = {Status.PASS: "ok  ", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "skip"}


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    matrix = _matrix(args)
    env = get_env(matrix, args.env)
    if args.ray is not None:
        return _check_ray(args, matrix, env.id, out)
    report = _host_report(args, matrix, [env.family])
    findings = check(matrix, env, report, host_only=args.host_only)
    if args.allow_missing_hardware:
        findings = [
            dataclasses.replace(f, status=Status.SKIP, message=f.message + " (allowed: --allow-missing-hardware)")
            if f.id == "hardware.present" and f.status is Status.FAIL
            else f
            for f in findings
        ]
    source = f"snapshot {args.snapshot}" if args.snapshot else f"host (root {report.root})"
    result = verdict_json(env.id, findings, source=source)
    if args.json:
        _dump(result, out)
    else:
        out.write(f"accelenv check {env.id} on {source}\n")
        for f in findings:
            out.write(f"  {_MARK[f.status]}  {f.id:<28} {f.message}\n")
            if f.status in (Status.FAIL, Status.WARN):
                out.write(f"        expected {f.expected}; found {f.found}\n")
                if f.fix:
                    out.write(f"        fix: {f.fix}\n")
        counts = result["counts"]
        out.write(
            f"verdict: {result['verdict']} ({counts['pass']} passed, {counts['warn']} warned, "
            f"{counts['fail']} failed, {counts['skip']} skipped)\n"
        )
    return 1 if result["verdict"] == "fail" else 0


def _check_ray(args: argparse.Namespace, matrix: Matrix, env_id: str, out: TextIO) -> int:
    from accelenv.cluster.ray import check_cluster, summary

    matrix_text = find_matrix(args.matrix).read_text(encoding="utf-8")
    family = matrix.envs[env_id].family
    address = None if args.ray == "auto" else args.ray
    results = check_cluster(matrix_text, env_id, family, address=address, timeout=args.ray_timeout)
    cluster = summary(results)
    if args.jsonl:
        write_atomic(Path(args.jsonl), "".join(json.dumps(r.as_json(), sort_keys=True) + "\n" for r in results))
    if args.json:
        _dump({"env": env_id, "cluster": cluster, "nodes": [r.as_json() for r in results]}, out)
    else:
        rows = [
            [
                r.node_id[:12],
                r.address,
                r.verdict,
                str(r.devices),
                f"{r.ray_count:g}" if r.ray_count is not None else "-",
                r.driver or "-",
                ", ".join(r.failing + r.problems)[:100] or "-",
            ]
            for r in results
        ]
        _table(rows, ["NODE", "ADDRESS", "VERDICT", "DEVICES", "RAY", "DRIVER", "FAILING"], out)
        out.write(
            f"{cluster['conforming']} of {cluster['nodes']} nodes conform to {env_id}; "
            f"{len(cluster['unreachable'])} unreachable; "
            f"{len(cluster['differ_from_majority'])} differ from the majority\n"
        )
    return 0 if cluster["conforming"] == cluster["nodes"] else 1


def cmd_which(args: argparse.Namespace, out: TextIO) -> int:
    matrix = _matrix(args)
    report = _host_report(args, matrix)
    ranked = rank_environments(matrix, report)
    if args.json:
        _dump(ranked, out)
        return 0
    if not any(r["runnable"] for r in ranked):
        out.write("no environment of the matrix can run on this host\n")
    rows = [
        [r["id"] + (" *" if r["default"] else ""), r["family"], r["verdict"], r["reason"]]
        for r in ranked
        if r["runnable"] or args.all
    ]
    _table(rows, ["ENVIRONMENT", "FAMILY", "HOST VERDICT", "WHY"], out)
    return 0


# ------------------------------------------------------------------------------------------------- generate


def _repo(args: argparse.Namespace) -> Path:
    return find_matrix(args.matrix).parent


def cmd_render(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.plan.render import apply, generated_files, render_plan

    matrix = _matrix(args)
    repo = _repo(args)
    result = apply(repo, render_plan(matrix, generated_files(repo)), check=args.check)
    if args.check:
        for rel in result.out_of_date:
            out.write(f"{rel}: out of date\n")
        if result.out_of_date:
            out.write(f"{len(result.out_of_date)} generated file(s) out of date; run `accelenv render` and commit\n")
            return 1
        out.write(f"{len(result.unchanged)} generated file(s) up to date\n")
        return 0
    for rel in result.written:
        out.write(f"{rel}: written\n")
    for rel in result.removed:
        out.write(f"{rel}: removed (its environment is gone)\n")
    out.write(f"{len(result.written)} written, {len(result.unchanged)} unchanged, {len(result.removed)} removed\n")
    return 0


def cmd_lock(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.plan.lock import LockState, glibc_of, lock_path, lock_state, resolve

    matrix = _matrix(args)
    repo = _repo(args)
    envs = [get_env(matrix, e) for e in args.envs] if args.envs else list(matrix.envs.values())
    rows: list[dict[str, Any]] = []
    if args.check:
        for env in envs:
            state = lock_state(repo, env, glibc_of(matrix, env))
            rows.append({"env": env.id, "state": str(state), "path": str(lock_path(repo, env.id).relative_to(repo))})
        stale = [r for r in rows if r["state"] == LockState.STALE]
        unlocked = [r for r in rows if r["state"] == LockState.UNLOCKED]
        if args.json:
            _dump(rows, out)
        else:
            for r in rows:
                hint = {
                    "stale": "  (the matrix changed: run accelenv lock " + r["env"] + ")",
                    "unlocked": "  (no lock)",
                }
                out.write(f"{r['env']:<24} {r['state']}{hint.get(r['state'], '')}\n")
            out.write(
                f"{len(rows) - len(stale) - len(unlocked)} current, {len(stale)} stale, {len(unlocked)} unlocked\n"
            )
        return 1 if stale or (args.require_all and unlocked) else 0
    failed = 0
    for env in envs:
        glibc = glibc_of(matrix, env)
        if lock_state(repo, env, glibc) is LockState.CURRENT and not args.force:
            rows.append({"env": env.id, "state": "current", "problem": None})
            if not args.json:
                out.write(f"{env.id:<24} current (use --force to resolve again)\n")
            continue
        if not args.json:
            out.write(f"{env.id:<24} resolving for {', '.join(env.platforms)} ...\n")
            out.flush()
        result = resolve(env, glibc=glibc, timeout=args.timeout)
        if result.text is None:
            failed += 1
            rows.append({"env": env.id, "state": str(lock_state(repo, env, glibc)), "problem": result.problem})
            if not args.json:
                out.write(f"{env.id:<24} not locked: {result.problem}\n")
            continue
        write_atomic(lock_path(repo, env.id), result.text)
        rows.append({"env": env.id, "state": "current", "problem": None})
        if not args.json:
            pins = sum(1 for line in result.text.splitlines() if "==" in line and not line.startswith((" ", "#")))
            out.write(f"{env.id:<24} locked: {pins} distributions -> {lock_path(repo, env.id).relative_to(repo)}\n")
    if args.json:
        _dump(rows, out)
    return 1 if failed else 0


# ------------------------------------------------------------------------------------------------- images


def _lock_text(repo: Path, env_id: str) -> str:
    from accelenv.plan.lock import lock_path

    path = lock_path(repo, env_id)
    if not path.is_file():
        raise UsageError(f"{env_id} has no lock ({path.relative_to(repo)}): run `accelenv lock {env_id}` first")
    return path.read_text(encoding="utf-8")


def cmd_build(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.build.context import build_order, find_source, plan_build, source_hash
    from accelenv.build.engine import connect
    from accelenv.build.images import build_images, summary
    from accelenv.plan.lock import LockState, glibc_of, lock_state

    matrix = _matrix(args)
    repo = _repo(args)
    envs = [get_env(matrix, e) for e in args.envs] if args.envs else list(matrix.envs.values())
    source = find_source()
    source_digest = source_hash(source)
    matrix_text = find_matrix(args.matrix).read_text(encoding="utf-8")
    plans, unbuildable = [], []
    for env in envs:
        state = lock_state(repo, env, glibc_of(matrix, env))
        if state is not LockState.CURRENT:
            unbuildable.append((env.id, f"lock is {state}: run `accelenv lock {env.id}`"))
            continue
        plans.append(
            plan_build(
                matrix,
                env,
                matrix_text=matrix_text,
                lock=_lock_text(repo, env.id),
                accelenv_source=source_digest,
                repository=args.repository,
            )
        )
    for env_id, reason in unbuildable:
        out.write(f"{env_id}: not built: {reason}\n")
    if args.envs and unbuildable:
        raise UsageError(f"{len(unbuildable)} environment(s) cannot be built: {', '.join(e for e, _ in unbuildable)}")
    engine = connect()
    info = engine.info()
    progress = sys.stderr if args.json else out
    progress.write(
        f"engine: {info.host}, Docker {info.server_version}, API {info.api_version} ({info.os}/{info.arch})\n"
    )
    results = build_images(
        engine,
        build_order(plans),
        source=source,
        logs=repo / ".accelenv" / "build-logs",
        nocache=args.no_cache,
        dry_run=args.dry_run,
        push=args.push,
        out=progress,
    )
    if args.json:
        _dump(
            {
                "results": [r.as_json() for r in results],
                "not_built": [{"env": e, "reason": r} for e, r in unbuildable],
            },
            out,
        )
    else:
        out.write(summary(results) + "\n")
    return 1 if any(r.status == "failed" for r in results) else 0


def _image_ref(args: argparse.Namespace, matrix: Matrix, env_id: str) -> str:
    from accelenv.plan.render import human_tag

    return args.image or human_tag(args.repository, matrix, matrix.envs[env_id])


def cmd_verify(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.build.engine import connect
    from accelenv.build.images import verify_image

    matrix = _matrix(args)
    env = get_env(matrix, args.env)
    reference = _image_ref(args, matrix, env.id)
    lock = _lock_text(_repo(args), env.id)
    with connect() as engine:
        findings = verify_image(engine, matrix, env, reference, lock)
    result = verdict_json(env.id, findings, source=f"image {reference}")
    if args.json:
        _dump(result, out)
    else:
        out.write(f"accelenv verify {env.id}: {reference}\n")
        for f in findings:
            out.write(f"  {_MARK[f.status]}  {f.id:<22} {f.message}\n")
            if f.status is Status.FAIL:
                out.write(f"        expected {f.expected}; found {f.found}\n")
                if f.fix:
                    out.write(f"        fix: {f.fix}\n")
        out.write(f"verdict: {result['verdict']}\n")
    return 1 if result["verdict"] == "fail" else 0


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.build.engine import connect
    from accelenv.build.images import run_spec

    matrix = _matrix(args)
    env = get_env(matrix, args.env)
    command = list(args.command)
    if not command:
        raise UsageError("nothing to run: accelenv run ENV -- COMMAND [ARGS...]")
    spec = run_spec(
        matrix, env, _image_ref(args, matrix, env.id), command, root=Root.from_option(None), workdir=Path.cwd()
    )

    def echo(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    with connect() as engine:
        return engine.run(spec, echo)


# ------------------------------------------------------------------------------------------------- pin


def cmd_pin(args: argparse.Namespace, out: TextIO) -> int:
    import requests

    from accelenv.pin import pin

    matrix = _matrix(args)
    path = find_matrix(args.matrix)
    unknown = [r for r in args.runtimes if r not in matrix.runtimes]
    if unknown:
        raise UsageError(f"no runtime {', '.join(unknown)}; runtimes are: {', '.join(matrix.runtimes)}")
    with requests.Session() as session:
        try:
            results = pin(matrix, path, session, runtimes=args.runtimes, check=args.check, refresh=args.refresh)
        except ValueError as error:
            raise AccelenvError(str(error)) from error
    if args.json:
        _dump([r.as_json() for r in results], out)
    else:
        for r in results:
            out.write(f"{r.runtime:<16} {r.os:<12} {r.state:<9} {r.image}: {r.message}\n")
        counts = {
            s: sum(1 for r in results if r.state == s) for s in ("pinned", "unchanged", "moved", "unpinned", "error")
        }
        out.write(", ".join(f"{n} {s}" for s, n in counts.items()) + "\n")
    failing = {"error", "moved"} | ({"unpinned"} if args.check else set())
    return 1 if any(r.state in failing for r in results) else 0


# ------------------------------------------------------------------------------------------------- ci


def cmd_ci(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.matrix.model import CiTier
    from accelenv.plan.ci import buildkite, github, jobs

    matrix = _matrix(args)
    previous = load_matrix(Path(args.base_matrix), use_cache=False) if args.base_matrix else None
    rows = jobs(matrix, tier=CiTier(args.tier), changed=args.changed, previous=previous)
    out.write(github(rows) if args.format == "github" else buildkite(rows))
    return 0


# ------------------------------------------------------------------------------------------------- add


def cmd_add(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.edit import add_entry, diff

    path = find_matrix(args.matrix)
    old = path.read_text(encoding="utf-8")
    new = add_entry(old, args.kind, args.id, args.assignments, args.template)
    if args.dry_run:
        out.write(diff(old, new, path.name))
        return 0
    write_atomic(path, new)
    out.write(f"{path}: added {args.kind} {args.id}; run `accelenv render` (and `accelenv lock` for an env)\n")
    return 0


# ------------------------------------------------------------------------------------------------- outdated


def cmd_outdated(args: argparse.Namespace, out: TextIO) -> int:
    import requests

    from accelenv.outdated import as_json, check_matrix, render_github, render_table

    matrix = _matrix(args)
    with requests.Session() as session:
        findings, problems = check_matrix(
            matrix, session, envs=[args.env] if args.env else None, prereleases=args.prereleases
        )
    if args.json:
        out.write(as_json(findings, problems))
    elif args.format == "github":
        out.write(render_github(findings))
    else:
        out.write(render_table(findings, problems))
    return 1 if problems else 0


# ------------------------------------------------------------------------------------------------- report


def _sync(target: Path, text: str, *, check: bool, regenerate: str, out: TextIO) -> bool:
    """Write `text` to `target` when it differs (or, with `check`, only say so). True when the file was stale."""
    current = target.read_text(encoding="utf-8") if target.is_file() else None
    if current == text:
        out.write(f"{target}: up to date\n")
        return False
    if check:
        out.write(f"{target}: out of date; run `{regenerate}`\n")
    else:
        write_atomic(target, text)
        out.write(f"{target}: written\n")
    return True


def cmd_report(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.plan.report import html_page, markdown

    matrix = _matrix(args)
    text = markdown(matrix) if args.format == "md" else html_page(matrix)
    if not args.output:
        if args.check:
            raise UsageError("--check needs -o PATH: the committed file to compare with")
        out.write(text)
        return 0
    target = Path(args.output)
    regenerate = f"accelenv report --format {args.format} -o {target}"
    stale = _sync(target, text, check=args.check, regenerate=regenerate, out=out)
    return 1 if stale and args.check else 0


# ------------------------------------------------------------------------------------------------- schema


def cmd_schema(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.contracts import schema_files

    files = schema_files()
    if not (args.check or args.write):
        out.write(files[args.name])
        return 0
    folder = Path(args.output) if args.output else find_matrix(args.matrix).parent / SCHEMA_DIR
    stale = [
        name
        for name, text in files.items()
        if _sync(folder / name, text, check=args.check, regenerate="accelenv schema --write", out=out)
    ]
    return 1 if stale and args.check else 0


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

    def host_options(p: argparse.ArgumentParser, *, snapshot: bool) -> None:
        p.add_argument(
            "--root", metavar="DIR", help="read /sys, /proc, /dev, /etc under DIR (default: $ACCELENV_ROOT or /)"
        )
        p.add_argument(
            "--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help="per vendor tool (default %(default)gs)"
        )
        p.add_argument("--metadata", action="store_true", help="ask the GCE metadata server for the TPU type (2 s)")
        if snapshot:
            p.add_argument("--snapshot", metavar="FILE", help="judge a saved snapshot instead of this host")

    p = command(
        "inspect",
        "Show what this host is: OS, Python, accelerators (PCI, modules, device nodes, vendor tools), limits.",
        "examples:\n  accelenv inspect\n  accelenv inspect --json | jq '.accelerators[].devices'\n"
        "  accelenv inspect --root ./captured-node   # a captured host stands in for a real one",
        cmd_inspect,
    )
    host_options(p, snapshot=True)
    p.add_argument("--family", action="append", metavar="F", help="only run the tools of family F (repeatable)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema/inspect.schema.json)")

    p = command(
        "check",
        "Check that this host (or a snapshot) is the environment ENV declares; one line per check.",
        "examples:\n  accelenv check gpu-nvidia-cu128\n  accelenv check gpu-nvidia --json\n"
        "  accelenv check gpu-nvidia-cu128 --snapshot ci-node.json   # replay a CI node's verdict\n\n"
        "exit status: 0 nothing failed (warnings allowed), 1 a check failed, 2 usage error",
        cmd_check,
    )
    p.add_argument("env", metavar="ENV", help="environment id, or a family session name for its default")
    host_options(p, snapshot=True)
    p.add_argument("--json", action="store_true", help="print the verdict as JSON (schema/check.schema.json)")
    p.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        metavar="ADDRESS",
        help="check every alive node of a Ray cluster (ADDRESS, $RAY_ADDRESS, or auto)",
    )
    p.add_argument(
        "--ray-timeout", type=float, default=120.0, metavar="S", help="per cluster check (default %(default)gs)"
    )
    p.add_argument("--jsonl", metavar="FILE", help="with --ray: one JSON line per node, for CI artefacts")
    p.add_argument(
        "--host-only",
        action="store_true",
        help="only what the host decides (hardware, driver, runtime, visible devices): before installing the pins",
    )
    p.add_argument(
        "--allow-missing-hardware",
        action="store_true",
        help="no device of the family is a skip, not a failure (laptops; CI never sets this)",
    )

    p = command(
        "snapshot",
        "Save what inspect sees (parsed facts and raw tool outputs) so a verdict can be replayed elsewhere.",
        "examples:\n  accelenv snapshot -o node7.json\n  accelenv check gpu-amd --snapshot node7.json",
        cmd_snapshot,
    )
    host_options(p, snapshot=False)
    p.add_argument("-o", "--output", default="accelenv-snapshot.json", metavar="FILE", help="default: %(default)s")

    p = command(
        "which",
        "List the environments this host can run, best match first.",
        "examples:\n  accelenv which\n  accelenv which --all --json",
        cmd_which,
    )
    host_options(p, snapshot=True)
    p.add_argument("--all", action="store_true", help="also list environments the host cannot run, with the reason")
    p.add_argument("--json", action="store_true", help="print the ranking as JSON")

    p = command(
        "lock",
        "Resolve each environment's pins with uv into envs/<env>/requirements.lock, with hashes.",
        "examples:\n  accelenv lock                      # every environment whose lock is missing or stale\n"
        "  accelenv lock cpu-py311 --force\n  accelenv lock --check              # CI: no lock is stale (offline)\n\n"
        "Only the resolver writes a lock. An environment whose index cannot be reached stays unlocked, and\n"
        "its nox session says so.",
        cmd_lock,
    )
    p.add_argument("envs", nargs="*", metavar="ENV", help="environments (default: all)")
    p.add_argument("--check", action="store_true", help="exit 1 if a lock no longer matches the matrix (offline)")
    p.add_argument("--require-all", action="store_true", help="with --check: an unlocked environment fails too")
    p.add_argument("--force", action="store_true", help="resolve again even when the lock is current")
    p.add_argument("--timeout", type=float, default=900.0, metavar="S", help="per resolution (default %(default)gs)")
    p.add_argument("--json", action="store_true", help="print one result per environment as JSON")

    p = command(
        "render",
        "Write images/<env>/Dockerfile and envs/<env>/env.json for every environment; remove those of gone ones.",
        "examples:\n  accelenv render\n  accelenv render --check   # CI: exit 1 listing every out-of-date file",
        cmd_render,
    )
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if any generated file is out of date")

    p = command(
        "build",
        "Build environment images with the container engine: content-addressed, hermetic, tagged only on success.",
        "examples:\n  accelenv build                    # every locked environment\n"
        "  accelenv build cpu-py311 --json\n  accelenv build --dry-run\n"
        "  accelenv build gpu-nvidia-cu128 --push registry.example.com/team\n\n"
        "Images are tagged <repository>:<env>-<content hash> and <repository>:<env>-<wheel tag>-py<python>;\n"
        "an image whose content tag exists is not built again. Logs: .accelenv/build-logs/<env>.log",
        cmd_build,
    )
    p.add_argument("envs", nargs="*", metavar="ENV", help="environments (default: all locked ones)")
    p.add_argument("--push", metavar="REGISTRY", help="also push to REGISTRY (skipped when it has the content tag)")
    p.add_argument("--dry-run", action="store_true", help="say what would be built; build nothing")
    p.add_argument("--no-cache", action="store_true", help="build again, without the engine's layer cache")
    p.add_argument("--repository", default="accelenv", help="image repository name (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print results as JSON (progress goes to stderr)")

    def image_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--image", help="image reference (default: the human tag accelenv build gives it)")
        p.add_argument("--repository", default="accelenv", help="image repository name (default: %(default)s)")

    p = command(
        "verify",
        "Start ENV's image, run accelenv check inside it, and compare its labels and distributions with the matrix.",
        "examples:\n  accelenv verify cpu-py311\n"
        "  accelenv verify gpu-nvidia-cu128 --image accelenv:gpu-nvidia-cu128-py312",
        cmd_verify,
    )
    p.add_argument("env", metavar="ENV")
    image_options(p)
    p.add_argument("--json", action="store_true", help="print the verdict as JSON")

    p = command(
        "run",
        "Run a command in ENV's image with the working tree at /workspace and the family's devices wired in.",
        "examples:\n  accelenv run gpu-nvidia-cu128 -- pytest tests/devices\n  accelenv run cpu-py311 -- python -V",
        cmd_run,
    )
    p.add_argument("env", metavar="ENV")
    image_options(p)
    p.set_defaults(command=[])  # everything after `--` (split off in main: argparse would misread it)

    p = command(
        "pin",
        "Pin base images by digest: ask each registry for the digest of the tag and write it into matrix.toml.",
        "examples:\n  accelenv pin                 # every base image without a digest\n"
        "  accelenv pin cuda-12-8 --refresh\n  accelenv pin --check         # CI/scheduled: report re-pushed tags\n\n"
        "exit status: 0 done, 1 a registry error, a moved tag (or, with --check, an unpinned image)",
        cmd_pin,
    )
    p.add_argument("runtimes", nargs="*", metavar="RUNTIME", help="runtimes whose base images to pin (default: all)")
    p.add_argument("--check", action="store_true", help="write nothing; report unpinned images and moved tags")
    p.add_argument("--refresh", action="store_true", help="ask again for images that already have a digest")
    p.add_argument("--json", action="store_true", help="print one result per image as JSON")

    p = command(
        "ci",
        "Fan CI out: one job per environment, as GitHub Actions matrix JSON or a Buildkite pipeline.",
        "examples:\n  accelenv ci --format github --tier pr\n"
        "  accelenv ci --format github --changed $(git diff --name-only origin/main) --base-matrix old.toml\n"
        "  accelenv ci --format buildkite --tier nightly | buildkite-agent pipeline upload\n\n"
        "Tiers nest: nightly includes the pr environments, release includes all. With --changed, only the\n"
        "environments the files affect; --base-matrix (matrix.toml as it was) narrows a matrix change to the\n"
        "environments whose resolved form changed.",
        cmd_ci,
    )
    p.add_argument("--format", choices=("github", "buildkite"), default="github")
    p.add_argument("--tier", choices=("pr", "nightly", "release"), default="pr")
    p.add_argument("--changed", nargs="*", metavar="FILE", help="changed files (repository-relative)")
    p.add_argument(
        "--base-matrix", metavar="PATH", help="the matrix before the change (e.g. git show main:matrix.toml)"
    )

    p = command(
        "add",
        "Add a SKU, runtime or environment (or family, os, source) to matrix.toml, validated, layout kept.",
        "examples:\n"
        "  accelenv add sku h100-pcie-94gb --from h100-nvl name='\"NVIDIA H100 NVL 94GB\"' memory_mib=95830\n"
        "  accelenv add sku mi300a family=amd name='\"AMD Instinct MI300A\"' arch=gfx942 \\\n"
        "      product_names='[\"*MI300A*\"]' pci_device_ids='[\"0x74a0\"]' sources='[\"rocm-gpu-specs\"]'\n"
        "  accelenv add env gpu-nvidia-cu129-py311 --from gpu-nvidia-cu129 python='\"3.11\"' --dry-run\n\n"
        "Values are TOML (a bare word is a string); dotted keys reach nested tables (driver.min=...).\n"
        "Nothing is written when the new matrix would not validate.",
        cmd_add,
    )
    p.add_argument("kind", choices=("sku", "runtime", "env", "family", "os", "source"))
    p.add_argument("id", metavar="ID")
    p.add_argument("assignments", nargs="*", metavar="KEY=VALUE")
    p.add_argument("--from", dest="template", metavar="ID", help="start from a copy of this entry")
    p.add_argument("--dry-run", action="store_true", help="print the diff; write nothing")

    p = command(
        "outdated",
        "Report newer upstream releases of the pinned packages (PyPI JSON API, PEP 691 indexes) and of runtimes.",
        "examples:\n  accelenv outdated\n  accelenv outdated --env tpu-jax-0-12 --json\n"
        "  accelenv outdated --format github > findings.md   # one issue-ready section per finding\n\n"
        "Newer releases of a runtime the matrix holds back (runtimes.<id>.hold: the support window's reason) are\n"
        "listed apart, with the reason, not as updates to make.\n\n"
        "exit status: 0 the indexes answered (findings or not), 1 some index could not be asked",
        cmd_outdated,
    )
    p.add_argument("--env", metavar="ENV", help="only this environment")
    p.add_argument("--prereleases", action="store_true", help="also report pre-releases")
    p.add_argument("--format", choices=("table", "github"), default="table")
    p.add_argument("--json", action="store_true", help="findings and problems as JSON")

    p = command(
        "report",
        "The compatibility report: families, runtimes, environments, and which environments run on each SKU.",
        "examples:\n  accelenv report --format md -o docs/compatibility.md\n"
        "  accelenv report --format html -o compatibility.html   # self-contained: pick a SKU, see why\n"
        "  accelenv report --format md -o docs/compatibility.md --check   # CI: exit 1 when it drifted",
        cmd_report,
    )
    p.add_argument("--format", choices=("md", "html"), default="md")
    p.add_argument("-o", "--output", metavar="PATH", help="write here (default: standard output)")
    p.add_argument("--check", action="store_true", help="with -o: write nothing; exit 1 if the file is out of date")

    p = command(
        "schema",
        "Print a JSON Schema (matrix.toml, inspect --json, check --json), or write/check the schema/ files.",
        "examples:\n  accelenv schema > matrix.schema.json\n  accelenv schema check.schema.json\n"
        "  accelenv schema --check    # CI: the committed schemas match this version",
        cmd_schema,
    )
    p.add_argument("name", nargs="?", default="matrix.schema.json", choices=SCHEMA_NAMES, help="schema to print")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write every schema file that changed")
    group.add_argument("--check", action="store_true", help="exit 1 if a schema file is out of date")
    p.add_argument("-o", "--output", metavar="DIR", help="schema folder (default: schema/ beside the matrix)")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    stdout = out or sys.stdout
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    trailing: list[str] | None = None
    if "--" in words:
        cut = words.index("--")
        words, trailing = words[:cut], words[cut + 1 :]
    try:
        args, extra = parser.parse_known_args(words)
        if extra:  # KEY=VALUE after an option (`add env X --from Y key=value`): argparse leaves them over
            if getattr(args, "func", None) is cmd_add and all("=" in e and not e.startswith("-") for e in extra):
                args.assignments = [*args.assignments, *extra]
            else:
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if trailing is not None:
            if not hasattr(args, "command") or args.func is not cmd_run:
                parser.error("`--` only goes with `accelenv run ENV -- COMMAND`")
            args.command = trailing
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
