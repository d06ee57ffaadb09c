"""An emulated arm64 build against the native amd64 build of the same environment, on this amd64 machine.

One test environment (six and markupsafe, a compiled extension) on the local Debian base (.ci/run makes both the
amd64 base and its arm64 twin with debootstrap) is locked for both platforms, then built with `--no-cache` for
linux/amd64 and for linux/arm64, alternating, ROUNDS times each. It reports the median build time of each and
their ratio: what a contributor without a Grace machine pays to build (and so check) the arm64 image here, and
what CI pays for its arm64 job. The first build of each platform also fills the OS layer caches; `--no-cache` makes
every round rebuild every step.

    python benchmarks/build_platform.py [ROUNDS]
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from accelenv.build.engine import connect
from accelenv.cli import main as accelenv

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from localmatrix import local_matrix  # noqa: E402 - the builder the image tests use, from tests/support

REPOSITORY = "accelenv-bench-platform"
ENV = "bench-multi"


def run(matrix: Path, *args: str) -> tuple[int, str, float]:
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        code = accelenv(["--matrix", str(matrix), *args], out=out)
    return code, out.getvalue(), time.perf_counter() - start


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    times: dict[str, list[float]] = {"linux/amd64": [], "linux/arm64": []}
    with tempfile.TemporaryDirectory() as folder, connect() as engine:
        matrix = Path(folder) / "matrix.toml"
        local_matrix(
            matrix,
            {ENV: ["six==1.17.0", "markupsafe==3.0.2"]},
            runtime="bench-bookworm",
            platforms=("linux/amd64", "linux/arm64"),
        )
        code, output, _ = run(matrix, "lock", ENV, "--platform", "all")
        assert code == 0, output
        try:
            for _ in range(rounds):
                for platform, seconds_of in times.items():
                    args = ("build", ENV, "--platform", platform, "--no-cache", "--repository", REPOSITORY, "--json")
                    code, output, seconds = run(matrix, *args)
                    assert code == 0, output
                    assert json.loads(output)["results"][0]["status"] == "built", output
                    seconds_of.append(seconds)
                    print(f"{platform}: {seconds:.1f}s")
        finally:
            for tag in engine.tags(REPOSITORY):
                engine.remove(tag)
    native, emulated = (statistics.median(times[p]) for p in ("linux/amd64", "linux/arm64"))
    print(f"median of {rounds}: native linux/amd64 {native:.1f}s, emulated linux/arm64 {emulated:.1f}s")
    print(f"emulated / native: {emulated / native:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
