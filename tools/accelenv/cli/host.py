"""Commands about this host (or a saved one): inspect, snapshot, check, which.

`check` runs before every test session, so this module imports only what the command it runs needs: start-up
time is part of the user's experience (benchmarks/check_latency.py measures it)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from accelenv import records
from accelenv.cli.common import Command, host_options, host_report, host_words, matrix_of, own_pythons, seconds
from accelenv.cli.output import dump_json, findings, table
from accelenv.excerpts import clip
from accelenv.matrix.load import find_matrix

if TYPE_CHECKING:
    import argparse

    from accelenv.check.subject import Judged
    from accelenv.cluster.ray import NodeResult
    from accelenv.host.report import HostReport
    from accelenv.matrix.model import Matrix


def _mib(value: int | None) -> str:
    return f"{value} MiB" if value is not None else "-"


# ---------------------------------------------------------------------------------------------------- inspect


def inspect_arguments(p: argparse.ArgumentParser) -> None:
    host_options(p, snapshot=True)
    p.add_argument("--family", action="append", metavar="F", help="only run the tools of family F (repeatable)")
    p.add_argument(
        "--engine",
        action="store_true",
        help="also ask the container engine DOCKER_HOST reaches: its version, CDI, runtimes, and which families "
        "`accelenv run` can give devices to (an engine call; inspect stays fast without it)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema/inspect.schema.json)")


def inspect(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.host.root import Root

    matrix = matrix_of(args)
    # the text shows no topology and no platform
    report = host_report(args, matrix, args.family or None, topology=args.json, platform=args.json)
    if args.json:
        from accelenv.cluster.accelerator_types import expected_ray

        data = report.as_json()
        for entry, acc in zip(data["accelerators"], report.accelerators, strict=True):
            entry["ray"] = expected_ray(matrix, acc).as_json()
        dump_json(data, out)
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
    if args.engine and not args.snapshot:  # a snapshot has no engine; under --root, as for run: the tree's specs
        from accelenv.build.launch import engine_lines

        out.write(
            "".join(
                f"{line}\n"
                for line in engine_lines(matrix, report, root=Root.from_option(args.root), environ=os.environ)
            )
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
            table(rows, ["#", "NAME", "ARCH", "MEMORY", "PCI", "SKU"], buffer)
            out.write("".join(f"            {line}\n" for line in buffer.getvalue().splitlines()))
        for error in acc.errors:
            out.write(f"            problem: {error}\n")
    return 0


# ---------------------------------------------------------------------------------------------------- snapshot


def snapshot_arguments(p: argparse.ArgumentParser) -> None:
    host_options(p, snapshot=False)
    p.add_argument("-o", "--output", default="accelenv-snapshot.json", metavar="FILE", help="default: %(default)s")


def snapshot(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.host.snapshot import save_snapshot

    matrix = matrix_of(args)
    report = host_report(args, matrix, platform=True)
    from accelenv.host.fabric import with_fabric_output
    from accelenv.host.run import ToolRunner

    report = with_fabric_output(report, ToolRunner(timeout=args.timeout))  # what replaying the NVLink domain needs
    target = Path(args.output)
    save_snapshot(report, target)
    out.write(
        f"{target}: snapshot of {len(report.accelerators)} accelerator famil(ies) and {len(report.raw)} tool run(s)\n"
    )
    return 0


# ---------------------------------------------------------------------------------------------------- check


def check_arguments(p: argparse.ArgumentParser) -> None:
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
        "--ray-timeout", type=seconds, default=120.0, metavar="S", help="per cluster check (default %(default)gs)"
    )
    p.add_argument("--jsonl", metavar="FILE", help="with --ray: one JSON line per node, for CI artefacts")
    p.add_argument(
        "--format",
        choices=("text", "json", "html"),
        default="text",
        help="text (default), json (as --json), or with --ray html: the cluster drawn, one offline page",
    )
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
    p.add_argument(
        "--python",
        metavar="PATH",
        help="judge this interpreter's version and packages (a virtualenv's bin/python) instead of the one running "
        "accelenv",
    )


def check(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.check.checks import check as check_env
    from accelenv.check.verdict import Status, verdict_json
    from accelenv.matrix.resolve import get_env

    matrix = matrix_of(args)
    env = get_env(matrix, args.env)
    if args.ray is not None:
        return _check_ray(args, matrix, env.id, out)
    if args.format == "html":
        from accelenv.errors import UsageError

        raise UsageError("check --format html draws a Ray cluster: give it with --ray [ADDRESS]")
    from accelenv.matrix.model import Requires

    report = host_report(args, matrix, [env.family], topology=env.requires != Requires())
    report, judged = _judged_python(args, report)
    found = check_env(matrix, env, report, host_only=args.host_only)
    if not args.snapshot:  # in a Kubernetes pod: what the scheduler allocated (DRA device metadata), judged too
        from accelenv.host.root import Root
        from accelenv.k8s.allocated import allocated_findings, read_allocation

        found += allocated_findings(matrix, env, report, read_allocation(Root.from_option(args.root)))
    if args.allow_missing_hardware:
        found = [
            records.replace(f, status=Status.SKIP, message=f.message + " (allowed: --allow-missing-hardware)")
            if f.id == "hardware.present" and f.status is Status.FAIL
            else f
            for f in found
        ]
    source = f"snapshot {args.snapshot}" if args.snapshot else f"host (root {report.root})"
    result = verdict_json(env.id, found, source=source, judged=judged.as_json())
    if args.json or args.format == "json":
        dump_json(result, out)
    else:
        out.write(f"accelenv check {env.id} on {source}\n{judged.words()}\n")
        findings(found, out, id_width=28)
        counts = result["counts"]
        out.write(
            f"verdict: {result['verdict']} ({counts['pass']} passed, {counts['warn']} warned, "
            f"{counts['fail']} failed, {counts['skip']} skipped)\n"
        )
    return 1 if result["verdict"] == "fail" else 0


def _judged_python(args: argparse.Namespace, report: HostReport) -> tuple[HostReport, Judged]:
    """The report with the Python `check` judges (--python's, else the one running accelenv, else the one a
    snapshot recorded), and what was judged (check.subject)."""
    import sys

    from accelenv.check.subject import interpreter, not_judged

    host = f"snapshot {args.snapshot}" if args.snapshot else f"host (root {report.root})"
    if args.host_only:
        return report, not_judged(host, "--host-only")
    if args.python:
        from accelenv.errors import UsageError
        from accelenv.host.interpreter import read_interpreter
        from accelenv.host.run import ToolRunner

        read = read_interpreter(ToolRunner(timeout=args.timeout), args.python)
        if isinstance(read, str):
            raise UsageError(f"--python: {read}")
        info, prefix = read
        return records.replace(report, python=info), interpreter(host, info, prefix=prefix)
    if args.snapshot:
        return report, interpreter(host, report.python, prefix=None, recorded=True)
    prefix = sys.prefix if sys.prefix != sys.base_prefix else None
    return report, interpreter(host, report.python, prefix=prefix)


def cluster_lines(cluster: dict[str, Any], env_id: str) -> str:
    """The cluster verdict under the node table: counts (dead nodes among the unreachable, drained ones not
    counted), then what sets each differing node apart from the majority."""
    counts = [
        f"{cluster['conforming']} of {cluster['nodes']} nodes conform to {env_id}",
        f"{len(cluster['unreachable'])} unreachable ({len(cluster['dead'])} dead)",
    ]
    if cluster.get("disagreements"):
        counts.append("no majority: the nodes disagree")
    else:
        counts.append(f"{len(cluster['differ_from_majority'])} differ from the majority")
    if cluster["drained"]:
        counts.append(f"{len(cluster['drained'])} drained, not counted")
    lines = ["; ".join(counts)]
    for node_id, differences in sorted(cluster["differences"].items()):
        lines.append(f"  {clip(node_id, 13)}: " + "; ".join(differences))
    for label, said in cluster.get("disagreements", {}).items():
        lines.append(f"  {label}: " + ", ".join(f"{v} ({clip(n, 13)})" for n, v in sorted(said.items())))
    for domain in cluster.get("domains", []):
        state = "; ".join(domain["problems"]) or "complete, agreeing"
        lines.append(f"{domain['kind']} {domain['name']}: {len(domain['nodes'])} node(s); {state}")
    return "\n".join(lines) + "\n"


def _check_ray(args: argparse.Namespace, matrix: Matrix, env_id: str, out: TextIO) -> int:
    from accelenv.cluster.ray import check_cluster, summary
    from accelenv.fileio import read_text, write_atomic
    from accelenv.redact import redact_json

    matrix_text = read_text(find_matrix(args.matrix), what="matrix")
    family = matrix.envs[env_id].family
    address = None if args.ray == "auto" else args.ray
    results = check_cluster(matrix_text, env_id, family, address=address, timeout=args.ray_timeout)
    cluster = summary(results)
    if args.jsonl:
        lines = (json.dumps(redact_json(r.as_json()), sort_keys=True) + "\n" for r in results)
        write_atomic(Path(args.jsonl), "".join(lines))
    if args.format == "html":
        from accelenv.cluster.view import render_page

        out.write(render_page(env_id, cluster, [r.as_json() for r in results]))
    elif args.json or args.format == "json":
        dump_json({"env": env_id, "cluster": cluster, "nodes": [r.as_json() for r in results]}, out)
    else:
        rows = ray_rows(results)
        table(rows, ["NODE", "ADDRESS", "VERDICT", "DEVICES", "RAY", "DRIVER", "FAILING"], out)
        out.write(cluster_lines(cluster, env_id))
    return 0 if cluster["conforming"] == cluster["nodes"] else 1


def ray_rows(results: list[NodeResult]) -> list[list[str]]:
    """`check --ray`'s table rows, one per node; a cell cut to fit says so (`…`) and keeps whole words."""
    return [
        [
            clip(r.node_id, 13),
            r.address,
            r.verdict,
            str(r.devices),
            f"{r.ray_count:g}" if r.ray_count is not None else "-",
            r.driver or "-",
            clip(", ".join(r.failing + r.problems), 100) or "-",
        ]
        for r in results
    ]


# ---------------------------------------------------------------------------------------------------- which


def which_arguments(p: argparse.ArgumentParser) -> None:
    host_options(p, snapshot=True)
    p.add_argument("--all", action="store_true", help="also list environments the host cannot run, with the reason")
    p.add_argument("--json", action="store_true", help="print the ranking as JSON")


def which(args: argparse.Namespace, out: TextIO) -> int:
    from accelenv.check.rank import rank_environments

    matrix = matrix_of(args)
    report = host_report(args, matrix)
    own = own_pythons(args, matrix, list(matrix.envs.values()))
    ranked = rank_environments(matrix, report, own, host=host_words(args, report))
    if args.json:
        dump_json(ranked, out)
        return 0
    out.write(
        f"judged: {host_words(args, report)} and each environment's own interpreter (its session's virtualenv, "
        "or inside its image the image's), never the Python running this command; PYTHON says which\n"
    )
    if not any(r["runnable"] for r in ranked):
        out.write("no environment of the matrix can run on this host\n")
    rows = [
        [r["id"] + (" *" if r["default"] else ""), r["family"], r["verdict"], _python_cell(r["judged"]), r["reason"]]
        for r in ranked
        if r["runnable"] or args.all
    ]
    table(rows, ["ENVIRONMENT", "FAMILY", "VERDICT", "PYTHON", "WHY"], out)
    return 0


def _python_cell(judged: dict[str, str]) -> str:
    """The PYTHON column of `which`: the interpreter kind judged (its folder for a virtualenv), or `not judged`."""
    if judged["python_kind"] == "virtualenv":
        return "venv " + judged["python"].removeprefix("the virtualenv ").split(" (", 1)[0]
    return judged["python_kind"]


COMMANDS = {
    "inspect": Command(
        epilog="examples:\n  accelenv inspect\n  accelenv inspect --json | jq '.accelerators[].devices'\n"
        "  accelenv inspect --root ./captured-node   # a captured host stands in for a real one",
        arguments=inspect_arguments,
        run=inspect,
    ),
    "check": Command(
        epilog="examples:\n  accelenv check gpu-nvidia-cu132\n  accelenv check gpu-nvidia --json\n"
        "  accelenv check gpu-nvidia-cu132 --snapshot ci-node.json   # replay a CI node's verdict\n\n"
        "exit status: 0 nothing failed (warnings allowed), 1 a check failed, 2 usage error",
        arguments=check_arguments,
        run=check,
    ),
    "snapshot": Command(
        epilog="examples:\n  accelenv snapshot -o node7.json\n  accelenv check gpu-amd --snapshot node7.json",
        arguments=snapshot_arguments,
        run=snapshot,
    ),
    "which": Command(
        epilog="examples:\n  accelenv which\n  accelenv which --all --json",
        arguments=which_arguments,
        run=which,
    ),
}
