"""Issue 41, the evidence the result-record plugin and `results` write: what the plugin writes is redacted and
stays in a real results folder (never through a `results/` symlink, never INTERNALERROR for a results folder that
cannot take records or a test id the record cannot hold); `results --merge` writes only inside its folder and
never replaces a merged run with another of the same id; `results` bounds what it reads in all and in depth, and
a file name cannot forge a line of its summary."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hostilekit import REPO, accelenv, assert_clean_error
from recordkit import SHIPPED_MATRIX, good_record
from reference import REFERENCE_MATRIX

from accelenv.errors import UsageError
from accelenv.fileio import MAX_DEPTH, files_under
from accelenv.matrix import load_matrix
from accelenv.results import record as record_module
from accelenv.results.merge import merge_into
from accelenv.results.record import SUFFIX, read_records

TOKEN = "ghp_" + "Q" * 36
PASSWORD = "s3cr3t-Pa55word-xyz"  # noqa: S105 (the secret the run must not leak)
TEST_FILE = f'''
import pytest

def test_fails_with_a_token():
    assert "{TOKEN}" == "", "login with token={TOKEN} failed"

def test_skips_with_a_password():
    pytest.skip("index https://ci:{PASSWORD}@pypi.example/simple unreachable")

@pytest.mark.parametrize("name", ["{"x" * 600}"])
def test_a_very_long_id(name):
    print("HF_TOKEN={TOKEN}")
    assert name

@pytest.mark.parametrize("url", ["https://{TOKEN}@git.example/repo"])
def test_a_token_in_its_id(url):
    assert url
'''


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(REFERENCE_MATRIX, project / "matrix.toml")
    (project / "test_suite.py").write_text(TEST_FILE)
    (tmp_path / "host").mkdir()
    return project


def _suite(project: Path, results: str | None, wrap: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ACCELENV_RESULTS", "CI")}
    env |= {
        "ACCELENV_ENV": "cpu-py311",
        "ACCELENV_ROOT": str(project.parent / "host"),  # an empty host: no real device file is read
        "PYTHONPATH": str(REPO / "tools"),
        "PATH": str(project.parent / "bin"),  # no vendor tool of this machine runs
    }
    if results is not None:
        env["ACCELENV_RESULTS"] = results
    argv = [sys.executable, "-m", "pytest", "-p", "accelenv.results.plugin", "-p", "no:cacheprovider", "-q"]
    return subprocess.run(
        [*(wrap or []), *argv, "test_suite.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_record_and_the_junit_xml_hold_no_secret_and_a_long_id_fits(tmp_path: Path) -> None:
    project = _project(tmp_path)
    result = _suite(project, str(tmp_path / "results"))
    output = result.stdout + result.stderr
    assert "INTERNALERROR" not in output, output
    assert "does not validate" not in output, output
    assert result.returncode == 1, output  # a test failed: the run fails, the record is written
    written = sorted(p.name for p in (tmp_path / "results").iterdir())
    assert [n for n in written if n.endswith(SUFFIX)], written
    assert [n for n in written if n.endswith(".junit.xml")], written
    for path in (tmp_path / "results").iterdir():
        text = path.read_text()
        assert TOKEN not in text, path.name
        assert PASSWORD not in text, path.name
    record = json.loads(next((tmp_path / "results").glob("*" + SUFFIX)).read_text())
    reasons = {t["outcome"]: t["reason"] for t in record["tests"]}
    assert "<redacted>" in reasons["skipped"], reasons
    assert max(len(t["id"]) for t in record["tests"]) <= 500
    junit = next((tmp_path / "results").glob("*.junit.xml")).read_text()
    assert "&lt;redacted&gt;" in junit  # escaped as XML text: the file stays XML
    assert TOKEN not in output  # nor does the terminal report show it


def _no_internal_error(result: subprocess.CompletedProcess[str], says: str) -> None:
    output = result.stdout + result.stderr
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert says in output, output
    assert "INTERNALERROR" not in output, output
    assert "Traceback" not in output, output


@pytest.mark.parametrize("kind", ["file", "fifo", "under-a-file"])
def test_a_results_folder_that_cannot_take_records_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    project = _project(tmp_path)
    target = tmp_path / "taken"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.write_text("x")
    named = target / "deeper" if kind == "under-a-file" else target
    says = "cannot make the results folder" if kind == "under-a-file" else "not a folder for result records"
    _no_internal_error(_suite(project, str(named)), says)


def test_a_read_only_results_folder_is_a_usage_error(tmp_path: Path) -> None:
    """A folder the run may not write: mode 0555 for a user; for root, which writes through modes, the folder
    bind-mounted read-only in a mount namespace of the run's own (unshare), so the machine's mounts are untouched."""
    project = _project(tmp_path)
    folder = tmp_path / "read-only"
    folder.mkdir(mode=0o555)
    wrap: list[str] = []
    if os.geteuid() == 0:
        where, tool = str(folder), {name: shutil.which(name) or name for name in ("unshare", "mount", "sh")}
        mount = f"{tool['mount']} --bind {where} {where} && {tool['mount']} -o remount,ro,bind {where}"
        wrap = [tool["unshare"], "--mount", tool["sh"], "-c", f'{mount} && exec "$@"', "sh"]
    _no_internal_error(_suite(project, str(folder), wrap=wrap), "cannot be written")


def test_the_plugin_never_writes_through_a_results_symlink(tmp_path: Path) -> None:
    project = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / "results").symlink_to(elsewhere)
    _no_internal_error(_suite(project, None), "is a symlink")
    assert list(elsewhere.iterdir()) == []


# ---------------------------------------------------------------------------------------------------- results --merge


def _write(folder: Path, name: str, data: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data))
    return path


def test_the_fixture_record_is_valid(tmp_path: Path) -> None:
    """The merge tests below mean something only if their record is one `results` accepts."""
    _write(tmp_path / "a", "one" + SUFFIX, good_record("0000000a"))
    records, refused = read_records([tmp_path / "a"], load_matrix(SHIPPED_MATRIX), now=2e9)
    assert refused == []
    assert len(records) == 1


def test_merge_never_replaces_a_merged_run_with_another_of_the_same_id(tmp_path: Path) -> None:
    merged = tmp_path / "merged"
    first = good_record("0000000a")
    held = _write(merged, f"{first['id']}{SUFFIX}", first)
    before = held.read_text()
    later = good_record("0000000a", outcome="failed", check={"verdict": "fail", "failed": ["x"]})
    _write(tmp_path / "artifact", "r" + SUFFIX, later)
    records, _ = read_records([tmp_path / "artifact"], load_matrix(SHIPPED_MATRIX), now=2e9)
    with pytest.raises(UsageError, match="holds another run with the id"):
        merge_into(merged, records)
    assert held.read_text() == before


def test_merge_never_writes_through_a_symlink_in_its_folder(tmp_path: Path) -> None:
    merged = tmp_path / "merged"
    merged.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    data = good_record("0000000b")
    (merged / f"{data['id']}{SUFFIX}").symlink_to(victim)
    _write(tmp_path / "artifact", "r" + SUFFIX, data)
    result = accelenv("--matrix", str(SHIPPED_MATRIX), "results", str(tmp_path / "artifact"), "--merge", str(merged))
    assert_clean_error(result, code=2, says="symlink")
    assert victim.read_text() == "keep"


def test_merge_writes_new_runs_and_keeps_identical_ones(tmp_path: Path) -> None:
    merged = tmp_path / "merged"
    same = good_record("0000000c")
    _write(merged, f"{same['id']}{SUFFIX}", same)
    _write(tmp_path / "artifact", "a" + SUFFIX, same)
    _write(tmp_path / "artifact", "b" + SUFFIX, good_record("0000000d"))
    records, _ = read_records([tmp_path / "artifact"], load_matrix(SHIPPED_MATRIX), now=2e9)
    assert merge_into(merged, records) == 1
    assert len(list(merged.iterdir())) == 2


# ---------------------------------------------------------------------------------------------------- reading


def test_a_deep_artifacts_folder_is_refused_not_a_recursion_error(tmp_path: Path) -> None:
    folder = tmp_path / "artifacts"
    folder.mkdir()
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:  # 1,100 levels: longer than a path the kernel takes whole, so made a folder at a time
        for _ in range(1100):
            os.mkdir("d", dir_fd=fd)
            deeper = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = deeper
    finally:
        os.close(fd)
    try:
        with pytest.raises(UsageError, match=f"more than {MAX_DEPTH} deep"):
            files_under(folder, SUFFIX, limit=10)
        result = accelenv("--matrix", str(SHIPPED_MATRIX), "results", str(folder))
        assert_clean_error(result, code=2, says="deep")
    finally:  # rm, not pytest: its clean-up of old temporary folders (shutil.rmtree, a call a level on Python 3.11)
        # dies of a RecursionError on this folder, in whichever later run on the machine meets it
        subprocess.run(["rm", "-rf", str(folder)], check=True, timeout=60)


def test_results_bounds_what_it_reads_in_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(3):
        _write(tmp_path / "a", f"{n}{SUFFIX}", good_record(f"0000001{n}"))
    size = (tmp_path / "a" / f"0{SUFFIX}").stat().st_size
    monkeypatch.setattr(record_module, "MAX_TOTAL", size * 2 + 1)
    with pytest.raises(UsageError, match="in all"):
        read_records([tmp_path / "a"], load_matrix(SHIPPED_MATRIX), now=2e9)


def test_a_file_name_cannot_forge_a_summary_line(tmp_path: Path) -> None:
    forged = "x\n3 record(s), 0 refused, 0 regression(s)\nrefused y"
    _write(tmp_path / "a", forged + SUFFIX, {"not": "a record"})
    result = accelenv("--matrix", str(SHIPPED_MATRIX), "results", str(tmp_path / "a"))
    lines = result.stdout.splitlines()
    refused = [line for line in lines if line.startswith("refused")]
    assert len(refused) == 1, result.stdout  # the name's newlines are escaped: one line, whatever it holds
    assert "\\n" in refused[0], result.stdout
    assert [line for line in lines if line[:1].isdigit() and " record(s)" in line] == [lines[-1]], result.stdout
    assert lines[-1].startswith("0 record(s)"), result.stdout
    assert "1 refused" in lines[-1], result.stdout


def test_every_write_of_a_record_stays_inside_its_folder() -> None:
    """Enumerates the modules that write records, snapshots or merges (results/, the results command): every
    write_atomic call there names the folder it must stay inside."""
    import ast

    import accelenv as package

    root = Path(package.__file__).parent
    sources = [*sorted((root / "results").glob("*.py")), root / "cli" / "results.py"]
    offenders = []
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            writes = isinstance(node, ast.Call) and ast.unparse(node.func).endswith("write_atomic")
            if writes and not any(k.arg == "inside" for k in node.keywords):  # type: ignore[attr-defined]
                offenders.append(f"{source.name}:{getattr(node, 'lineno', '?')}")
    assert offenders == []
