"""`accelenv labels` runs on a node's start-up path (before `ray start`): its cost as a ratio to `accelenv check`.

Paired runs: each round runs `accelenv check ENV` and `accelenv labels --env ENV --format ray` back to back as fresh
processes (the order alternating, so neither always runs on a warmer cache), after one warm-up of each; the
report is the median of the per-round ratios and the median of each command's seconds. Both judge the same
environment, so the ratio is what labelling adds to a check: the label set, the rendering, and the import of the
labels command. Bytecode caching is left on, as on an installed accelenv.

With `--pair metadata` the pair is `accelenv labels` and `accelenv labels --metadata` instead: on a host of no
cloud (no DMI field names one, no override variable set) the second asks nobody, so the ratio is what reading the
platform sources costs there (the issue's bound: within 1.2x).

    python benchmarks/labels_latency.py [--repeat 15] [--env cpu-py311] [--pair check|metadata]
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


def run(args: list[str]) -> float:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO / "tools")
    argv = [sys.executable, "-c", "import sys; from accelenv.cli import main; sys.exit(main())", *args]
    start = time.perf_counter()
    code = subprocess.run(argv, capture_output=True, check=False, cwd=REPO, env=env).returncode
    seconds = time.perf_counter() - start
    if code not in (0, 1):
        raise SystemExit(f"accelenv {' '.join(args)} exited {code}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--env", default="cpu-py311", help="environment to check and label (default: %(default)s)")
    parser.add_argument("--pair", choices=("check", "metadata"), default="check", help="default: %(default)s")
    args = parser.parse_args()
    check = ["check", args.env]
    labels = ["labels", "--env", args.env, "--format", "ray"]
    if args.pair == "metadata":
        check, labels = labels, [*labels, "--metadata"]
    run(check), run(labels)  # warm-up: bytecode written, files cached
    checks, labellings, ratios = [], [], []
    for i in range(args.repeat):
        if i % 2:
            lab, chk = run(labels), run(check)
        else:
            chk, lab = run(check), run(labels)
        checks.append(chk)
        labellings.append(lab)
        ratios.append(lab / chk)
    first, second = " ".join(check), " ".join(labels)
    print(f"accelenv {first}: {statistics.median(checks) * 1000:7.1f} ms (median of {args.repeat})")
    print(f"accelenv {second}: {statistics.median(labellings) * 1000:7.1f} ms")
    print(f"ratio second / first (median of paired runs): {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
