"""The device smoke suite, run by an environment's nox session (or inside its image) with ACCELENV_ENV set.

Each test module declares the family it is for; modules of other families are skipped. Within a module, a
test skips with a reason when the family's framework is not installed, and fails when it is installed but
sees the wrong devices. ACCELENV_ALLOW_MISSING_HARDWARE=1 (the session's --skip-missing-hardware, never in CI)
turns "no device here" into a skip.
"""

from __future__ import annotations

import pytest
from devicekit import Expected, current_env, load_expected


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
        pytest.skip(f"{family} tests; {env.id} is a {env.family} environment")
