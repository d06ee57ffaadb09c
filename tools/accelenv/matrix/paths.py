"""Where the repository beside `matrix.toml` keeps an environment's lock: `envs/<id>/requirements.lock`.

A name, not a read: the lock itself is made and judged by `accelenv.plan.lock`. It sits with the matrix core
because the layers between the matrix and the plans need it too: a result record names the lock its run used
(`accelenv.results`), and its sha256 is what proves that lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

LOCK_NAME = "requirements.lock"


def lock_path(repo: Path, env_id: str) -> Path:
    return repo / "envs" / env_id / LOCK_NAME
