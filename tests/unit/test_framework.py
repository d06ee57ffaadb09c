"""An environment's framework: declared for every shipped environment, consistent with its source (rules), read
from the framework's own files (probe), and judged like a pin by `check`: exact version, and the build."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from accelenv.check.checks import check
from accelenv.check.verdict import Status
from accelenv.host.probes.python import framework_builds
from accelenv.host.report import Container, HostReport, Limits, OsInfo, PythonInfo
from accelenv.matrix import load_matrix, validate_text
from accelenv.matrix.model import FrameworkSource

REPO = Path(__file__).resolve().parents[2]
SHIPPED = load_matrix(REPO / "matrix.toml")


def _report(distributions: dict[str, list[str]], builds: dict[str, str] | None = None) -> HostReport:
    return HostReport(
        root="/",
        os=OsInfo(id="ubuntu", version_id="24.04", pretty_name=None, kernel=None, glibc="2.39", arch="x86_64"),
        python=PythonInfo(
            version="3.12.3",
            implementation="CPython",
            executable="python3",
            distributions=distributions,
            builds=builds or {},
        ),
        accelerators=(),
        environment={},
        limits=Limits(shm_bytes=None, memlock_bytes=None, memlock_unlimited=False),
        container=Container(inside_container=False, docker_socket=False, nvidia_container_toolkit=False, cdi_specs=()),
    )


def _framework(
    env_id: str, distributions: dict[str, list[str]], builds: dict[str, str] | None = None
) -> tuple[Status, str, str, str]:
    found = [
        f for f in check(SHIPPED, SHIPPED.envs[env_id], _report(distributions, builds)) if f.id == "framework.torch"
    ]
    assert len(found) == 1
    return found[0].status, found[0].found, found[0].message, found[0].fix


def test_every_shipped_environment_declares_its_framework() -> None:
    sources = {env.id: env.framework.source for env in SHIPPED.envs.values() if env.framework is not None}
    assert set(sources) == set(SHIPPED.envs)
    assert {e for e, s in sources.items() if s is FrameworkSource.BASE_IMAGE} == {
        "gpu-amd-rocm100",
        "gpu-amd-rocm714",
        "neuron-2-33",
        "neuron-2-31",
        "gaudi-1-24",
        "gaudi-1-23",
    }


AMD_BASE = "rocm/pytorch:rocm10.0_ubuntu24.04_py3.12_pytorch_release_2.13.0"
OTHER_RELEASE = f"torch 2.12.0 is installed, gpu-amd-rocm100 declares 2.13.0 (from the base image {AMD_BASE})"
ABSENT = f"torch is not installed: gpu-amd-rocm100's framework comes from the base image {AMD_BASE}"
CPU_BUILD = "torch 2.13.0 is a cpu, not a rocm10.0 build"
TWICE = "torch is installed 2 times; which one imports is an accident"


@pytest.mark.parametrize(
    ("distributions", "builds", "status", "found", "message"),
    [
        ({"torch": ["2.13.0+rocm10.0.0"]}, {"torch": "rocm10.0"}, Status.PASS, "2.13.0+rocm10.0.0 (rocm10.0)", ""),
        ({"torch": ["2.13.0"]}, {"torch": "cpu"}, Status.FAIL, "2.13.0 (cpu)", CPU_BUILD),
        ({"torch": ["2.12.0"]}, {"torch": "rocm7.14"}, Status.FAIL, "2.12.0", OTHER_RELEASE),
        ({}, None, Status.FAIL, "not installed", ABSENT),
        ({"torch": ["2.13.0", "2.13.0+rocm10.0.0"]}, None, Status.FAIL, "2.13.0, 2.13.0+rocm10.0.0", TWICE),
    ],
)  # fmt: skip
def test_a_base_image_framework_is_judged_by_version_and_build(
    distributions: dict[str, list[str]], builds: dict[str, str] | None, status: Status, found: str, message: str
) -> None:
    got_status, got_found, got_message, fix = _framework("gpu-amd-rocm100", distributions, builds)
    assert (got_status, got_found) == (status, found)
    if message:
        assert got_message == message
    if status is Status.FAIL and not distributions:
        assert fix.startswith("run inside the environment's image (nox -s gpu-amd-rocm100 runs its device tests")


def test_a_lock_framework_with_a_local_label_must_carry_it() -> None:
    status, _, message, fix = _framework("gpu-nvidia-cu126", {"torch": ["2.14.1"]}, {"torch": "cu126"})
    lock = "gpu-nvidia-cu126's lock (envs/gpu-nvidia-cu126/requirements.lock)"
    assert status is Status.FAIL
    assert message == f"torch 2.14.1 is installed, gpu-nvidia-cu126 declares 2.14.1+cu126 (from {lock})"
    assert fix.startswith("install the environment's lock into this Python: pip install --require-hashes -r ")
    status, _, message, _ = _framework("gpu-nvidia-cu132", {"torch": ["2.15.0"]}, {"torch": "cu132"})
    assert (status, message) == (Status.PASS, "torch 2.15.0, a cu132 build")  # PyPI's CUDA build has no label


@pytest.mark.parametrize(
    ("text", "build"),
    [
        ("__version__ = '2.15.0'\ncuda: Optional[str] = '13.2'\nhip: Optional[str] = None\n", "cu132"),
        ("__version__ = '2.13.0+rocm10.0.0'\ncuda = None\nhip = '10.0.25421-1a2b'\n", "rocm10.0"),
        ("__version__ = '2.15.0+cpu'\ncuda: Optional[str] = None\nhip: Optional[str] = None\n", "cpu"),
    ],
)
def test_torch_declares_its_build_in_its_version_file(tmp_path: Path, text: str, build: str) -> None:
    (tmp_path / "site" / "torch").mkdir(parents=True)
    (tmp_path / "site" / "torch" / "version.py").write_text(text)
    assert framework_builds([str(tmp_path / "empty"), str(tmp_path / "site")]) == {"torch": build}
    assert framework_builds([str(tmp_path / "empty")]) == {}


def _rule_messages(replacement: tuple[str, str]) -> list[str]:
    text = (REPO / "matrix.toml").read_text()
    assert replacement[0] in text
    result = validate_text(text.replace(replacement[0], replacement[1]))
    return [f"{p.path}: {p.message}" for p in result.problems if p.rule == "framework"]


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        (
            'framework = { name = "torch", version = "2.15.0", build = "cu132", source = "lock" }',
            'framework = { name = "torch", version = "2.15.1", build = "cu132", source = "lock" }',
            (
                "envs.gpu-nvidia-cu132.framework.version: '2.15.1', but requirements.packages pins torch==2.15.0: "
                "write the same version in both"
            ),
        ),
        (
            'framework = { name = "torch", version = "2.13.0", build = "rocm10.0", source = "base-image" }',
            'framework = { name = "torch", version = "2.13.0", build = "rocm7.14", source = "base-image" }',
            (
                "envs.gpu-amd-rocm100.framework.build: 'rocm7.14', but runtime rocm-10-0 takes rocm10.0 builds: "
                'build = "rocm10.0"'
            ),
        ),
        (
            'framework = { name = "jax", version = "0.12.0.1", source = "lock" }',
            'framework = { name = "jax", version = "0.12.0.1", source = "base-image" }',
            (
                "envs.tpu-jax-0-12.framework.source: 'base-image', but requirements.packages pins jax==0.12.0.1: "
                'the lock would install a second copy over the image\'s; drop the pin or say source = "lock"'
            ),
        ),
    ],
)
def test_a_framework_that_contradicts_its_environment_is_refused(old: str, new: str, problem: str) -> None:
    assert _rule_messages((old, new)) == [problem]


def test_an_environment_without_a_framework_is_warned_about() -> None:
    env = dataclasses.replace(SHIPPED.envs["cpu-py311"], framework=None)
    from accelenv.matrix.framework_rules import frameworks

    matrix = dataclasses.replace(SHIPPED, envs={"cpu-py311": env})
    (finding,) = frameworks(matrix, frozenset())
    assert finding.path == ("envs", "cpu-py311")
    assert finding.message.startswith("declares no framework: `accelenv check` cannot verify what the device tests")
