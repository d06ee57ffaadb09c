"""The example workflow, run as its YAML states it: the plan step (changed file names reach `accelenv ci` as names,
never as options or words: a file named `--tier=release` once turned 2 jobs into 10), and the judging job's
commands over the records a real run made, where a record of another run or a job that left none fails the run.
Every generated workflow and pipeline is checked against the systems' published schemas (SchemaStore's, as
check-jsonschema vendors them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pytest
from hostilekit import REPO, tool
from ruamel.yaml import YAML

from accelenv.matrix.load import load_matrix
from accelenv.matrix.model import CiTier
from accelenv.plan.ci import GATE, jobs, plan
from accelenv.plan.ci_outputs import buildkite

if TYPE_CHECKING:
    from pathlib import Path

WORKFLOWS = REPO / ".github" / "workflows"
WORKFLOW = WORKFLOWS / "accelenv.yml"
CHANGED = ["--tier=release", "docs/a b.md", "tests/devices/conftest.py"]  # the last: every environment
SHIPPED = REPO / "matrix.toml"
RUN = {"GITHUB_RUN_ID": "4242", "GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "acme/accel"}
RUN_URL = "https://github.com/acme/accel/actions/runs/4242"


def workflow() -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe").load(WORKFLOW.read_text(encoding="utf-8"))
    return data


def steps(job: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = workflow()["jobs"][job]["steps"]
    return found


def _environ() -> dict[str, str]:
    """This process's environment without any CI system's or accelenv's own variables: a test run inside CI
    must not hand its own run URL (or results folder) to the runs it stands up."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "BUILDKITE", "ACCELENV_"))}


def _shims(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "accelenv", f'exec "{sys.executable}" -m accelenv --matrix "{SHIPPED}" "$@"')
    return {**_environ(), "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(REPO / "tools")}


def _bash(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip


def test_changed_file_names_stay_names(tmp_path: Path) -> None:
    script = next(s for s in steps("plan") if s.get("id") == "plan")["run"]
    assert "${{" not in script  # expressions come in as environment variables, not as script text
    env = _shims(tmp_path)
    names = " ".join(f"'{name}'" for name in CHANGED)
    tool(tmp_path / "bin", "git", f'case "$1" in show) cat "{SHIPPED}";; diff) printf "%s\\0" {names};; esac')
    tool(tmp_path / "bin", "jq", 'exec python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[2]))'
         '[sys.argv[1][1:]], separators=(\',\', \':\')))" "$2" "$3"')  # fmt: skip
    output = tmp_path / "github-output"
    env |= {"BASE_REF": "main", "EVENT_NAME": "pull_request", "TIER": "pr", "GITHUB_OUTPUT": str(output)}
    env |= {"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    result = _bash(script.replace("/tmp/", f"{tmp_path}/"), env, tmp_path)
    assert result.returncode == 0, result.stderr
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines())
    planned = json.loads(outputs["sessions"])
    matrix = load_matrix(SHIPPED)
    expected = jobs(matrix, tier=CiTier.PR, changed=CHANGED, previous=matrix)
    assert sorted(job["artifact"] for job in planned["include"]) == sorted(job.artifact for job in expected)
    assert len(planned["include"]) < len(jobs(matrix, tier=CiTier.RELEASE, changed=CHANGED, previous=matrix))
    assert json.loads(outputs["images"])["include"]  # image jobs apart, in their own matrix
    assert "### accelenv ci: tier pr" in (tmp_path / "summary.md").read_text()


def test_the_gate_is_the_same_on_both_systems() -> None:
    gate = next(s for s in steps("plan") if str(s.get("name", "")).startswith("Gate"))["run"]
    assert gate == " && ".join(GATE)
    assert f'command: "{" && ".join(GATE)}"' in buildkite(plan(load_matrix(SHIPPED), tier=CiTier.PR))


def test_each_session_job_uploads_its_evidence_under_its_own_name() -> None:
    session = workflow()["jobs"]["session"]
    upload = next(s for s in session["steps"] if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    assert upload["with"]["name"] == "${{ matrix.artifact }}"
    assert "results/" in upload["with"]["path"].split()
    snapshot = next(s for s in session["steps"] if "accelenv snapshot" in str(s.get("run", "")))
    assert snapshot["if"] == "always()"
    judge = workflow()["jobs"]["judge"]
    downloads = [s["with"] for s in judge["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    assert {"pattern": "accelenv-session-*", "path": "artifacts"} in downloads  # no run-id: this run's only
    assert any(str(s.get("uses", "")).startswith("actions/upload-pages-artifact@") for s in judge["steps"])
    pages = workflow()["jobs"]["pages"]
    assert pages["steps"][0]["uses"].startswith("actions/deploy-pages@")
    assert pages["permissions"] == {"pages": "write", "id-token": "write"}


def _real_run(project: Path, results: Path, extra: dict[str, str]) -> None:
    """A real pytest run of one test with the result-record plugin, as a session job makes it."""
    (project / "test_small.py").write_text("def test_small() -> None:\n    assert sum([1, 1]) == 2\n")
    (project / "root/proc/sys/kernel").mkdir(parents=True, exist_ok=True)  # a captured x86_64 host, nothing more
    (project / "root/proc/sys/kernel/arch").write_text("x86_64\n")
    env = {**_environ(), **extra, "ACCELENV_ENV": "cpu-py311", "ACCELENV_MATRIX": str(SHIPPED)}
    env |= {"ACCELENV_RESULTS": str(results), "ACCELENV_ROOT": str(project / "root")}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "accelenv.results.plugin", "-p", "no:cacheprovider",
                    "--rootdir", str(project), "-c", os.devnull, str(project / "test_small.py")],
                   env=env, cwd=project, capture_output=True, text=True, timeout=120, check=True)  # fmt: skip


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A judging job's folder: the plan and the session artifacts of a cpu-py311 run, made by real runs."""
    work = tmp_path_factory.mktemp("judge")
    matrix = load_matrix(SHIPPED)
    made = plan(matrix, tier=CiTier.PR, changed=["envs/cpu-py311/requirements.lock"])
    assert [job.artifact for job in made.sessions] == [
        "accelenv-session-cpu-py311-amd64",
        "accelenv-session-cpu-py311-arm64",
    ]
    fetch = [s["with"] for s in steps("judge") if str(s.get("uses", "")).startswith("actions/download-artifact@")]
    downloads = {w.get("name") or w["pattern"]: w["path"] for w in fetch}
    (work / downloads["accelenv-plan"]).mkdir()
    (work / downloads["accelenv-plan"] / "plan.json").write_text(json.dumps(made.as_json()))
    for job in made.sessions:
        _real_run(work, work / downloads["accelenv-session-*"] / job.artifact / "results", RUN)
    return work


def _judge(folder: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "job"
    shutil.copytree(folder, work)
    script = next(s for s in steps("judge") if "accelenv collect" in str(s.get("run", "")))["run"]
    return _bash(script, _shims(tmp_path) | RUN, work)


def test_the_judge_passes_a_run_whose_jobs_all_left_their_records(judged_run: Path, tmp_path: Path) -> None:
    result = _judge(judged_run, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 record(s) of 2 job(s) collected into collected, 0 problem(s)" in result.stdout
    assert len(list((tmp_path / "job" / "merged").glob("*.result.json"))) == 2
    page = (tmp_path / "job" / "page" / "index.html").read_text()
    assert RUN_URL in page  # the page links each proof to its run


def test_a_record_of_another_run_proves_nothing(judged_run: Path, tmp_path: Path) -> None:
    """A fork's record (another run) in a job's artifact, and one under a name no job of this run has: neither is
    counted; the first fails the judge, the second is named."""
    forged = tmp_path / "forged"
    forged.mkdir()
    _real_run(forged, forged / "results", {**RUN, "GITHUB_RUN_ID": "4243"})
    record = next((forged / "results").glob("*.result.json"))
    shutil.copy(record, judged_run / "artifacts" / "accelenv-session-cpu-py311-amd64" / "results")
    (judged_run / "artifacts" / "accelenv-session-evil").mkdir()
    shutil.copy(record, judged_run / "artifacts" / "accelenv-session-evil")
    try:
        result = _judge(judged_run, tmp_path)
    finally:
        (judged_run / "artifacts" / "accelenv-session-cpu-py311-amd64" / "results" / record.name).unlink()
        shutil.rmtree(judged_run / "artifacts" / "accelenv-session-evil")
    assert result.returncode == 1
    assert f"made by another run ({RUN_URL[:-1]}3), not {RUN_URL}: not counted" in result.stdout
    assert "ignored accelenv-session-evil: no job of this run uploads it" in result.stdout
    assert len(list((tmp_path / "job" / "merged").glob("*.result.json"))) == 2  # the page still shows the rest


def test_a_scheduled_job_that_left_no_record_fails_the_judge(judged_run: Path, tmp_path: Path) -> None:
    work = tmp_path / "run"
    shutil.copytree(judged_run, work)
    shutil.rmtree(work / "artifacts" / "accelenv-session-cpu-py311-arm64")
    result = _judge(work, tmp_path)
    assert result.returncode == 1
    assert (
        "accelenv-session-cpu-py311-arm64: the job scheduled for cpu-py311 left no record of this run (no artifact: "
        "it did not run, or failed before uploading)"
    ) in result.stdout
    assert (tmp_path / "job" / "page" / "index.html").exists()  # published all the same, with what there is


def test_the_buildkite_judge_downloads_each_jobs_own_artifacts(tmp_path: Path) -> None:
    """The pipeline's judging step, run as the pipeline states it (after the upload's `$$` -> `$`), with a
    buildkite-agent that hands out each step's artifacts: the records of this build's jobs pass; a record of
    another build in a job's artifacts fails it."""
    build = "https://buildkite.com/acme/accel/builds/9"
    made = plan(load_matrix(SHIPPED), tier=CiTier.PR, changed=["envs/cpu-py311/requirements.lock"])
    pipeline = YAML(typ="safe").load(buildkite(made))
    step = next(s for s in pipeline["steps"] if s.get("key") == "judge")
    assert [d["step"] for d in step["depends_on"][1:]] == [job.artifact for job in made.sessions]
    store = tmp_path / "store"
    for n, job in enumerate(made.sessions):
        _real_run(
            tmp_path, store / job.artifact / "results", {"BUILDKITE_BUILD_URL": build, "BUILDKITE_JOB_ID": f"j{n}"}
        )
    # buildkite-agent artifact download PATTERN . --step KEY: that step's files, at their paths, into the folder
    agent = 'test "$1 $2" = "artifact download" && cp -r "' + str(store) + '/$6/results" "$4"'
    tool(tmp_path / "bin", "buildkite-agent", agent)
    work = tmp_path / "build"
    work.mkdir()
    env = _shims(tmp_path) | {"BUILDKITE_BUILD_URL": build, "BUILDKITE_JOB_ID": "judge"}
    script = step["command"].replace("$$", "$")
    result = _bash(script, env, work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 record(s) of 2 job(s) collected into collected, 0 problem(s)" in result.stdout
    assert f"{build}#j{len(made.sessions) - 1}" in (work / "page" / "index.html").read_text()  # the newest proof's job
    other = tmp_path / "other"
    other.mkdir()
    _real_run(other, other / "results", {"BUILDKITE_BUILD_URL": build[:-1] + "10", "BUILDKITE_JOB_ID": "x"})
    shutil.copy(next((other / "results").glob("*.result.json")), store / made.sessions[0].artifact / "results")
    shutil.rmtree(work)
    work.mkdir()
    result = _bash(script, env, work)
    assert result.returncode == 1
    assert f"made by another run ({build[:-1]}10#x), not {build}: not counted" in result.stdout


def _schema_check(schema: str, files: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *map(str, files)],
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def test_every_workflow_and_pipeline_matches_the_published_schema(tmp_path: Path) -> None:
    workflows = sorted(WORKFLOWS.glob("*.yml"))
    assert len(workflows) >= 2
    result = _schema_check("vendor.github-workflows", workflows)
    assert result.returncode == 0, result.stdout + result.stderr
    matrix = load_matrix(SHIPPED)
    from accelenv.plan.readiness import readiness

    pipelines: list[Path] = []
    for tier in CiTier:
        for ready in (None, readiness(matrix, REPO), readiness(matrix, tmp_path)):  # all, shipped, nothing locked
            made = plan(matrix, tier=tier, ready=ready)
            pipelines.append(tmp_path / f"{tier}-{len(pipelines)}.yml")
            pipelines[-1].write_text(buildkite(made))
    pipelines.append(tmp_path / "none.yml")
    pipelines[-1].write_text(buildkite(plan(matrix, tier=CiTier.PR, changed=[])))
    result = _schema_check("vendor.buildkite", pipelines)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(pipelines[0].read_text().replace("soft_fail: true", "soft_fail: sometimes", 1))
    broken.write_text(broken.read_text().replace('    depends_on: "gate"', "    depends_on: 3", 1))
    assert _schema_check("vendor.buildkite", [broken]).returncode == 1  # the check can fail
