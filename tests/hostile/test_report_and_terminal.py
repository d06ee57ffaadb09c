"""Items 6 and 7: matrix text cannot break the HTML report's page or put raw HTML into the Markdown report, and
control characters from a matrix, a sysfs file or a tool never reach the terminal raw."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Any

import tomlkit
from hostilekit import accelenv, tool
from hostkit import make_root
from reference import REFERENCE_TEXT

from accelenv.cli import main
from accelenv.matrix.load import model_from_text
from accelenv.plan.report import html_page, markdown

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

HOSTILE_NAME = "NVIDIA L4 <!--<script>document.title='pwned'</script> & </script><b>|x|</b>"


def _with_sku_name(name: str) -> Any:
    document = tomlkit.parse(REFERENCE_TEXT)
    document["skus"]["l4"]["name"] = name
    return model_from_text(tomlkit.dumps(document))


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._open: dict[str, str | None] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self._open = dict(attrs)
            self.scripts.append((self._open, ""))

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._open = None


def test_a_sku_name_cannot_break_the_html_page() -> None:
    page = html_page(_with_sku_name(HOSTILE_NAME))
    parser = _Scripts()
    parser.feed(page)
    assert [attrs.get("id") for attrs, _ in parser.scripts] == ["data", None]  # the data, then the page's own code
    data = json.loads(parser.scripts[0][1])
    assert HOSTILE_NAME in [sku["name"] for sku in data["skus"]]
    assert "<" not in parser.scripts[0][1]
    assert "document.getElementById" in parser.scripts[1][1]


def test_a_sku_name_is_text_in_the_markdown_report() -> None:
    text = markdown(_with_sku_name(HOSTILE_NAME))
    body = text.split("\n", 1)[1]  # past the generated-by comment
    assert "<" not in body  # no raw HTML at all: `<` and `&` are entities, so no tag can open
    line = next(line for line in body.splitlines() if line.startswith("| NVIDIA L4 "))
    assert "&lt;!--&lt;script>document.title='pwned'&lt;/script> &amp; &lt;/script>&lt;b>\\|x\\|&lt;/b>" in line
    cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]  # the name's own pipes are escaped: they split no cell
    header = next(h for h in body.splitlines() if h.startswith("| SKU |") and "gpu-nvidia" in h)
    assert len(cells) == header.count("|") - 1


ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31m\r\x9b"


def test_control_characters_in_a_sysfs_file_do_not_reach_the_terminal(tmp_path: Path, matrix: Path) -> None:
    root = make_root(tmp_path / "root", files={"/etc/os-release": f'PRETTY_NAME="Ubuntu{ESCAPES}"\nID=ubuntu\n'})
    result = accelenv("--matrix", str(matrix), "inspect", "--root", str(root))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert "\r" not in result.stdout
    assert "\x9b" not in result.stdout
    assert "Ubuntu\\x1b]0;pwned\\x07\\x1b[2J" in result.stdout  # shown, harmlessly


def test_control_characters_in_a_tool_fault_do_not_reach_the_terminal(tmp_path: Path, matrix: Path) -> None:
    bin_dir = tmp_path / "bin"
    escapes = ESCAPES.replace("\r", "").replace(chr(0x9B), "")  # a fault keeps one line: no \r to split it
    tool(bin_dir, "nvidia-smi", f"printf 'boom{escapes}\\n' >&2; exit 3")
    root = make_root(tmp_path / "root")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    result = accelenv("--matrix", str(matrix), "check", "gpu-nvidia-cu128", "--root", str(root), env=env)
    assert "\x1b" not in result.stdout + result.stderr
    assert "nvidia-smi exited with status 3: boom\\x1b]0;pwned\\x07\\x1b[2J" in result.stdout


def test_control_characters_in_matrix_keys_do_not_reach_the_terminal(
    matrix: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tomlkit.parse(matrix.read_text())
    document["skus"]["l4"]["\x1b[31mevil\x1b[0m"] = 1
    document["envs"]["cpu\x1b[2Jpy"] = {"family": "cpu"}
    matrix.write_text(tomlkit.dumps(document))
    assert main(["--matrix", str(matrix), "validate"]) == 1
    out, err = capsys.readouterr()
    assert "\x1b" not in out + err
    assert "unknown key '\\x1b[31mevil\\x1b[0m'" in out
