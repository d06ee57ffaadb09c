"""The HTML report in a real headless browser (Debian's chromium): it renders, and picking a SKU shows which
environments run on it and why the others do not."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from reference import REFERENCE_MATRIX

from accelenv.matrix import load_matrix
from accelenv.plan.report import html_page

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]


def dom(page: Path, fragment: str, profile: Path) -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is missing (.ci/run installs Debian's chromium)")
        pytest.skip("chromium is not installed")
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
         "--dump-dom", f"{page.as_uri()}#{fragment}"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-500:]
    return result.stdout


def rows(text: str) -> dict[str, str]:
    return dict(re.findall(r'data-env="([^"]+)" data-status="([^"]+)"', text))


def test_picking_a_sku_shows_where_it_runs(tmp_path: Path) -> None:
    page = tmp_path / "compatibility.html"
    page.write_text(html_page(load_matrix(REFERENCE_MATRIX)), encoding="utf-8")
    b300 = dom(page, "sku=b300", tmp_path / "p1")
    assert 'data-sku="b300"' in b300
    assert rows(b300) == {
        "gpu-nvidia-cu126": "no",
        "gpu-nvidia-cu128": "no",
        "gpu-nvidia-cu129": "runs",
        "gpu-nvidia-cu130": "runs",
    }
    assert "CUDA 12.8 Update 1 has no sm_103" in b300
    mi355x = dom(page, "sku=mi355x", tmp_path / "p2")
    assert rows(mi355x) == {"gpu-amd-rocm64": "no", "gpu-amd-rocm70": "runs"}
    first = dom(page, "", tmp_path / "p3")  # no choice yet: the first SKU is shown
    assert 'data-sku="a100-sxm4-40gb"' in first
