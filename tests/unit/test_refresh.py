"""`accelenv refresh`'s plan: what `outdated` found, written into the matrix text (pure; no network)."""

from __future__ import annotations

import dataclasses

import pytest
from reference import REFERENCE_MATRIX, REFERENCE_TEXT

from accelenv.errors import MatrixInvalidError
from accelenv.matrix import load_matrix, validate_text
from accelenv.upstream.outdated import Finding
from accelenv.upstream.refresh import TpuLine, plan_refresh, summary_markdown

PYPI = "https://pypi.org/simple"
MATRIX = load_matrix(REFERENCE_MATRIX)


def package(env: str, name: str, current: str, latest: str) -> Finding:
    return Finding(kind="package", env=env, name=name, current=current, latest=latest, index=PYPI)


def test_newer_pins_are_bumped_and_the_result_validates() -> None:
    plan = plan_refresh(REFERENCE_TEXT, MATRIX, [package("cpu-py311", "pytest", "9.2.0", "9.3.1")])
    assert [(c.kind, c.env, c.summary) for c in plan.changes] == [("bump", "cpu-py311", "pytest 9.2.0 -> 9.3.1")]
    assert plan.envs == ("cpu-py311",)
    new = validate_text(plan.text)
    assert new.ok
    assert new.matrix is not None
    assert "pytest==9.3.1" in new.matrix.envs["cpu-py311"].requirements.specs
    assert new.matrix.envs["gpu-nvidia-cu128"].requirements.specs[-1] == "pytest==9.2.0"  # only that env
    # everything else in the file is kept as written
    assert plan.text.replace("pytest==9.3.1", "pytest==9.2.0", 1) == REFERENCE_TEXT


def test_held_findings_are_left_as_they_are() -> None:
    held = dataclasses.replace(package("tpu-jax-0-8", "libtpu", "0.0.32", "0.0.52"), held="jax pins it")
    plan = plan_refresh(REFERENCE_TEXT, MATRIX, [held])
    assert plan.empty
    assert plan.text == REFERENCE_TEXT


def test_a_newer_jax_is_a_new_tpu_line_beside_the_old_one() -> None:
    findings = [
        package("tpu-jax-0-8", "jax", "0.8.3", "0.12.0.1"),
        package("tpu-jax-0-8", "libtpu", "0.0.32", "0.0.52"),  # moves with the line, not bumped alone
        Finding(kind="runtime", env="libtpu-0-0-32", name="jax", current="0.8.3", latest="0.12.0.1", index=PYPI),
    ]
    line = TpuLine(jax="0.12.0.1", libtpu="0.0.50.1", requires_python=">=3.12")
    plan = plan_refresh(REFERENCE_TEXT, MATRIX, findings, tpu_lines={"libtpu-0-0-32": line})
    new = validate_text(plan.text)
    assert new.ok
    assert new.matrix is not None
    assert str(new.matrix.runtimes["libtpu-0-0-50"].version) == "0.0.50.1"
    env = new.matrix.envs["tpu-jax-0-12"]
    assert env.requirements.specs[:3] == ("jax==0.12.0.1", "jaxlib==0.12.0.1", "libtpu==0.0.50.1")
    assert not env.default  # the old line stays the default until the new one has passed CI
    assert new.matrix.envs["tpu-jax-0-8"].requirements.specs[0] == "jax==0.8.3"  # the old line is kept
    assert plan.envs == ("tpu-jax-0-12",)


def test_a_python_the_new_jax_does_not_support_is_named() -> None:
    findings = [
        Finding(kind="runtime", env="libtpu-0-0-32", name="jax", current="0.8.3", latest="0.12.0.1", index=PYPI)
    ]
    line = TpuLine(jax="0.12.0.1", libtpu="0.0.50.1", requires_python=">=3.13")
    plan = plan_refresh(REFERENCE_TEXT, MATRIX, findings, tpu_lines={"libtpu-0-0-32": line})
    assert plan.empty
    assert any("needs Python >=3.13; tpu-jax-0-8 runs 3.12" in s.why for s in plan.skipped)


def test_what_needs_vendor_facts_is_named_not_written() -> None:
    findings = [
        Finding(kind="runtime", env="cuda-13-0", name="CUDA 13.x", current="13.0", latest="13.5", index=PYPI),
        Finding(kind="framework", env="frameworks", name="torch", current="2.10.0", latest="2.15.0", index=PYPI),
        Finding(kind="sku", env="nvidia", name="NVIDIA GB400 (0x3300)", current="-", latest="-", index=PYPI),
    ]
    plan = plan_refresh(REFERENCE_TEXT, MATRIX, findings)
    assert plan.empty
    assert [s.what for s in plan.skipped] == [
        "CUDA 13.x: 13.0 -> 13.5",
        "torch 2.15.0 (a new framework line)",
        "NVIDIA GB400 (0x3300)",
    ]
    summary = summary_markdown(plan)
    assert "### Left out" in summary
    assert "accelenv add runtime ... --from cuda-13-0" in summary


def test_an_environment_whose_lock_fails_keeps_its_old_pins() -> None:
    findings = [package("cpu-py311", "pytest", "9.2.0", "9.3.1"), package("gaudi-1-23", "pytest", "9.2.0", "9.3.1")]
    plan = plan_refresh(REFERENCE_TEXT, MATRIX, findings, exclude_envs={"gaudi-1-23"})
    assert plan.envs == ("cpu-py311",)
    assert [s.what for s in plan.skipped] == ["pytest 9.3.1 in gaudi-1-23"]


def test_a_change_that_would_not_validate_writes_nothing() -> None:
    # a pin of a +cu128 torch moved to a build the runtime does not take: the local-label rule refuses it
    bad = package("gpu-nvidia-cu128", "torch", "2.9.1+cu128", "2.10.0+cu126")
    with pytest.raises(MatrixInvalidError):
        plan_refresh(REFERENCE_TEXT, MATRIX, [bad])
