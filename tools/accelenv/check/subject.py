"""What a verdict judged: the host (or a snapshot, or an image) and which Python, if any.

`check` compares an environment with a `HostReport`; its Python checks (`python.version`, `requirements.*`,
`framework.*`) judge the interpreter the report describes. Which interpreter that is depends on the command:

- `check ENV` judges this interpreter, the Python that runs accelenv (in a nox session: the environment's
  virtualenv), or the one `--python PATH` names;
- `which` and `labels`, which feed schedulers, judge the environment's own interpreter: the virtualenv its nox
  session made (`.nox/<session>-py<X.Y>`), and never the Python that happened to run them. Where the environment
  has none on this host, its Python checks are not judged: one `python.judged` finding (a skip) says so and what
  makes one, and the host checks alone decide the verdict;
- `verify` judges the image's own interpreter, inside the image.

Every verdict carries a `Judged` that says which of these it was, in its text and its JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from accelenv import records
from accelenv.check.verdict import Finding, Status
from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.host.interpreter import OwnPython
    from accelenv.host.report import HostReport, PythonInfo
    from accelenv.matrix.model import Environment, Matrix

Kind = Literal["interpreter", "virtualenv", "image", "not judged"]


@frozen
class Judged:
    """`host`: the machine judged ("host (root /)", "snapshot node7.json", "image accelenv/cpu-py311:..."); `kind`
    and `python`: the interpreter whose packages the Python checks judged, or "not judged" and why (`python` is
    then the reason)."""

    host: str
    kind: Kind
    python: str

    def words(self) -> str:
        if self.kind == "not judged":
            return f"judged: {self.host} only; the Python checks were not judged: {self.python}"
        return f"judged: {self.host} and {self.python}"

    def as_json(self) -> dict[str, str]:
        return {"host": self.host, "python_kind": self.kind, "python": self.python}


def interpreter(
    host: str, python: PythonInfo, *, prefix: str | None, image: bool = False, recorded: bool = False
) -> Judged:
    """The verdict judged `python`: a virtualenv's when `prefix` (its folder) is given, an image's own when
    `image`, the one a snapshot recorded when `recorded`, else a plain interpreter."""
    what = f"Python {python.version}"
    if recorded:
        return Judged(
            host=host, kind="interpreter", python=f"the interpreter it recorded, {python.executable} ({what})"
        )
    if image:
        return Judged(host=host, kind="image", python=f"the image's interpreter {python.executable} ({what})")
    if prefix is not None:
        return Judged(host=host, kind="virtualenv", python=f"the virtualenv {prefix} ({what}, {python.executable})")
    return Judged(host=host, kind="interpreter", python=f"the interpreter {python.executable} ({what})")


def not_judged(host: str, why: str) -> Judged:
    return Judged(host=host, kind="not judged", python=why)


def not_judged_finding(env_python: str, why: str, fix: str) -> Finding:
    """The one finding that stands for the Python checks left out: a skip that says why and what makes them
    possible (the verdict is the host checks')."""
    return Finding(
        id="python.judged",
        status=Status.SKIP,
        expected=f"an interpreter of the environment (Python {env_python} with its pins)",
        found=why,
        message=f"the Python checks were not judged: {why}",
        fix=fix,
    )


def judge_with_own_python(
    matrix: Matrix, env: Environment, report: HostReport, *, host: str, own: OwnPython | None
) -> tuple[list[Finding], Judged]:
    """The findings of `env` judged on the host of `report` with the environment's own interpreter (`own`), never
    the report's (the Python that ran accelenv). Without one (`own` None: a snapshot; or none found), the host
    checks and one `python.judged` finding: a skip, or a warning when this host has no Python of the environment's
    version at all (its session could not run here as it is)."""
    from accelenv.check.checks import check

    if own is not None and own.info is not None:
        judged = interpreter(host, own.info, prefix=own.prefix, image=own.image)
        return check(matrix, env, records.replace(report, python=own.info)), judged
    why = own.why if own is not None else "a snapshot records the Python that took it, not the environment's"
    fix = (
        own.fix
        if own is not None
        else f"judge the node itself: accelenv labels (or which) on it, after nox -s {env.id}"
    )
    finding = not_judged_finding(env.python, why, fix)
    if own is not None and own.installable is False:
        finding = records.replace(finding, status=Status.WARN)
    return [*check(matrix, env, report, host_only=True), finding], not_judged(host, why)
