"""How the CPU conformance suite's Ray cluster starts on this host, and how often it fails to: the set-up the suite
used before (a two-node cluster with Ray's defaults started and ended by every test) against the one it uses now
(tests/support/conformancekit.py: only the processes the suite needs, started once, a job per test).

    python benchmarks/cluster_startup.py [--runs N] [--tests 3] [--burn K]

Each run is one fresh Python process per variant, variants alternating so both see the same load: it does what
`--tests` conformance tests do with Ray (start or reuse the cluster, connect, run tasks on both nodes, disconnect)
and reports the time, the processes each start spawns, the CPU seconds they had used when the cluster ended, how
long the ended cluster's processes took to go, and any failure with the stage it happened in. `--burn K` adds K
busy processes of its own (ended by pid) to load the host further. Run it under the load the suite flaked under.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SUPPORT = Path(__file__).resolve().parents[1] / "tests" / "support"
VARIANTS = ("per-test", "shared")


def descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found: list[int] = []
    todo = [root]
    while todo:
        here = todo.pop()
        children = [pid for pid, parent in parents.items() if parent == here]
        found += children
        todo += children
    return found


def cpu_seconds(pids: list[int]) -> float:
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def gone_after(pids: list[int], limit: float = 20.0) -> float:
    """Seconds until none of `pids` is alive (a zombie counts as gone), at most `limit`."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive:
            break
        time.sleep(0.1)
    return round(time.monotonic() - start, 2)


def trial(variant: str, tests: int) -> dict[str, Any]:
    """What `tests` conformance tests do with Ray, in this process; never raises."""
    sys.path.insert(0, str(SUPPORT))
    import conformancekit  # before ray: it sets the loopback variables Ray reads on import
    import ray

    record: dict[str, Any] = {"variant": variant, "starts": [], "error": None}
    begin = time.monotonic()
    local: Any = None
    try:
        for _ in range(tests):
            if variant == "shared":
                with conformancekit.ray_cluster("cpu", 0) as cluster:
                    _work(ray)
                    if "head node (GCS, raylet)" in cluster.startup:
                        record["starts"].append(_start_figures(cluster.startup))
            else:
                local, timings = _per_test_cluster(ray)
                record["starts"].append(_start_figures(timings))
                _work(ray)
                ray.shutdown()
                record["starts"][-1]["cpu_s"] = round(cpu_seconds(descendants(os.getpid())), 1)
                _end(local, record)
                local = None
        if variant == "shared":
            record["starts"][-1]["cpu_s"] = round(cpu_seconds(descendants(os.getpid())), 1)
            _end(conformancekit.SHARED.pop(), record)
    except BaseException as error:  # pytest.fail raises an exception outside Exception
        if isinstance(error, KeyboardInterrupt):
            raise
        record["error"] = f"{type(error).__name__}: {str(error).strip()[:400]}"
        ray.shutdown()
        if local is not None:
            local.stop() if hasattr(local, "stop") else local.shutdown()
        conformancekit.stop_shared_cluster()
    # the wait for the ended processes to go is reported apart, not as Ray time
    waited = sum(s.get("lingering_s", 0) for s in record["starts"])
    record["seconds"] = round(time.monotonic() - begin - waited, 1)
    return record


def _work(ray: Any) -> None:
    square = ray.remote(num_cpus=1)(lambda x: x * x)
    assert ray.get([square.options(scheduling_strategy="SPREAD").remote(i) for i in range(8)]) == [
        i * i for i in range(8)
    ]


def _start_figures(timings: dict[str, float]) -> dict[str, Any]:
    return {"stages": dict(timings), "processes": len(descendants(os.getpid()))}


def _per_test_cluster(ray: Any) -> tuple[Any, dict[str, float]]:
    """The set-up every conformance test ran before: a two-node cluster with Ray's defaults, in folders of its own."""
    from conformancekit import LOOPBACK_ENV, stage
    from ray.cluster_utils import Cluster as RayCluster

    home = tempfile.mkdtemp(prefix="accelenv-ray-home-")
    temp = tempfile.mkdtemp(prefix="ar-", dir="/tmp")
    Path(temp, "ray").mkdir()
    os.environ.update({**LOOPBACK_ENV, "HOME": home, "RAY_TMPDIR": temp})
    node: dict[str, Any] = {"node_ip_address": "127.0.0.1", "temp_dir": temp}
    timings: dict[str, float] = {}
    local = RayCluster()
    try:
        stage(
            "head node (GCS, raylet)",
            timings,
            lambda: local.add_node(num_cpus=1, include_dashboard=False, **node),
        )
        stage("second node (raylet)", timings, lambda: local.add_node(num_cpus=1, **node))
        stage("nodes registered", timings, local.wait_for_nodes)
        stage(
            "driver connect",
            timings,
            lambda: ray.init(address=local.address, _node_ip_address="127.0.0.1", log_to_driver=False),
        )
    except BaseException:
        local.shutdown()  # type: ignore[no-untyped-call]
        raise
    return local, timings


def _end(local: Any, record: dict[str, Any]) -> None:
    started = descendants(os.getpid())
    begin = time.monotonic()
    local.stop() if hasattr(local, "stop") else local.shutdown()
    record["starts"][-1]["teardown_s"] = round(time.monotonic() - begin, 2)
    record["starts"][-1]["lingering_s"] = gone_after(started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each variant")
    parser.add_argument("--tests", type=int, default=3, help="conformance tests per run (the suite has 3)")
    parser.add_argument("--burn", type=int, default=0, help="busy processes of its own to add load")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one run may take")
    parser.add_argument("--json", type=Path, help="write every run's figures here")
    parser.add_argument("--trial", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trial:
        print(json.dumps(trial(args.trial, args.tests)), flush=True)
        return
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.burn)]
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    try:
        for run in range(args.runs):
            for variant in VARIANTS if run % 2 == 0 else VARIANTS[::-1]:
                results[variant].append(_run_trial(variant, args))
                last = results[variant][-1]
                print(
                    f"run {run + 1} {variant}: {last['seconds']} s, load {os.getloadavg()[0]:.1f}, "
                    f"{last['error'] or 'ok'}",
                    flush=True,
                )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    _report(results, args)


def _run_trial(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--trial", variant, "--tests", str(args.tests)]
    environ = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=environ, check=False)
    except subprocess.TimeoutExpired:
        return {"variant": variant, "starts": [], "error": f"no answer in {args.timeout:g} s", "seconds": None}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"variant": variant, "starts": [], "error": done.stderr[-400:], "seconds": None}
    record: dict[str, Any] = json.loads(lines[-1])
    return record


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.1f}" if values else "-"


def _report(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> None:
    print(f"\n{args.runs} run(s) of each, {args.tests} test(s) per run, {args.burn} busy process(es) added")
    print(f"{'variant':<10}{'failed':>8}{'run s':>8}{'max s':>8}{'starts':>8}{'start s':>9}{'procs':>7}{'cpu s':>7}")
    print("(run s: a run's Ray time; starts: clusters started per run; start s, procs: per start; cpu s: per run)")
    summary: dict[str, float] = {}
    for variant, trials in results.items():
        done = [t["seconds"] for t in trials if t["seconds"] is not None and not t["error"]]
        starts = [s for t in trials for s in t["starts"]]
        start_s = [sum(v for k, v in s["stages"].items() if k != "driver connect") for s in starts]
        failed = sum(1 for t in trials if t["error"])
        per_run = statistics.median([len(t["starts"]) for t in trials if not t["error"]] or [0])
        print(
            f"{variant:<10}{failed:>4}/{len(trials):<3}{_median(done):>8}{max(done, default=0):>8.1f}"
            f"{per_run:>8.0f}{_median(start_s):>9}{_median([s['processes'] for s in starts]):>7}"
            f"{_median([sum(s.get('cpu_s', 0) for s in t['starts']) for t in trials if not t['error']]):>7}"
        )
        if done:
            summary[variant] = statistics.median(done)
        for t in trials:
            if t["error"]:
                print(f"  {variant} failure: {t['error']}")
        names = dict.fromkeys(name for s in starts for name in s["stages"])
        stages = {n: [s["stages"][n] for s in starts if n in s["stages"]] for n in names}
        print(
            f"  {variant} per start (median / max s): "
            + "; ".join(f"{n} {_median(v)} / {max(v):.1f}" for n, v in stages.items())
        )
        lingering = [s["lingering_s"] for s in starts if "lingering_s" in s]
        if lingering:
            print(f"  {variant}: ended cluster's processes gone {_median(lingering)} s (median) after shutdown")
    if len(summary) == 2:
        print(f"suite's Ray time, per-test / shared: {summary['per-test'] / summary['shared']:.2f}x")


if __name__ == "__main__":
    main()
