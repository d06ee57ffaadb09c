"""Start-up of `accelenv check` and `accelenv inspect`, as ratios to a bare `python -c pass` (and, when torch is
installed, to `python -m torch.utils.collect_env`, the tool users run today).

The commands are timed in pairs: the command, then the bare interpreter, then the command again, and so on. Each
pair gives one ratio, and the median of those ratios is reported. On a shared machine a burst of load slows both
runs of a pair alike, so the ratio holds where a median of each command measured apart would drift with the load.

Each command runs as a fresh process, as a user runs it, after one warm-up run that also fills the matrix cache.
Bytecode caching is left on (PYTHONDONTWRITEBYTECODE is removed from the children's environment), as on an
installed accelenv: a run that must compile every module measures the compiler, not accelenv.

    python benchmarks/check_latency.py [--pairs 21] [--env cpu-py311] [--torch-python /path/to/python-with-torch]
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
MIN_PAIRS = 21
# what the installed `accelenv` script runs (python -m would add runpy's cost to the command, not to the bare run)
ENTRY = "import sys; from accelenv.cli import main; sys.exit(main())"
BARE = [sys.executable, "-c", "pass"]


def child_env(pythonpath: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return env


def seconds(argv: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall-clock seconds of one run of `argv`, and its exit status."""
    start = time.perf_counter()
    code = subprocess.run(argv, capture_output=True, check=False, cwd=cwd, env=env).returncode
    return time.perf_counter() - start, code


def paired(argv: list[str], pairs: int, *, cwd: Path, env: dict[str, str]) -> tuple[list[float], list[float], int]:
    """`argv` and the bare interpreter, alternately, `pairs` times after one warm-up run of each: the seconds of
    each run of `argv`, of each bare run, and `argv`'s exit status."""
    _, code = seconds(argv, cwd=cwd, env=env)
    seconds(BARE, cwd=cwd, env=env)
    command, bare = [], []
    for _ in range(pairs):
        took, code = seconds(argv, cwd=cwd, env=env)
        command.append(took)
        bare.append(seconds(BARE, cwd=cwd, env=env)[0])
    return command, bare, code


def ratio(command: list[float], bare: list[float]) -> float:
    """The median of the per-pair ratios."""
    return statistics.median(c / b for c, b in zip(command, bare, strict=True))


def measure(checkout: Path, env_id: str, pairs: int) -> dict[str, tuple[float, float, float]]:
    """Per command (check, inspect) with `checkout`'s accelenv first on the path: (median per-pair ratio to
    `python -c pass`, median milliseconds of the command, median milliseconds of the bare runs)."""
    env = child_env(checkout / "tools")
    out = {}
    for name, args in (("check", ["check", env_id]), ("inspect", ["inspect"])):
        command, bare, code = paired([sys.executable, "-c", ENTRY, *args], pairs, cwd=checkout, env=env)
        if code not in (0, 1):
            raise SystemExit(f"accelenv {' '.join(args)} in {checkout} exited {code}")
        out[name] = (ratio(command, bare), statistics.median(command) * 1000, statistics.median(bare) * 1000)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=MIN_PAIRS, help="pairs per command (at least %(default)s)")
    parser.add_argument("--env", default="cpu-py311", help="environment to check (default: %(default)s)")
    parser.add_argument("--torch-python", default=sys.executable, help="a Python with torch installed")
    parser.add_argument("--compare", type=Path, metavar="CHECKOUT", help="also measure another checkout")
    args = parser.parse_args()
    if args.pairs < MIN_PAIRS:
        parser.error(f"--pairs: at least {MIN_PAIRS}, so that the median stands on enough pairs")

    print(f"{args.pairs} pairs per command (the command, then python -c pass); median of the per-pair ratios")
    checkouts = [("this checkout", REPO)] + ([("compared checkout", args.compare.resolve())] if args.compare else [])
    for label, checkout in checkouts:
        for name, (times, command_ms, bare_ms) in measure(checkout, args.env, args.pairs).items():
            print(
                f"{label}: accelenv {name:<7} {times:5.2f}x python -c pass "
                f"(medians: {command_ms:6.1f} ms against {bare_ms:5.1f} ms)"
            )
    has_torch = subprocess.run([args.torch_python, "-c", "import torch"], capture_output=True, check=False).returncode
    if has_torch != 0:
        print(f"torch is not importable from {args.torch_python}: no collect_env comparison (pass --torch-python)")
        return 0
    env = child_env(REPO / "tools")
    check = [sys.executable, "-c", ENTRY, "check", args.env]
    collect = [args.torch_python, "-m", "torch.utils.collect_env"]
    check_s, collect_s = [], []
    for _ in range(args.pairs):
        check_s.append(seconds(check, cwd=REPO, env=env)[0])
        collect_s.append(seconds(collect, cwd=REPO, env=env)[0])
    print(f"python -m torch.utils.collect_env: {statistics.median(collect_s) * 1000:7.1f} ms")
    print(f"accelenv check / collect_env: {ratio(check_s, collect_s):.3f} (median of the per-pair ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
