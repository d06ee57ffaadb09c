"""Support for the device smoke suite (tests/devices): what the environment and the host say the framework
must see, the two rules for what is missing (a framework fails, naming where it should have come from; a device
skips only when --skip-missing-hardware allowed it, never under CI), and the tally a session reads afterwards."""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from accelenv.check.framework import declared, origin, where_to_get_it
from accelenv.host.discover import discover
from accelenv.host.root import Root
from accelenv.host.run import ToolRunner
from accelenv.matrix import Environment, Matrix, find_matrix, load_matrix

if TYPE_CHECKING:
    from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
NO_DEVICE = "no device here"  # every skip for missing hardware starts so; the session's tally counts them


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
        pytest.fail(
            "ACCELENV_ENV is not set: run the device tests through `nox -s <session>` or inside an image",
            pytrace=False,
        )
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


ALLOWED_BY_OPTION: list[bool] = []  # set by tests/devices/conftest.py from --accelenv-allow-missing-hardware


def missing_hardware_allowed() -> bool:
    """Asked for (the session's --skip-missing-hardware, passed as an option or ACCELENV_ALLOW_MISSING_HARDWARE=1)
    and not under CI: CI never skips missing hardware."""
    if os.environ.get("CI", "").lower() in ("true", "1"):
        return False
    return any(ALLOWED_BY_OPTION) or os.environ.get("ACCELENV_ALLOW_MISSING_HARDWARE") == "1"


def need_module(expected: Expected, module: str, *, from_lock: bool = False) -> ModuleType:
    """Import `module`, or fail saying where the environment's framework should have come from. A missing
    framework is never a skip: a session that imported nothing tested nothing. `from_lock`: a module the lock
    always brings (ray), whatever the framework's source."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        env = expected.env
        framework = env.framework
        if from_lock or framework is None:
            where = f"it comes from {env.id}'s lock (envs/{env.id}/requirements.lock): install it (nox -s {env.id})"
        else:
            where = (
                f"{env.id}'s framework {declared(framework)} comes from {origin(expected.matrix, env)}: "
                f"{where_to_get_it(expected.matrix, env)}"
            )
        pytest.fail(f"could not import {module!r} ({error}); {where}", pytrace=False)


def need_devices(expected: Expected, seen: int) -> None:
    """Fail when the framework sees no device or another number than the host has, unless missing hardware was
    explicitly allowed (and there really is none)."""
    if seen == 0 and expected.device_count == 0 and missing_hardware_allowed():
        pytest.skip(f"{NO_DEVICE}: the host has no {expected.env.family} device (allowed by --skip-missing-hardware)")
    assert seen > 0, f"the framework sees no {expected.env.family} device"
    assert seen == expected.device_count, (
        f"the framework sees {seen} device(s), the host has {expected.device_count} visible"
    )
