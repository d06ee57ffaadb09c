"""What `accelenv check` and `accelenv inspect` import: only what they need (start-up is part of the user's
experience; benchmarks/check_latency.py measures it). A regression here shows up as a module that should not be
loaded, not as a timing, so the test cannot flake on a slow machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import io, json, sys
from accelenv.cli import main
main(sys.argv[1:], out=io.StringIO())
print(json.dumps(sorted(sys.modules)))
"""

# never needed to check or inspect a host against a matrix this accelenv already validated
HEAVY = (
    "jsonschema",  # the schema is only checked by validate (and once per matrix text)
    "tomllib",  # a validated matrix is read back from the cache as JSON
    "importlib.metadata",  # installed distributions are read from folder names; plugins only when declared
    "packaging.requirements",  # exact pins are read without packaging's requirement parser
    "packaging.tags",
    "requests",
    "docker",
    "tomlkit",
    "accelenv.plan.lock",
    "accelenv.plan.render",
    "accelenv.upstream.outdated",
    "accelenv.cli.matrix",
    "accelenv.cli.generate",
    "accelenv.cli.lock",
    "accelenv.cli.images",
)


def loaded(tmp_path: Path, *args: str) -> set[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(REPO / "tools")}
    env.pop("ACCELENV_NO_CACHE", None)
    argv = [sys.executable, "-c", PROGRAM, "--matrix", str(REPO / "matrix.toml"), *args]
    subprocess.run(argv, capture_output=True, check=False, cwd=tmp_path, env=env, timeout=120)  # fills the cache
    result = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [("check", "cpu-py311"), ("check", "gpu-nvidia", "--host-only"), ("inspect",)])
def test_host_commands_import_only_what_they_need(tmp_path: Path, args: tuple[str, ...]) -> None:
    modules = loaded(tmp_path, *args)
    assert "accelenv.cli.host" in modules  # the command ran
    assert [m for m in HEAVY if m in modules] == []
