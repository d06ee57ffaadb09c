"""Fixtures of the integration tests: the real Docker engine, one connection per test module, and a repository
name per test whose images are removed afterwards (only those: a test never touches images it did not make).

Every local Ray cluster runs on loopback (`rayloop`). Under CI=true a missing engine or base image fails the tests
instead of skipping them: .ci/run installs docker.io and makes the base image.
"""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING

import pytest
import rayloop
from cdp import Browser, find_chromium
from localmatrix import BASE_IMAGE, unavailable
from nestedpytest import _inner_pytest_temp  # noqa: F401 - an autouse fixture, found by its name here

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

    from accelenv.build.engine import DockerEngine

rayloop.before_ray()  # before any test imports Ray: every local cluster on loopback


# light tests between two heavy ones in the run's order: pytest-xdist's loadgroup scheduler keeps two or three tests
# queued a worker, so a heavy test queued right behind another would wait for it on the same worker
STRIDE = 100


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked heavy spread over the start of the run, the longest first, STRIDE light tests apart; the
    rest keep their order. pytest-xdist (--dist loadgroup, a test at a time) hands them out in this order, so the
    minutes-long tests start early on different workers and the quick ones fill in around them, instead of one
    heavy test starting last, or behind another, and the run waiting for it. (This hook sees every test of the
    session, the unit and hostile ones too.)"""

    def seconds(item: pytest.Item) -> float:
        marker = item.get_closest_marker("heavy")
        return float(marker.kwargs.get("seconds", 60)) if marker is not None else 0.0

    heavy = sorted((item for item in items if seconds(item)), key=seconds, reverse=True)
    light = [item for item in items if not seconds(item)]
    order: list[pytest.Item] = []
    for index, item in enumerate(heavy):
        order += [item, *light[index * STRIDE : (index + 1) * STRIDE]]
    items[:] = order + light[len(heavy) * STRIDE :]


@pytest.fixture
def ray_loopback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The arguments every node of a test's local Ray cluster starts with: on loopback, with its own HOME, auth
    setting and temp dir (`rayloop.loopback`)."""
    with rayloop.loopback(tmp_path, monkeypatch) as node_args:
        yield node_args


@pytest.fixture(scope="module")
def engine() -> Iterator[DockerEngine]:
    from accelenv.build.engine import EngineError, connect

    try:
        engine = connect(timeout=60)
    except EngineError as error:
        unavailable(f"no Docker engine: {error}")
    with engine:
        if engine.image(BASE_IMAGE) is None:
            unavailable(f"base image {BASE_IMAGE} is missing")
        yield engine


@pytest.fixture
def repository(engine: DockerEngine) -> Iterator[str]:
    """A repository name of this test alone; every image tagged in it is removed afterwards."""
    name = f"accelenv-test-{uuid.uuid4().hex[:8]}"
    yield name
    for tag in engine.tags(name):
        engine.remove(tag)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Headless Chromium for the page tests (tests/support/cdp.py), one a module."""
    executable = find_chromium()
    if executable is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed")
    chromium = Browser(executable, tmp_path_factory.mktemp("profile"), timeout=30)
    try:
        yield chromium
    finally:
        chromium.close()
