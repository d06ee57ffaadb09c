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
from hostkit import FakeRunner, Pci, capture, make_root, reorder_query
from reference import REFERENCE_MATRIX, reference_document

from accelenv.check.rank import rank_environments
from accelenv.host.discover import discover
from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.report import HostReport, PythonInfo
from accelenv.host.root import Root
from accelenv.matrix import Matrix, load_matrix
from accelenv.matrix.load import model_from_text
from accelenv.plan.compatibility import preference, recommended, verdict
from accelenv.plan.lock import LockState
from accelenv.plan.page import cell, http_url, page_data
from accelenv.plan.report import html_page, markdown, report_data
from accelenv.plan.sessions import session_specs
from accelenv.plan.start import start_steps

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
    document = reference_document()
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


# ---------------------------------------------------------------------------------------------------- get started

H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"


def _h100_host(tmp_path: Path, matrix: Matrix, driver: str, cuda: str) -> HostReport:
    """The H100 capture's host (as tests/unit/test_check.py builds it), every source reporting `driver`."""
    query = reorder_query(capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS).replace("590.48.01", driver)
    version = (
        f"NVIDIA-SMI version  : {driver}\nNVML version        : {driver.rsplit('.', 1)[0]}\n"
        f"DRIVER version      : {driver}\nCUDA Version        : {cuda}\n"
    )
    root = make_root(
        tmp_path / "host",
        pci=[Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")],
        modules={"nvidia": driver},
        files={
            "/proc/self/limits": "Max locked memory         unlimited            unlimited            bytes\n",
            "/proc/sys/kernel/arch": "x86_64\n",
        },
    )
    outputs = {"nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): query, "nvidia-smi --version": version}
    python = PythonInfo(version="3.12.7", implementation="CPython", executable="/usr/bin/python3", distributions={})
    return discover(matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=["nvidia"], python=python)


@pytest.mark.parametrize(
    ("driver", "cuda", "expected"),
    [
        ("590.48.01", "13.1", ["gpu-nvidia-cu128", "gpu-nvidia-cu129", "gpu-nvidia-cu130", "gpu-nvidia-cu126"]),
        ("570.124.06", "12.8", ["gpu-nvidia-cu128", "gpu-nvidia-cu126", "gpu-nvidia-cu129"]),  # cu129: compat mode
        ("535.54.03", "12.2", ["gpu-nvidia-cu128", "gpu-nvidia-cu129", "gpu-nvidia-cu126"]),  # all in compat mode
        ("450.80.02", "11.0", []),
    ],
)
def test_page_ranks_as_accelenv_which_does(
    tmp_path: Path, matrix: Matrix, driver: str, cuda: str, expected: list[str]
) -> None:
    """The page's order (`recommended` over `preference`, given the statuses) is `accelenv which`'s order on a
    real H100 host with that driver, restricted to the NVIDIA environments that run."""
    ranked = [
        r for r in rank_environments(matrix, _h100_host(tmp_path, matrix, driver, cuda)) if r["family"] == "nvidia"
    ]
    statuses = {r["id"]: {"pass": "runs", "warn": "warn"}.get(r["verdict"], "no") for r in ranked}
    assert [r["id"] for r in ranked if r["runnable"]] == expected
    assert recommended(preference(matrix, "nvidia"), statuses) == expected


def test_preference_is_default_then_ci_tier_then_matrix_order(matrix: Matrix) -> None:
    assert preference(matrix, "nvidia") == [
        "gpu-nvidia-cu128",
        "gpu-nvidia-cu129",
        "gpu-nvidia-cu130",
        "gpu-nvidia-cu126",
    ]
    assert preference(matrix, "amd") == ["gpu-amd-rocm64", "gpu-amd-rocm70"]
    assert recommended(["a", "b", "c"], {"a": "warn", "b": "no", "c": "runs"}) == ["c", "a"]
    assert recommended(["a", "b"], {}) == []


@pytest.mark.parametrize(
    ("sku", "without_locks", "with_locks"),
    [
        # the default runs: it comes first; a stale or missing lock ("warn") ranks below every plain "runs"
        (
            "h100-sxm",
            ["gpu-nvidia-cu128", "gpu-nvidia-cu129", "gpu-nvidia-cu130", "gpu-nvidia-cu126"],
            ["gpu-nvidia-cu128", "gpu-nvidia-cu130", "gpu-nvidia-cu129", "gpu-nvidia-cu126"],
        ),
        ("b300", ["gpu-nvidia-cu129", "gpu-nvidia-cu130"], ["gpu-nvidia-cu130", "gpu-nvidia-cu129"]),  # no sm_103
        ("h200-nvl", ["gpu-nvidia-cu128", "gpu-nvidia-cu126"], ["gpu-nvidia-cu128", "gpu-nvidia-cu126"]),
        ("mi355x", ["gpu-amd-rocm70"], ["gpu-amd-rocm70"]),  # the default has no gfx950
        ("cpu-x86-64", ["cpu-py311"], ["cpu-py311"]),
    ],
)
def test_recommended_per_sku(matrix: Matrix, sku: str, without_locks: list[str], with_locks: list[str]) -> None:
    assert next(s for s in report_data(matrix)["skus"] if s["id"] == sku)["recommended"] == without_locks
    assert next(s for s in page_data(matrix, LOCKS)["skus"] if s["id"] == sku)["recommended"] == with_locks


def test_a_sku_no_environment_lists_has_no_recommendation() -> None:
    # gpu-nvidia-cu126 and -cu128 are the H200 NVL's only environments: without them in its list nothing runs
    narrowed = _with(envs__gpu_nvidia_cu126__skus=["h100-sxm"], envs__gpu_nvidia_cu128__skus=["h100-sxm", "b200"])
    row = next(s for s in page_data(narrowed, None)["skus"] if s["id"] == "h200-nvl")
    assert row["recommended"] == []
    assert all("does not list this SKU" in e["why"] for e in row["envs"])


def test_driver_floors_for_the_page(matrix: Matrix) -> None:
    b200 = next(s for s in page_data(matrix, LOCKS)["skus"] if s["id"] == "b200")
    floors = {e["env"]: (e["floor"], e["compat_floor"]) for e in b200["envs"]}
    assert floors["gpu-nvidia-cu128"] == ("570.133.20", None)  # the SKU's own floor is above compatibility mode
    h100 = next(s for s in page_data(matrix, LOCKS)["skus"] if s["id"] == "h100-sxm")
    floors = {e["env"]: (e["floor"], e["compat_floor"]) for e in h100["envs"]}
    assert floors["gpu-nvidia-cu128"] == ("570.124.06", "525.60.13")


def test_start_steps_of_a_default_locked_environment(matrix: Matrix) -> None:
    steps = page_data(matrix, LOCKS)["envs"]["gpu-nvidia-cu128"]["steps"]
    assert [s["text"] for s in steps] == [
        "nox -s gpu-nvidia",
        "accelenv check gpu-nvidia-cu128",
        (
            "accelenv build gpu-nvidia-cu128 && accelenv run gpu-nvidia-cu128 -- pytest "
            "tests/devices/test_nvidia_devices.py"
        ),
        (
            "python3.12 -m venv .venv && . .venv/bin/activate\n"
            "pip install --require-hashes --no-deps --extra-index-url https://download.pytorch.org/whl/cu128 "
            "-r envs/gpu-nvidia-cu128/requirements.lock"
        ),
    ]
    assert steps[0]["note"] == "the family's default environment"
    assert steps[3]["label"] == "Without accelenv: the locked requirements, into Python 3.12"


def test_start_steps_of_an_unlocked_environment(matrix: Matrix) -> None:
    env = matrix.envs["gpu-nvidia-cu126"]
    steps = start_steps(matrix, env, LockState.UNLOCKED, "gpu-nvidia-cu126")
    assert steps[0].text == "nox -s gpu-nvidia-cu126"
    assert steps[3].label.startswith(
        "Without accelenv: gpu-nvidia-cu126 is not locked (accelenv lock gpu-nvidia-cu126)"
    )
    assert steps[3].text == (
        "python3.12 -m pip install --extra-index-url https://download.pytorch.org/whl/cu126 "
        "torch==2.9.1+cu126 ray==2.60.0 pytest==9.2.0"
    )
    assert "has a stale lock" in start_steps(matrix, env, LockState.STALE, "x")[3].label


def test_start_sessions_are_noxs_names(matrix: Matrix) -> None:
    """Each environment's first step names a session the noxfile registers: the family's for its default."""
    names = {spec.name for spec in session_specs(matrix)}
    data = page_data(matrix, LOCKS)
    for env_id, env in data["envs"].items():
        session = env["steps"][0]["text"].removeprefix("nox -s ")
        assert session in names
        family = matrix.families[env["family"]]
        assert session == (family.session if env["default"] else env_id)
        assert data["start"][env["family"]]["prefer"] == preference(matrix, env["family"])


def test_start_commands_are_shell_quoted_and_data_only() -> None:
    hostile = _with(envs__cpu_py311__tests=["tests/devices/x y;rm -rf ~.py"])
    steps = page_data(hostile, None)["envs"]["cpu-py311"]["steps"]
    assert steps[2]["text"].endswith("-- pytest 'tests/devices/x y;rm -rf ~.py'")
    page = html_page(hostile)
    assert "rm -rf" not in page.split('<script id="data"')[0]  # only in the JSON, never as markup
