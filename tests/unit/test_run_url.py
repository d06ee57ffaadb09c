"""The run URL is known on every path: GitHub's run, Buildkite's job, and a suite inside an image, which `accelenv
run` hands the URL of the job that started it; a value that is not a plain https URL is never recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelenv.build.images import run_spec
from accelenv.host.root import Root
from accelenv.host.run_url import build_url, in_run, run_url
from accelenv.matrix import load_matrix

REPO = Path(__file__).resolve().parents[2]
GITHUB = {"GITHUB_RUN_ID": "123", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/accel"}
BUILDKITE = {"BUILDKITE_BUILD_URL": "https://buildkite.com/acme/accel/builds/9", "BUILDKITE_JOB_ID": "0190-ab-cd"}


@pytest.mark.parametrize(
    ("environ", "job", "run"),
    [
        ({}, None, None),
        (GITHUB, "https://github.com/acme/accel/actions/runs/123", "https://github.com/acme/accel/actions/runs/123"),
        (
            BUILDKITE,
            "https://buildkite.com/acme/accel/builds/9#0190-ab-cd",
            "https://buildkite.com/acme/accel/builds/9",
        ),
        (
            {**BUILDKITE, "BUILDKITE_JOB_ID": "x y"},
            "https://buildkite.com/acme/accel/builds/9",
            BUILDKITE["BUILDKITE_BUILD_URL"],
        ),
        (
            {"ACCELENV_RUN_URL": "https://ci.example/job/7", **BUILDKITE},
            "https://ci.example/job/7",
            BUILDKITE["BUILDKITE_BUILD_URL"],
        ),
        ({"ACCELENV_RUN_URL": "javascript:alert(1)"}, None, None),
        ({"ACCELENV_RUN_URL": "https://ci.example/a b"}, None, None),
        ({"BUILDKITE_BUILD_URL": "http://buildkite.example/b/1"}, None, None),
        ({**GITHUB, "GITHUB_SERVER_URL": "https://x\n.example"}, None, None),
    ],
)
def test_run_url_from_each_system(environ: dict[str, str], job: str | None, run: str | None) -> None:
    assert run_url(environ) == job
    assert build_url(environ) == run


def test_a_job_of_a_run_is_in_it_and_a_neighbour_is_not() -> None:
    run = "https://github.com/acme/accel/actions/runs/12"
    assert in_run(run, run)
    assert in_run(run + "#job", run)
    assert not in_run(run + "3", run)
    assert not in_run(None, run)


def test_accelenv_run_passes_the_run_url_into_the_image(tmp_path: Path) -> None:
    matrix = load_matrix(REPO / "matrix.toml")
    env = matrix.envs["cpu-py311"]
    url = "https://buildkite.com/acme/accel/builds/9#0190-ab-cd"
    spec = run_spec(matrix, env, "img", ["true"], root=Root(tmp_path), workdir=tmp_path, run_url=url)
    assert spec.environment["ACCELENV_RUN_URL"] == url
    bare = run_spec(matrix, env, "img", ["true"], root=Root(tmp_path), workdir=tmp_path)
    assert "ACCELENV_RUN_URL" not in bare.environment


def test_a_record_made_on_buildkite_names_its_job(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelenv.results import plugin

    for name in ("ACCELENV_RUN_URL", *GITHUB):
        monkeypatch.delenv(name, raising=False)
    for name, value in BUILDKITE.items():
        monkeypatch.setenv(name, value)
    assert plugin._run_url() == "https://buildkite.com/acme/accel/builds/9#0190-ab-cd"
