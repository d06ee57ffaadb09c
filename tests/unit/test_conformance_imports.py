"""The single-process conformance figures need torch only: a machine with PyTorch and no Ray (a GPU lent for a few
minutes) can measure them; the distributed parts still fail, naming the lock Ray comes from."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from conformancekit import need_torch, need_torch_alone
from devicekit import Expected

from accelenv.matrix import load_matrix

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def expected() -> Expected:
    matrix = load_matrix(REPO / "matrix.toml")
    env = matrix.envs["gpu-nvidia-cu132"]
    return Expected(matrix=matrix, env=env, archs=frozenset(), runtime_archs=frozenset(), device_count=1)


def test_torch_alone_needs_no_ray(expected: Expected, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = types.ModuleType("torch")
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "ray", None)  # importing it fails
    assert need_torch_alone(expected) is torch
    with pytest.raises(pytest.fail.Exception, match=r"could not import 'ray'.*envs/gpu-nvidia-cu132/requirements"):
        need_torch(expected)
