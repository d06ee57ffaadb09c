"""The provenance of the repository's lock files: each read (through `plan.lock.read_lock`) and assessed
(`provenance.assess`) against the indexes its environment declares, for `lock --check` and `validate`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.matrix.paths import lock_path
from accelenv.plan.lock import PYPI, image_lock_path, read_lock
from accelenv.plan.provenance import LockProvenance, assess, normal_index, relock

if TYPE_CHECKING:
    from pathlib import Path

    from accelenv.matrix import Environment
    from accelenv.matrix.problems import Problem


def declared_indexes(env: Environment) -> tuple[str, ...]:
    """The indexes a lock of `env` may take pins from: its index_url (PyPI when it declares none) and its
    extra_index_urls, as `normal_index` writes them."""
    urls = [env.requirements.index_url or PYPI, *env.requirements.extra_index_urls]
    return tuple(dict.fromkeys(normal_index(url) for url in urls))


def lock_provenance(repo: Path, env: Environment) -> LockProvenance | None:
    """What the environment's lock says about its pins' indexes and hashes (None: no lock)."""
    path = lock_path(repo, env.id)
    text = read_lock(repo, path, what="lock file")
    if text is None:
        return None
    return assess(text, declared_indexes(env), where=str(path.relative_to(repo)), env_id=env.id)


def image_lock_provenance(repo: Path) -> LockProvenance | None:
    """The same for envs/accelenv-image.lock, resolved from PyPI alone."""
    path = image_lock_path(repo)
    text = read_lock(repo, path, what="lock file")
    if text is None:
        return None
    return assess(text, (PYPI,), where=str(path.relative_to(repo)), env_id="")


def provenance_problems(repo: Path, env: Environment) -> list[Problem]:
    """For `validate`: a current lock's pins from an index the environment does not declare (errors), and a lock
    that does not record where its pins came from or whose hashes were not checked (a warning that needs an index
    to fix, so `validate --release` fails on it)."""
    from accelenv.matrix.problems import Problem, Severity

    found = lock_provenance(repo, env)
    if found is None:
        return []
    problems = [Problem(path=f"envs.{env.id}", message=message, rule="lock") for message in found.problems]
    if found.shortfall is not None:
        what, why = found.shortfall
        message = f"has {what} ({why}); run `{relock(env.id)}` where its indexes are reachable"
        problems.append(Problem(path=f"envs.{env.id}", message=message, severity=Severity.WARNING, rule="lock"))
    return problems
