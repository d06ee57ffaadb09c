"""The real command line against fake vendor tools on PATH and a captured host under --root.

The tools are shell scripts that print real captures, hang, fail, or cannot be executed; accelenv runs them as
subprocesses exactly as it runs nvidia-smi on a real node. This proves the timeout and fault handling end to end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from hostkit import Pci, capture, make_root, reorder_query
from reference import REFERENCE_MATRIX

from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.schema import inspect_schema
from accelenv.plan.schemas import check_schema

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"


def tool(folder: Path, name: str, body: str, *, executable: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755 if executable else 0o644)


def accelenv(*args: str, path: Path, root: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{path}:/usr/bin:/bin", "ACCELENV_MATRIX": str(REFERENCE_MATRIX)}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return subprocess.run(
        [sys.executable, "-m", "accelenv", *args, "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def h100_host(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "data"
    data.mkdir()
    (data / "query").write_text(reorder_query(capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS))
    (data / "version").write_text(capture("nvidia-smi--version__" + H100))
    bin_dir = tmp_path / "bin"
    tool(
        bin_dir,
        "nvidia-smi",
        f'case "$1" in --version) cat {data}/version;; --query-gpu=*) cat {data}/query;; *) exit 2;; esac',
    )
    root = make_root(
        tmp_path / "root",
        pci=[Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")],
        modules={"nvidia": "590.48.01"},
        dev=["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm"],
        files={"/etc/os-release": 'ID=ubuntu\nVERSION_ID="24.04"\nPRETTY_NAME="Ubuntu 24.04.1 LTS"\n'},
    )
    return bin_dir, root


def test_inspect_json_from_fake_nvidia_smi(h100_host: tuple[Path, Path]) -> None:
    bin_dir, root = h100_host
    result = accelenv("inspect", "--json", path=bin_dir, root=root)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    jsonschema.Draft202012Validator(inspect_schema()).validate(report)
    (nvidia,) = report["accelerators"]
    assert nvidia["driver_version"] == "590.48.01"
    assert nvidia["runtime_version"] == "13.1"
    assert nvidia["device_nodes"] == ["/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidiactl"]
    assert nvidia["devices"][0]["sku"] == "h100-sxm"
    assert report["os"]["pretty_name"] == "Ubuntu 24.04.1 LTS"


def test_check_json_and_exit_code(h100_host: tuple[Path, Path]) -> None:
    bin_dir, root = h100_host
    result = accelenv("check", "gpu-nvidia-cu128", "--json", path=bin_dir, root=root)
    verdict = json.loads(result.stdout)
    jsonschema.Draft202012Validator(check_schema()).validate(verdict)
    statuses = {c["id"]: c["status"] for c in verdict["checks"]}
    assert statuses["driver.version"] == "pass"
    assert statuses["devices.arch"] == "pass"
    # this interpreter is not the env's Python 3.12 with torch: the verdict fails, and the exit code says so
    assert verdict["verdict"] == "fail"
    assert result.returncode == 1


def test_hanging_tool_is_bounded_by_the_timeout(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "nvidia-smi", "sleep 30")
    root = make_root(tmp_path / "root", pci=[Pci("0000:01:00.0", "0x10de", "0x2330", driver="nvidia")])
    start = time.monotonic()
    result = accelenv("check", "gpu-nvidia-cu128", "--json", "--timeout", "1", path=bin_dir, root=root)
    elapsed = time.monotonic() - start
    assert elapsed < 15, elapsed
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    assert "nvidia-smi did not finish within 1 s" in checks["tools"]["found"]
    assert checks["hardware.present"]["status"] == "pass"  # the PCI layer still sees the GPU


@pytest.mark.parametrize(
    ("body", "executable", "fragment"),
    [
        (
            "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.' >&2; exit 9",
            True,
            "nvidia-smi exited with status 9: NVIDIA-SMI has failed",
        ),
        ("printf 'No devices were found\\n'", True, "nvidia-smi --query-gpu"),
        ("exit 0", False, "not permitted to run"),
    ],
)
def test_tool_faults_through_the_cli(tmp_path: Path, body: str, executable: bool, fragment: str) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "nvidia-smi", body, executable=executable)
    root = make_root(tmp_path / "root", pci=[Pci("0000:01:00.0", "0x10de", "0x2330", driver="nvidia")])
    result = accelenv("inspect", "--json", path=bin_dir, root=root)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    (nvidia,) = json.loads(result.stdout)["accelerators"]
    assert any(fragment in e for e in nvidia["errors"]), nvidia["errors"]


def test_snapshot_then_check_elsewhere(h100_host: tuple[Path, Path], tmp_path: Path) -> None:
    bin_dir, root = h100_host
    snap = tmp_path / "node.json"
    assert accelenv("snapshot", "-o", str(snap), path=bin_dir, root=root).returncode == 0
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    replay = accelenv("check", "gpu-nvidia-cu128", "--json", "--snapshot", str(snap), path=empty, root=tmp_path)
    checks = {c["id"]: c["status"] for c in json.loads(replay.stdout)["checks"]}
    assert checks["driver.version"] == "pass"
    assert checks["hardware.present"] == "pass"


def test_bad_snapshot_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    result = accelenv("check", "cpu", "--snapshot", str(bad), path=tmp_path, root=tmp_path)
    assert result.returncode == 2
    assert "not an accelenv snapshot" in result.stderr
    assert "Traceback" not in result.stderr
