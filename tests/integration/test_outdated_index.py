"""`accelenv outdated` over real HTTP: requests against indexes served on loopback by the test.

PyPI's JSON API is stood in for by real answers captured from https://pypi.org/pypi/<name>/json (trimmed, see
tests/integration/data and each file's `_source`), served as `/pypi/<name>/json`; a PEP 503 simple index with
tiny wheels built on the spot plays the part of download.pytorch.org/whl/cu128.
"""

from __future__ import annotations

import dataclasses
import shutil
import socket
from pathlib import Path

import pytest
import requests
from hostkit import LoopbackServer, build_wheel, write_simple_index
from reference import REFERENCE_MATRIX

from accelenv.matrix import Matrix, Requirements, load_matrix
from accelenv.upstream.indexes import PYPI_SIMPLE
from accelenv.upstream.outdated import ReleaseSourceUrls, render_github
from accelenv.upstream.survey import check_matrix

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """The folder the server serves: captured PyPI JSON answers and a PEP 503 index of demo-torch builds."""
    root = tmp_path / "www"
    for name in ("ray", "libtpu", "jax"):
        (root / "pypi" / name).mkdir(parents=True)
        shutil.copyfile(DATA / f"pypi-{name}.json", root / "pypi" / name / "json")
    simple = root / "simple"
    for version in ("2.9.1+cu128", "2.10.0+cu128", "2.10.0+cpu", "2.11.0"):
        build_wheel(simple / "demo-torch", "demo-torch", version)
    write_simple_index(simple)
    # the pci.ids release the matrix cites: nothing new in it (TPU's vendor id is read there)
    (root / "pci.ids").write_text("#\tVersion: 2026.10.24\n1ae0  Google, Inc.\n", encoding="utf-8")
    return root


def with_env_pins(matrix: Matrix, env_id: str, packages: list[str], extra_index_urls: tuple[str, ...]) -> Matrix:
    env = matrix.envs[env_id]
    requirements = Requirements(specs=tuple(packages), index_url=None, extra_index_urls=extra_index_urls)
    envs = {**matrix.envs, env_id: dataclasses.replace(env, requirements=requirements)}
    return dataclasses.replace(matrix, envs=envs)


def test_real_pypi_answers_and_a_simple_index_on_loopback(served: Path) -> None:
    matrix = load_matrix(REFERENCE_MATRIX)
    with LoopbackServer(served) as server, requests.Session() as session:
        simple = f"{server.url}/simple"
        matrix = with_env_pins(
            matrix, "cpu-py311", ["demo-torch==2.9.1+cu128", "ray==2.58.0", "jax==0.8.3", "pytest==9.2.0"], (simple,)
        )
        sources = ReleaseSourceUrls(pci_ids=f"{server.url}/pci.ids")
        findings, problems = check_matrix(
            matrix, session, envs=["cpu-py311", "tpu-jax-0-8"], pypi_url=server.url, sources=sources
        )
    assert [(f.kind, f.env, f.name, f.current, f.latest, f.index) for f in findings] == [
        ("package", "cpu-py311", "demo-torch", "2.9.1+cu128", "2.10.0+cu128", simple),
        ("package", "cpu-py311", "ray", "2.58.0", "2.60.0", PYPI_SIMPLE),
        ("package", "cpu-py311", "jax", "0.8.3", "0.10.2", PYPI_SIMPLE),  # jax 0.11 and later need Python 3.12
        ("package", "tpu-jax-0-8", "jax", "0.8.3", "0.12.0.1", PYPI_SIMPLE),
        ("package", "tpu-jax-0-8", "libtpu", "0.0.32", "0.0.52", PYPI_SIMPLE),
        ("runtime", "libtpu-0-0-32", "libtpu", "0.0.32", "0.0.52", PYPI_SIMPLE),
        ("runtime", "libtpu-0-0-32", "jax", "0.8.3", "0.12.0.1", PYPI_SIMPLE),
    ]
    assert [(p.env, p.name, p.message) for p in problems] == [
        ("cpu-py311", "pytest", f"no index has pytest (asked {simple}, {PYPI_SIMPLE})"),
        ("tpu-jax-0-8", "jaxlib", f"no index has jaxlib (asked {PYPI_SIMPLE})"),
        ("tpu-jax-0-8", "pytest", f"no index has pytest (asked {PYPI_SIMPLE})"),
    ]
    report = render_github(findings)
    assert "Change `envs.cpu-py311.requirements.packages` in `matrix.toml`: `ray==2.58.0` → `ray==2.60.0`." in report
    assert "Change `runtimes.libtpu-0-0-32.components.jax` in `matrix.toml`: `0.8.3` → `0.12.0.1`." in report


def test_an_index_nobody_listens_on_is_a_problem_not_an_exception() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dead = f"http://127.0.0.1:{port}/simple"
    matrix = with_env_pins(load_matrix(REFERENCE_MATRIX), "cpu-py311", ["ray==2.58.0"], (dead,))
    with requests.Session() as session:
        findings, problems = check_matrix(matrix, session, envs=["cpu-py311"], pypi_url=f"http://127.0.0.1:{port}")
    assert findings == []
    # both indexes were asked, in order; each says in a few words why it could not answer
    assert [(p.env, p.name, p.index, p.message) for p in problems] == [
        ("cpu-py311", "ray", dead, f"GET {dead}/ray/ failed: connection refused"),
        (
            "cpu-py311",
            "ray",
            "https://pypi.org/simple",
            f"GET http://127.0.0.1:{port}/pypi/ray/json failed: connection refused",
        ),
    ]


def test_a_mirror_set_through_pips_settings_replaces_pypi(served: Path, tmp_path: Path) -> None:
    """pip.conf's index-url (and PIP_INDEX_URL over it) is where PyPI's pins are looked up: the mirror answers,
    pypi.org is never asked (here: a port nobody listens on stands for it)."""
    from accelenv.upstream.settings import read_index_settings

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{probe.getsockname()[1]}"
    with LoopbackServer(served) as server, requests.Session() as session:
        conf = tmp_path / "pip.conf"
        conf.write_text(f"[global]\nindex-url = {server.url}/simple\n", encoding="utf-8")
        settings = read_index_settings({}, [conf])
        matrix = with_env_pins(load_matrix(REFERENCE_MATRIX), "cpu-py311", ["demo-torch==2.10.0+cpu"], ())
        findings, problems = check_matrix(matrix, session, envs=["cpu-py311"], pypi_url=nobody, settings=settings)
    assert problems == []
    # 2.10.0+cpu is the newest +cpu build, so no bump; the mirror's plain 2.11.0 is a newer framework line
    mirror = f"{server.url}/simple"
    assert [(f.kind, f.name, f.current, f.latest, f.index) for f in findings] == [
        ("framework", "demo-torch", "2.10.0", "2.11.0", mirror)
    ]
    assert settings.strategy == "best-version"
    assert settings.main == f"{server.url}/simple"
