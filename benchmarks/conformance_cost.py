"""What the conformance suite adds to `nox -s cpu`: the cpu device suite with and without it, in a virtualenv
built as CI builds it (the cpu lock, torch for the CPU, this checkout), timed end to end (pytest start to exit).
`--framework jax` times the JAX path instead (the TPU sessions' suite), with the TPU environment's JAX.

    python benchmarks/conformance_cost.py [--framework torch|jax] [--venv DIR] [--runs N]

--venv reuses a virtualenv made before (tests/support/cpusuite.py builds one into a temp folder otherwise, and
that build is timed and reported too: it is a one-off cost of the session, not of each run).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from cpusuite import BASIC, CONFORMANCE, JAX_CONFORMANCE, build_jax_venv, build_venv, run_suite, torch_wheel


def _timed(python: Path, tests: list[str], folder: Path) -> float:
    start = time.perf_counter()
    done = run_suite(python, folder, tests)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"the suite failed ({done.returncode}):\n{done.stdout[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=("torch", "jax"), default="torch", help="which path to time")
    parser.add_argument("--venv", type=Path, help="an existing venv with the cpu lock, the framework and accelenv")
    parser.add_argument("--runs", type=int, default=1, help="runs of each variant (median reported)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="accelenv-bench-") as tmp:
        folder = Path(tmp)
        suite = JAX_CONFORMANCE if args.framework == "jax" else CONFORMANCE
        if args.venv:
            python = args.venv / "bin" / "python"
        elif args.framework == "jax":
            start = time.perf_counter()
            python = build_jax_venv(folder / "venv")
            print(f"venv (cpu lock + jax + accelenv): {time.perf_counter() - start:.1f} s, once per session")
        else:
            wheel = torch_wheel()
            if wheel is None:
                sys.exit("no torch CPU wheel for this Python (set ACCELENV_CPU_TORCH_WHEEL)")
            start = time.perf_counter()
            python = build_venv(folder / "venv", wheel)
            print(f"venv (cpu lock + torch CPU + accelenv): {time.perf_counter() - start:.1f} s, once per session")
        basic = [_timed(python, BASIC, folder / f"basic-{i}") for i in range(args.runs)]
        full = [_timed(python, [*suite, *BASIC], folder / f"full-{i}") for i in range(args.runs)]
    b, f = statistics.median(basic), statistics.median(full)
    print(f"device suite today (test_cpu_devices.py): {b:.1f} s")
    print(f"with the {args.framework} conformance suite:        {f:.1f} s")
    print(f"added: {f - b:.1f} s, {f / b:.2f}x the suite's time")


if __name__ == "__main__":
    main()
