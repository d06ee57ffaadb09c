"""Issue 28, injection and unclear errors: matrix text reaching docs/compatibility.md renders as that text
(a backslash before `|` cannot open a cell, Markdown link syntax is not a link), and a sysfs `driver` link that
is a loop is read as no driver name, never as the driver "driver"."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from accelenv.host.root import Root
from accelenv.plan.report import _md

if TYPE_CHECKING:
    from pathlib import Path


def _cells(row: str) -> list[str]:
    """The cells of a GFM table row: split at `|` not escaped by a backslash (an escaped backslash is text)."""
    cells, current, i = [], "", 0
    while i < len(row):
        if row[i] == "\\" and i + 1 < len(row):
            current += row[i : i + 2]
            i += 2
            continue
        if row[i] == "|":
            cells.append(current)
            current = ""
        else:
            current += row[i]
        i += 1
    return [*cells, current]


@pytest.mark.parametrize(
    "name",
    ["a|b", "a\\|b", "a\\\\|b", "[click](https://evil.example)", "![x](http://e/i.png)", "x\\", "<b>&amp;</b>"],
)
def test_matrix_text_stays_one_cell_and_no_link(name: str) -> None:
    cell = _md(name)
    assert len(_cells(f"|{cell}|")) == 3
    assert not re.search(r"(?<!\\)\[", cell)  # no unescaped bracket: no link, no image
    unescaped = re.sub(r"\\(.)", r"\1", cell).replace("&lt;", "<").replace("&amp;", "&")
    assert unescaped == name


@pytest.mark.parametrize("target", ["driver", "../driver", "../../x/driver", "..", "bad\x1bname"])
def test_a_driver_link_that_names_itself_has_no_driver_name(tmp_path: Path, target: str) -> None:
    device = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:17:00.0"
    device.mkdir(parents=True)
    (device / "driver").symlink_to(target)
    assert Root(tmp_path).link_name("/sys/bus/pci/devices/0000:17:00.0/driver") is None


def test_a_real_driver_link_is_read(tmp_path: Path) -> None:
    device = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:17:00.0"
    device.mkdir(parents=True)
    (device / "driver").symlink_to("../../../bus/pci/drivers/nvidia")
    assert Root(tmp_path).link_name("/sys/bus/pci/devices/0000:17:00.0/driver") == "nvidia"
