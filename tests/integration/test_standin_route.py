"""`accelenv build cpu-py311` from a fresh clone, by the README's steps for a machine that reaches no registry
("Images without a registry"): `base make` points the environment at a local stand-in base, `lock` locks the
OS release's Python against it (beside the override, never in envs/), `build` builds it offline and `verify`
passes with the warning that it is not a release image; `build --push` refuses it, and the repository's own
files are unchanged, so nothing made against the stand-in can be committed as the real base's lock.

The stand-in is made `--from` the CI base image (`.ci/run` debootstraps it) instead of running debootstrap again.
The images are built into a repository of this test's own (removed afterwards, with the stand-in tag when this
test made it). `lock` asks Debian's archive from inside the base, as it does for users.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from localmatrix import BASE_IMAGE
from repocopy import copy_repository

if TYPE_CHECKING:
    from pathlib import Path

    from accelenv.build.engine import DockerEngine

pytestmark = pytest.mark.integration
STANDIN = "accelenv-standin/debian12:bookworm-minbase"


@pytest.mark.heavy(seconds=70)
def test_cpu_py311_builds_from_a_fresh_clone_on_a_stand_in_base(
    tmp_path: Path, engine: DockerEngine, repository: str
) -> None:
    from pathlib import Path as RealPath

    repo = RealPath(__file__).resolve().parents[2]
    clone = tmp_path / "clone"
    copy_repository(repo, clone)
    env = {**os.environ, "PYTHONPATH": str(clone / "tools"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # the copy stays as a clone has it
    env.pop("ACCELENV_MATRIX", None)
    made_standin = engine.image(STANDIN) is None

    def accelenv(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "accelenv", *args],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=1200,
            check=False,
        )

    def committable() -> dict[Path, bytes]:  # every file of the copy a commit would take: all but .accelenv/
        return {
            p.relative_to(clone): p.read_bytes()
            for p in clone.rglob("*")
            if p.is_file() and ".accelenv" not in p.relative_to(clone).parts
        }

    tracked = committable()
    try:
        made = accelenv("base", "make", "cpu-py311", "--from", BASE_IMAGE)
        assert made.returncode == 0, made.stdout + made.stderr
        assert "accelenv lock cpu-py311 && accelenv build cpu-py311 && accelenv verify cpu-py311" in made.stdout
        locked = accelenv("lock", "cpu-py311")
        assert locked.returncode == 0, locked.stdout + locked.stderr
        assert (clone / ".accelenv" / "overrides" / "cpu-py311" / "os-packages.lock").is_file()
        built = accelenv("build", "cpu-py311", "--json", "--repository", repository)
        document = json.loads(built.stdout)  # one JSON document on stdout; progress on stderr
        assert built.returncode == 0, built.stderr[-4000:]
        assert document["ok"] is True
        assert [r["env"] for r in document["results"]] == ["cpu-py311"]
        assert document["not_built"] == []
        verified = accelenv("verify", "cpu-py311", "--repository", repository)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert "WARN  image.base" in verified.stdout
        assert "not a release image" in verified.stdout
        assert "FAIL" not in verified.stdout
        pushed = accelenv("build", "cpu-py311", "--json", "--repository", repository, "--push", "localhost:5000")
        assert pushed.returncode == 1
        [refused] = json.loads(pushed.stdout)["not_built"]
        assert "local stand-in" in refused["reason"]
        # nothing made against the stand-in reached the files a commit would take
        assert committable() == tracked
    finally:
        if made_standin and engine.image(STANDIN) is not None:
            engine.remove(STANDIN)
