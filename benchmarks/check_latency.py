"""Start-up of `accelenv check` and `accelenv inspect`, as ratios to a bare `python -c pass` and to
`python -m torch.utils.collect_env` (the tool users run today, when torch is installed).

Each command runs as a fresh process, as a user runs it, several times after one warm-up run; medians are
reported. Bytecode caching is left on (PYTHONDONTWRITEBYTECODE is removed from the children's environment), as
on an installed accelenv: a run that must compile every module measures the compiler, not accelenv.

    python benchmarks/check_latency.py [--repeat 15] [--env cpu-py311] [--torch-python /path/to/python-with-torch]
    python benchmarks/check_latency.py --compare OTHER_CHECKOUT   # the same, for another checkout (before/after)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(argv: list[str], repeat: int, *, cwd: Path, pythonpath: Path | None = None) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    code = subprocess.run(argv, capture_output=True, check=False, cwd=cwd, env=env).returncode  # warm-up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        code = subprocess.run(argv, capture_output=True, check=False, cwd=cwd, env=env).returncode
        times.append(time.perf_counter() - start)
    return statistics.median(times), code


def measure(checkout: Path, env_id: str, repeat: int) -> dict[str, float]:
    """Median seconds of check and inspect, with `checkout`'s accelenv first on the path."""
    tools = checkout / "tools"
    out = {}
    for name, args in (("check", ["check", env_id]), ("inspect", ["inspect"])):
        # what the installed `accelenv` script runs (python -m would add runpy's cost to both sides)
        argv = [sys.executable, "-c", "import sys; from accelenv.cli import main; sys.exit(main())", *args]
        seconds, code = timed(argv, repeat, cwd=checkout, pythonpath=tools)
        if code not in (0, 1):
            raise SystemExit(f"accelenv {' '.join(args)} in {checkout} exited {code}")
        out[name] = seconds
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--env", default="cpu-py311", help="environment to check (default: %(default)s)")
    parser.add_argument("--torch-python", default=sys.executable, help="a Python with torch installed")
    parser.add_argument("--compare", type=Path, metavar="CHECKOUT", help="also measure another checkout")
    args = parser.parse_args()

    bare, _ = timed([sys.executable, "-c", "pass"], args.repeat, cwd=REPO)
    print(f"python -c pass:                    {bare * 1000:7.1f} ms (median of {args.repeat})")
    checkouts = [("this checkout", REPO)] + ([("compared checkout", args.compare.resolve())] if args.compare else [])
    for label, checkout in checkouts:
        times = measure(checkout, args.env, args.repeat)
        for name, seconds in times.items():
            print(
                f"{label}: accelenv {name:<7}     {seconds * 1000:7.1f} ms  ratio to python -c pass "
                f"{seconds / bare:5.1f}x  under 100 ms: {seconds < 0.1}"
            )
    has_torch = subprocess.run([args.torch_python, "-c", "import torch"], capture_output=True, check=False).returncode
    if has_torch != 0:
        print(f"torch is not importable from {args.torch_python}: no collect_env comparison (pass --torch-python)")
        return 0
    collect_s, _ = timed([args.torch_python, "-m", "torch.utils.collect_env"], args.repeat, cwd=REPO)
    check_s = measure(REPO, args.env, args.repeat)["check"]
    print(f"python -m torch.utils.collect_env: {collect_s * 1000:7.1f} ms")
    print(f"ratio accelenv check / collect_env: {check_s / collect_s:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
