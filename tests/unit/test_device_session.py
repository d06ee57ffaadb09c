"""The environment session's body (plan/device_session.py) against a recording fake of nox.Session: the order of
its steps, where the device tests run (the venv, or the image for a base-image framework), and what a finished run
must show to count (a tally with something tested; a not-a-hardware-pass line after no-device skips)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace
from typing import NoReturn

import nox.command
import pytest
from reference import REFERENCE_MATRIX

from accelenv.matrix import load_matrix
from accelenv.plan.device_session import closing_line, record_line, run_environment, tally_problem
from accelenv.plan.interpreters import candidates
from accelenv.plan.sessions import python_variants, session_specs

REPO = Path(__file__).resolve().parents[2]
SHIPPED = load_matrix(REPO / "matrix.toml")
PASSED = {"passed": 1, "failed": 0, "no_device": 0, "skipped": 0}


class FakeSession:
    """What run_environment uses of a nox.Session; records the calls, raises on error() as nox does. A pytest
    run writes `tally` where --accelenv-summary says; a check --json prints `check_json`; a command whose first
    words are in `failing` fails as nox's CommandFailed."""

    def __init__(
        self,
        posargs: list[str] | None = None,
        *,
        tally: dict[str, int] | None = None,
        check_json: object = None,
        failing: tuple[str, ...] = (),
        root: Path | None = None,
        record: dict[str, object] | None = None,
    ) -> None:
        self.posargs = posargs or []
        self.name = "cpu"
        self.calls: list[tuple[str, ...]] = []
        self.virtualenv = SimpleNamespace(location="/nox/cpu")
        self.tally, self.check_json, self.failing, self.root = tally, check_json, failing, root
        self.record = record  # a result record the pytest run writes (before it fails, when it fails)

    def error(self, message: str) -> NoReturn:
        raise RuntimeError(message)

    def warn(self, message: str) -> None:
        self.calls.append(("warn", message))

    def log(self, message: str) -> None:
        self.calls.append(("log", message))

    def install(self, *args: str) -> None:
        self.calls.append(("install", *args))

    def run_install(self, *args: str, external: bool = False) -> None:
        self.calls.append(("run_install", *args))

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        external: bool = False,
        silent: bool = False,
        success_codes: list[int] | None = None,
    ) -> object:
        self.calls.append(("run", *args))
        words = " ".join(Path(a).name if a.startswith("/") else a for a in args)
        if "pytest" in args and self.record is not None and self.root is not None:
            folder = self.root / "results"
            folder.mkdir(exist_ok=True)
            (folder / f"{self.record['id']}.result.json").write_text(json.dumps(self.record))
        if any(words.startswith(f) for f in self.failing):
            raise nox.command.CommandFailed(f"{words} failed")
        if "--json" in args:
            return json.dumps(self.check_json)
        if "pytest" in args and self.tally is not None:
            target = Path(args[args.index("--accelenv-summary") + 1])
            target = target if target.is_absolute() else (self.root or REPO) / target
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(self.tally))
        return True


def _steps(session: FakeSession) -> list[tuple[str, ...]]:
    steps = [(c[0], *(Path(a).name if a.startswith("/") else a for a in c[1:5])) for c in session.calls]
    return [s for s in steps if s[0] not in ("log", "warn")]


def test_a_session_without_a_lock_says_how_to_make_one() -> None:
    matrix = load_matrix(REFERENCE_MATRIX)
    with pytest.raises(RuntimeError) as raised:
        run_environment(FakeSession(), matrix, "gpu-nvidia-cu128", REFERENCE_MATRIX.parent)
    assert str(raised.value) == (
        "gpu-nvidia-cu128 has no lock file (envs/gpu-nvidia-cu128/requirements.lock). Create it where its indexes "
        "are reachable (https://pypi.org/simple, https://download.pytorch.org/whl/cu128): "
        "`accelenv lock gpu-nvidia-cu128`, then commit it."
    )


def test_a_session_checks_the_host_before_installing_and_again_after(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)  # under CI the opt-in is refused (test_plan.py)
    session = FakeSession(["--skip-missing-hardware", "-k", "ray"], tally=PASSED)
    run_environment(
        session, SHIPPED, "cpu-py311", REPO, find_python=lambda v: f"/usr/bin/python{v}", tally_root=tmp_path
    )
    lock = str(REPO / "envs" / "cpu-py311" / "requirements.lock")
    assert _steps(session) == [
        ("install", "-e", REPO.name),
        ("run", "accelenv", "check", "cpu-py311", "--host-only"),
        ("run_install", "uv", "venv", "--clear", "--quiet"),
        ("run_install", "uv", "pip", "install", "--quiet"),
        ("run_install", "uv", "pip", "install", "--quiet"),
        ("run", "accelenv", "check", "cpu-py311", "--allow-missing-hardware"),
        ("run", "python", "-m", "pytest", "-p"),
    ]
    tests_call = [c for c in session.calls if c[0] == "run"][-1]
    assert tests_call[4:7] == ("-p", "accelenv.results.plugin", "tests/devices/test_cpu_devices.py")  # a record per run
    venv_call = next(c for c in session.calls if c[0] == "run_install" and "venv" in c)
    assert venv_call[-3:] == ("--python", "/usr/bin/python3.11", "/nox/cpu-py3.11")  # beside the session's own
    assert "--system-site-packages" not in venv_call  # a lock framework: nothing from the host's Python
    assert [c for c in session.calls if c[0] == "run_install"][-1][-3:] == ("--require-hashes", "-r", lock)
    pytest_call = session.calls[-1]
    assert pytest_call[-5:] == ("--accelenv-allow-missing-hardware", "-k", "ray", "--accelenv-summary", pytest_call[-1])
    assert pytest_call[-1] == str(tmp_path / ".accelenv" / "device-tests" / "cpu-py311.json")


@pytest.mark.parametrize(
    ("tally", "problem"),
    [
        (
            None,
            "the device tests of cpu-py311 wrote no tally (.accelenv/device-tests/cpu-py311.json): they did not run",
        ),
        (
            {"passed": 0, "failed": 0, "no_device": 0, "skipped": 3},
            "no device test of cpu-py311 ran (all 3 skipped): nothing was tested",
        ),
    ],
)
def test_a_run_that_tested_nothing_fails_the_session(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tally: dict[str, int] | None, problem: str
) -> None:
    monkeypatch.delenv("CI", raising=False)
    session = FakeSession(tally=tally)
    with pytest.raises(RuntimeError) as raised:
        run_environment(session, SHIPPED, "cpu-py311", REPO, find_python=lambda v: "/py", tally_root=tmp_path)
    assert str(raised.value) == problem


def test_no_device_skips_end_on_a_line_that_is_not_a_hardware_pass(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)
    closing: list[str] = []
    session = FakeSession(["--skip-missing-hardware"], tally={"passed": 0, "failed": 0, "no_device": 4, "skipped": 0})
    run_environment(
        session,
        SHIPPED,
        "cpu-py311",
        REPO,
        find_python=lambda v: "/py",
        tally_root=tmp_path,
        on_closing_line=closing.append,
    )
    line = "cpu: NOT PROVEN: 4 device test(s) skipped, no device here (--skip-missing-hardware); 0 passed"
    assert closing == [line]
    assert session.calls[-1] == ("warn", line)
    assert closing_line("gpu-amd", PASSED) is None
    assert tally_problem("x", PASSED) is None


def test_a_missing_python_is_named_after_the_host_check_with_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    session = FakeSession()
    with pytest.raises(RuntimeError) as raised:
        run_environment(session, SHIPPED, "cpu-py311", REPO, find_python=lambda version: None)
    assert [c[:3] for c in session.calls if c[0] == "run"] == [("run", "accelenv", "check")]  # it got that far
    assert str(raised.value) == (
        "cpu-py311 runs on Python 3.11, which this machine does not have (looked on PATH, among pyenv's versions "
        "and among uv's interpreters). Install it, then run the session again: `uv python install 3.11`, or "
        "`pyenv install 3.11` (found without PYENV_VERSION), or your distribution's package where it has that "
        "version (Debian 12's python3 is 3.11, Ubuntu 24.04's is 3.12)."
    )


def test_the_cpu_session_runs_the_cpu_environment_of_the_python_this_machine_has(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)
    spec = next(s for s in session_specs(SHIPPED) if s.name == "cpu")
    assert (spec.env, spec.variants) == ("cpu-py311", ("cpu-py312",))
    assert python_variants(SHIPPED, "tpu-jax-0-12") == ()  # another jax: not the same tests of the same framework
    session = FakeSession(tally=PASSED)
    only_312 = {"3.12": "/opt/py312/bin/python3.12"}
    run_environment(
        session, SHIPPED, spec.env, REPO, variants=spec.variants, find_python=only_312.get, tally_root=tmp_path
    )
    assert ("run", "accelenv", "check", "cpu-py312", "--host-only") in _steps(session)
    assert session.calls[0] == (
        "log",
        (
            "cpu-py311 runs on Python 3.11, which this machine does not have: running cpu-py312 (Python 3.12), "
            "the same tests of the same framework"
        ),
    )


def _framework_finding(status: str, found: str) -> dict[str, object]:
    return {"verdict": status, "checks": [{"id": "framework.torch", "status": status, "found": found}]}


def test_a_base_image_framework_the_host_lacks_is_tested_inside_the_image(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)
    session = FakeSession(
        ["--skip-missing-hardware"], tally=PASSED, check_json=_framework_finding("fail", "not installed"), root=tmp_path
    )
    run_environment(session, SHIPPED, "gpu-amd-rocm100", REPO, find_python=lambda v: "/py", tally_root=tmp_path)
    venv_call = next(c for c in session.calls if c[0] == "run_install" and "venv" in c)
    assert "--system-site-packages" in venv_call  # a host-installed vendor PyTorch would be seen
    runs = [c[1:] for c in session.calls if c[0] == "run"]
    assert [Path(r[0]).name + " " + " ".join(r[1:5]) for r in runs[-3:]] == [
        "accelenv run gpu-amd-rocm100 -- true",
        "accelenv run gpu-amd-rocm100 -- accelenv",
        "accelenv run gpu-amd-rocm100 -- python",
    ]
    assert runs[-1][-2:] == ("--accelenv-summary", ".accelenv/device-tests/gpu-amd-rocm100.json")  # /workspace-relative


def test_an_image_that_cannot_start_fails_with_the_next_step(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CI", raising=False)
    session = FakeSession(check_json=_framework_finding("fail", "not installed"), failing=("accelenv run",))
    with pytest.raises(RuntimeError) as raised:
        run_environment(session, SHIPPED, "gaudi-1-23", REPO, find_python=lambda v: "/py", tally_root=tmp_path)
    assert str(raised.value) == (
        "the device tests of gaudi-1-23 run where its framework is, the base image "
        "vault.habana.ai/gaudi-docker/1.23.0/ubuntu24.04/habanalabs/pytorch-installer-2.9.0:latest, and the "
        "environment's image could not be started here (the lines above say why). Next step: `accelenv build "
        "gaudi-1-23`, then run this session again on a host with Intel Gaudi devices and a container engine that "
        "can give them (`accelenv run gaudi-1-23 -- accelenv check gaudi-1-23` shows what is missing)"
    )


def test_a_vendor_framework_the_host_has_is_tested_in_the_venv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("CI", raising=False)
    session = FakeSession(tally=PASSED, check_json=_framework_finding("pass", "2.13.0 (rocm10.0)"))
    run_environment(session, SHIPPED, "gpu-amd-rocm100", REPO, find_python=lambda v: "/py", tally_root=tmp_path)
    assert not [c for c in session.calls if "run" in c[1:3]]  # no accelenv run
    assert _steps(session)[-1] == ("run", "python", "-m", "pytest", "-p")
    assert session.calls[-1][4:7] == ("-p", "accelenv.results.plugin", "tests/devices/test_amd_devices.py")


def test_another_vendor_framework_on_the_host_fails_the_session(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("CI", raising=False)
    finding = _framework_finding("fail", "2.9.0")
    finding["checks"][0]["message"] = "torch 2.9.0 is installed"  # type: ignore[index]
    session = FakeSession(check_json=finding)
    with pytest.raises(RuntimeError) as raised:
        run_environment(session, SHIPPED, "gpu-amd-rocm100", REPO, find_python=lambda v: "/py", tally_root=tmp_path)
    assert str(raised.value) == ("the host has another torch than torch 2.13.0 (rocm10.0): torch 2.9.0 is installed")


def test_interpreters_behind_a_refusing_pyenv_shim_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every python3.X on PATH counts (not only the first, which may be a shim), then pyenv's versions, newest
    patch first, under PYENV_ROOT and ~/.pyenv."""
    shims, usr = tmp_path / "shims", tmp_path / "usr-bin"
    for folder in (shims, usr):
        folder.mkdir()
        (folder / "python3.13").write_text("#!/bin/sh\n")
    root = tmp_path / "pyenv"
    for version in ("3.13.0", "3.13.2", "3.130.1", "3.12.9"):
        (root / "versions" / version / "bin").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    found = candidates("3.13", {"PATH": f"{shims}:{usr}", "PYENV_ROOT": str(root)})
    assert [str(Path(p).relative_to(tmp_path)) for p in found if p.startswith(str(tmp_path))] == [
        "shims/python3.13",
        "usr-bin/python3.13",
        "pyenv/versions/3.13.2/bin/python3.13",
        "pyenv/versions/3.13.0/bin/python3.13",
    ]


def _record(outcome: str, note: str | None) -> dict[str, object]:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return {
        "id": f"cpu-py311-{stamp}-0a1b2c3d",
        "outcome": outcome,
        "note": note,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


RECORD_LINES = [
    ("passed", None, False, "cpu: passed"),
    (
        "not_proven",
        "no nvidia device here: 10 device test(s) skipped as asked (--skip-missing-hardware), 4 passed",
        False,
        (
            "cpu: NOT PROVEN: no nvidia device here: 10 device test(s) skipped as asked (--skip-missing-hardware), "
            "4 passed"
        ),
    ),
    ("failed", "1 test(s) did not pass", True, "cpu: FAILED: 1 test(s) did not pass"),
    ("incomplete", "the run was cut short (KeyboardInterrupt: ) before it completed", True, "cpu: INCOMPLETE: the run"),
]


@pytest.mark.parametrize("case", RECORD_LINES, ids=[r[0] for r in RECORD_LINES])
def test_the_session_ends_on_the_records_state(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, case: tuple[str, str | None, bool, str]
) -> None:
    """Whatever the outcome, the session's last line is the record's state in the record's words, and names the
    record; a failed or cut-short run fails the session, a not-proven one (skipped as asked) does not."""
    outcome, note, fails, start = case
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("ACCELENV_RESULTS", raising=False)
    closing: list[str] = []
    data = _record(outcome, note)
    session = FakeSession(
        ["--skip-missing-hardware"],
        tally={"passed": 4, "failed": int(fails), "no_device": 10 if outcome == "not_proven" else 0, "skipped": 0},
        failing=("python -m pytest",) if fails else (),
        root=tmp_path,
        record=data,
    )

    def run() -> None:
        run_environment(
            session,
            SHIPPED,
            "cpu-py311",
            REPO,
            find_python=lambda v: "/py",
            tally_root=tmp_path,
            on_closing_line=closing.append,
        )

    if fails:
        with pytest.raises(nox.command.CommandFailed):
            run()
    else:
        run()
    assert len(closing) == 1
    assert closing[0].startswith(start), closing
    assert closing[0].endswith(f"(record {tmp_path / 'results' / (str(data['id']) + '.result.json')})")


def test_an_older_record_is_not_this_runs_line(tmp_path: Path) -> None:
    folder = tmp_path / "results"
    folder.mkdir()
    old = {**_record("passed", None), "started": "2020-01-01T00:00:00Z"}
    (folder / f"{old['id']}.result.json").write_text(json.dumps(old))
    assert record_line("cpu", "cpu-py311", folder, time.time()) is None
    assert record_line("cpu", "cpu-py311", tmp_path / "absent", 0) is None
