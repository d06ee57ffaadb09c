"""The Python side: the interpreter is the Python the environment pins (`python.version`), and every pinned
distribution is installed once, at exactly its pinned version, local label included (`requirements.<name>`).
`torch 2.14.1+cpu` does not satisfy `torch==2.14.1+cu126`: packaging's `==` would say it does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from accelenv.check.verdict import Finding, Status
from accelenv.matrix.model import canonical_name

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.host.report import HostReport
    from accelenv.matrix import Environment


def python_version(env: Environment, report: HostReport) -> Finding:
    found = ".".join(report.python.version.split(".")[:2])
    if found == env.python:
        return Finding(
            id="python.version",
            status=Status.PASS,
            expected=env.python,
            found=report.python.version,
            message=f"Python {report.python.version}",
        )
    return Finding(
        id="python.version",
        status=Status.FAIL,
        expected=env.python,
        found=report.python.version,
        message=f"{env.id} is pinned for Python {env.python}, this is Python {report.python.version}",
        fix=f"run under Python {env.python}: with it installed (`uv python install {env.python}`), "
        f"`nox -s {env.id}` checks again from a virtualenv made with it",
    )


def requirements(env: Environment, report: HostReport) -> Iterator[Finding]:
    installed = report.python.distributions
    for written, pin in env.requirements.pins:
        name = canonical_name(written)
        versions = installed.get(name, [])
        fid = f"requirements.{name}"
        if not versions:
            yield Finding(
                id=fid,
                status=Status.FAIL,
                expected=pin,
                found="not installed",
                message=f"{written} is not installed",
                fix=f"install the environment's lock into this Python: pip install --require-hashes -r "
                f"envs/{env.id}/requirements.lock (`nox -s {env.id}` does so in a virtualenv of its own)",
            )
        elif len(versions) > 1:
            yield Finding(
                id=fid,
                status=Status.FAIL,
                expected=pin,
                found=", ".join(versions),
                message=f"{written} is installed {len(versions)} times; which one imports is an accident",
                fix=f"recreate the environment (pip uninstall {written} until none is left, then reinstall)",
            )
        elif _same_version(versions[0], pin):
            yield Finding(id=fid, status=Status.PASS, expected=pin, found=versions[0], message=f"{written} {pin}")
        else:
            label_note = ""
            if versions[0].partition("+")[0] == pin.partition("+")[0]:
                label_note = f": a +{versions[0].partition('+')[2] or '(none)'} build, not +{pin.partition('+')[2]}"
            yield Finding(
                id=fid,
                status=Status.FAIL,
                expected=pin,
                found=versions[0],
                message=f"{written} {versions[0]} is installed, {env.id} pins {pin}{label_note}",
                fix=f"install the environment's lock into this Python: pip install --require-hashes -r "
                f"envs/{env.id}/requirements.lock (a plain pip install may pull another build)",
            )


def _same_version(installed: str, pin: str) -> bool:
    """Exact equality, local label included: `==2.8.0` would accept 2.8.0+cpu, this does not."""
    try:
        return Version(installed) == Version(pin) and Version(installed).local == Version(pin).local
    except InvalidVersion:
        return installed == pin
