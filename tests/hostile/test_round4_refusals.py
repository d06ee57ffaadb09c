"""Issue 41, tracebacks: inputs that used to end in an internal error or an OSError from deep inside a command are
clear refusals (a usage error naming the option) or are passed over as a shell passes them over."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest
from hostilekit import accelenv, accelenv_here, assert_clean_error

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("size", ["lots", "16", "0g", "16gb", "-1g", "1e9m", "16g\n", ""])
def test_a_shm_size_that_is_not_a_size_is_a_usage_error(matrix: Path, size: str) -> None:
    result = accelenv_here("--matrix", str(matrix), "run", "cpu-py311", "--shm-size", size, "--", "true")
    assert_clean_error(result, code=2, says="--shm-size")


def _unsearchable_folders(tmp_path: Path) -> list[str]:
    """PATH folders no tool can be looked up in: a name longer than the kernel takes, and (not as root, who may
    search anything) a folder without search permission."""
    folders = ["/" + "a" * 5000]
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o600)
        folders.append(str(locked))
    return folders


@pytest.mark.parametrize("command", [["check", "cpu-py311"], ["inspect"], ["labels", "--env", "cpu-py311"]])
def test_a_path_folder_that_cannot_be_searched_is_passed_over(matrix: Path, tmp_path: Path, command: list[str]) -> None:
    path = os.pathsep.join([*_unsearchable_folders(tmp_path), "/usr/bin", "/bin"])
    result = accelenv("--matrix", str(matrix), *command, "--root", str(tmp_path), env={"PATH": path})
    assert result.returncode in (0, 1), result.stderr
    assert "File name too long" not in result.stderr
    assert "Permission denied" not in result.stderr
    assert "internal error" not in result.stderr
