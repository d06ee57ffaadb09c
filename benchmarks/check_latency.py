"""`accelenv check cpu` against `python -m torch.utils.collect_env`, the tool users run today, on this machine.

Both run as fresh processes, as a user would run them, several times; the medians and their ratio are reported.
collect_env imports torch and shells out to nvidia-smi, pip and others; accelenv reads distribution metadata and
runs only the tools of the environment's family (none for cpu).

    python benchmarks/check_latency.py [--repeat 5] [--torch-python /path/to/python-with-torch]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], repeat: int) -> tuple[float, int]:
    times = []
    code = 0
    for _ in range(repeat):
        start = time.perf_counter()
        code = subprocess.run(argv, capture_output=True, check=False, cwd=REPO).returncode
        times.append(time.perf_counter() - start)
    return statistics.median(times), code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--torch-python", default=sys.executable, help="a Python with torch installed")
    parser.add_argument("--env", default="cpu", help="environment to check (default: cpu)")
    args = parser.parse_args()

    check_s, check_code = timed([sys.executable, "-m", "accelenv", "check", args.env, "--json"], args.repeat)
    print(f"accelenv check {args.env}:          {check_s * 1000:7.0f} ms (median of {args.repeat}, exit {check_code})")
    has_torch = subprocess.run([args.torch_python, "-c", "import torch"], capture_output=True, check=False).returncode
    if has_torch != 0:
        print(
            f"torch is not importable from {args.torch_python}: install it (pip install torch) or pass --torch-python"
        )
        return 0
    collect_s, collect_code = timed([args.torch_python, "-m", "torch.utils.collect_env"], args.repeat)
    print(
        f"python -m torch.utils.collect_env: {collect_s * 1000:7.0f} ms (median of {args.repeat}, exit {collect_code})"
    )
    print(
        f"ratio accelenv / collect_env: {check_s / collect_s:.3f} (target < 0.1); accelenv under 0.5 s: {check_s < 0.5}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
