"""The page's "Get started" offers only steps that work in an environment's current state, and the page says
what it was made from (the matrix's content hash, its commit, the date)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from reference import REFERENCE_MATRIX

from accelenv.build.readiness import image_blockers
from accelenv.matrix import Matrix, load_matrix
from accelenv.plan import start
from accelenv.plan.lock import LockState
from accelenv.plan.page import html_page, page_data
from accelenv.plan.start import start_steps

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REFERENCE_MATRIX)


def test_a_session_and_a_build_without_a_lock_are_not_offered(matrix: Matrix) -> None:
    env = matrix.envs["gpu-nvidia-cu126"]
    steps = start.gate(start_steps(matrix, env, LockState.UNLOCKED, env.id), env, LockState.UNLOCKED, None)
    assert [(s.text.split()[0:2], s.available) for s in steps][:3] == [
        (["nox", "-s"], False),
        (["accelenv", "check"], True),
        (["accelenv", "build"], False),
    ]
    assert steps[0].why == "the session aborts: envs/gpu-nvidia-cu126/requirements.lock does not exist"
    assert steps[0].fix == steps[2].fix == "accelenv lock gpu-nvidia-cu126"
    stale = start.gate(start_steps(matrix, env, LockState.STALE, env.id), env, LockState.STALE, None)
    assert stale[0].why.endswith("requirements.lock is stale (the matrix changed)")


def test_a_build_the_checkout_cannot_make_is_not_offered(matrix: Matrix) -> None:
    env = matrix.envs["gpu-nvidia-cu128"]
    refused = start.Unavailable(why="accelenv build refuses it now: x", fix="accelenv lock gpu-nvidia-cu128")
    steps = start.gate(start_steps(matrix, env, LockState.CURRENT, env.id), env, LockState.CURRENT, refused)
    assert [s.available for s in steps] == [True, True, False, True]
    assert (steps[2].why, steps[2].fix) == (refused.why, refused.fix)
    unknown = start.gate(start_steps(matrix, env, None, env.id), env, None, None)  # a state the page does not know
    assert all(s.available for s in unknown)


def test_image_blockers_read_the_checkout(matrix: Matrix, tmp_path: Path) -> None:
    shutil.copy(REPO / "envs" / "accelenv-image.lock", tmp_path)
    (tmp_path / "envs" / "cpu-py311").mkdir(parents=True)
    shutil.copy(REPO / "envs" / "cpu-py311" / "requirements.lock", tmp_path / "envs" / "cpu-py311")
    found = image_blockers(tmp_path, matrix)
    assert found["cpu-py311"] is None  # locked, and its base ships its Python
    blocked = found["gpu-nvidia-cu126"]
    assert blocked is not None
    assert blocked.why == (
        "accelenv build refuses it now: it has no lock; its base nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04 lacks "
        "Python 3.12 and it has no os-packages.lock"
    )
    assert blocked.fix == "accelenv lock gpu-nvidia-cu126"


def test_the_page_data_carries_why_a_step_is_not_available(matrix: Matrix) -> None:
    data = page_data(matrix, {"gpu-nvidia-cu126": LockState.UNLOCKED})
    first = data["envs"]["gpu-nvidia-cu126"]["steps"][0]
    assert (first["available"], first["fix"]) == (False, "accelenv lock gpu-nvidia-cu126")
    assert "available" not in data["envs"]["gpu-nvidia-cu126"]["steps"][1]


def test_stamp_of_a_committed_matrix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    answers = {"status": "", "%H": "ab" * 20 + "\n", "%cs": "2026-11-30\n"}

    def git(folder: str, *args: str) -> str | None:
        return next(v for k, v in answers.items() if any(k in a for a in args))

    monkeypatch.setattr(start, "_git", git)
    stamp = start.stamp_of(tmp_path / "matrix.toml", "x")
    assert stamp == start.Stamp(
        matrix_sha256="2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
        commit="ab" * 20,
        date="2026-11-30",
    )
    answers["status"] = " M matrix.toml\n"  # changed since its commit: the commit does not describe it
    changed = start.stamp_of(tmp_path / "matrix.toml", "x", today="2026-12-01")
    assert (changed.commit, changed.date) == (None, "2026-12-01")
    monkeypatch.setattr(start, "_git", lambda folder, *args: None)  # no git, or not a checkout
    assert start.stamp_of(tmp_path / "matrix.toml", "x", today="2026-12-01").commit is None


def test_the_page_shows_its_stamp_and_no_sku_is_preselected(matrix: Matrix) -> None:
    stamp = start.Stamp(matrix_sha256="c" * 64, commit=None, date="2026-12-01")
    page = html_page(matrix, stamp=stamp)
    assert f'<p id="stamp" class="muted" data-matrix-sha256="{"c" * 64}" data-commit="">' in page
    assert f"Matrix sha256:{'c' * 16} \u00b7 uncommitted \u00b7 2026-12-01</p>" in page
    assert '<select id="sku"><option value="">Pick your accelerator\u2026</option>' in page
    assert 'id="stamp"' not in html_page(matrix)
