"""One state per outcome, everywhere: a real pytest run with the result-record plugin, for each way a run can end
(passed, failed, hardware absent and skipped as asked, Ctrl-C, pytest.exit(), a test file that does not import, a
process killed mid-test, a failure with a named upstream defect, nothing tested), and what its exit status, its
last line, its record, `accelenv results` (text, --json and exit status) and the page then say. The host is a fake
root in the test's folder; the tests are small files written there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

PASSING = "def test_ok():\n    assert True\n"
FAIL = "def test_bad():\n    assert 1 == 2\n"
NO_DEVICE = "import pytest\n\n" + "".join(
    f"def test_device_{i}():\n    pytest.skip('no device here: the host has no nvidia device')\n\n" for i in range(10)
)
CTRL_C = "def test_interrupted():\n    raise KeyboardInterrupt\n\ndef test_after():\n    pass\n"
EXIT = "import pytest\n\ndef test_stops():\n    pytest.exit('stopping the run')\n"
IMPORT_ERROR = "import a_module_that_is_not_there\n\ndef test_never():\n    pass\n"
KILLED = "import os, signal\n\ndef test_killed():\n    os.kill(os.getpid(), signal.SIGKILL)\n"
DEFECT = textwrap.dedent(
    """\
    import pytest

    @pytest.mark.accelenv_upstream_defect(
        url="https://example.org/upstream/issues/1", description="gloo all-reduce hangs on 1 CPU"
    )
    def test_known():
        assert 1 == 2
    """
)
SKIPPED = "import pytest\n\ndef test_skipped():\n    pytest.skip('not today')\n"

# env, test files, expected record outcome, expected pytest exit status, expected `results` state, results exit
CASES = [
    ("passed", "cpu-py311", [PASSING], "passed", 0, "passed", 0),
    ("failed", "cpu-py311", [PASSING, FAIL], "failed", 1, "failed", 1),
    ("not-proven", "gpu-nvidia-cu132", [PASSING] * 4 + [NO_DEVICE], "not_proven", 0, "not proven", 0),
    ("ctrl-c", "cpu-py311", [PASSING, CTRL_C], "incomplete", 2, "incomplete", 1),
    ("pytest-exit", "cpu-py311", [PASSING, EXIT], "incomplete", 2, "incomplete", 1),
    ("import-error", "cpu-py311", [PASSING, IMPORT_ERROR], "failed", 2, "failed", 1),
    ("killed", "cpu-py311", [PASSING, KILLED], "incomplete", -9, "incomplete", 1),
    ("upstream-defect", "cpu-py311", [PASSING, DEFECT], "failed", 1, "failed", 1),
    ("nothing-tested", "cpu-py311", [SKIPPED], "failed", 1, "failed", 1),
]


def _run(tmp_path: Path, env_id: str, files: list[str]) -> tuple[subprocess.CompletedProcess[str], Path]:
    host = tmp_path / "host"
    (host / "proc/sys/kernel").mkdir(parents=True)
    (host / "proc/sys/kernel/arch").write_text("x86_64\n")
    tests = tmp_path / "suite"
    tests.mkdir()
    for n, text in enumerate(files):
        (tests / f"test_{n}.py").write_text(text)
    results = tmp_path / "results"
    environ = {k: v for k, v in os.environ.items() if k not in ("CI", "RUNNER_NAME", "GITHUB_RUN_ID")}
    environ |= {
        "ACCELENV_ENV": env_id,
        "ACCELENV_ROOT": str(host),
        "ACCELENV_MATRIX": str(REPO / "matrix.toml"),
        "ACCELENV_RESULTS": str(results),
        "BUILDKITE_AGENT_NAME": "gpu-node-07",
    }
    argv = [sys.executable, "-m", "pytest", "-p", "accelenv.results.plugin", "-p", "no:cacheprovider", "-q"]
    done = subprocess.run(
        [*argv, "--rootdir", str(tests), str(tests)],
        cwd=tests,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, results


def _accelenv(*args: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "ACCELENV_MATRIX": str(REPO / "matrix.toml")}
    command = [sys.executable, "-m", "accelenv", *args]
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=300, check=False, cwd=REPO)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_view_of_a_run_says_the_same(
    tmp_path: Path, case: tuple[str, str, list[str], str, int, str, int]
) -> None:
    _, env_id, files, outcome, status, state, results_status = case
    done, results = _run(tmp_path, env_id, files)
    output = done.stdout + done.stderr
    assert done.returncode == status, output[-3000:]
    (path,) = results.glob("*.result.json")
    record = json.loads(path.read_text())
    assert record["outcome"] == outcome, record
    assert record["runner"] == "gpu-node-07"
    assert not any(t["outcome"] == "passed" and "interrupted" in t["id"] for t in record["tests"])
    if status != -9:  # a killed run leaves the record it began, and no line
        assert f"result record {path} ({outcome})" in output
    if outcome == "incomplete":
        assert record["note"], record
    if env_id == "gpu-nvidia-cu132":
        assert record["host"]["sku"] is None
        assert "10 device test(s) skipped as asked" in record["note"]
        assert "4 passed" in record["note"]

    listed = _accelenv("results", str(results), "--json")
    assert listed.returncode == results_status, listed.stdout[-2000:] + listed.stderr[-2000:]
    judged = json.loads(listed.stdout)
    assert judged["refused"] == []
    assert [(r["id"], r["state"]) for r in judged["records"]] == [(record["id"], state)]
    text = _accelenv("results", str(results))
    assert text.returncode == results_status
    assert f"1 record(s): 1 {state};" in text.stdout

    page = _accelenv("report", "--format", "html", "--results", str(results))
    assert page.returncode == 0, page.stderr[-2000:]
    assert "proven</span>" not in page.stdout.replace("not proven</span>", "")
    assert f"{state}</span> <code>{record['id']}</code>" in page.stdout or record["host"]["sku"] is not None


def test_a_named_upstream_defect_is_a_failure_with_its_cause(tmp_path: Path) -> None:
    done, results = _run(tmp_path, "cpu-py311", [PASSING, DEFECT])
    assert done.returncode == 1
    record = json.loads(next(results.glob("*.result.json")).read_text())
    (failed,) = [t for t in record["tests"] if t["outcome"] == "failed"]
    assert failed["defect"] == {
        "url": "https://example.org/upstream/issues/1",
        "description": "gloo all-reduce hangs on 1 CPU",
    }
    text = _accelenv("results", str(results))
    assert "failed on a known upstream defect: test_known: https://example.org/upstream/issues/1: gloo" in (text.stdout)
