"""The runtime: does the host's runtime release go with the environment's? For CUDA, the driver's own CUDA version
must cover the runtime's (`driver.cuda`); elsewhere the host's runtime release (a ROCm install, Gaudi software)
should be of the runtime's release line (`runtime.version`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import Version

from accelenv.check.driver import numeric_version
from accelenv.check.verdict import Finding, Status
from accelenv.matrix.model import release_line

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.host.report import Accelerator
    from accelenv.matrix import Family, Runtime


def runtime_version(family: Family, runtime: Runtime, acc: Accelerator) -> Iterator[Finding]:
    if runtime.version is None or acc.runtime_version is None:
        return
    found = numeric_version(acc.runtime_version)
    if found is None:
        return
    wanted = Version(f"{runtime.version.major}.{runtime.version.minor}")
    have = Version(f"{found.major}.{found.minor}")
    if family.runtime_kind == "cuda":
        if have >= wanted:
            status, message = Status.PASS, f"driver supports CUDA {acc.runtime_version}"
        elif have.major == wanted.major and runtime.driver.compat_min is not None:
            status = Status.WARN
            message = (
                f"the driver supports CUDA {acc.runtime_version}, older than {wanted}: minor-version compatibility only"
            )
        else:
            status, message = (
                Status.FAIL,
                f"the driver supports CUDA {acc.runtime_version}; {runtime.name} needs {wanted}",
            )
        yield Finding(
            id="driver.cuda",
            status=status,
            expected=f">= {wanted}",
            found=acc.runtime_version,
            message=message,
            fix="" if status is Status.PASS else f"install a driver that supports CUDA {wanted} or newer",
        )
        return
    line = release_line(runtime.version)  # ROCm 7.14, Gaudi 1.24, libtpu 0.0.50: what a release line is
    same = release_line(found)[: len(line)] == line
    shown = ".".join(map(str, line))
    yield Finding(
        id="runtime.version",
        status=Status.PASS if same else Status.WARN,
        expected=f"{shown}.x",
        found=acc.runtime_version,
        message=f"host {runtime.name.split()[0]} {acc.runtime_version}"
        + ("" if same else f" differs from the environment's {runtime.version}"),
        fix="" if same else f"install the {shown} release on the host, or use the environment that matches it",
    )
