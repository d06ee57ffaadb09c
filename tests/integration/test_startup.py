"""What `accelenv check` and `accelenv inspect` import: only what they need (start-up is part of the user's
experience; benchmarks/check_latency.py measures it). A regression here shows up as a module that should not be
loaded, not as a timing, so the test cannot flake on a slow machine.

Each command runs in a fresh interpreter twice (the first run fills the matrix cache), and the modules of the
second run are judged three ways:
- third-party: none but `packaging` (each of the others costs more than all of accelenv's own start-up);
- the standard library: none of `HEAVY_STDLIB`, each measured (`python -X importtime`, cumulative, on the 2-core
  CI machine) at 2 ms or more. `json.encoder` (0.3 ms) stays, with `json`, the matrix cache's format. The models
  (matrix, host report, findings) are `accelenv.records.frozen` classes, not dataclasses: `dataclasses` brings
  `inspect`, `ast`, `dis` and `tokenize` (about 8 ms) and compiles six methods a class at import;
- accelenv's own: none of the modules that only other commands, or families with devices, need.
"""

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
before = set(sys.modules)
from accelenv.cli import main
main(sys.argv[1:], out=io.StringIO())
print(json.dumps({"before": sorted(before), "after": sorted(sys.modules)}))
"""

THIRD_PARTY = frozenset({"packaging"})  # packaging.version: the model's versions

# never needed to check or inspect a host against a matrix this accelenv already validated; the cost in ms
HEAVY_STDLIB = (
    "tomllib",  # 8: a validated matrix is read back from the cache as JSON
    "importlib.metadata",  # 34: installed distributions are read from folder names; plugins only when declared
    "hashlib",  # 3 (OpenSSL): the cache's entries are named by a checksum, and hold the text they were made from
    "email",  # 15
    "http.client",  # 23
    "urllib.request",  # 31
    "asyncio",  # 36
    "ssl",  # 9
    "socket",  # 3
    "zipfile",  # 10
    "tarfile",  # 5
    "tempfile",  # 5
    "pprint",  # 9
    "shutil",  # 3, with bz2 and lzma: argparse's formatter and which() are sized and written without it
    "dataclasses",  # 9 with what it imports, and about 0.2 ms a class for the methods it compiles
    "inspect",  # 5
    "tokenize",  # 4
)
HEAVY = (
    "jsonschema",  # the schema is only checked by validate (and once per matrix text)
    "packaging.requirements",  # exact pins are read without packaging's requirement parser
    "packaging.tags",
    "packaging.specifiers",
    "requests",
    "urllib3",
    "docker",
    "tomlkit",
    "ray",
    "accelenv.matrix.rules",  # validation: not for a matrix text already validated
    "accelenv.matrix.schema",
    "accelenv.matrix.locate",
    "accelenv.netio",  # the network client: only --metadata asks the network, and not by default
    "accelenv.plan.lock",
    "accelenv.plan.provenance",
    "accelenv.plan.render",
    "accelenv.upstream.outdated",
    "accelenv.cli.matrix",
    "accelenv.cli.generate",
    "accelenv.cli.lock",
    "accelenv.cli.images",
    *HEAVY_STDLIB,
)
# not needed to check an environment of a family without devices: it runs no tool, and none of these checks
CPU_HEAVY = (
    "subprocess",  # 5
    "concurrent.futures",  # 8, with logging
    "accelenv.host.probes.nvidia",
    "accelenv.host.facts",
    "accelenv.check.driver",
    "accelenv.check.runtime",
    "accelenv.check.container",
    "accelenv.check.consistency",
    "accelenv.check.tool_faults",
    "accelenv.matrix.driver_branches",
    "accelenv.host.cdi_yaml",
)


def loaded(tmp_path: Path, *args: str) -> tuple[set[str], set[str]]:
    """(the modules of a bare interpreter, the modules after `accelenv ARGS` ran in it)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(REPO / "tools")}
    env.pop("ACCELENV_NO_CACHE", None)
    argv = [sys.executable, "-c", PROGRAM, "--matrix", str(REPO / "matrix.toml"), *args]
    subprocess.run(argv, capture_output=True, check=False, cwd=tmp_path, env=env, timeout=120)  # fills the cache
    result = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    modules = json.loads(result.stdout.strip().splitlines()[-1])
    return set(modules["before"]), set(modules["after"])


def _under(module: str, names: tuple[str, ...]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in names)


@pytest.mark.parametrize(
    ("args", "also_heavy"),
    [
        (("check", "cpu-py311"), CPU_HEAVY),
        (("check", "gpu-nvidia", "--host-only"), ()),
        (("inspect",), ()),
    ],
)
def test_host_commands_import_only_what_they_need(
    tmp_path: Path, args: tuple[str, ...], also_heavy: tuple[str, ...]
) -> None:
    bare, modules = loaded(tmp_path, *args)
    assert "accelenv.cli.host" in modules  # the command ran
    new = modules - bare
    third_party = {m.split(".")[0] for m in new} - set(sys.stdlib_module_names) - {"accelenv"}
    assert third_party <= THIRD_PARTY, f"third-party modules on the start-up path: {sorted(third_party)}"
    assert sorted(m for m in new if _under(m, (*HEAVY, *also_heavy))) == []
