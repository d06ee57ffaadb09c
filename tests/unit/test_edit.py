"""accelenv add: entries land after their section's last entry, the rest of the file is untouched, and a matrix
that would not validate is never written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from reference import REFERENCE_MATRIX

from accelenv.cli import main
from accelenv.matrix.edit import parse_value

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    path = tmp_path / "matrix.toml"
    shutil.copy(REFERENCE_MATRIX, path)
    return path


MI300A = [
    "family=amd",
    'name="AMD Instinct MI300A"',
    "arch=gfx942",
    'product_names=["*MI300A*"]',
    'pci_device_ids=["0x74a0"]',
    'sources=["rocm-gpu-specs"]',
]


def test_add_a_sku_keeps_everything_else(matrix: Path) -> None:
    before = matrix.read_text()
    assert main(["--matrix", str(matrix), "add", "sku", "mi300a", *MI300A]) == 0
    after = matrix.read_text()
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    assert added[0] == "[skus.mi300a]"
    assert 'pci_device_ids = ["0x74a0"]' in added
    # every original line is still there, in order
    remaining = iter(after.splitlines())
    assert all(any(line == other for other in remaining) for line in before.splitlines())
    assert after.index("[skus.mi300a]") < after.index("[runtimes.cuda-12-6]")
    assert main(["--matrix", str(matrix), "validate"]) == 0


def test_a_wrong_entry_is_refused_and_nothing_written(matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = matrix.read_text()
    bad = [a.replace("0x74a0", "0x74a1").replace("gfx942", "sm_90") for a in MI300A]
    assert main(["--matrix", str(matrix), "add", "sku", "mi300a", *bad]) == 1
    err = capsys.readouterr().err
    assert "skus.mi300a.arch: 'sm_90' is not a amd architecture name" in err
    assert "'0x74a1' already identifies SKU 'mi300x'" in err
    assert matrix.read_text() == before


def test_dry_run_prints_a_diff(matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = matrix.read_text()
    assert main(["--matrix", str(matrix), "add", "sku", "mi300a", *MI300A, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- a/matrix.toml\n+++ b/matrix.toml\n")
    assert "+[skus.mi300a]" in out
    assert matrix.read_text() == before


def test_an_env_from_a_template_does_not_take_the_default(matrix: Path) -> None:
    assert main(["--matrix", str(matrix), "add", "env", "gpu-nvidia-cu128-b", "--from", "gpu-nvidia-cu128",
                 'description="a copy"']) == 0  # fmt: skip
    text = matrix.read_text()
    block = text[text.index("[envs.gpu-nvidia-cu128-b]") :]
    assert "default" not in block.split("\n[", 1)[0]
    assert main(["--matrix", str(matrix), "validate"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["add", "sku", "h100-sxm", "family=nvidia"], "skus.h100-sxm already exists"),
        (["add", "env", "x", "--from", "gpu-nvidia-cu12"], "--from gpu-nvidia-cu12: no envs.gpu-nvidia-cu12"),
        (["add", "sku", "x", "family"], "'family': expected KEY=VALUE"),
    ],
)
def test_usage_errors(matrix: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(["--matrix", str(matrix), *argv]) == 2
    assert message in capsys.readouterr().err


def test_values_are_toml_or_plain_strings() -> None:
    assert parse_value('["a", "b"]') == ["a", "b"]
    assert parse_value("95830") == 95830
    assert parse_value("gfx942") == "gfx942"
    assert parse_value("true") is True
