"""`accelenv validate` tells the truth first: errors, then the summary, then the warnings, registry warnings one
line per kind (each with --verbose), no absolute path for a matrix in the working folder; schema and rule errors
together where the file parses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import tomlkit
from reference import REFERENCE_TEXT

from accelenv.cli import main

if TYPE_CHECKING:
    import pytest


def write(folder: Path, *, stray: bool = True, unknown_sku: bool = True) -> Path:
    doc = tomlkit.parse(REFERENCE_TEXT)
    if stray:
        doc["stray_top"] = 1  # a schema error at the top level
    doc["envs"]["cpu-py311"]["bogus_key"] = 1  # a schema error in an entry
    if unknown_sku:
        doc["envs"]["gpu-nvidia-cu128"]["skus"].append("no-such-sku")  # a rule error
    path = folder / "matrix.toml"
    path.write_text(tomlkit.dumps(doc), encoding="utf-8")
    return path


def lines_of(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["validate", *args])
    return code, capsys.readouterr().out.splitlines()


def test_schema_and_rule_errors_come_together_and_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path)
    monkeypatch.chdir(tmp_path)
    code, lines = lines_of(capsys, "matrix.toml")
    assert code == 1
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 3
    assert any("stray_top: unknown key 'stray_top'" in e for e in errors)
    assert any("envs.cpu-py311.bogus_key: unknown key" in e for e in errors)
    assert any("envs.gpu-nvidia-cu128.skus[" in e and "'no-such-sku' is not defined" in e for e in errors)
    assert lines[:3] == errors  # the errors first, then the summary
    assert lines[3].startswith("matrix.toml: invalid: 3 error(s), ")
    assert all(str(tmp_path) not in line for line in lines)  # the file as the reader named it


def test_registry_warnings_are_one_line_per_kind_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write(tmp_path, stray=False, unknown_sku=False)
    monkeypatch.chdir(tmp_path)
    _, lines = lines_of(capsys, "matrix.toml")
    registry = [line for line in lines if line.startswith("warning (registry): ")]
    pinned = next(line for line in registry if "base images not pinned by digest" in line)
    count = int(pinned.split()[2])
    assert count > 4
    assert pinned.endswith(f"and {count - 4} more; fix: accelenv pin (needs the registries)")
    assert any(
        line.startswith("warning (registry): ") and "environment(s) with no lock file: " in line for line in registry
    )
    assert len(registry) == len({line.split(":")[1] for line in registry})  # one line per kind
    assert all(len(line) < 300 for line in lines)
    assert lines[-1] == "(each warning with its line: accelenv validate --verbose; all of them: --json)"
    _, verbose = lines_of(capsys, "matrix.toml", "--verbose")
    unpinned = [line for line in verbose if "is not pinned by digest" in line]
    assert len(unpinned) == count
    assert all(line.startswith("matrix.toml:") for line in unpinned)
    code = main(["validate", "matrix.toml", "--json"])  # --json keeps every problem
    problems = json.loads(capsys.readouterr().out)
    assert code == 1
    assert sum(1 for p in problems if p["rule"] == "unpinned") == count


def test_a_matrix_outside_the_working_folder_keeps_its_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path)
    assert not path.is_relative_to(Path.cwd())
    _, lines = lines_of(capsys, str(path))
    assert any(line.startswith(f"{path}: invalid: ") for line in lines)
