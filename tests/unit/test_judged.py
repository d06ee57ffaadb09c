"""What a verdict judged (issue 39): `labels` and `which` judge the host and the environment's own interpreter (its
session's virtualenv, or inside its image the image's), never the Python that runs them; without one, the Python
checks are not judged and one finding says so. `check` says which interpreter it judged."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hostkit import FakeRunner

from accelenv.check.checks import check
from accelenv.check.node_labels import labels_for
from accelenv.check.rank import rank_environments
from accelenv.check.subject import judge_with_own_python
from accelenv.check.verdict import Status, verdict
from accelenv.cli import main
from accelenv.host.interpreter import OwnPython, own_python
from accelenv.host.report import Container, HostReport, Limits, OsInfo, PythonInfo
from accelenv.host.snapshot import save_snapshot
from accelenv.matrix import load_matrix

REPO = Path(__file__).resolve().parents[2]
MATRIX = load_matrix(REPO / "matrix.toml")
ENV = MATRIX.envs["cpu-py311"]


def report(python: PythonInfo) -> HostReport:
    return HostReport(
        root="/",
        os=OsInfo(id="debian", version_id="12", pretty_name=None, kernel=None, glibc="2.36", arch="x86_64"),
        python=python,
        accelerators=(),
        environment={},
        limits=Limits(shm_bytes=None, memlock_bytes=None, memlock_unlimited=True),
        container=Container(inside_container=False, docker_socket=False, nvidia_container_toolkit=False, cdi_specs=()),
    )


SYSTEM_311 = PythonInfo(version="3.11.2", implementation="CPython", executable="/usr/bin/python3", distributions={})
SYSTEM_312 = PythonInfo(version="3.12.3", implementation="CPython", executable="/usr/bin/python3", distributions={})


def virtualenv(repo: Path, name: str, version: str, packages: dict[str, str]) -> tuple[Path, FakeRunner]:
    """A session virtualenv under repo/.nox/NAME: its pyvenv.cfg, bin/python, and site-packages with `packages`
    (as .dist-info folders); and a runner whose `python -I -c` answers what that interpreter prints."""
    folder = repo / ".nox" / name
    site = folder / "lib" / f"python{version[:4]}" / "site-packages"
    site.mkdir(parents=True)
    (folder / "bin").mkdir()
    (folder / "bin" / "python").write_text("", encoding="utf-8")
    (folder / "pyvenv.cfg").write_text(f"version_info = {version}\n", encoding="utf-8")
    for name_, pinned in packages.items():
        (site / f"{name_}-{pinned}.dist-info").mkdir()
    said = json.dumps([version, "cpython", str(folder / "bin" / "python"), str(folder), "/usr", [str(site)]])
    return folder, FakeRunner({str(folder / "bin" / "python"): said})


def no_python(version: str) -> str | None:
    return None


def test_the_label_does_not_depend_on_the_python_that_runs_labels(tmp_path: Path) -> None:
    folder, runner = virtualenv(tmp_path, "cpu-py311-py3.11", "3.11.9", {"ray": "2.60.0", "pytest": "9.2.0"})
    own = own_python(MATRIX, ENV, tmp_path, runner, python_here=no_python, environ={})
    assert own.prefix == str(folder)
    seen = set()
    for running in (SYSTEM_311, SYSTEM_312):  # the Python that happens to run `accelenv labels`
        found, _ = labels_for(MATRIX, report(running), [ENV], own={ENV.id: own}, host="host (root /)")
        seen.add(found.labels["accelenv.io/env.cpu-py311"])
        assert found.judged["cpu-py311"] == (
            f"judged: host (root /) and the virtualenv {folder} (Python 3.11.9, {folder}/bin/python)"
        )
    assert seen == {"pass"}
    # what labels used to do: judge the running Python (3.12, without the pins): fail
    assert verdict(check(MATRIX, ENV, report(SYSTEM_312))) is Status.FAIL


def test_a_virtualenv_without_the_pins_fails_its_requirements(tmp_path: Path) -> None:
    _, runner = virtualenv(tmp_path, "cpu-py3.11", "3.11.9", {"ray": "2.59.0"})  # the family session's folder
    own = own_python(MATRIX, ENV, tmp_path, runner, python_here=no_python, environ={})
    findings, judged = judge_with_own_python(MATRIX, ENV, report(SYSTEM_312), host="h", own=own)
    failing = {f.id for f in findings if f.status is Status.FAIL}
    assert failing == {"requirements.ray", "requirements.pytest", "framework.ray"}
    assert "python.version" not in failing  # the virtualenv's 3.11, not the running 3.12
    assert judged.kind == "virtualenv"


@pytest.mark.parametrize(
    ("python_here", "status", "why"),
    [
        (
            no_python,
            Status.WARN,
            (
                "no virtualenv of cpu-py311 here (.nox/cpu-py311-py3.11 or .nox/cpu-py3.11), and no Python 3.11 on "
                "this host to make one"
            ),
        ),
        (
            lambda version: f"/usr/bin/python{version}",
            Status.SKIP,
            (
                "no virtualenv of cpu-py311 here (.nox/cpu-py311-py3.11 or .nox/cpu-py3.11); Python 3.11 is here "
                "(/usr/bin/python3.11) to make one"
            ),
        ),
    ],
)
def test_without_the_environments_interpreter_the_python_checks_are_not_judged(
    tmp_path: Path, python_here: object, status: Status, why: str
) -> None:
    own = own_python(MATRIX, ENV, tmp_path, FakeRunner(), python_here=python_here, environ={})  # type: ignore[arg-type]
    findings, judged = judge_with_own_python(MATRIX, ENV, report(SYSTEM_312), host="host (root /)", own=own)
    assert not [f for f in findings if f.id.startswith(("python.version", "requirements."))]
    (said,) = [f for f in findings if f.id == "python.judged"]
    assert (said.status, said.found) == (status, why)
    assert judged.words() == f"judged: host (root /) only; the Python checks were not judged: {why}"
    assert judged.as_json() == {"host": "host (root /)", "python_kind": "not judged", "python": why}


def test_inside_the_environments_image_its_interpreter_is_judged(tmp_path: Path) -> None:
    site = tmp_path / "opt" / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for name, pinned in {"ray": "2.60.0", "pytest": "9.2.0"}.items():
        (site / f"{name}-{pinned}.dist-info").mkdir()
    python = str(tmp_path / "opt" / "venv" / "bin" / "python")
    said = json.dumps(["3.11.14", "cpython", python, str(tmp_path / "opt" / "venv"), "/usr/local", [str(site)]])
    environ = {"ACCELENV_ENV": "cpu-py311", "VIRTUAL_ENV": str(tmp_path / "opt" / "venv")}
    own = own_python(MATRIX, ENV, tmp_path, FakeRunner({python: said}), python_here=no_python, environ=environ)
    findings, judged = judge_with_own_python(MATRIX, ENV, report(SYSTEM_312), host="image x", own=own)
    assert verdict(findings) is Status.PASS
    assert (judged.kind, judged.python) == ("image", f"the image's interpreter {python} (Python 3.11.14)")


def test_which_says_what_each_row_judged(tmp_path: Path) -> None:
    _, runner = virtualenv(tmp_path, "cpu-py311-py3.11", "3.11.9", {"ray": "2.60.0", "pytest": "9.2.0"})
    own: dict[str, OwnPython | None] = {
        e.id: own_python(MATRIX, e, tmp_path, runner, python_here=no_python, environ={}) for e in MATRIX.envs.values()
    }
    rows = {r["id"]: r for r in rank_environments(MATRIX, report(SYSTEM_311), own, host="host (root /)")}
    assert rows["cpu-py311"]["verdict"] == "pass"
    assert rows["cpu-py311"]["judged"]["python_kind"] == "virtualenv"
    # cpu-py312 on a host without Python 3.12: not a pass as if its Python had been judged
    assert (rows["cpu-py312"]["verdict"], rows["cpu-py312"]["judged"]["python_kind"]) == ("warn", "not judged")
    assert "no Python 3.12 on this host" in rows["cpu-py312"]["reason"]


def test_check_says_which_interpreter_it_judged(tmp_path: Path) -> None:
    snap = tmp_path / "node.json"
    save_snapshot(report(SYSTEM_312), snap)
    out = io.StringIO()
    assert main(["--matrix", str(REPO / "matrix.toml"), "check", "cpu-py312", "--snapshot", str(snap)], out=out) == 1
    assert out.getvalue().splitlines()[1] == (
        f"judged: snapshot {snap} and the interpreter it recorded, /usr/bin/python3 (Python 3.12.3)"
    )
    out = io.StringIO()
    main(["--matrix", str(REPO / "matrix.toml"), "check", "cpu-py312", "--snapshot", str(snap), "--json"], out=out)
    assert json.loads(out.getvalue())["judged"]["python_kind"] == "interpreter"
    out = io.StringIO()
    main(["--matrix", str(REPO / "matrix.toml"), "check", "cpu-py312", "--snapshot", str(snap), "--host-only"], out=out)
    assert out.getvalue().splitlines()[1] == (
        f"judged: snapshot {snap} only; the Python checks were not judged: --host-only"
    )
