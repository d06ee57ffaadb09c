"""Start-up's two bounds in one run: `accelenv check ENV` against a bare `python -c pass` (within 6x), and
`accelenv labels --env ENV --format ray` against that `check` (within 1.2x).

Each round runs the three as fresh processes, back to back, in an order that rotates from round to round (so
none always runs first, on a colder cache, or last); a round gives one ratio of each kind, and the report is the
median of those ratios beside the median seconds of each command. On a shared machine a burst of load slows the
runs of one round alike, so the ratios hold where medians measured apart would drift with the load. One warm-up
round comes first (bytecode written, the matrix cache filled); bytecode caching is left on, as on an installed
accelenv. The commands run as the installed `accelenv` script runs them (not `python -m`, whose runpy cost is
not accelenv's).

    python benchmarks/startup_bounds.py [--rounds 31] [--env cpu-py311]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from check_latency import BARE, ENTRY, child_env, seconds  # beside this file: how check_latency.py runs a command

REPO = Path(__file__).resolve().parents[1]
CHECK_BOUND = 6.0  # check / python -c pass
LABELS_BOUND = 1.2  # labels / check


def timed(argv: list[str], env: dict[str, str]) -> float:
    took, code = seconds(argv, cwd=REPO, env=env)
    if code not in (0, 1):  # 1: a verdict of fail on this host, still a full run
        raise SystemExit(f"{' '.join(argv)} exited {code}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=31, help="rounds of the three commands (default %(default)s)")
    parser.add_argument("--env", default="cpu-py311", help="environment to check and label (default %(default)s)")
    args = parser.parse_args()
    env = child_env(REPO / "tools")
    commands = {
        "python -c pass": BARE,
        f"accelenv check {args.env}": [sys.executable, "-c", ENTRY, "check", args.env],
        f"accelenv labels --env {args.env} --format ray": [
            *[sys.executable, "-c", ENTRY],
            *["labels", "--env", args.env, "--format", "ray"],
        ],
    }
    names = list(commands)
    for name in names:
        timed(commands[name], env)
    took: dict[str, list[float]] = {name: [] for name in names}
    for i in range(args.rounds):
        for name in names[i % 3 :] + names[: i % 3]:
            took[name].append(timed(commands[name], env))
    bare, check, labels = (took[name] for name in names)
    check_ratio = statistics.median(c / b for c, b in zip(check, bare, strict=True))
    labels_ratio = statistics.median(lab / c for lab, c in zip(labels, check, strict=True))
    print(f"{args.rounds} rounds, the order rotating; medians")
    for name in names:
        print(f"  {name:<45} {statistics.median(took[name]) * 1000:7.1f} ms")
    print(f"check / python -c pass: {check_ratio:5.2f}x (bound {CHECK_BOUND}x)")
    print(f"labels / check:         {labels_ratio:5.2f}x (bound {LABELS_BOUND}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
