"""The compatibility page in a real headless Chromium (Debian's chromium), driven through the DevTools protocol:
search, picking a SKU from the grid with the mouse and the keyboard, the driver check, "Get started" (the
recommendation, its commands and their Copy buttons), the print layout, and a screenshot that the test decodes
and looks at (the grid's colours where the cells are, a page that is not blank).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import TYPE_CHECKING, Any

import pytest
from png import Image, decode
from reference import REFERENCE_MATRIX

from accelenv.matrix import load_matrix
from accelenv.plan import page as page_module
from accelenv.plan.lock import LockState
from accelenv.plan.report import html_page
from accelenv.plan.start import Stamp, Unavailable

if TYPE_CHECKING:
    from pathlib import Path

    from cdp import Browser

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


NO_OS_LOCK = Unavailable(
    why="accelenv build refuses it now: its base nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04 lacks Python 3.12 and it "
    "has no os-packages.lock",
    fix="accelenv lock gpu-nvidia-cu130",
)
STAMP = Stamp(matrix_sha256="4f" * 32, commit="0123456789abcdef" * 2 + "01234567", date="2026-11-30")


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The page with the build of gpu-nvidia-cu130 refused (no OS lock) and a stamp."""
    path = tmp_path_factory.mktemp("gated") / "compatibility.html"
    matrix = load_matrix(REFERENCE_MATRIX)
    text = page_module.html_page(matrix, locks=LOCKS, images={"gpu-nvidia-cu130": NO_OS_LOCK}, stamp=STAMP)
    path.write_text(text, encoding="utf-8")
    return path


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
    show(browser, page)  # no choice yet: no SKU is guessed for the reader; the page asks them to pick or search
    assert js(browser, "return [document.body.dataset.sku, document.querySelector('tr.picked')];") == [None, None]
    assert js(
        browser,
        "return [document.getElementById('sku').value, document.getElementById('start-prompt').hidden,"
        " document.getElementById('start-body').hidden];",
    ) == ["", False, True]
    assert js(browser, "return document.getElementById('start-sku').textContent;") == "your accelerator"


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


def box_of(browser: Browser, selector: str) -> dict[str, float]:
    box: dict[str, float] = js(
        browser,
        f"const e = document.querySelector({json.dumps(selector)}); e.scrollIntoView({{block: 'center'}});"
        "const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height};",
    )
    return box


def test_in_page_links_keep_the_state_and_a_sku_link_picks_it(browser: Browser, page: Path) -> None:
    """Following the section nav, or an environment card's SKU link, keeps the picked SKU, the search and the
    driver in the fragment (a plain #anchor would replace them and reset the page)."""
    show(browser, page, "sku=b300&q=b")
    for section in ("environments", "overview"):
        box = box_of(browser, f'nav a[href="#{section}"]')
        browser.click(box["x"] + box["w"] / 2, box["y"] + box["h"] / 2)
        assert js(browser, "return [document.body.dataset.sku, location.hash];") == ["b300", "#sku=b300&q=b"]
        assert js(browser, "return document.activeElement.id;") == section
    show(browser, page, "sku=b300")
    box = box_of(browser, '#env-gpu-nvidia-cu129 a[href="#sku-h200"]')
    browser.click(box["x"] + box["w"] / 2, box["y"] + box["h"] / 2)
    assert js(browser, "return [document.body.dataset.sku, location.hash];") == ["h200", "#sku=h200"]
    assert js(browser, "return document.activeElement.id;") == "sku-h200"


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


def start(browser: Browser) -> dict[str, Any]:
    """What "Get started" shows: the environments to choose from, the chosen one, why, the commands, or why none."""
    shown: dict[str, Any] = js(
        browser,
        "const text = id => document.getElementById(id).textContent;"
        "return {choices: [...document.querySelectorAll('#start-envs button')].map(b => b.dataset.env),"
        " pressed: [...document.querySelectorAll('#start-envs [aria-pressed=true]')].map(b => b.dataset.env),"
        " env: text('start-env'), why: text('start-why'), none: text('start-none'),"
        " body: !document.getElementById('start-body').hidden,"
        " noneShown: !document.getElementById('start-none').hidden,"
        " commands: [...document.querySelectorAll('#start-steps pre code')].map(c => c.textContent)};",
    )
    return shown


def test_get_started_recommends_an_environment_and_its_commands(browser: Browser, page: Path) -> None:
    show(browser, page, "sku=h100-sxm")
    shown = start(browser)
    assert js(browser, "return document.getElementById('start-sku').textContent;") == "NVIDIA H100 SXM5 80GB"
    # accelenv which's order: plain "runs" first (cu126 has no lock: "warn"), the default, then by CI tier
    assert shown["choices"] == ["gpu-nvidia-cu128", "gpu-nvidia-cu129", "gpu-nvidia-cu130", "gpu-nvidia-cu126"]
    assert shown["pressed"] == ["gpu-nvidia-cu128"]
    assert shown["why"].startswith(
        "Recommended: the NVIDIA GPU default (nox -s gpu-nvidia), and it runs on NVIDIA H100"
    )
    assert shown["commands"] == [
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
    show(browser, page, "sku=b300")  # the default has no sm_103: the best other one, and why
    shown = start(browser)
    assert shown["env"] == "gpu-nvidia-cu129"
    assert "the default, gpu-nvidia-cu128, does not run on NVIDIA B300" in shown["why"]
    assert "CUDA 12.8 Update 1 has no sm_103" in shown["why"]
    assert shown["commands"][0] == "nox -s gpu-nvidia-cu129"  # not the default: the environment's own session
    button = '#start-envs button[data-env="gpu-nvidia-cu130"]'
    js(browser, f"document.querySelector({button!r}).click();")  # an alternative
    shown = start(browser)
    assert (shown["env"], shown["pressed"]) == ("gpu-nvidia-cu130", ["gpu-nvidia-cu130"])
    assert shown["why"].startswith("An alternative to gpu-nvidia-cu129")
    assert shown["commands"][1] == "accelenv check gpu-nvidia-cu130"
    assert "env=gpu-nvidia-cu130" in js(browser, "return location.hash;")
    show(browser, page, "sku=h100-sxm&env=gpu-nvidia-cu126")  # a shared link keeps the choice
    shown = start(browser)
    assert shown["env"] == "gpu-nvidia-cu126"
    assert shown["commands"][3] == (
        "python3.12 -m pip install --extra-index-url https://download.pytorch.org/whl/cu126 "
        "torch==2.9.1+cu126 ray==2.60.0 pytest==9.2.0"
    )  # not locked: the pins, and no --require-hashes line


def test_get_started_follows_the_driver(browser: Browser, page: Path) -> None:
    show(browser, page, "sku=h100-sxm")
    browser.evaluate("document.getElementById('start-driver').focus()")
    browser.type_text("535.54.03")  # every CUDA 12 environment in compatibility mode, CUDA 13 not at all
    shown = start(browser)
    assert shown["choices"] == ["gpu-nvidia-cu128", "gpu-nvidia-cu129", "gpu-nvidia-cu126"]  # as accelenv which
    assert "driver-nvidia=535.54.03" in js(browser, "return location.hash;")
    assert js(browser, "return document.querySelector('input[data-driver=\"nvidia\"]').value;") == "535.54.03"
    show(browser, page, "sku=b200&driver-nvidia=535.54.03")  # B200 itself needs 570.133.20: nothing runs
    shown = start(browser)
    assert (shown["body"], shown["noneShown"]) == (False, True)
    assert "Driver 535.54.03 is too old for every environment that runs on NVIDIA B200" in shown["none"]
    assert "needs driver >= 570.133.20 (for gpu-nvidia-cu128)" in shown["none"]
    assert each(browser, "#start .copy", "e", keep="e.offsetParent") == []  # no commands to copy
    show(browser, page, "sku=h100-sxm&driver-nvidia=450.80.02")
    assert (
        "needs driver >= 525.60.13 (for gpu-nvidia-cu128, >= 570.124.06 without compatibility mode)"
        in (start(browser)["none"])
    )
    js(browser, "const i = document.getElementById('start-driver'); i.focus(); i.select();")
    browser.type_text("590.48.01")  # a new driver: the recommendation is back
    assert start(browser)["env"] == "gpu-nvidia-cu128"


def _copied(browser: Browser, index: int) -> str:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        how: str = js(browser, f"return document.querySelectorAll('#start .copy')[{index}].dataset.copied || '';")
        if how:
            return how
        time.sleep(0.05)
    raise AssertionError("the Copy button gave no feedback")


def test_copy_buttons_copy_the_command(browser: Browser, page: Path) -> None:
    browser.grant("clipboardReadWrite", "clipboardSanitizedWrite")
    show(browser, page, "sku=h100-sxm")
    box = js(
        browser,
        "const b = document.querySelectorAll('#start .copy')[1]; b.scrollIntoView({block: 'center'});"
        "const r = b.getBoundingClientRect(); return {x: r.x + r.width / 2, y: r.y + r.height / 2};",
    )
    browser.click(box["x"], box["y"])
    how = _copied(browser, 1)
    assert js(browser, "return document.querySelectorAll('#start .copy')[1].textContent;") == "Copied"
    assert js(browser, "return document.getElementById('copy-status').textContent;") == "Copied to the clipboard"
    if how == "clipboard":  # headless Chromium granted the permission: read it back
        assert browser.evaluate("navigator.clipboard.readText()", wait=True) == "accelenv check gpu-nvidia-cu128"
    else:  # the fallback: the command selected and copied through execCommand
        assert how == "selection"
        assert js(browser, "return getSelection().toString();") == "accelenv check gpu-nvidia-cu128"
    js(browser, "document.querySelectorAll('#start .copy')[0].focus();")  # the keyboard works too
    browser.press("Enter", "Enter", 13, "\r")
    assert _copied(browser, 0) in ("clipboard", "selection")
    label = js(browser, "return document.querySelectorAll('#start .copy')[0].getAttribute('aria-label');")
    assert label == "Copy: Check the host, install the lock and run the tests, in one step"


def test_copy_falls_back_to_the_selection(browser: Browser, page: Path) -> None:
    show(browser, page, "sku=b300")
    js(browser, "navigator.clipboard.writeText = () => Promise.reject(new Error('denied'));")  # as a file:// page may
    js(browser, "document.querySelectorAll('#start .copy')[2].click();")
    assert _copied(browser, 2) in ("selection", "selected")
    assert js(browser, "return getSelection().toString();") == (
        "accelenv build gpu-nvidia-cu129 && accelenv run gpu-nvidia-cu129 -- pytest "
        "tests/devices/test_nvidia_devices.py"
    )


def test_print_hides_the_controls_and_shows_everything(browser: Browser, page: Path) -> None:
    show(browser, page, "q=mi355")
    assert len(visible_skus(browser)) == 1
    browser.send("Emulation.setEmulatedMedia", {"media": "print"})
    try:
        shown = "getComputedStyle(e).display"
        selectors = (".controls", "nav", "#pick", "label.driver", "#start .copy", "#start-driver-label")
        hidden = [each(browser, selector, shown)[0] for selector in selectors]
        assert hidden == ["none"] * len(selectors)
        assert js(browser, "return getComputedStyle(document.getElementById('start')).display;") != "none"
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


def test_get_started_follows_the_search_and_otherwise_asks(browser: Browser, page: Path) -> None:
    show(browser, page)
    assert not js(browser, "return document.getElementById('start-prompt').hidden;")
    browser.evaluate("document.getElementById('q').focus()")
    browser.type_text("mi355")  # no SKU picked: the first SKU the search leaves in the grid is followed
    assert js(browser, "return document.body.dataset.sku;") == "mi355x"
    assert js(browser, "return document.getElementById('sku').value;") == "mi355x"
    assert js(browser, "return document.getElementById('start-prompt').hidden;") is True
    assert start(browser)["body"] is True
    browser.press("Escape", "Escape", 27)  # the search cleared: no SKU is guessed
    assert js(browser, "return [document.body.dataset.sku, document.getElementById('start-prompt').hidden];") == [
        None,
        False,
    ]
    show(browser, page, "sku=h100-sxm&q=mi355")  # a pick outranks the search
    assert js(browser, "return document.body.dataset.sku;") == "h100-sxm"
    show(browser, page, "q=zzzz-no-such-sku")
    assert js(browser, "return document.getElementById('start-prompt').hidden;") is False


def steps(browser: Browser) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = each(
        browser,
        "#start-steps li.step",
        "({available: e.dataset.available !== 'false', text: e.textContent,"
        " code: [...e.querySelectorAll('pre code')].map(c => c.textContent)})",
    )
    return found


def test_get_started_offers_only_steps_that_work_now(browser: Browser, gated: Path) -> None:
    show(browser, gated, "sku=h100-sxm&env=gpu-nvidia-cu126")  # no lock: neither its session nor its build works
    shown = steps(browser)
    assert [s["available"] for s in shown] == [False, True, False, True]
    assert "the session aborts: envs/gpu-nvidia-cu126/requirements.lock does not exist" in shown[0]["text"]
    assert "not available now" in shown[0]["text"]
    assert shown[0]["code"] == ["accelenv lock gpu-nvidia-cu126"]  # what to copy is the step that makes it work
    assert shown[2]["code"] == ["accelenv lock gpu-nvidia-cu126"]
    copied = " ".join(c for s in shown for c in s["code"])
    assert "nox -s" not in copied
    assert "accelenv build" not in copied
    show(browser, gated, "sku=h100-sxm&env=gpu-nvidia-cu130")  # locked, but its OS packages are not
    shown = steps(browser)
    assert [s["available"] for s in shown] == [True, True, False, True]
    assert shown[0]["code"] == ["nox -s gpu-nvidia-cu130"]
    assert "has no os-packages.lock" in shown[2]["text"]
    assert shown[2]["code"] == ["accelenv lock gpu-nvidia-cu130"]
    show(browser, gated, "sku=h100-sxm")  # the recommended environment: every step works
    assert [s["available"] for s in steps(browser)] == [True, True, True, True]


def test_the_page_says_what_it_was_made_from(browser: Browser, gated: Path, page: Path) -> None:
    show(browser, gated)
    stamp = js(browser, "const s = document.getElementById('stamp'); return [s.textContent, s.dataset.commit];")
    assert stamp == [f"Matrix sha256:{'4f' * 8} \u00b7 commit 0123456789ab \u00b7 2026-11-30", STAMP.commit]
    show(browser, page)  # made without a stamp (a test page): no line claims one
    assert js(browser, "return document.getElementById('stamp');") is None
