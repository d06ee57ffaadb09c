"""The compatibility report: committed Markdown current, reasons from the rules' data, a self-contained page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from reference import REFERENCE_MATRIX

from accelenv.matrix import Matrix, load_matrix
from accelenv.plan.report import html_page, markdown, report_data, verdict

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REFERENCE_MATRIX)


def test_committed_report_is_current() -> None:
    shipped = load_matrix(REPO / "matrix.toml")  # the committed page describes the shipped matrix
    assert (REPO / "docs" / "compatibility.md").read_text() == markdown(shipped), "run accelenv report -o docs/..."


@pytest.mark.parametrize(
    ("sku", "env", "runs", "why"),
    [
        ("b300", "gpu-nvidia-cu128", False, "CUDA 12.8 Update 1 has no sm_103"),
        ("b300", "gpu-nvidia-cu129", True, "CUDA 12.9 Update 1, driver >= 575.57.08"),
        ("b200", "gpu-nvidia-cu128", True, "CUDA 12.8 Update 1, driver >= 570.133.20"),
        ("mi355x", "gpu-amd-rocm64", False, "ROCm 6.4.1 has no gfx950"),
        (
            "h200-nvl",
            "gpu-nvidia-cu129",
            False,
            "CUDA 12.9 Update 1 supports sm_90, but gpu-nvidia-cu129 does not list",
        ),
    ],
)
def test_reasons(matrix: Matrix, sku: str, env: str, runs: bool, why: str) -> None:
    ok, reason = verdict(matrix, matrix.skus[sku], matrix.envs[env])
    assert ok is runs
    assert reason.startswith(why)


def test_html_is_self_contained(matrix: Matrix) -> None:
    page = html_page(matrix)
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert '<script id="data" type="application/json">' in page
    assert len(report_data(matrix)["skus"]) == len(matrix.skus)
