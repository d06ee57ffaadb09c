"""The vendor guide's worked example, performed: docs/adding-an-accelerator.md's `console worked-example` block
is run command by command, exactly as written, in a copy of the repository (its tracked and untracked files, as
`git ls-files` lists them), and every command must succeed: the two SKUs are added and attached, `validate
--strict` passes, the generated files are rendered and checked, and the unit tests pass on the changed matrix.

The block is read from the guide, so the guide cannot show a command this test does not run. It takes a minute
or two (the unit suite runs once more in the copy), hence the integration mark."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repocopy import copy_repository

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "adding-an-accelerator.md"
FENCE = "```console worked-example"


def worked_example(text: str) -> list[str]:
    """The commands of the guide's worked-example block, continuation lines joined."""
    lines = text.splitlines()
    start = lines.index(FENCE) + 1
    end = lines.index("```", start)
    commands: list[str] = []
    for line in lines[start:end]:
        if line.startswith("$ "):
            commands.append(line[2:])
        elif commands and commands[-1].rstrip().endswith("\\"):
            commands[-1] = commands[-1].rstrip()[:-1].rstrip() + " " + line.strip()
    return commands


def test_the_guide_has_a_worked_example() -> None:
    commands = worked_example(GUIDE.read_text(encoding="utf-8"))
    assert [c.split()[:3] for c in commands[:3]] == [
        ["accelenv", "add", "sku"],
        ["accelenv", "add", "sku"],
        ["accelenv", "attach", "example-rtx-pro-4500"],
    ]
    assert "accelenv validate --strict" in commands
    assert "python -m pytest tests/unit -q -x" in commands


@pytest.mark.heavy(seconds=60)
def test_the_worked_example_ends_green(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the repository's files")
    copy = tmp_path / "repo"
    copy_repository(REPO, copy)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(copy / "tools"),  # the copy's accelenv, whatever is installed
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("ACCELENV_MATRIX", None)
    for command in worked_example(GUIDE.read_text(encoding="utf-8")):
        result = subprocess.run(
            ["bash", "-c", command], cwd=copy, env=env, capture_output=True, text=True, timeout=900, check=False
        )
        assert result.returncode == 0, f"`{command}` failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        assert "Traceback" not in result.stderr
    text = (copy / "matrix.toml").read_text(encoding="utf-8")
    # each SKU is filed with its family (after the last AMD and the last NVIDIA SKU), and attached
    assert text.index("[skus.mi355x]") < text.index("[skus.example-mi350p]") < text.index("# ---- Google TPU")
    assert (
        text.index("[skus.rtx-pro-6000-maxq]") < text.index("[skus.example-rtx-pro-4500]") < text.index("[skus.mi100]")
    )
    amd = text[text.index("[envs.gpu-amd-rocm100]") :].split("\n[", 1)[0]
    assert '"example-mi350p"' in amd
    # --from copied the family and architecture only: no memory, PCI id or notes of the RTX PRO 6000
    entry = text[text.index("[skus.example-rtx-pro-4500]") :].split("\n[", 1)[0].split("\n\n", 1)[0]
    assert 'arch = "sm_120"' in entry
    assert "pci_device_ids" not in entry
    assert "notes" not in entry
