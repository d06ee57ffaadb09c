"""Image builds with the real engine: a no-op rebuild of every env, a one-env pin change, and shared bytes.

Two test environments on one local base image (made by .ci/run with debootstrap; override with
ACCELENV_CI_BASE_IMAGE) are locked and built. Then:
  1. every env is built again: nothing may be built; the time is compared with one engine call per image
     (docker image inspect), the least any tool could do;
  2. one env's pin changes: exactly that env is rebuilt, reusing the layers it shares with the other;
  3. image sizes, and the bytes the two images share (common layers);
  4. bytes rebuilt when one small pin changes in an env that also holds a framework-sized wheel (numpy): the
     layers of the new image that the old one lacks. Before: the old layout kept the whole venv (every wheel and
     accelenv) in one layer, so any pin change rebuilt all of it; that figure is reconstructed as the sum of the
     three venv layers of the same image. After: the framework layer is kept, only the rest and accelenv's layer
     are new.

    python benchmarks/build_noop.py
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path

from accelenv.build.engine import connect
from accelenv.cli import main as accelenv

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "support"))
from localmatrix import local_matrix  # noqa: E402 - the builder the image tests use, from tests/support

REPOSITORY = "accelenv-bench"


def run(matrix: Path, *args: str) -> tuple[int, str, float]:
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        code = accelenv(["--matrix", str(matrix), *args], out=out)
    return code, out.getvalue(), time.perf_counter() - start


def built(output: str) -> list[str]:
    return [r["env"] for r in json.loads(output)["results"] if r["status"] == "built"]


def main() -> int:
    envs = {"bench-a": ["six==1.17.0"], "bench-b": ["six==1.17.0", "iniconfig==2.3.0"]}
    with tempfile.TemporaryDirectory() as folder, connect() as engine:
        matrix = Path(folder) / "matrix.toml"
        local_matrix(matrix, envs, runtime="bench-bookworm")
        assert run(matrix, "lock", *envs)[0] == 0
        code, output, first_s = run(matrix, "build", *envs, "--repository", REPOSITORY, "--json")
        assert code == 0, output
        print(f"first build of {len(envs)} envs: {first_s:.1f}s, built {built(output)}")

        code, output, noop_s = run(matrix, "build", *envs, "--repository", REPOSITORY, "--json")
        tags = [r["human_tag"] for r in json.loads(output)["results"]]
        start = time.perf_counter()
        for tag in tags:
            engine.image(tag)
        inspect_s = time.perf_counter() - start
        print(
            f"no-op rebuild: {len(built(output))} built in {noop_s * 1000:.0f} ms; "
            f"{len(tags)} image inspects alone take {inspect_s * 1000:.0f} ms; ratio {noop_s / inspect_s:.1f}x"
        )

        envs["bench-b"] = ["six==1.16.0", "iniconfig==2.3.0"]
        local_matrix(matrix, envs, runtime="bench-bookworm")
        assert run(matrix, "lock", "bench-b")[0] == 0
        code, output, change_s = run(matrix, "build", *envs, "--repository", REPOSITORY, "--json")
        print(f"one env's pin changed: rebuilt {built(output)} in {change_s:.1f}s ({change_s / first_s:.2f}x first)")

        infos = [engine.image(tag) for tag in tags]
        assert all(infos)
        a, b = infos[0], infos[1]
        assert a is not None
        assert b is not None
        shared = [layer for layer in a.layers if layer in set(b.layers)]
        history = engine._client.history(a.id)  # newest first; entries with size map onto RootFS layers
        sizes = [h["Size"] for h in reversed(history) if h.get("Size")]
        shared_bytes = sum(sizes[: len(shared)]) if len(sizes) >= len(shared) else None
        print(
            f"sizes: {a.size / 2**20:.0f} MiB and {b.size / 2**20:.0f} MiB; {len(shared)} of {len(a.layers)} layers "
            f"shared" + (f" ({shared_bytes / 2**20:.0f} MiB)" if shared_bytes is not None else "")
        )
        rebuilt_bytes(matrix, engine)
        for tag in engine.tags(REPOSITORY):
            engine.remove(tag)
    return 0


def layer_sizes(engine: object, image_id: str) -> dict[str, int]:
    """diff_id -> bytes, from the image's history (entries with a size map onto RootFS layers in order)."""
    from accelenv.build.engine import DockerEngine

    assert isinstance(engine, DockerEngine)
    info = engine.image(image_id)
    assert info is not None
    history = engine._client.history(image_id)  # newest first
    sizes = [h["Size"] for h in reversed(history) if h.get("Size") or "COPY" in str(h.get("CreatedBy"))]
    sizes = sizes[-len(info.layers) :]
    return dict(zip(info.layers, [0] * (len(info.layers) - len(sizes)) + sizes, strict=True))


def rebuilt_bytes(matrix: Path, engine: object) -> None:
    envs = {"bench-c": ["numpy==2.2.6", "six==1.17.0"]}
    local_matrix(matrix, envs, runtime="bench-bookworm")
    assert run(matrix, "lock", *envs)[0] == 0
    code, output, _ = run(matrix, "build", *envs, "--repository", REPOSITORY, "--json")
    assert code == 0, output
    before_id = json.loads(output)["results"][0]["image_id"]
    envs["bench-c"] = ["numpy==2.2.6", "six==1.16.0"]
    local_matrix(matrix, envs, runtime="bench-bookworm")
    assert run(matrix, "lock", *envs)[0] == 0
    code, output, seconds = run(matrix, "build", *envs, "--repository", REPOSITORY, "--json")
    assert code == 0, output
    after_id = json.loads(output)["results"][0]["image_id"]
    old, new = layer_sizes(engine, before_id), layer_sizes(engine, after_id)
    rebuilt = sum(size for layer, size in new.items() if layer not in old)
    venv = sum(list(new.values())[-3:])  # large, rest, accelenv: what the one-venv-layer layout rebuilt
    print(
        f"one small pin changed (six 1.17.0 -> 1.16.0 beside numpy): {rebuilt / 2**20:.1f} MiB rebuilt in "
        f"{seconds:.1f}s; the old one-venv-layer layout rebuilt {venv / 2**20:.1f} MiB; "
        f"ratio {rebuilt / venv:.3f} ({venv / max(rebuilt, 1):.1f}x fewer bytes)"
    )


if __name__ == "__main__":
    sys.exit(main())
