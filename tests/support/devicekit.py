"""Support for the device smoke suite (tests/devices): what the environment and the host say the framework
must see, and the one rule for a missing device."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from accelenv.host.discover import discover
from accelenv.host.root import Root
from accelenv.host.run import ToolRunner
from accelenv.matrix import Environment, Matrix, find_matrix, load_matrix

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Expected:
    """What the environment and the host say the framework must see."""

    matrix: Matrix
    env: Environment
    archs: frozenset[str]  # architectures of the environment's SKUs
    runtime_archs: frozenset[str]
    device_count: int  # devices the checker found and the visible-devices variable leaves visible


def _visible(count: int, variables: tuple[str, ...]) -> int:
    for name in variables:
        value = os.environ.get(name)
        if value is None or value.strip().lower() == "all":
            continue
        return len([part for part in value.split(",") if part.strip()])
    return count


def current_env() -> tuple[Matrix, Environment] | None:
    env_id = os.environ.get("ACCELENV_ENV")
    if not env_id:
        return None
    matrix = load_matrix(find_matrix(None, start=REPO))
    return matrix, matrix.envs[env_id]


def load_expected() -> Expected:
    found = current_env()
    if found is None:
        pytest.skip("ACCELENV_ENV is not set: run the device tests through `nox -s <session>` or inside an image")
    matrix, env = found
    family = matrix.families[env.family]
    report = discover(
        matrix, root=Root.from_option(None), runner=ToolRunner(), environ=os.environ, families=[env.family]
    )
    accelerator = report.accelerator(env.family)
    count = len(accelerator.devices) if accelerator else 0
    return Expected(
        matrix=matrix,
        env=env,
        archs=frozenset(matrix.skus[s].arch for s in env.skus),
        runtime_archs=frozenset(matrix.runtimes[env.runtime].architectures),
        device_count=_visible(count, family.visible_devices_env),
    )


def missing_hardware_allowed() -> bool:
    return os.environ.get("ACCELENV_ALLOW_MISSING_HARDWARE") == "1"


def need_devices(expected: Expected, seen: int) -> None:
    """Fail when the framework sees no device or another number than the host has, unless missing hardware was
    explicitly allowed (and there really is none)."""
    if seen == 0 and expected.device_count == 0 and missing_hardware_allowed():
        pytest.skip("no device on this host (allowed by --skip-missing-hardware)")
    assert seen > 0, f"the framework sees no {expected.env.family} device"
    assert seen == expected.device_count, (
        f"the framework sees {seen} device(s), the host has {expected.device_count} visible"
    )
