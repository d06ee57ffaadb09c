"""Finding a Python interpreter the way users have them: installed by the distribution, by pyenv or by uv.

A pyenv shim on PATH that refuses (`pyenv: python3.12: command not found` when PYENV_VERSION names another
version) does not count, but the interpreter behind it does: pyenv keeps it at
$PYENV_ROOT/versions/<X.Y.Z>/bin/pythonX.Y. Each candidate is run once to prove it is that version; nothing is
downloaded.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

from accelenv.host.run import run_in_group

SUPPORTED = ("3.11", "3.12", "3.13", "3.14")  # what pyproject's requires-python (>=3.11) admits, oldest first
_PROBE = "import sys; print('%d.%d' % sys.version_info[:2])"


def uv_binary() -> str:
    try:
        from uv import find_uv_bin
    except ImportError:
        return "uv"
    return str(find_uv_bin())


def _pyenv_candidates(version: str, environ: dict[str, str]) -> list[str]:
    roots = [environ["PYENV_ROOT"]] if environ.get("PYENV_ROOT") else []
    roots.append(str(Path.home() / ".pyenv"))
    found: list[tuple[Version, str]] = []
    for root in dict.fromkeys(roots):
        versions = Path(root) / "versions"
        with contextlib.suppress(OSError):
            for folder in versions.iterdir():
                if folder.name != version and not folder.name.startswith(f"{version}."):
                    continue
                with contextlib.suppress(InvalidVersion):
                    found.append((Version(folder.name), str(folder / "bin" / f"python{version}")))
    return [path for _, path in sorted(found, reverse=True)]  # newest patch release first


def candidates(version: str, environ: dict[str, str] | None = None) -> list[str]:
    """Where python<version> may be, in the order they are tried: the running interpreter, every one on PATH (a
    refusing pyenv shim first hides the distribution's /usr/bin/python<version> from `which`), then pyenv's
    versions. uv's own interpreters are asked of uv afterwards."""
    environ = dict(os.environ) if environ is None else environ
    out = []
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        out.append(sys.executable)
    for folder in environ.get("PATH", "").split(os.pathsep):
        if folder:
            path = os.path.join(folder, f"python{version}")  # noqa: PTH118 - PATH entries are plain strings
            if os.path.isfile(path):  # noqa: PTH113 - False, not PermissionError, for a folder it cannot search
                out.append(path)
    out += _pyenv_candidates(version, environ)
    return list(dict.fromkeys(out))


def _runs_as(path: str, version: str) -> bool:
    if not os.access(path, os.X_OK):
        return False
    with contextlib.suppress(OSError):
        if sys.executable and Path(path).samefile(sys.executable):  # the Python running this: no child to ask
            return f"{sys.version_info[0]}.{sys.version_info[1]}" == version
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = run_in_group([path, "-c", _PROBE], input_text="", timeout=20)
        return out.returncode == 0 and out.stdout.strip() == version
    return False


@functools.cache
def find_interpreter(version: str) -> str | None:
    """A working python<version> on this machine (see the module's docstring), or None."""
    for path in candidates(version):
        if _runs_as(path, version):
            return path
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found = run_in_group(
            [uv_binary(), "python", "find", "--no-python-downloads", version], input_text="", timeout=30
        )
        path = found.stdout.strip().splitlines()[-1] if found.returncode == 0 and found.stdout.strip() else ""
        if path and _runs_as(path, version):
            return path
    return None


def missing_python_message(env_id: str, version: str) -> str:
    return (
        f"{env_id} runs on Python {version}, which this machine does not have (looked on PATH, among pyenv's "
        f"versions and among uv's interpreters). Install it, then run the "
        f"session again: `uv python install {version}`, or `pyenv install {version}` (found without "
        f"PYENV_VERSION), or your distribution's package where it has that version (Debian 12's python3 is 3.11, "
        f"Ubuntu 24.04's is 3.12)."
    )
