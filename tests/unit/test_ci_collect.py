"""`accelenv collect`: a record counts only in its own job's artifact, for that job's environment, from this run;
everything else is named, and a job that left nothing fails the collection."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from accelenv.cli import main
from accelenv.errors import UsageError
from accelenv.plan.ci_collect import Expected, collect, expected_from_plan, parse_expected

if TYPE_CHECKING:
    from pathlib import Path

RUN = "https://github.com/acme/accel/actions/runs/7"
JOB = Expected(artifact="accelenv-session-cpu-py311-amd64", env="cpu-py311")


def record(folder: Path, name: str, *, env: str = "cpu-py311", url: str | None = RUN) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.result.json"
    path.write_text(json.dumps({"env": {"id": env}, "run_url": url}))
    return path


def test_only_this_jobs_records_count(tmp_path: Path) -> None:
    art = tmp_path / JOB.artifact / "results"
    record(art, "good")
    record(art, "other-env", env="gpu-nvidia-cu132")
    record(art, "other-run", url=RUN + "1")
    record(art, "no-url", url=None)
    (art / "link.result.json").symlink_to(art / "good.result.json")
    (art / "torn.result.json").write_text('{"env": ')
    record(tmp_path / "accelenv-session-evil", "planted")
    got = collect(tmp_path, [JOB], run=RUN)
    assert [(a, n) for a, n, _ in got.accepted] == [(JOB.artifact, "good.result.json")]
    assert got.ignored == ("accelenv-session-evil",)
    problems = "\n".join(got.problems)
    assert "link.result.json: a symlink, not a record" in problems
    assert "other-env.result.json: names environment 'gpu-nvidia-cu132', but its job ran cpu-py311" in problems
    assert f"other-run.result.json: made by another run ({RUN}1), not {RUN}: not counted" in problems
    assert "no-url.result.json: made by another run (None)" in problems
    assert "torn.result.json: not a readable JSON record" in problems
    assert len(got.problems) == 5


def test_a_job_that_left_nothing_is_named(tmp_path: Path) -> None:
    got = collect(tmp_path, [JOB], run=RUN)
    why = "left no record of this run (no artifact: it did not run, or failed before uploading)"
    assert got.problems == (f"{JOB.artifact}: the job scheduled for cpu-py311 {why}",)
    record(tmp_path / JOB.artifact, "stale", url=RUN + "#old-job")  # a job of this run: counts
    assert collect(tmp_path, [JOB], run=RUN).problems == ()


@pytest.mark.parametrize("bad", ["accelenv-session-x", "=cpu", "something=cpu", "accelenv-session-../x=cpu"])
def test_expect_pairs_are_artifact_names(bad: str) -> None:
    with pytest.raises(UsageError, match="expected ARTIFACT=ENV"):
        parse_expected([bad])


def test_the_plan_lists_what_to_expect() -> None:
    plan = {"expected": [{"artifact": JOB.artifact, "env": "cpu-py311", "platform": "linux/amd64", "arch": "amd64"}]}
    assert expected_from_plan(plan, "plan.json") == [JOB]
    with pytest.raises(UsageError, match="no `expected` list"):
        expected_from_plan({"include": []}, "plan.json")


def test_the_cli_writes_a_fresh_folder_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GITHUB_RUN_ID", "BUILDKITE_BUILD_URL"):  # as on a machine outside CI
        monkeypatch.delenv(name, raising=False)
    record(tmp_path / "artifacts" / JOB.artifact, "good")
    args = ["collect", str(tmp_path / "artifacts"), "--expect", f"{JOB.artifact}=cpu-py311", "--run", RUN]
    assert main([*args, "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / JOB.artifact / "good.result.json").exists()
    assert "1 record(s) of 1 job(s) collected" in capsys.readouterr().out
    assert main([*args, "-o", str(tmp_path / "out")]) == 2  # not empty: nothing of an earlier collection mixes in
    assert "not a new or empty folder" in capsys.readouterr().err
    assert main(["collect", str(tmp_path / "artifacts"), "-o", str(tmp_path / "o2")]) == 2  # run unknown
