"""The vendor checklist for a new family, performed: docs/adding-an-accelerator.md's `console family-plugin` block
is run command by command, exactly as written, in a copy of the repository as a fresh clone has it, with the
reference plugin (tools/plugins/accelenv-ascend) installed by pip into a virtualenv of the test's own. Every
command must succeed, except one marked `# fails here: WORDS`, which must fail saying WORDS (the device tests,
with no torch_npu or CANN here). The outputs are then checked: the plugin loaded, the probe read the real
npu-smi capture into eight 910B3, the host check passed, the labels and the CI job are the family's.

The block is read from the guide, so the guide cannot show a command this test does not run. About a minute
(pip builds the plugin; the rest is accelenv on the copy), hence the integration mark."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from repocopy import copy_repository

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "adding-an-accelerator.md"
FENCE = "```console family-plugin"
FAILS = re.compile(r"\s+# fails here: (.+)\Z")


def commands(text: str) -> list[tuple[str, str | None]]:
    """(command, the words it must fail with, or None) for each `$` line of the block."""
    lines = text.splitlines()
    start = lines.index(FENCE) + 1
    end = lines.index("```", start)
    out: list[tuple[str, str | None]] = []
    for line in lines[start:end]:
        if line.startswith("$ "):
            command = line[2:]
            fails = FAILS.search(command)
            out.append((command[: fails.start()] if fails else command, fails.group(1) if fails else None))
    return out


def test_the_guide_walks_every_step_of_the_checklist() -> None:
    shown = " ; ".join(c for c, _ in commands(GUIDE.read_text(encoding="utf-8")))
    for step in (
        "pip install",
        "accelenv show --plugins",
        'plugins = ["accelenv-ascend"]',
        "accelenv validate --strict",
        "accelenv lock --check",
        "accelenv render --check",
        "accelenv inspect --family ascend",
        "accelenv check npu-ascend-cann85",
        "accelenv labels",
        "accelenv ci",
        "nox -l",
        "device_tests",
    ):
        assert step in shown, step


def _venv(tmp_path: Path) -> tuple[Path, Path]:
    """A virtualenv for the plugin that sees this interpreter's packages (accelenv, its dependencies): its bin and
    its site-packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    ours = subprocess.run(
        [sys.executable, "-c", "import site; print(site.getsitepackages()[0])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    (site / "accelenv-test-parent.pth").write_text(ours + "\n")
    return venv / "bin", site


def test_the_family_plugin_example_ends_green(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the repository's files")
    copy = tmp_path / "repo"
    copy_repository(REPO, copy)
    venv_bin, site = _venv(tmp_path)
    env = {
        **os.environ,
        # the venv's python (pip installs the plugin there), then this interpreter's accelenv and nox
        "PATH": f"{venv_bin}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": f"{copy / 'tools'}{os.pathsep}{site}",  # the copy's accelenv; the plugin as pip installed it
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    for name in ("ACCELENV_MATRIX", "ACCELENV_PLUGINS", "RAY_ADDRESS"):
        env.pop(name, None)
    said: dict[str, str] = {}
    for command, fails in commands(GUIDE.read_text(encoding="utf-8")):
        result = subprocess.run(
            ["bash", "-c", command], cwd=copy, env=env, capture_output=True, text=True, timeout=600, check=False
        )
        output = result.stdout + result.stderr
        if fails is None:
            assert result.returncode == 0, f"`{command}` failed:\n{output[-4000:]}"
            assert "Traceback" not in result.stderr, output[-4000:]
        else:
            assert result.returncode != 0, f"`{command}` passed, but the guide says it fails here:\n{output[-4000:]}"
            assert fails in output, output[-4000:]
            assert " skipped" not in output  # failed by name, never skipped
        said[command] = output

    def of(part: str) -> str:
        return next(output for command, output in said.items() if part in command)

    plugins = of("accelenv show --plugins")
    assert re.search(r"accelenv-ascend\s+0\.1\.0\s+ascend\s+ascend:hccl\s+loaded", plugins), plugins
    inspected = of("accelenv inspect")
    assert "driver 23.0.7" in inspected
    assert "8 device(s) via npu-smi" in inspected
    assert inspected.count("ascend-910b3") == 8
    checked = of("accelenv check")
    assert "verdict: pass" in checked
    labels = of("accelenv labels")
    assert '"accelenv.io/family": "ascend"' in labels
    assert '"accelenv.io/sku": "ascend-910b3"' in labels
    jobs = json.loads(of("accelenv ci").split("\naccelenv ci: ")[0])["sessions"]["include"]
    ascend = [j for j in jobs if j["family"] == "ascend"]
    runs_on = ["self-hosted", "linux", "ascend-npu", "arm64", "accelenv-env-npu-ascend-cann85"]  # a passing node only
    assert [(j["env"], j["platform"], j["runs-on"]) for j in ascend] == [("npu-ascend-cann85", "linux/arm64", runs_on)]
    assert "npu-ascend -> Huawei Ascend NPU" in of("nox -l")
    shown = of("accelenv show npu-ascend-cann85")
    assert "family      Huawei Ascend NPU (ascend, experimental)" in shown
    assert "base image  quay.io/ascend/cann:8.5.0-910b-ubuntu22.04-py3.11" in shown


def test_the_guide_shows_the_reference_plugin_as_it_is() -> None:
    text = GUIDE.read_text(encoding="utf-8").splitlines()
    start = text.index("```python plugin-excerpt") + 1
    shown = text[start : text.index("```", start)]
    source = (REPO / "tools/plugins/accelenv-ascend/accelenv_ascend/__init__.py").read_text(encoding="utf-8")
    assert "\n".join(shown) in source
