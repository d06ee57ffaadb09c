"""A matrix with cpu environments on a local base image: what image tests and benchmarks build.

No registry can be reached from the machines that run them, so the base image is one made locally (.ci/run
debootstraps `accelenv-ci/debian:bookworm-minbase`; ACCELENV_CI_BASE_IMAGE names another). The shipped matrix is
the starting point, so the environments are built with the project's real families, OS bases and rules.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import tomlkit

REPO = Path(__file__).resolve().parents[2]
BASE_IMAGE = os.environ.get("ACCELENV_CI_BASE_IMAGE", "accelenv-ci/debian:bookworm-minbase")
# the same base for linux/arm64, under the name accelenv looks for a foreign platform's base (.ci/run makes it with
# debootstrap --arch arm64 and `python -m accelenv.build.platforms`)
ARM64_BASE_IMAGE = f"accelenv-platform/{BASE_IMAGE}-arm64"


def unavailable(reason: str) -> None:
    """Skip a test that needs the engine, the base image or the local registry; under CI=true, fail it: CI must
    run them all (.ci/run installs docker.io, makes the base image and starts the registry)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI needs it: .ci/run sets it up)")
    pytest.skip(reason)


def local_matrix(
    path: Path,
    envs: dict[str, list[str]],
    *,
    runtime: str = "local-bookworm",
    base: str = BASE_IMAGE,
    platforms: tuple[str, ...] = ("linux/amd64",),
) -> Path:
    """Write the shipped matrix plus runtime `runtime` (a cpu runtime on `base`) and one cpu environment per
    entry of `envs` (id -> pinned packages) for `platforms` to `path`; returns `path`."""
    repository, _, tag = base.rpartition(":")
    doc = tomlkit.parse((REPO / "matrix.toml").read_text(encoding="utf-8"))
    table = tomlkit.table()
    table.update(
        {
            "family": "cpu",
            "name": f"Debian 12 minbase, local ({runtime})",
            "wheel_tag": "cpu",
            "architectures": ["x86_64", "aarch64"],
            "base_images": {"debian12": {"repository": repository, "tag": tag}},
        }
    )
    doc["runtimes"][runtime] = table
    for env_id, packages in envs.items():
        env = tomlkit.table()
        env.update(
            {
                "family": "cpu",
                "runtime": runtime,
                "description": f"local image {env_id}",
                "os": "debian12",
                "python": "3.11",
                "platforms": list(platforms),
                "skus": ["cpu-x86-64"],
                "requirements": {"packages": packages},
                "tests": ["tests/devices/test_cpu_devices.py"],
                "ci_tier": "pr",
            }
        )
        doc["envs"][env_id] = env
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path
