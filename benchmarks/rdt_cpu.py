"""Ray Direct Transport over GLOO on the CPU beside the object store, and what the RDT conformance test adds to
the CPU suite's time: tests/devices/test_conformance_rdt.py run as CI runs it (a virtualenv of the cpu lock, torch
for the CPU and this checkout; two loopback Ray nodes), timed end to end, then its record's transfer figures as
ratios to the object store moving the same tensor between the same two actors.

    python benchmarks/rdt_cpu.py [--venv DIR] [--runs N]

The run fails, as it must on Ray 2.60.0, with the tests that Ray's known defects fail; any other failure stops
the benchmark.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))

from cpusuite import RDT, build_venv, run_suite, torch_wheel

from accelenv.matrix import find_matrix, load_matrix
from accelenv.results.record import read_records
from accelenv.results.transports import Recipe, recipes


def _run(python: Path, folder: Path) -> tuple[float, Recipe]:
    start = time.perf_counter()
    done = run_suite(python, folder, RDT)
    seconds = time.perf_counter() - start
    records, refused = read_records([folder], load_matrix(find_matrix(None)))
    found = recipes(records)
    if refused or len(found) != 1 or found[0].failed:
        reasons = [f"{t['id']}: {t['reason']}" for r in records for t in r.data["tests"] if t["outcome"] != "passed"]
        shown = "\n".join(reasons) or done.stdout[-3000:]
        sys.exit(f"the RDT suite failed otherwise than by Ray's known defects:\n{shown}")
    return seconds, found[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, help="an existing venv with the cpu lock, torch for the CPU and accelenv")
    parser.add_argument("--runs", type=int, default=1, help="runs (median time reported; figures of the last run)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="accelenv-bench-") as tmp:
        folder = Path(tmp)
        if args.venv:
            python = args.venv / "bin" / "python"
        else:
            wheel = torch_wheel()
            if wheel is None:
                sys.exit("no torch CPU wheel for this Python (set ACCELENV_CPU_TORCH_WHEEL)")
            start = time.perf_counter()
            python = build_venv(folder / "venv", wheel)
            print(f"venv (cpu lock + torch CPU + accelenv): {time.perf_counter() - start:.1f} s, once per session")
        runs = [_run(python, folder / f"run-{i}") for i in range(args.runs)]
    print(f"RDT conformance test, end to end: {statistics.median(s for s, _ in runs):.1f} s")
    recipe = runs[-1][1]
    for t in recipe.transfers:
        store = f"{t.object_store_gb_s:.3f}" if t.object_store_gb_s else "-"
        ratio = f"{t.vs_object_store:.2f}x" if t.vs_object_store else "-"
        print(
            f"{t.transport} {t.scope:7} {t.size_bytes >> 20:4d} MiB: {t.gb_s:.3f} GB/s, "
            f"object store {store} GB/s: {ratio}"
        )
    for d in recipe.defects:
        print(f"known upstream defect {d.reference}: {d.test}")


if __name__ == "__main__":
    main()
