"""A copy of the repository as a fresh clone has it: the files `git ls-files` lists (tracked, and untracked ones
git does not ignore), nothing else (no .accelenv/, no virtualenvs, no caches)."""

from __future__ import annotations

import shutil
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def copy_repository(repo: Path, target: Path) -> None:
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=repo,
        capture_output=True,
        check=True,
        timeout=60,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = repo / name
        if source.is_file() and not source.is_symlink():  # a file deleted in the working tree is still listed
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
