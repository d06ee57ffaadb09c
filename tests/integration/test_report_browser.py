"""The compatibility page in a real headless Chromium (Debian's chromium), driven through the DevTools protocol:
search, picking a SKU from the grid with the mouse and the keyboard, the driver check, the print layout, and a
screenshot that the test decodes and looks at (the grid's colours where the cells are, a page that is not blank).
"""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING, Any

import pytest
from cdp import Browser, find_chromium
from png import Image, decode
from reference import REFERENCE_MATRIX

from accelenv.matrix import load_matrix
from accelenv.plan.lock import LockState
from accelenv.plan.report import html_page

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

pytestmark = pytest.mark.integration

LOCKED = ("cpu-py311", "gpu-nvidia-cu128", "gpu-nvidia-cu129", "gpu-nvidia-cu130", "gpu-amd-rocm64")
LOCKS = {"gpu-nvidia-cu126": LockState.UNLOCKED} | dict.fromkeys(LOCKED, LockState.CURRENT)
LIGHT = {"runs": (0xDA, 0xFB, 0xE1), "warn": (0xFF, 0xF1, 0xC2), "no": (0xFF, 0xEB, 0xE9)}  # page.css, light
DARK = {"runs": (0x12, 0x36, 0x1F), "warn": (0x3B, 0x2C, 0x00), "no": (0x42, 0x16, 0x1B)}


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("page") / "compatibility.html"
    path.write_text(html_page(load_matrix(REFERENCE_MATRIX), locks=LOCKS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
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


def show(browser: Browser, page: Path, fragment: str = "", *, scheme: str = "light") -> None:
    features = [{"name": "prefers-color-scheme", "value": scheme}]
    browser.send("Emulation.setEmulatedMedia", {"media": "", "features": features})
    browser.open("about:blank")  # a new document even when only the fragment differs
    browser.open(page.as_uri() + (f"#{fragment}" if fragment else ""))


def js(browser: Browser, expression: str) -> Any:
    return browser.evaluate(f"(() => {{ {expression} }})()")


def each(browser: Browser, selector: str, value: str, keep: str = "true") -> list[Any]:
    """`value` (a JavaScript expression of `e`) for every element matching `selector` for which `keep` holds."""
    found: list[Any] = js(
        browser, f"return [...document.querySelectorAll({selector!r})].filter(e => {keep}).map(e => {value});"
    )
    return found


def picked(browser: Browser) -> dict[str, str]:
    return dict(each(browser, "#result td[data-status]", "[e.dataset.env, e.dataset.status]"))


def visible_skus(browser: Browser) -> list[str]:
    return each(browser, ".grid tbody tr", "e.dataset.sku", keep="e.offsetParent")


def cell_box(browser: Browser, sku: str, env: str) -> dict[str, float]:
    box: dict[str, float] = js(
        browser,
        f'const td = document.querySelector(\'tr[data-sku="{sku}"] td[data-env="{env}"]\');'
        "td.scrollIntoView({block: 'center'}); const r = td.getBoundingClientRect();"
        "return {x: r.x, y: r.y, w: r.width, h: r.height};",
    )
    return box


def test_a_fragment_picks_a_sku(browser: Browser, page: Path) -> None:
    show(browser, page, "sku=b300")
    assert js(browser, "return document.body.dataset.sku;") == "b300"
    assert picked(browser) == {
        "gpu-nvidia-cu126": "no",
        "gpu-nvidia-cu128": "no",
        "gpu-nvidia-cu129": "runs",
        "gpu-nvidia-cu130": "runs",
    }
    assert "CUDA 12.8 Update 1 has no sm_103" in js(browser, "return document.getElementById('result').textContent;")
    assert js(browser, "return document.querySelector('tr.picked').dataset.sku;") == "b300"
    show(browser, page)  # no choice yet: the first SKU is shown, none is marked in the grid
    assert js(browser, "return [document.body.dataset.sku, document.querySelector('tr.picked')];") == [
        "a100-sxm4-40gb",
        None,
    ]


def test_search_filters_the_grid_and_lands_in_the_fragment(browser: Browser, page: Path) -> None:
    show(browser, page)
    browser.press("/", "Slash", 191, "/")  # the shortcut focuses the search box
    assert js(browser, "return document.activeElement.id;") == "q"
    browser.type_text("mi355")
    assert visible_skus(browser) == ["mi355x"]
    assert each(browser, ".family", "e.dataset.family", keep="!e.hidden") == ["amd"]
    assert "q=mi355" in js(browser, "return location.hash;")
    browser.press("Escape", "Escape", 27)
    assert len(visible_skus(browser)) == 34
    browser.type_text("0x2330")  # a PCI device id
    assert visible_skus(browser) == ["h100-sxm"]
    browser.press("Escape", "Escape", 27)
    browser.type_text("torch 2.8.0")  # a package pin narrows the columns to the environments that have it
    columns = each(browser, "#fam-nvidia thead th[data-env]", "e.dataset.env", keep="e.offsetParent")
    assert columns == ["gpu-nvidia-cu129"]
    assert each(browser, ".card", "e.dataset.env", keep="!e.hidden") == ["gpu-nvidia-cu129"]
    show(browser, page, "q=gh200&sku=gh200")  # a shared link restores both
    assert visible_skus(browser) == ["gh200"]
    assert js(browser, "return document.getElementById('q').value;") == "gh200"


def test_clicking_and_arrow_keys_pick_a_sku_and_explain(browser: Browser, page: Path) -> None:
    show(browser, page)
    box = cell_box(browser, "h200", "gpu-nvidia-cu126")
    browser.click(box["x"] + box["w"] / 2, box["y"] + box["h"] / 2)
    assert js(browser, "return document.body.dataset.sku;") == "h200"
    assert "sku=h200" in js(browser, "return location.hash;")
    why = js(browser, "return document.getElementById('why-nvidia').textContent;")
    assert why.startswith("NVIDIA H200 SXM 141GB on gpu-nvidia-cu126: warn.")
    assert "gpu-nvidia-cu126 is not locked" in why
    browser.press("ArrowRight", "ArrowRight", 39)
    browser.press("ArrowDown", "ArrowDown", 40)
    focused = js(browser, "const td = document.activeElement; return [td.closest('tr').dataset.sku, td.dataset.env];")
    assert focused == ["h200-nvl", "gpu-nvidia-cu128"]
    browser.press("Enter", "Enter", 13, "\r")
    assert js(browser, "return document.body.dataset.sku;") == "h200-nvl"
    assert picked(browser)["gpu-nvidia-cu128"] == "runs"
    assert js(browser, "return document.querySelectorAll('.grid td[tabindex=\"0\"]').length;") == len(
        js(browser, "return document.querySelectorAll('.grid').length;") * [0]
    )  # one tab stop per grid: the arrow keys do the rest


def test_a_driver_version_rechecks_the_cells(browser: Browser, page: Path) -> None:
    show(browser, page, "sku=b200")
    browser.evaluate("document.querySelector('input[data-driver=\"nvidia\"]').focus()")
    browser.type_text("535.54.03")
    status = dict(each(browser, '#fam-nvidia tr[data-sku="h100-sxm"] td', "[e.dataset.env, e.dataset.status]"))
    assert status["gpu-nvidia-cu128"] == "warn"  # 525.60.13 <= 535 < 570.124.06: minor-version compatibility
    assert status["gpu-nvidia-cu130"] == "no"  # CUDA 13 has no compatibility below 580
    assert picked(browser)["gpu-nvidia-cu128"] == "no"  # B200 itself needs 570.133.20
    assert "needs driver 570.133.20" in js(browser, "return document.getElementById('result').textContent;")
    assert "driver-nvidia=535.54.03" in js(browser, "return location.hash;")


def test_print_hides_the_controls_and_shows_everything(browser: Browser, page: Path) -> None:
    show(browser, page, "q=mi355")
    assert len(visible_skus(browser)) == 1
    browser.send("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        shown = "getComputedStyle(e).display"
        hidden = [each(browser, selector, shown)[0] for selector in (".controls", "nav", "#pick", "label.driver")]
        assert hidden == ["none"] * 4
        assert len(visible_skus(browser)) == 34  # every section expanded, whatever the search
        assert js(browser, "return getComputedStyle(document.querySelector('.grid tbody tr')).breakInside;") == "avoid"
        assert (
            js(browser, "return getComputedStyle(document.querySelector('.grid thead')).display;")
            == "table-header-group"
        )
    finally:
        browser.send("Emulation.setEmulatedMedia", {"media": ""})


def _near(pixel: tuple[int, int, int], colour: tuple[int, int, int], tolerance: int = 6) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, colour, strict=True))


def _share(image: Image, box: dict[str, float], colour: tuple[int, int, int]) -> float:
    """How much of a cell (less a 3 px border) is painted in `colour`: its background, not the text on it."""
    pixels = image.region(int(box["x"]) + 3, int(box["y"]) + 3, int(box["w"]) - 6, int(box["h"]) - 6)
    return sum(_near(p, colour) for p in pixels) / len(pixels)


@pytest.mark.parametrize(("scheme", "colours"), [("light", LIGHT), ("dark", DARK)])
def test_screenshot_shows_the_grid_in_its_colours(
    browser: Browser, page: Path, tmp_path: Path, scheme: str, colours: dict[str, tuple[int, int, int]]
) -> None:
    show(browser, page, "sku=b300", scheme=scheme)
    assert each(browser, 'tr[data-sku="b300"] td.c', "e.dataset.status") == ["no", "no", "runs", "runs"]
    runs = cell_box(browser, "b300", "gpu-nvidia-cu130")
    no = cell_box(browser, "b300", "gpu-nvidia-cu128")  # the same row: both are on screen
    shot = browser.screenshot()
    (tmp_path / f"page-{scheme}.png").write_bytes(shot)
    if os.environ.get("ACCELENV_SCREENSHOTS"):  # keep it for a person to look at
        shutil.copy(tmp_path / f"page-{scheme}.png", os.environ["ACCELENV_SCREENSHOTS"])
    image = decode(shot)
    assert (image.width, image.height) == (1280, 900)
    assert len(image.colours()) > 40  # text, badges and cells: not a blank page
    assert _share(image, runs, colours["runs"]) > 0.6
    assert _share(image, no, colours["no"]) > 0.6
    assert _share(image, runs, colours["no"]) == 0
    assert _share(image, no, colours["runs"]) == 0
    show(browser, page, "sku=h100-sxm", scheme=scheme)
    warn = cell_box(browser, "h100-sxm", "gpu-nvidia-cu126")  # runs, but the environment is not locked
    image = decode(browser.screenshot())
    assert _share(image, warn, colours["warn"]) > 0.6
    background = image.rgb(5, 5)
    assert (sum(background) > 600) is (scheme == "light")  # light page, dark page
