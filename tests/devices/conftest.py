"""The device smoke suite, run by an environment's nox session (or inside its image) with ACCELENV_ENV set.

Each test module declares the family it is for; modules of other families are skipped. A test fails when the
family's framework is not installed (saying where it should have come from: the lock or the base image) and
when it is installed but sees the wrong devices. Only "no device here" may skip, and only when asked:
--accelenv-allow-missing-hardware (or ACCELENV_ALLOW_MISSING_HARDWARE=1; the session's --skip-missing-hardware),
never under CI. A run with such skips ends on a line that says it is not a hardware pass, and
--accelenv-summary PATH writes the tally the session reads (a path inside the working tree, so a container
run can write it too).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import devicekit
import pytest
from devicekit import NO_DEVICE, Expected, current_env, load_expected

OTHER_FAMILY = "another family's tests"
TALLY: dict[str, int] = {"passed": 0, "failed": 0, "no_device": 0, "skipped": 0}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("accelenv device tests")
    group.addoption(
        "--accelenv-allow-missing-hardware",
        action="store_true",
        help="skip, not fail, a test on a host with no device of the family (refused under CI)",
    )
    group.addoption("--accelenv-summary", metavar="PATH", help="write the tally of outcomes as JSON to PATH")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--accelenv-allow-missing-hardware"):
        devicekit.ALLOWED_BY_OPTION.append(True)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and report.passed:
        TALLY["passed"] += 1
    elif report.failed:
        TALLY["failed"] += 1
    elif report.skipped:
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason.startswith(NO_DEVICE):
            TALLY["no_device"] += 1
        elif not reason.startswith(OTHER_FAMILY):
            TALLY["skipped"] += 1


@pytest.hookimpl(trylast=True)  # after pytest's own teardown, which ends the test's fixtures (a module's driver)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """End the conformance suite's CPU cluster (one per run, see conformancekit) once no later test uses it, so
    a test that starts Ray by itself never starts it beside an idle cluster."""
    kit = sys.modules.get("conformancekit")
    if kit is not None and not hasattr(getattr(nextitem, "module", None), "ray_cluster"):
        kit.stop_shared_cluster()


def not_a_hardware_pass(env_id: str, tally: dict[str, int]) -> str | None:
    """The closing line of a run whose device tests skipped for want of a device, else None."""
    if not tally["no_device"]:
        return None
    return (
        f"{env_id}: NOT PROVEN: {tally['no_device']} device test(s) skipped, {NO_DEVICE} "
        f"(--skip-missing-hardware); {tally['passed']} passed"
    )


def pytest_terminal_summary(terminalreporter: object, exitstatus: int, config: pytest.Config) -> None:
    env_id = os.environ.get("ACCELENV_ENV", "?")
    path = config.getoption("--accelenv-summary")
    if path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"env": env_id, **TALLY}, sort_keys=True) + "\n", encoding="utf-8")


def pytest_unconfigure(config: pytest.Config) -> None:
    line = not_a_hardware_pass(os.environ.get("ACCELENV_ENV", "?"), TALLY)
    if line:  # after pytest's own summary line, so it is the run's last line
        print(line, flush=True)


@pytest.fixture(scope="session")
def expected() -> Expected:
    return load_expected()


@pytest.fixture(autouse=True)
def _only_this_family(request: pytest.FixtureRequest) -> None:
    family = getattr(request.module, "FAMILY", None)
    found = current_env()
    if family is None or found is None:
        return
    _, env = found
    if env.family != family:
        pytest.skip(f"{OTHER_FAMILY} ({family}); {env.id} is a {env.family} environment")
