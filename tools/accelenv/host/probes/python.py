"""The Python that will run the tests: version and installed distributions, read from metadata (nothing imported)."""

from __future__ import annotations

import importlib.metadata
import platform
import re
import sys

from accelenv.host.report import PythonInfo


def normalise(name: str) -> str:
    """PEP 503 name normalisation: Torch_Neuronx and torch.neuronx are torch-neuronx."""
    return re.sub(r"[-_.]+", "-", name).lower()


def python_info() -> PythonInfo:
    installed: dict[str, list[str]] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        installed.setdefault(normalise(name), []).append(dist.version)
    return PythonInfo(
        version=platform.python_version(),
        implementation=platform.python_implementation(),
        executable=sys.executable,
        distributions={k: sorted(v) for k, v in sorted(installed.items())},
    )
