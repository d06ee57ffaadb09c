"""An environment's own interpreter on this host, and what it has installed.

The interpreter is the virtualenv the environment's nox session makes beside the session's own
(`plan/device_session.py`): `.nox/<env id>-py<X.Y>` for `nox -s <env id>`, `.nox/<family session>-py<X.Y>` for the
family's session (`nox -s cpu`), in the folder of the matrix. What it has is read from the folders on its
`sys.path`, which the interpreter itself prints (one run, with a timeout); nothing is imported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from accelenv.host.report import PythonInfo
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from accelenv.host.run import Runner
    from accelenv.matrix.model import Environment, Matrix

# prints version, implementation, executable, prefix, base prefix and sys.path as one JSON list; -I: the
# interpreter's own path only (no PYTHONPATH, no user site, no current folder)
_PROBE = (
    "import json, sys; print(json.dumps([sys.version.split()[0], sys.implementation.name, sys.executable, "
    "sys.prefix, sys.base_prefix, sys.path]))"
)
_IMPLEMENTATIONS = {"cpython": "CPython", "pypy": "PyPy", "graalpy": "GraalVM"}


def session_virtualenvs(matrix: Matrix, env: Environment, repo: Path) -> list[Path]:
    """Where the environment's nox sessions put its virtualenv, the environment's own session first."""
    folders = [repo / ".nox" / f"{env.id}-py{env.python}"]
    session = matrix.families[env.family].session
    if session:
        folders.append(repo / ".nox" / f"{session}-py{env.python}")
    return folders


def find_virtualenv(matrix: Matrix, env: Environment, repo: Path) -> Path | None:
    """The environment's session virtualenv on this host: the first that has a Python; None when there is none."""
    for folder in session_virtualenvs(matrix, env, repo):
        if (folder / "pyvenv.cfg").is_file() and (folder / "bin" / "python").exists():
            return folder
    return None


def read_interpreter(runner: Runner, python: str) -> tuple[PythonInfo, str | None] | str:
    """What `python` is and has: (its PythonInfo, its virtualenv folder or None), or why it could not be read."""
    from accelenv.host.probes.python import framework_builds, installed_distributions

    result = runner.run([python, "-I", "-c", _PROBE])
    if not result.ok:
        return f"{python} could not be run: {result.fault}"
    try:
        version, implementation, executable, prefix, base_prefix, path = json.loads(result.stdout.strip())
        paths = [str(p) for p in path if isinstance(p, str)]
    except (ValueError, TypeError):
        return f"{python} printed no interpreter facts"
    info = PythonInfo(
        version=str(version),
        implementation=_IMPLEMENTATIONS.get(str(implementation), str(implementation)),
        executable=str(executable),
        distributions=installed_distributions(paths),
        builds=framework_builds(paths),
    )
    return info, (str(prefix) if prefix != base_prefix else None)


@frozen
class OwnPython:
    """An environment's own interpreter as found on this host: `info` and its virtualenv folder (`prefix`) when
    found, else `why` not and `fix` (what makes one); `installable`: whether a Python of the environment's version
    is on the host (its session could make the virtualenv); None when not asked (a snapshot)."""

    info: PythonInfo | None
    prefix: str | None
    why: str = ""
    fix: str = ""
    installable: bool | None = None
    image: bool = False  # inside the environment's own image (its ACCELENV_ENV): the image's interpreter


def own_python(
    matrix: Matrix,
    env: Environment,
    repo: Path,
    runner: Runner,
    *,
    python_here: Callable[[str], str | None],
    environ: Mapping[str, str],
) -> OwnPython:
    """The environment's own interpreter and what it has: inside the environment's image (ACCELENV_ENV names it),
    the image's virtualenv; else its session virtualenv; or why there is none and what makes one.
    `python_here(version)`: a Python of that version on this host, or None (the session's own search)."""
    session = matrix.families[env.family].session or env.id
    if environ.get("ACCELENV_ENV") == env.id and environ.get("VIRTUAL_ENV"):
        read = read_interpreter(runner, str(Path(environ["VIRTUAL_ENV"]) / "bin" / "python"))
        if isinstance(read, str):
            return OwnPython(info=None, prefix=None, why=read, fix=f"rebuild the image: accelenv build {env.id}")
        return OwnPython(info=read[0], prefix=read[1], image=True)
    folder = find_virtualenv(matrix, env, repo)
    if folder is not None:
        read = read_interpreter(runner, str(folder / "bin" / "python"))
        if isinstance(read, str):
            return OwnPython(info=None, prefix=str(folder), why=read, fix=f"remake it: nox -s {env.id}")
        info, _prefix = read
        return OwnPython(info=info, prefix=str(folder))
    where = " or ".join(str(p.relative_to(repo)) for p in session_virtualenvs(matrix, env, repo))
    found = python_here(env.python)
    if found is None:
        return OwnPython(
            info=None,
            prefix=None,
            why=f"no virtualenv of {env.id} here ({where}), and no Python {env.python} on this host to make one",
            fix=f"install Python {env.python} (uv python install {env.python}), then nox -s {env.id}",
            installable=False,
        )
    return OwnPython(
        info=None,
        prefix=None,
        why=f"no virtualenv of {env.id} here ({where}); Python {env.python} is here ({found}) to make one",
        fix=f"nox -s {env.id} (or nox -s {session}) makes it and installs the lock",
        installable=True,
    )
