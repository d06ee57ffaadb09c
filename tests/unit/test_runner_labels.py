"""CI runner labels are a view of the node's label set: `--format github-runner` (what `config.sh --labels` takes)
and `--format buildkite-tags` (an agent's tags), within each system's rules whatever the host reports, and a job
that `accelenv ci` schedules selects only a node whose verdict on its environment is pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelenv.check.labels import PREFIX, labelled
from accelenv.check.runner_labels import (
    BUILDKITE_PART,
    GITHUB_LABEL,
    buildkite_tags,
    github_label,
    github_runner,
    render_runner,
    verdict_label,
)
from accelenv.matrix import load_matrix
from accelenv.matrix.model import CiTier
from accelenv.plan.ci import plan

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "580.65+cu13, =x y\n\u202e,ray.io/évil" + "9" * 80


def node(**verdicts: str) -> dict[str, str]:
    raw = {
        PREFIX + "family": "nvidia",
        PREFIX + "sku": "h100-sxm",
        PREFIX + "devices": "8",
        PREFIX + "driver": HOSTILE,
        PREFIX + "nvlink-domain": "not-a-fact",
    }
    raw.update({f"{PREFIX}env.{env}": verdict for env, verdict in verdicts.items()})
    return raw


def _github_ok(labels: list[str]) -> None:
    for label in labels:
        assert GITHUB_LABEL.fullmatch(label), label
        assert "," not in label
        assert label == label.lower()
        assert len(label) <= 63
    assert len({label.lower() for label in labels}) == len(labels)


def _buildkite_ok(tags: list[str]) -> None:
    for tag in tags:
        key, _, value = tag.partition("=")
        assert BUILDKITE_PART.fullmatch(key), tag
        assert BUILDKITE_PART.fullmatch(value), tag


def test_only_a_passing_verdict_becomes_a_runner_label() -> None:
    found = labelled(node(**{"gpu-nvidia-cu132": "pass", "gpu-nvidia-cu126": "warn", "gpu-nvidia-cu128": "fail"}))
    labels = github_runner(found)
    _github_ok(labels)
    assert "accelenv-env-gpu-nvidia-cu132" in labels
    assert not any(
        label.startswith(("accelenv-env-gpu-nvidia-cu126", "accelenv-env-gpu-nvidia-cu128")) for label in labels
    )
    assert {"accelenv-family-nvidia", "accelenv-sku-h100-sxm", "accelenv-devices-8"} <= set(labels)
    assert not any("nvlink" in label for label in labels)  # facts only, as FACT_KEYS says
    driver = next(label for label in labels if label.startswith("accelenv-driver-"))
    assert len(driver) <= 63  # the hostile driver string, cut and given a digest
    tags = buildkite_tags(found)
    _buildkite_ok(tags)
    assert {
        "accelenv-env-gpu-nvidia-cu132=pass",
        "accelenv-env-gpu-nvidia-cu126=warn",
        "accelenv-env-gpu-nvidia-cu128=fail",
        "accelenv-family=nvidia",
    } <= set(tags)
    assert render_runner(found, "github-runner") == ",".join(labels) + "\n"
    assert render_runner(found, "buildkite-tags") == ",".join(tags) + "\n"


def test_a_scheduled_job_lands_only_on_a_node_that_passes_its_environment() -> None:
    matrix = load_matrix(REPO / "matrix.toml")
    made = plan(matrix, tier=CiTier.RELEASE)
    for job in (j for j in made.sessions if "self-hosted" in j.runs_on):
        passing = set(github_runner(labelled(node(**{job.env: "pass"})))) | set(job.runs_on[:-1])
        failing = set(github_runner(labelled(node(**{job.env: "fail"})))) | set(job.runs_on[:-1])
        assert set(job.runs_on) <= passing  # GitHub: a runner with every label of runs-on
        assert not set(job.runs_on) <= failing
        tags = dict(t.split("=", 1) for t in buildkite_tags(labelled(node(**{job.env: "pass"}))))
        assert all(tags.get(key) == value for key, value in job.agent_tags)
        assert job.agent_tags == ((verdict_label(job.env), "pass"),)


@given(st.text(min_size=0, max_size=200))
def test_any_text_becomes_a_valid_github_label(text: str) -> None:
    label = github_label(text)
    assert GITHUB_LABEL.fullmatch(label)
    assert len(label) <= 63


@given(st.text(min_size=1, max_size=120))
def test_any_fact_value_stays_within_both_systems_rules(value: str) -> None:
    found = labelled({PREFIX + "family": "amd", PREFIX + "sku": value, PREFIX + "env.gpu-amd-rocm100": "pass"})
    _github_ok(github_runner(found))
    _buildkite_ok(buildkite_tags(found))


@pytest.mark.parametrize("env", ["gpu-nvidia-cu132", "x" * 120])
def test_the_verdict_label_fits(env: str) -> None:
    assert GITHUB_LABEL.fullmatch(verdict_label(env))
