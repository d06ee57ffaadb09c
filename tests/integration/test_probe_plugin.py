"""A new accelerator family's probe as a plugin: a small package, installed with pip, registered under the
`accelenv.probes` entry-point group, shows its devices in `inspect` and is judged by `check`.

The family, its SKU, runtime and environment are matrix data added with `accelenv add`; the plugin's probe runs
a fake vendor tool on PATH, exactly as the built-in probes do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hostkit import Pci, make_root

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

PROBE = '''
from accelenv.host.facts import DeviceFacts, ParseError
from accelenv.host.probes import ToolView, tool_errors


class DemoProbe:
    """demo-smi prints one line per device: index, name, memory in MiB."""

    family = "demo"

    def commands(self):
        return {"demo-smi": ["demo-smi", "--list"]}

    def interpret(self, ctx, results):
        errors = tool_errors(results)
        devices = []
        result = results.get("demo-smi")
        if result is not None and result.ok:
            for line in result.stdout.splitlines():
                index, name, memory = (part.strip() for part in line.split(","))
                devices.append(DeviceFacts(index=int(index), name=name, arch="demo1", memory_mib=int(memory)))
        return ToolView(driver_version="1.0.0", devices=tuple(devices), source="demo-smi" if devices else None,
                        errors=tuple(errors))
'''


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=300, check=False)


def test_a_plugin_family_shows_up_in_inspect_and_check(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    (plugin / "accelenv_demo").mkdir(parents=True)
    (plugin / "accelenv_demo" / "__init__.py").write_text(textwrap.dedent(PROBE))
    (plugin / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "accelenv-demo"
            version = "0.1.0"

            [project.entry-points."accelenv.probes"]
            demo = "accelenv_demo:DemoProbe"
            """
        )
    )
    site = tmp_path / "site"
    install = run(
        sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
        str(plugin), env=dict(os.environ),
    )  # fmt: skip
    assert install.returncode == 0, install.stderr

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "demo-smi").write_text(
        "#!/bin/sh\nprintf '0, Demo Accelerator X1, 65536\\n1, Demo Accelerator X1, 65536\\n'\n"
    )
    (bin_dir / "demo-smi").chmod(0o755)

    matrix = tmp_path / "repo" / "matrix.toml"
    matrix.parent.mkdir()
    matrix.write_text((REPO / "matrix.toml").read_text())
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "ACCELENV_MATRIX": str(matrix),
    }
    cli = [sys.executable, "-m", "accelenv"]
    steps = [
        ["add", "family", "demo", 'name="Demo accelerator"', "maturity=experimental", "session=demo",
         "runtime_kind=demo", 'pci_vendor_ids=["0x1234"]', 'host_tools=["demo-smi"]', 'arch_pattern="demo[0-9]+"'],
        ["add", "sku", "demo-x1", "family=demo", 'name="Demo Accelerator X1"', "arch=demo1",
         'product_names=["Demo Accelerator X1"]'],
        ["add", "runtime", "demo-rt-1", "family=demo", 'name="Demo runtime 1.0"', 'version="1.0.0"',
         'architectures=["demo1"]', 'driver={ min = "1.0" }',
         'base_images={ debian12 = { repository = "python", tag = "3.11-slim-bookworm", python = "3.11" } }'],
        ["add", "env", "demo-1", "family=demo", "runtime=demo-rt-1", 'description="demo"', "default=true",
         "os=debian12", 'python="3.11"', 'platforms=["linux/amd64"]', 'skus=["demo-x1"]',
         'requirements={ packages = [] }', 'tests=["tests/devices"]', "ci_tier=release"],
    ]  # fmt: skip
    for step in steps:
        added = run(*cli, *step, env=env)
        assert added.returncode == 0, added.stderr

    root = make_root(tmp_path / "host", pci=[Pci("0000:3b:00.0", "0x1234", "0x0001", klass="0x120000")])
    inspect = run(*cli, "inspect", "--json", "--family", "demo", "--root", str(root), env=env)
    assert inspect.returncode == 0, inspect.stderr
    (demo,) = json.loads(inspect.stdout)["accelerators"]
    assert demo["source"] == "demo-smi"
    assert [(d["name"], d["arch"], d["sku"]) for d in demo["devices"]] == [
        ("Demo Accelerator X1", "demo1", "demo-x1")
    ] * 2

    check = run(*cli, "check", "demo-1", "--json", "--root", str(root), env=env)
    verdict = {c["id"]: c["status"] for c in json.loads(check.stdout)["checks"]}
    assert verdict["hardware.present"] == "pass"
    assert verdict["devices.sku"] == "pass"
    assert verdict["devices.arch"] == "pass"
    assert verdict["driver.version"] == "pass"
