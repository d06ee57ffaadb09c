"""The compatibility report: committed Markdown current, reasons from the rules' data, a self-contained page."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import tomlkit
from reference import REFERENCE_MATRIX, REFERENCE_TEXT

from accelenv.matrix import Matrix, load_matrix
from accelenv.matrix.load import model_from_text
from accelenv.plan.lock import LockState
from accelenv.plan.page import cell, http_url
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


# ---------------------------------------------------------------------------------------------------- the page

LOCKS = {
    "gpu-nvidia-cu126": LockState.UNLOCKED,
    "gpu-nvidia-cu128": LockState.CURRENT,
    "gpu-nvidia-cu129": LockState.STALE,
}
HOSTILE = "NVIDIA L4 </script><img src=x onerror=alert(1)> & \"quoted\" 'single'"


class _Tree(HTMLParser):
    """Start tags with their attributes, and the text of every script element."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script = True
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data

    def find(self, tag: str, **attrs: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())]


def _tree(page: str) -> _Tree:
    tree = _Tree()
    tree.feed(page)
    tree.close()
    return tree


def _with(**changes: Any) -> Matrix:
    """The reference matrix with values replaced, keys joined by `__` (`skus__l4__name=...`; `_` in a key is `-`)."""
    document = tomlkit.parse(REFERENCE_TEXT)
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        table: Any = document
        for key in parents:
            table = table[key.replace("_", "-")]
        table[leaf] = value
    return model_from_text(tomlkit.dumps(document))


def test_page_has_a_grid_per_family_with_a_cell_per_sku_and_environment(matrix: Matrix) -> None:
    tree = _tree(html_page(matrix, locks=LOCKS))
    for family in matrix.families.values():
        envs = [e for e in matrix.envs.values() if e.family == family.id]
        skus = [s for s in matrix.skus.values() if s.family == family.id]
        if envs and skus:
            assert tree.find("section", id=f"fam-{family.id}"), family.id
    cells = tree.find("td", **{"class": "c"})
    expected = sum(1 for s in matrix.skus.values() for e in matrix.envs.values() if e.family == s.family)
    assert len(cells) == expected
    assert {c["data-status"] for c in cells} == {"runs", "warn", "no"}
    for section in ("overview", "pick", "environments", "runtimes", "sources"):
        assert tree.find("section", id=section), section
    assert [a.get("id") for a in tree.find("script")] == ["data", None]
    assert tree.find("input", id="q")
    assert tree.find("select", id="sku")


@pytest.mark.parametrize(
    ("sku", "env", "status", "why"),
    [
        ("b300", "gpu-nvidia-cu128", "no", "CUDA 12.8 Update 1 has no sm_103"),
        ("b200", "gpu-nvidia-cu128", "runs", "CUDA 12.8 Update 1, driver >= 570.133.20"),
        ("h100-sxm", "gpu-nvidia-cu128", "runs", "CUDA 12.8 Update 1, driver >= 570.124.06 (>= 525.60.13 through"),
        ("h100-sxm", "gpu-nvidia-cu126", "warn", "CUDA 12.6 Update 3, driver >= 560.35.05"),
        ("b300", "gpu-nvidia-cu129", "warn", "CUDA 12.9 Update 1, driver >= 575.57.08"),
        ("mi355x", "gpu-amd-rocm64", "no", "ROCm 6.4.1 has no gfx950"),
    ],
)
def test_cells_carry_status_and_reason(matrix: Matrix, sku: str, env: str, status: str, why: str) -> None:
    found = cell(matrix, matrix.skus[sku], matrix.envs[env], LOCKS.get(env))
    assert found.status == status
    assert found.why.startswith(why)
    tree = _tree(html_page(matrix, locks=LOCKS))
    row = next(a for t, a in tree.tags if t == "tr" and a.get("data-sku") == sku)
    cells = [a for t, a in tree.tags[tree.tags.index(("tr", row)) :] if t == "td"]
    shown = next(c for c in cells if c["data-env"] == env)
    assert (shown["data-status"], shown["data-why"]) == (found.status, found.why)
    assert shown["title"] == found.why


def test_lock_status_is_data_passed_in(matrix: Matrix) -> None:
    assert cell(matrix, matrix.skus["h100-sxm"], matrix.envs["gpu-nvidia-cu126"], None).status == "runs"
    unlocked = cell(matrix, matrix.skus["h100-sxm"], matrix.envs["gpu-nvidia-cu126"], LockState.UNLOCKED)
    assert unlocked.why.endswith("gpu-nvidia-cu126 is not locked: run `accelenv lock gpu-nvidia-cu126`")
    stale = cell(matrix, matrix.skus["h100-sxm"], matrix.envs["gpu-nvidia-cu129"], LockState.STALE)
    assert "the lock of gpu-nvidia-cu129 is stale" in stale.why
    page = html_page(matrix, locks=LOCKS)
    assert '<span class="badge lock-unlocked"' in page
    assert ">not locked</span>" in page
    assert '<span class="badge lock-current"' in page
    assert '<span class="badge lock-stale"' in page
    assert "lock-" not in html_page(matrix).split("<main>")[1].split("</main>")[0]  # none given: none shown


def test_environment_details(matrix: Matrix) -> None:
    page = html_page(matrix, locks=LOCKS, repository="ghcr.io/acme/accelenv")
    card = page.split('<article class="card" id="env-gpu-nvidia-cu128"')[1].split("</article>")[0]
    assert "CUDA 12.8 Update 1" in card
    assert "\u2265 570.124.06; \u2265 525.60.13 in compatibility mode" in card
    assert "<b>torch</b> <code>2.9.1+cu128</code>" in card
    assert "3.12 on " in card
    assert "<dt>CI tier</dt><dd>pr" in card
    assert "<code>ghcr.io/acme/accelenv:gpu-nvidia-cu128-py312</code>" in card
    assert "\u2605 default" in card
    assert ">locked</span>" in card


def test_hostile_sku_name_is_escaped_everywhere() -> None:
    page = html_page(_with(skus__l4__name=HOSTILE))
    assert "<img" not in page
    assert page.count("</script>") == 2  # the data's and the code's own, nothing from the name
    tree = _tree(page)
    assert [a.get("id") for a in tree.find("script")] == ["data", None]
    data = json.loads(tree.scripts[0])
    assert HOSTILE in [s["name"] for s in data["skus"]]
    assert "<" not in tree.scripts[0]
    assert f'<span class="sku-name">{html.escape(HOSTILE)}</span>' in page  # shown as text in the grid
    labels = [a.get("aria-label") or "" for a in tree.find("td", **{"data-env": "gpu-nvidia-cu128"})]
    assert any(label.startswith(f"{HOSTILE} on gpu-nvidia-cu128: ") for label in labels)


@pytest.mark.parametrize(
    ("url", "link"),
    [
        ("https://docs.nvidia.com/cuda/", True),
        ("HTTP://example.org/x", True),
        ("javascript:alert(1)", False),
        ("data:text/html,<script>alert(1)</script>", False),
        ("//evil.example/x", False),
        ("file:///etc/passwd", False),
        ("https://", False),
        ("https://a.example/x y", False),
    ],
)
def test_only_http_sources_are_links(url: str, link: bool) -> None:
    assert (http_url(url) is not None) is link
    page = html_page(_with(sources__cuda_gpus__url=url))
    item = page.split('<li id="src-cuda-gpus">')[1].split("</li>")[0]
    assert ("<a href=" in item) is link
    assert "<script" not in item
    if link:
        assert f'href="{html.escape(url)}"' in item


def test_page_is_deterministic_and_says_how_it_was_made(matrix: Matrix) -> None:
    first = html_page(matrix, locks=LOCKS)
    assert first == html_page(load_matrix(REFERENCE_MATRIX), locks=dict(reversed(LOCKS.items())))
    header = "Generated by `accelenv report` from matrix.toml; do not edit. Regenerate: accelenv report --format"
    assert f"<!-- {header} html -->" in first
    assert "--format md" not in first


def test_page_is_self_contained(matrix: Matrix) -> None:
    page = html_page(matrix, locks=LOCKS)
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page)
    assert not re.search(r"""<script[^>]*\bsrc=""", page)
    assert "@import" not in page
    assert "url(" not in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page.split('<section id="sources"')[0])
    assert '<script id="data" type="application/json">' in page
    assert len(report_data(matrix)["skus"]) == len(matrix.skus)
