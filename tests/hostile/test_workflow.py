"""The example workflow's plan step: changed file names reach `accelenv ci` as names, never as options or words.
A file named `--tier=release` once turned 2 jobs into 10; one with a space became two names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

from hostilekit import REPO, tool

from accelenv.matrix.load import load_matrix
from accelenv.matrix.model import CiTier
from accelenv.plan.ci import jobs

if TYPE_CHECKING:
    from pathlib import Path

WORKFLOW = REPO / ".github" / "workflows" / "accelenv.yml"
CHANGED = ["--tier=release", "docs/a b.md", "tests/devices/conftest.py"]  # the last: every environment


def plan_script() -> str:
    """The `run: |` block of the step with `id: plan`, dedented."""
    lines = WORKFLOW.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "- id: plan")
    run = next(i for i in range(start, len(lines)) if lines[i].strip() == "run: |")
    indent = len(lines[run + 1]) - len(lines[run + 1].lstrip())
    body = []
    for line in lines[run + 1 :]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        body.append(line[indent:])
    return "\n".join(body) + "\n"


def test_changed_file_names_stay_names(matrix: Path, tmp_path: Path) -> None:
    script = plan_script()
    assert "${{" not in script  # expressions come in as environment variables, not as script text
    bin_dir = tmp_path / "bin"
    names = " ".join(f"'{name}'" for name in CHANGED)
    tool(bin_dir, "git", f'case "$1" in show) cat "{matrix}";; diff) printf "%s\\0" {names};; esac')
    tool(bin_dir, "accelenv", f'exec "{sys.executable}" -m accelenv --matrix "{matrix}" "$@"')
    tool(bin_dir, "jq", 'exec cat "$3"')
    output = tmp_path / "github-output"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": str(REPO / "tools"),
        "BASE_REF": "main",
        "EVENT_NAME": "pull_request",
        "TIER": "pr",
        "GITHUB_OUTPUT": str(output),
    }
    script = script.replace("/tmp/", f"{tmp_path}/")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True,
                            timeout=120, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr
    planned = json.loads(output.read_text().removeprefix("matrix="))
    expected = jobs(load_matrix(matrix), tier=CiTier.PR, changed=CHANGED, previous=load_matrix(matrix))
    # what cannot run (this copy has no locks) is named as not scheduled instead of planned
    not_scheduled = [line.split()[2] for line in (tmp_path / "not-scheduled.txt").read_text().splitlines()]
    assert sorted([job["env"] for job in planned["include"]] + not_scheduled) == sorted(job.env for job in expected)
    release = jobs(load_matrix(matrix), tier=CiTier.RELEASE, changed=CHANGED, previous=load_matrix(matrix))
    assert len(planned["include"]) < len(release)
