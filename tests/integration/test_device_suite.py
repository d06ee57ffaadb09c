"""The device suite (tests/devices) for every family, run for real by pytest with ACCELENV_ENV set to the family's
default environment, on a captured host with no device (an empty ACCELENV_ROOT):

- in a Python lacking the framework (its modules shadowed by ones that fail to import), every test fails and
  says where the framework should have come from: the lock, or the base image by name. Never a skip.
- with a framework that sees no device, the tests fail, unless --accelenv-allow-missing-hardware asked to skip
  them (never under CI); then the run's last line says it is not a hardware pass, and the tally says why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelenv.check.framework import origin
from accelenv.matrix import load_matrix
from accelenv.matrix.model import FrameworkSource

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(REPO / "matrix.toml")
FAMILIES = ["cpu", "nvidia", "amd", "tpu", "neuron", "gaudi"]
FRAMEWORK_MODULES = ["ray", "torch", "jax", "torch_neuronx", "torch_xla", "habana_frameworks"]

# A framework that imports and sees no device, for each family's tests.
NO_DEVICE_FRAMEWORKS = {
    "torch/__init__.py": "from . import cuda, version\n__version__ = '0'\n",
    "torch/cuda.py": "def device_count():\n    return 0\n",
    "torch/version.py": "cuda = '13.2'\nhip = '10.0'\n",
    "jax/__init__.py": "def devices(kind=None):\n    raise RuntimeError('no TPU backend')\n",
    "torch_neuronx/__init__.py": "",
    "torch_xla/__init__.py": "",
    "torch_xla/core/__init__.py": "",
    "torch_xla/core/xla_model.py": "",
    "habana_frameworks/__init__.py": "",
    "habana_frameworks/torch/__init__.py": "",
    "habana_frameworks/torch/hpu.py": "def device_count():\n    return 0\n",
}


def _default(family: str) -> str:
    env = MATRIX.default_env(family)
    assert env is not None
    return env.id


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _suite(
    env_id: str, tmp_path: Path, shadow: Path, *args: str, environ: dict[str, str] | None = None
) -> tuple[int, str, dict[str, int]]:
    host = tmp_path / "host"
    host.mkdir(exist_ok=True)
    tally = tmp_path / "tally.json"
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "ACCELENV_ALLOW_MISSING_HARDWARE")}
    env |= {
        "ACCELENV_ENV": env_id,
        "ACCELENV_ROOT": str(host),
        "PYTHONPATH": os.pathsep.join([str(shadow), str(REPO / "tools"), env.get("PYTHONPATH", "")]),
        **(environ or {}),
    }
    argv = [sys.executable, "-m", "pytest", *MATRIX.envs[env_id].tests, "-p", "no:cacheprovider"]
    argv += ["-o", "filterwarnings=default", "--accelenv-summary", str(tally), *args]
    result = subprocess.run(
        argv,
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    counts = json.loads(tally.read_text()) if tally.exists() else {}
    return result.returncode, result.stdout + result.stderr, counts


@pytest.mark.parametrize("family", FAMILIES)
def test_a_missing_framework_fails_every_test_and_names_its_source(family: str, tmp_path: Path) -> None:
    shadow = _write(
        tmp_path / "shadow",
        {f"{m}/__init__.py": f"raise ImportError('{m} is not in this Python')\n" for m in FRAMEWORK_MODULES},
    )
    env_id = _default(family)
    env = MATRIX.envs[env_id]
    code, output, tally = _suite(env_id, tmp_path, shadow, "--accelenv-allow-missing-hardware")
    assert code != 0, output[-3000:]
    assert tally["failed"] >= 1
    assert (tally["passed"], tally["no_device"], tally["skipped"]) == (0, 0, 0), tally  # no test skipped
    assert "could not import" in output
    assert env.framework is not None
    if env.framework.source is FrameworkSource.BASE_IMAGE:
        assert f"comes from {origin(MATRIX, env)}" in output, output[-3000:]
        assert "rocm/pytorch" in output or "neuron" in output or "habana" in output
    else:
        assert f"comes from {env_id}'s lock (envs/{env_id}/requirements.lock)" in output, output[-3000:]


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "cpu"])
def test_no_device_fails_unless_skipping_was_asked_and_then_says_it_is_not_a_hardware_pass(
    family: str, tmp_path: Path
) -> None:
    shadow = _write(tmp_path / "shadow", NO_DEVICE_FRAMEWORKS)
    env_id = _default(family)
    code, output, tally = _suite(env_id, tmp_path, shadow)
    assert code != 0, output[-3000:]
    assert tally["failed"] >= 1
    assert tally["no_device"] == 0

    results = tmp_path / "results"
    code, output, tally = _suite(
        env_id,
        tmp_path,
        shadow,
        "--accelenv-allow-missing-hardware",
        "-p",
        "accelenv.results.plugin",
        environ={"ACCELENV_RESULTS": str(results)},
    )
    assert code == 0, output[-3000:]
    assert tally["failed"] == 0
    assert tally["passed"] == 0
    assert tally["no_device"] >= 2
    (record,) = [json.loads(p.read_text()) for p in results.glob("*.result.json")]  # the record says the same
    assert (record["outcome"], record["host"]["sku"], record["host"]["device_count"]) == ("not_proven", None, 0)
    assert f"{tally['no_device']} device test(s) skipped as asked" in record["note"]
    assert output.rstrip().splitlines()[-1] == (
        f"{env_id}: NOT PROVEN: {tally['no_device']} device test(s) skipped, no device here "
        "(--skip-missing-hardware); 0 passed"
    )

    code, output, tally = _suite(env_id, tmp_path, shadow, "--accelenv-allow-missing-hardware", environ={"CI": "true"})
    assert code != 0, output[-3000:]  # CI never skips missing hardware
    assert tally["no_device"] == 0


def test_the_cpu_suite_passes_with_its_framework(tmp_path: Path) -> None:
    code, output, tally = _suite(_default("cpu"), tmp_path, tmp_path / "nothing-shadowed")
    assert code == 0, output[-3000:]
    assert (tally["passed"], tally["failed"], tally["no_device"]) == (1, 0, 0)
    assert "NOT PROVEN" not in output
