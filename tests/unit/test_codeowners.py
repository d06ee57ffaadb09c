"""Owners: each family (and, where it differs, an environment or SKU) names who answers for it in the matrix; the
generated CODEOWNERS section routes their files to them, CI jobs name them, and nobody the matrix does not name
ever appears."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelenv.cli import main
from accelenv.matrix import Matrix, validate_text
from accelenv.matrix.model import CiTier
from accelenv.plan.ci import plan
from accelenv.plan.codeowners import BEGIN, END, replace_section, section

REPO = Path(__file__).resolve().parents[2]
TEXT = (REPO / "matrix.toml").read_text(encoding="utf-8")
NVIDIA = 'ci_queue = "gpu-nvidia"\n'
CU126 = '[envs.gpu-nvidia-cu126]\nfamily = "nvidia"\n'


def owned(family: str = '["@acme/nvidia-ci"]', env: str | None = '["@jdoe"]') -> str:
    text = TEXT.replace(NVIDIA, f"{NVIDIA}owners = {family}\n", 1)
    if env is not None:
        text = text.replace(CU126, f"{CU126}owners = {env}\n", 1)
    assert text.count("owners = ") == (2 if env is not None else 1)
    return text


def matrix_of(text: str) -> Matrix:
    found = validate_text(text)
    assert found.matrix is not None, found.problems
    assert not [p for p in found.problems if p.severity == "error"]
    return found.matrix


def test_the_section_routes_each_environment_to_its_owners() -> None:
    matrix = matrix_of(owned())
    text = section(matrix)
    assert text.startswith(BEGIN + "\n")
    assert text.endswith(END + "\n")
    assert "/tests/devices/test_nvidia_devices.py @acme/nvidia-ci\n" in text
    assert "/envs/gpu-nvidia-cu132/ @acme/nvidia-ci\n/images/gpu-nvidia-cu132/ @acme/nvidia-ci\n" in text
    assert "/envs/gpu-nvidia-cu126/ @jdoe\n" in text  # the environment's own owners, where they differ
    assert "# amd: no owners in matrix.toml (families.amd.owners)\n" in text
    handles = {word for line in text.splitlines() if not line.startswith("#") for word in line.split()[1:]}
    assert handles == {"@acme/nvidia-ci", "@jdoe"}  # only owners the matrix names


def test_the_shipped_matrix_names_no_owner_and_the_section_routes_nothing() -> None:
    text = section(matrix_of(TEXT))
    assert [line for line in text.splitlines() if not line.startswith("#")] == []


def test_jobs_name_their_owners() -> None:
    made = plan(matrix_of(owned()), tier=CiTier.RELEASE)
    owners = {job.env: job.owners for job in made.sessions}
    assert owners["gpu-nvidia-cu132"] == ("@acme/nvidia-ci",)
    assert owners["cpu-py311"] == ()
    row = next(job.as_github() for job in made.sessions if job.env == "gpu-nvidia-cu132")
    assert row["owners"] == ["@acme/nvidia-ci"]


@pytest.mark.parametrize(
    "bad", ['["nvidia-team"]', '["@-lead"]', '["@acme/nvidia ci"]', '["@acme/x,@y"]', "[]", '["@' + "a" * 40 + '"]']
)
def test_an_owner_github_would_refuse_is_refused_with_its_key(bad: str) -> None:
    errors = [str(p) for p in validate_text(owned(family=bad, env=None)).problems if p.severity == "error"]
    assert len(errors) == 1, errors
    assert "families.nvidia.owners" in errors[0]


def test_the_section_replaces_its_old_self_and_keeps_the_rest(tmp_path: Path) -> None:
    target = tmp_path / "CODEOWNERS"
    target.write_text("* @maintainers\n")
    first = replace_section(target.read_text(), "# BEGIN accelenv owners: x\nold\n# END accelenv owners\n")
    assert first == "* @maintainers\n\n# BEGIN accelenv owners: x\nold\n# END accelenv owners\n"
    fresh = section(matrix_of(owned()))
    assert replace_section(first.replace("# BEGIN accelenv owners: x", BEGIN), fresh) == "* @maintainers\n\n" + fresh
    (tmp_path / "matrix.toml").write_text(owned())
    args = ["--matrix", str(tmp_path / "matrix.toml"), "codeowners", "-o", str(target)]
    assert main([*args, "--check"]) == 1
    assert main(args) == 0
    assert main([*args, "--check"]) == 0
    assert target.read_text().startswith("* @maintainers\n\n" + BEGIN)
    assert target.read_text().count(BEGIN) == 1


def test_ci_json_carries_the_owners(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "matrix.toml").write_text(owned())
    assert main(["--matrix", str(tmp_path / "matrix.toml"), "ci", "--json", "--tier", "release"]) in (0, 1)
    data = json.loads(capsys.readouterr().out)
    assert {tuple(r["owners"]) for r in data["sessions"]["include"] if r["family"] == "nvidia"} <= {
        ("@acme/nvidia-ci",),
        ("@jdoe",),
    }
