"""`accelenv.host.run.which` finds what `shutil.which` finds (it stands in for it so that a check need not import
`shutil`): every case is asked of both."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

import pytest

from accelenv.host.run import which

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    made = {name: tmp_path / name for name in ("a", "b", "c", "cwd")}
    for folder in made.values():
        folder.mkdir()
    (made["a"] / "tool").write_text("not executable\n")
    (made["b"] / "tool").write_text("#!/bin/sh\n")
    (made["b"] / "tool").chmod(0o755)
    (made["a"] / "dir-tool").mkdir()  # a folder of that name is not a tool
    (made["a"] / "dir-tool").chmod(0o755)
    (made["c"] / "dir-tool").write_text("#!/bin/sh\n")
    (made["c"] / "dir-tool").chmod(0o700)
    (made["cwd"] / "here").write_text("#!/bin/sh\n")
    (made["cwd"] / "here").chmod(0o755)
    monkeypatch.chdir(made["cwd"])
    return made


@pytest.mark.parametrize("tool", ["tool", "dir-tool", "here", "absent", "./here", "../b/tool", "../a/tool"])
@pytest.mark.parametrize("order", [("a", "b", "c"), ("c", "b", "a"), ("a", "a", "b"), ("", "a", "b"), ("a", "c", "")])
def test_which_agrees_with_shutil(folders: dict[str, Path], tool: str, order: tuple[str, ...]) -> None:
    path = os.pathsep.join(str(folders[name]) if name else "" for name in order)
    assert which(tool, path) == shutil.which(tool, path=path)


@pytest.mark.parametrize("tool", ["here", "./here", "tool"])
def test_an_empty_path_finds_only_a_name_with_a_folder(folders: dict[str, Path], tool: str) -> None:
    assert which(tool, "") == shutil.which(tool, path="")
