"""The documents `accelenv ci` prints from a `Plan` (plan/ci.py): GitHub Actions JSON, a Buildkite pipeline, text.

Both CI systems get the same gate (plan.ci.GATE) before any environment job, the same jobs, the same evidence
(each session job's `results/`: record, JUnit XML, snapshots; plus a host snapshot taken whatever happened) under
the same artifact names, and the same judging job at the end (`accelenv collect`, `accelenv results`, the page).
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from accelenv.plan.ci import GATE
from accelenv.plan.ci_hooks import GATE_EXIT

if TYPE_CHECKING:
    from accelenv.plan.ci import Job, Plan

EVIDENCE = "results"  # the folder each session job uploads (the results plugin writes there)
SNAPSHOT = f"{EVIDENCE}/host.snapshot.json"  # the runner's own snapshot, taken after the session whatever happened
COLLECTED, MERGED, PAGE = "collected", "merged", "page"


def github(plan: Plan) -> str:
    """The plan as JSON: `sessions` and `images` are strategy.matrix values ({"include": [...]}; GitHub refuses an
    empty include, so the workflow skips a job on `fromJSON(...).include[0] == null`), `expected` the artifacts
    the judging job must find, `not_scheduled` what cannot run and why."""
    return json.dumps(plan.as_json(), indent=2) + "\n"


def text(plan: Plan) -> str:
    lines = [f"tier {plan.tier}: {len(plan.sessions)} session job(s), {len(plan.images)} image job(s)"]
    lines += [f"  session {job.name:<28} runs-on {','.join(job.runs_on)}" for job in plan.sessions]
    lines += [f"  image   {job.name:<28} runs-on {','.join(job.runs_on)}" for job in plan.images]
    lines += not_scheduled_lines(plan)
    lines += [f"note: {note}" for note in plan.notes]
    lines += [f"error: {error}" for error in plan.errors]
    return "\n".join(lines) + "\n"


def not_scheduled_lines(plan: Plan) -> list[str]:
    """One line per job that cannot run: why, and the matrix's recorded reason where it gives one."""
    return [
        f"{u.target} not scheduled: {u.why}" + (f" (recorded: {u.recorded})" if u.recorded else "")
        for u in plan.unscheduled
    ]


def summary(plan: Plan) -> str:
    """Markdown for the run's summary page ($GITHUB_STEP_SUMMARY, a Buildkite annotation)."""
    lines = [f"### accelenv ci: tier {plan.tier}", ""]
    lines.append(f"{len(plan.sessions)} session job(s), {len(plan.images)} image job(s).")
    if plan.unscheduled:
        lines += ["", "#### Not scheduled", ""]
        lines += [f"- {line}" for line in not_scheduled_lines(plan)]
    if plan.errors:
        lines += ["", "#### Errors", ""]
        lines += [f"- {error}" for error in plan.errors]
    return "\n".join(lines) + "\n"


def _yaml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid YAML scalar


def _command(shell: str) -> str:
    """A step's command: `buildkite-agent pipeline upload` interpolates `$NAME` itself, so every `$` meant for the
    shell is written `$$`, which the upload turns back into `$`."""
    return _yaml(shell.replace("$", "$$"))


def session_command(job: Job) -> str:
    """A session job's shell command: a fresh results folder, the image first when its framework is the base
    image's, the session, then the runner's snapshot whatever happened; the session's exit status is the job's."""
    env = shlex.quote(job.env)
    steps = [f"rm -rf {EVIDENCE}", f"mkdir -p {EVIDENCE}"]
    run = f"nox -s {shlex.quote(job.session)}"
    if job.builds_image:
        run = f"accelenv build {env} --platform {shlex.quote(job.platform)} && {run}"
    steps += [
        f"{run}; status=$?",
        f"accelenv snapshot -o {SNAPSHOT} || true",
        "exit $status",
    ]
    return "; ".join(steps)


def image_command(job: Job) -> str:
    env = shlex.quote(job.env)
    return f"accelenv build {env} --platform {shlex.quote(job.platform)} && accelenv verify {env}"


def judge_commands(plan: Plan, *, download: list[str]) -> list[str]:
    """The judging job: fetch the run's own artifacts (`download`, per system), keep only the records its jobs
    produced, merge and judge them, write the page; fail on any of those."""
    expect = " ".join(f"--expect {shlex.quote(e['artifact'] + '=' + e['env'])}" for e in plan.expected())
    return [
        *download,
        "status=0",
        f"accelenv collect artifacts {expect} -o {COLLECTED} || status=1".replace("  ", " "),
        f"accelenv results {COLLECTED} --merge {MERGED} || status=1",
        f"mkdir -p {PAGE} && accelenv report --format html --results {MERGED} -o {PAGE}/index.html || status=1",
        "exit $status",
    ]


def buildkite(plan: Plan) -> str:
    """A pipeline for `buildkite-agent pipeline upload`: the gate; an image job (build and verify) and a session
    job per environment and platform, neither waiting for the other; a session job whose framework is the base
    image's builds its image on its own agent; a soft-failing step per job that cannot run, saying why; and the
    judging step, which waits for every session job (failed or not) and downloads only their artifacts."""
    lines = ["# generated by accelenv ci --format buildkite", "steps:"]
    lines += [
        '  - label: ":lock: gate"',
        '    key: "gate"',
        f"    command: {_command(' && '.join(GATE))}",
    ]
    style = "error" if plan.errors else "warning" if plan.unscheduled else "info"
    annotate = f"buildkite-agent annotate --style {style} --context accelenv-plan"
    lines += [
        '  - label: ":memo: plan"',  # the run's summary: jobs, what is not scheduled and why
        f"    command: {_command(f'printf %s {shlex.quote(summary(plan))} | {annotate}')}",
    ]
    for line in not_scheduled_lines(plan):
        say = shlex.quote(line)
        lines += [
            f"  - label: {_yaml(':warning: ' + line.partition(' not scheduled')[0] + ' not scheduled')}",
            f"    command: {_command(f'echo {say}; exit 1')}",
            "    soft_fail: true",
        ]
    for job in plan.images:
        lines += [
            f"  - label: {_yaml(f':docker: {job.name}')}",
            f"    key: {_yaml(job.artifact)}",
            '    depends_on: "gate"',
            f"    command: {_command(image_command(job))}",
            "    agents:",
            f"      queue: {_yaml(job.queue)}",
        ]
    for job in plan.sessions:
        lines += [
            f"  - label: {_yaml(f':test_tube: {job.name}')}",
            f"    key: {_yaml(job.artifact)}",
            '    depends_on: "gate"',
            f"    command: {_command(session_command(job))}",
            f"    artifact_paths: {_yaml(EVIDENCE + '/**/*')}",
            "    agents:",
            f"      queue: {_yaml(job.queue)}",
            *(f"      {_yaml(tag)}: {_yaml(value)}" for tag, value in job.agent_tags),
            "    env:",
            f"      ACCELENV_ENV: {_yaml(job.env)}",  # the agent's pre-command gate checks it (plan/ci_hooks.py)
            "    retry:",  # the gate refused the job: the node drifted; run it on another agent
            "      automatic:",
            f"        - exit_status: {GATE_EXIT}",
            "          limit: 2",
        ]
    download = [
        f"mkdir -p artifacts/{job.artifact} && (cd artifacts/{job.artifact} && buildkite-agent artifact download "
        f"{shlex.quote(EVIDENCE + '/**/*')} . --step {job.artifact}) || true"
        for job in plan.sessions
    ]
    lines += [
        '  - label: ":scales: judge"',
        '    key: "judge"',
        "    depends_on:",
        '      - "gate"',
        *(f"      - step: {_yaml(job.artifact)}\n        allow_failure: true" for job in plan.sessions),
        "    allow_dependency_failure: true",
        f"    command: {_command('; '.join(judge_commands(plan, download=download)))}",
        f"    artifact_paths: {_yaml(PAGE + '/**/*;' + MERGED + '/**/*')}",
    ]
    return "\n".join(lines) + "\n"
