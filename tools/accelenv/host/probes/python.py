"""The Python that will run the tests: version and installed distributions, read from metadata (nothing imported).

Names and versions come from the `.dist-info` folder names (`torch-2.9.1+cu128.dist-info`), as wheel installers
write them; only other layouts (`.egg-info`, odd names) pay for parsing the METADATA file.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from accelenv.errors import UsageError
from accelenv.fileio import read_bytes
from accelenv.host.report import PythonInfo
from accelenv.matrix.model import canonical_name

_DIST_INFO = re.compile(r"\A(?P<name>[A-Za-z0-9][A-Za-z0-9._]*)-(?P<version>[0-9][A-Za-z0-9.+!_]*)\.dist-info\Z")


def installed_distributions(paths: list[str] | None = None) -> dict[str, list[str]]:
    """Normalised name -> versions of every distribution on `paths` (default sys.path), duplicates kept."""
    installed: dict[str, list[str]] = {}
    for entry in paths if paths is not None else sys.path:
        folder = Path(entry or ".")
        try:
            children = list(folder.iterdir()) if folder.is_dir() else []
        except OSError:
            continue
        for child in children:
            if not child.name.endswith((".dist-info", ".egg-info")):
                continue
            match = _DIST_INFO.match(child.name)
            if match:
                name, version = match.group("name"), match.group("version")
            else:  # only layouts whose folder name does not say (egg-info) pay for reading the metadata
                from accelenv.distmeta import name_and_version

                found = name_and_version(child)
                if found is None:
                    continue
                name, version = found
            installed.setdefault(canonical_name(name), []).append(version)
    return {k: sorted(v) for k, v in sorted(installed.items())}


_TORCH_BUILD = re.compile(r"^(cuda|hip)\b[^=\n]*=\s*['\"]([0-9][0-9A-Za-z.+_-]{0,40})['\"]\s*$", re.MULTILINE)
_VERSION_PY_LIMIT = 1 << 16


def framework_builds(paths: list[str] | None = None) -> dict[str, str]:
    """The accelerator build frameworks declare in their own files, in the form of their wheel tags: torch's
    `torch/version.py` (`cuda = '13.2'` -> cu132, `hip = '10.0.x'` -> rocm10.0, neither -> cpu). Only the
    first torch on the path counts: it is the one that imports. Read, never imported."""
    for entry in paths if paths is not None else sys.path:
        version_py = Path(entry or ".") / "torch" / "version.py"
        try:
            if not version_py.is_file():
                continue
            text = read_bytes(version_py, limit=_VERSION_PY_LIMIT, what="torch version file").decode("utf-8", "replace")
        except (OSError, UsageError):
            continue
        found = dict(_TORCH_BUILD.findall(text))
        if "cuda" in found:
            return {"torch": "cu" + "".join(found["cuda"].split(".")[:2])}
        if "hip" in found:
            return {"torch": "rocm" + ".".join(found["hip"].split(".")[:2])}
        return {"torch": "cpu"}
    return {}


_IMPLEMENTATIONS = {"cpython": "CPython", "pypy": "PyPy", "graalpy": "GraalVM"}  # as platform names them


def python_info() -> PythonInfo:
    return PythonInfo(
        version=sys.version.split()[0],
        implementation=_IMPLEMENTATIONS.get(sys.implementation.name, sys.implementation.name),
        executable=sys.executable,
        distributions=installed_distributions(),
        builds=framework_builds(),
    )
