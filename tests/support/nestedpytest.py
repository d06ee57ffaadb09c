"""A pytest that a test starts keeps its temporary folders under the outer run's own.

Two pytest processes that clean one `/tmp/pytest-of-<user>` at once race: pytest's walk of that folder
(`_pytest.pathlib.find_prefixed`) then leaves a directory listing open when a folder vanishes under it, a
ResourceWarning that fails the inner run, whose warnings are errors. Pointing `PYTEST_DEBUG_TEMPROOT` at the outer
run's base folder gives every inner run a root no other process cleans."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _inner_pytest_temp(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DEBUG_TEMPROOT", str(tmp_path_factory.getbasetemp()))
