"""`accelenv results` and the page over 10,000 result records, against a plain `json.load` of the same files.

Generates N records (default 10,000) spread over the shipped matrix's NVIDIA, AMD and CPU environments and their
SKUs, on 40 runners, over 60 days: each with the three conformance tests and three figures (with spread), one in
twenty failed, one in fifty incomplete, one in fifty not proven (no device). Then times, median of --repeat runs:
  - json.load of every file (what a script that only reads them would do: the floor);
  - `accelenv results DIR --json` (read, validate against the schema and the matrix, judge, compare, maturity),
    and the same as text;
  - `accelenv report --format html --results DIR` (the page with its Evidence section);
and reports each as milliseconds and as a ratio to the floor, and the page's size against the page without records.

    python benchmarks/results_scale.py [--records 10000] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelenv.cli import main as accelenv
from accelenv.matrix import load_matrix
from accelenv.plan.lock import lock_digests
from accelenv.results.record import matrix_peak

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[1]
DAY = 86400


def generate(folder: Path, count: int, *, seed: int = 34) -> None:
    """`count` record files in `folder`, valid for the shipped matrix."""
    matrix = load_matrix(REPO / "matrix.toml")
    locks = lock_digests(REPO, matrix)
    rng = random.Random(seed)  # noqa: S311 - made-up figures for a benchmark, not secrets
    envs = [e for e in matrix.envs.values() if e.family in ("nvidia", "amd", "cpu") and e.skus]
    now = time.time() - 3600
    for n in range(count):
        env = envs[n % len(envs)]
        sku: str | None = env.skus[(n // len(envs)) % len(env.skus)]
        devices = 0 if env.family == "cpu" else rng.choice((1, 8))
        started = now - rng.uniform(0, 60) * DAY
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
        roll = n % 100
        outcome = "failed" if roll < 5 else "incomplete" if roll < 7 else "passed"
        if roll in (7, 8) and env.family != "cpu":
            outcome, sku, devices = "not_proven", None, 0
        tests = [
            {
                "id": f"tests/devices/test_conformance_{k}.py::test_x",
                "outcome": "failed" if outcome == "failed" and k == "perf" else "passed",
                "reason": None,
                "seconds": 1.0,
            }
            for k in ("distributed", "recovery", "perf")
        ]
        if outcome == "not_proven":
            tests = [{"id": "tests/devices/test_x.py::test_d", "outcome": "skipped", "reason": "no device here",
                      "seconds": 0}]  # fmt: skip
        perf = []
        if outcome != "not_proven":
            for name, unit, value in (("matmul", "TFLOP/s", 600.0), ("memory_bandwidth", "GB/s", 3000.0),
                                      ("allreduce_busbw", "GB/s", 300.0)):  # fmt: skip
                peak = matrix_peak(matrix, sku, name)
                perf.append(
                    {
                        "name": name,
                        "value": value * rng.uniform(0.95, 1.05),
                        "unit": unit,
                        "dtype": "bf16",
                        "devices": max(devices, 1) if name == "allreduce_busbw" else 1,
                        "samples": 10,
                        "peak": peak,
                        "fraction": None,
                        "min_fraction": None,
                        "warning": None,
                        "spread": 0.04,
                    }
                )
        data: dict[str, Any] = {
            "format": "accelenv-result/1",
            "id": f"{env.id}-{stamp}-{n:08x}",
            "run_url": f"https://github.com/example/accelenv/actions/runs/{n}",
            "runner": f"runner-{n % 40:02d}",
            "note": None if outcome == "passed" else f"{outcome} for the benchmark",
            "env": {"id": env.id, "lock_sha256": locks[env.id], "image": None, "frameworks": []},
            "host": {
                "family": env.family,
                "sku": sku,
                "device_count": devices,
                "driver": "580.95.05",
                "nodes": 1,
            },
            "check": {"verdict": "fail" if outcome == "failed" else "pass", "failed": []},
            "outcome": outcome,
            "tests": tests,
            "perf": perf,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started + 900)),
        }
        (folder / f"{data['id']}.result.json").write_text(json.dumps(data, indent=2), encoding="utf-8")


def timed(repeat: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        accelenv(["--matrix", str(REPO / "matrix.toml"), *args])
    return out.getvalue()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="accelenv-results-") as tmp:
        folder = Path(tmp)
        generate(folder, args.records)
        files = sorted(folder.glob("*.result.json"))

        def plain() -> object:
            return [json.loads(p.read_text(encoding="utf-8")) for p in files]

        judged = json.loads(run("results", str(folder), "--json"))
        assert len(judged["records"]) == args.records, (len(judged["records"]), judged["refused"][:3])
        assert not judged["refused"], judged["refused"][:3]
        floor = timed(args.repeat, plain)
        results = timed(args.repeat, lambda: run("results", str(folder), "--json"))
        text = timed(args.repeat, lambda: run("results", str(folder)))
        page = run("report", "--format", "html", "--results", str(folder))
        page_time = timed(args.repeat, lambda: run("report", "--format", "html", "--results", str(folder)))
        bare = run("report", "--format", "html")
        figures = {
            "records": args.records,
            "bytes_of_records": sum(p.stat().st_size for p in files),
            "json_load_ms": round(floor * 1000, 1),
            "results_ms": round(results * 1000, 1),
            "results_ratio": round(results / floor, 2),
            "results_text_ms": round(text * 1000, 1),
            "results_text_ratio": round(text / floor, 2),
            "page_ms": round(page_time * 1000, 1),
            "page_ratio": round(page_time / floor, 2),
            "page_bytes": len(page.encode("utf-8")),
            "page_bytes_without_records": len(bare.encode("utf-8")),
            "nodes": len(judged["nodes"]),
        }
    if args.json:
        json.dump(figures, sys.stdout, indent=2)
        print()
    else:
        print(f"{figures['records']} records ({figures['bytes_of_records'] / 2**20:.1f} MiB), {figures['nodes']} nodes")
        print(f"  json.load of every file      {figures['json_load_ms']:>9.1f} ms   1.00x")
        print(f"  accelenv results --json      {figures['results_ms']:>9.1f} ms   {figures['results_ratio']:.2f}x")
        text_ms, text_ratio = figures["results_text_ms"], figures["results_text_ratio"]
        print(f"  accelenv results (text)      {text_ms:>9.1f} ms   {text_ratio:.2f}x")
        print(f"  accelenv report --results    {figures['page_ms']:>9.1f} ms   {figures['page_ratio']:.2f}x")
        print(
            f"  page: {figures['page_bytes'] / 1024:.0f} KiB "
            f"(without records: {figures['page_bytes_without_records'] / 1024:.0f} KiB)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
