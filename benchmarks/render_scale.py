"""`accelenv render` on the shipped matrix and on a generated 1,000-environment matrix: a first render into an
empty folder, then a second, no-op render (which must write nothing), with times and files written.

    python benchmarks/render_scale.py [--envs 1000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from validate_scale import generate  # the same 1,000-env matrix as the validation benchmark

from accelenv.matrix import validate_text
from accelenv.plan.render import apply, generated_files, render_plan

REPO = Path(__file__).resolve().parents[1]


def run(text: str) -> dict[str, float]:
    validation = validate_text(text)
    assert validation.matrix is not None
    matrix = validation.matrix
    with tempfile.TemporaryDirectory() as folder:
        repo = Path(folder)
        start = time.perf_counter()
        first = apply(repo, render_plan(matrix, generated_files(repo)), check=False)
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        second = apply(repo, render_plan(matrix, generated_files(repo)), check=False)
        second_s = time.perf_counter() - start
    return {
        "envs": len(matrix.envs),
        "first_s": first_s,
        "first_written": len(first.written),
        "second_s": second_s,
        "second_written": len(second.written) + len(second.removed),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", type=int, default=1000)
    args = parser.parse_args()
    rows = {
        "shipped": run((REPO / "matrix.toml").read_text(encoding="utf-8")),
        f"{args.envs}-env": run(generate(args.envs)),
    }
    print(f"{'matrix':<10} {'envs':>5} {'first render':>13} {'files':>6} {'no-op render':>13} {'written':>8}  ratio")
    for label, r in rows.items():
        print(
            f"{label:<10} {r['envs']:>5} {r['first_s'] * 1000:>11.0f}ms {r['first_written']:>6.0f} "
            f"{r['second_s'] * 1000:>11.0f}ms {r['second_written']:>8.0f}  "
            f"no-op/first {r['second_s'] / r['first_s']:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
