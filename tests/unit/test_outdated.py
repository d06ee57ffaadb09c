"""`accelenv outdated`: the choice of a newer release, the index page parsers, the report, and the whole check over
the shipped matrix with a hand-written fake session (real PyPI answers captured under tests/integration/data)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pytest
import requests
from reference import REFERENCE_MATRIX

from accelenv.errors import UsageError
from accelenv.matrix import Hold, Matrix, load_matrix
from accelenv.upstream.indexes import UnusableAnswer, parse_pypi_json, parse_simple_html, parse_simple_json
from accelenv.upstream.outdated import Finding, Problem, render_github, render_table
from accelenv.upstream.packages import newest
from accelenv.upstream.survey import check_matrix

if TYPE_CHECKING:
    from collections.abc import Iterator

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "integration" / "data"


def captured(name: str) -> str:
    """A trimmed real answer of https://pypi.org/pypi/<name>/json (see its `_source` key)."""
    return (DATA / f"pypi-{name}.json").read_text(encoding="utf-8")


# ---- newest -----------------------------------------------------------------------------------------------------

JAX_REQUIRES = {"0.10.2": ">=3.11", "0.11.0": ">=3.12", "0.12.0": ">=3.12"}

NEWEST_CASES = [
    # (versions, current, python, requires_python, allow_prereleases, expected)
    (["2.58.0", "2.60.0", "2.59.0"], "2.58.0", "3.12", {}, False, "2.60.0"),
    (["2.58.0", "2.60.0"], "2.60.0", "3.12", {}, False, None),
    (["2.57.0"], "2.60.0", "3.12", {}, False, None),
    (["2.60.0", "2.61.0rc1"], "2.58.0", "3.12", {}, False, "2.60.0"),
    (["2.60.0", "2.61.0rc1"], "2.58.0", "3.12", {}, True, "2.61.0rc1"),
    (["2.60.0", "2.61.0.dev0"], "2.58.0", "3.12", {}, False, "2.60.0"),
    (["2.61.0rc1", "2.61.0rc2"], "2.61.0rc1", "3.12", {}, False, "2.61.0rc2"),  # a prerelease pin follows them
    (["2.60.0", "not a version", "2.61"], "2.58.0", "3.12", {}, False, "2.61"),
    (["2.60.0.post1", "2.60.0"], "2.60.0", "3.12", {}, False, "2.60.0.post1"),
    (["0.10.2", "0.11.0", "0.12.0"], "0.8.3", "3.11", JAX_REQUIRES, False, "0.10.2"),
    (["0.10.2", "0.11.0", "0.12.0"], "0.8.3", "3.12", JAX_REQUIRES, False, "0.12.0"),
    (["0.10.2", "0.11.0"], "0.8.3", "3.11", {"0.11.0": "not a specifier"}, False, "0.11.0"),  # ignored, as pip does
    (["0.10.2", "0.11.0"], "0.8.3", "3.11", {"0.11.0": None}, False, "0.11.0"),
    (["2.10.0+cu128", "2.10.0+cpu", "2.11.0"], "2.9.1+cu128", "3.12", {}, False, "2.10.0+cu128"),
    (["2.10.0+cu126", "2.11.0+cpu"], "2.9.1+cu128", "3.12", {}, False, None),
    (["2.10.0+cpu", "2.10.0"], "2.9.1", "3.12", {}, False, "2.10.0"),  # no label pins stay unlabelled
    (["2.9.1+cu130"], "2.9.1+cu128", "3.12", {}, False, None),
]


@pytest.mark.parametrize("case", NEWEST_CASES, ids=lambda case: f"{case[1]}->{case[5]}")
def test_newest(case: tuple[list[str], str, str, dict[str, str | None], bool, str | None]) -> None:
    versions, current, python, requires, pre, expected = case
    result = newest(versions, current=current, python=python, requires_python=requires, allow_prereleases=pre)
    assert result == expected


def test_a_yanked_release_is_never_newest() -> None:
    releases = parse_pypi_json(json.loads(captured("jax")), index="https://pypi.org/simple")
    assert "0.4.32" not in releases.versions  # every file of jax 0.4.32 is yanked on PyPI
    assert "0.8.3" in releases.versions
    older = newest(
        list(releases.versions),
        current="0.4.31",
        python="3.11",
        requires_python=dict(releases.requires_python),
        allow_prereleases=False,
    )
    assert older == "0.10.2"


# ---- index pages ------------------------------------------------------------------------------------------------


def test_pypi_json_takes_the_first_requires_python_and_skips_wholly_yanked_releases() -> None:
    data = {
        "info": {"name": "demo", "version": "1.2"},
        "releases": {
            "1.0": [{"filename": "demo-1.0.tar.gz", "requires_python": "", "yanked": False}],
            "1.1": [
                {"filename": "demo-1.1-py3-none-any.whl", "requires_python": None, "yanked": True},
                {"filename": "demo-1.1.tar.gz", "requires_python": ">=3.9", "yanked": False},
            ],
            "1.2": [{"filename": "demo-1.2.tar.gz", "requires_python": ">=3.12", "yanked": True}],
            "1.3": [],
        },
    }
    releases = parse_pypi_json(data, index="https://pypi.org/simple")
    assert releases.versions == ("1.0", "1.1", "1.3")
    assert dict(releases.requires_python) == {"1.0": None, "1.1": ">=3.9", "1.3": None}


@pytest.mark.parametrize("data", [[], {"info": {}}, {"releases": []}])
def test_pypi_json_without_releases_is_unusable(data: object) -> None:
    with pytest.raises(UnusableAnswer, match=r"^the JSON has no 'releases' object$"):
        parse_pypi_json(data, index="https://pypi.org/simple")


SIMPLE_JSON = {
    "meta": {"api-version": "1.1"},
    "name": "torch",
    "versions": ["2.9.1+cu128", "2.10.0+cu128", "2.11.0+cu128"],
    "files": [
        {"filename": "torch-2.9.1+cu128-cp312-cp312-manylinux_2_28_x86_64.whl", "requires-python": ">=3.10"},
        {"filename": "torch-2.10.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl", "requires-python": ">=3.10"},
        {"filename": "torch-2.11.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl", "yanked": "broken build"},
        {"filename": "torchvision-0.30.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl"},
    ],
}


def test_pep691_json_uses_the_versions_key_and_skips_yanked_files() -> None:
    releases = parse_simple_json(SIMPLE_JSON, project="torch", index="https://download.pytorch.org/whl/cu128")
    assert releases.versions == ("2.9.1+cu128", "2.10.0+cu128")
    assert dict(releases.requires_python) == {"2.9.1+cu128": ">=3.10", "2.10.0+cu128": ">=3.10"}


def test_pep691_json_without_versions_reads_the_file_names() -> None:
    data = {
        "meta": {"api-version": "1.0"},
        "files": [
            {"filename": "Neuronx_CC-2.26.6360.0-cp312-cp312-linux_x86_64.whl", "requires-python": ">=3.9"},
            {"filename": "neuronx-cc-2.27.1.0.tar.gz", "requires-python": ""},
            {"filename": "neuronx_cc-2.27.1.0-cp312-cp312-linux_x86_64.whl", "requires-python": ">=3.10"},
            {"filename": "README.txt"},
        ],
    }
    releases = parse_simple_json(data, project="neuronx-cc", index="https://pip.repos.neuron.amazonaws.com")
    assert releases.versions == ("2.26.6360.0", "2.27.1.0")
    assert dict(releases.requires_python) == {"2.26.6360.0": ">=3.9", "2.27.1.0": ">=3.10"}


def test_pep691_json_without_files_is_unusable() -> None:
    with pytest.raises(UnusableAnswer, match=r"^the JSON has no 'files' list \(not a PEP 691 project page\)$"):
        parse_simple_json({"projects": []}, project="torch", index="https://example.org/simple")


SIMPLE_HTML = """<!DOCTYPE html>
<html><body><h1>Links for torch</h1>
<a href="/whl/cu128/torch-2.9.1%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=ab"
   data-requires-python="&gt;=3.10">torch-2.9.1+cu128-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>
<a href="/whl/cu128/torch-2.10.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=cd"
   data-requires-python="&gt;=3.12">torch-2.10.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>
<a href="/whl/cu128/torch-2.11.0%2Bcu128-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=ef"
   data-yanked="">torch-2.11.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>
</body></html>
"""


def test_pep503_html_reads_anchors_unescapes_requires_python_and_skips_yanked() -> None:
    releases = parse_simple_html(SIMPLE_HTML, project="torch", index="https://download.pytorch.org/whl/cu128")
    assert releases.versions == ("2.9.1+cu128", "2.10.0+cu128")
    assert dict(releases.requires_python) == {"2.9.1+cu128": ">=3.10", "2.10.0+cu128": ">=3.12"}
    latest = newest(
        list(releases.versions),
        current="2.9.1+cu128",
        python="3.11",
        requires_python=dict(releases.requires_python),
        allow_prereleases=False,
    )
    assert latest is None  # 2.10.0+cu128 needs Python 3.12


# ---- the report -------------------------------------------------------------------------------------------------

RAY = Finding(
    kind="package",
    env="cpu-py311",
    name="ray",
    current="2.58.0",
    latest="2.60.0",
    index="https://pypi.org/simple",
    note="newest for Python 3.11",
)
LIBTPU = Finding(
    kind="runtime",
    env="libtpu-0-0-32",
    name="libtpu",
    current="0.0.32",
    latest="0.0.52",
    index="https://pypi.org/simple",
)


def test_render_github_is_one_issue_ready_section_per_finding() -> None:
    assert render_github([RAY, LIBTPU]) == (
        "### ray 2.60.0 is out (environment `cpu-py311` pins 2.58.0)\n"
        "\n"
        "| current | latest | index |\n"
        "| --- | --- | --- |\n"
        "| `2.58.0` | `2.60.0` | https://pypi.org/simple |\n"
        "\n"
        "Change `envs.cpu-py311.requirements.packages` in `matrix.toml`: `ray==2.58.0` → `ray==2.60.0`.\n"
        "\n"
        "Note: newest for Python 3.11.\n"
        "\n"
        "### libtpu 0.0.52 is out (runtime `libtpu-0-0-32` pins 0.0.32)\n"
        "\n"
        "| current | latest | index |\n"
        "| --- | --- | --- |\n"
        "| `0.0.32` | `0.0.52` | https://pypi.org/simple |\n"
        "\n"
        "Change `runtimes.libtpu-0-0-32.version` in `matrix.toml`: `0.0.32` → `0.0.52`.\n"
    )
    assert render_github([]) == "No newer releases found.\n"


def test_finding_json_names_the_key_to_change() -> None:
    jax = dataclasses.replace(LIBTPU, name="jax", current="0.8.3", latest="0.12.0.1")
    assert jax.as_json()["key"] == "runtimes.libtpu-0-0-32.components.jax"
    assert RAY.as_json() == {
        "kind": "package",
        "env": "cpu-py311",
        "name": "ray",
        "current": "2.58.0",
        "latest": "2.60.0",
        "index": "https://pypi.org/simple",
        "key": "envs.cpu-py311.requirements.packages",
        "note": "newest for Python 3.11",
        "held": "",
    }


def test_render_table_lines_up_findings_and_lists_problems() -> None:
    problem = Problem(env="cpu-py311", name="pytest", index="https://pypi.org/simple", message="GET x failed: boom")
    text = render_table([RAY, LIBTPU], [problem])
    assert text.splitlines()[:3] == [
        "KIND     ENV            NAME    CURRENT  LATEST  INDEX",
        "package  cpu-py311      ray     2.58.0   2.60.0  https://pypi.org/simple",
        "runtime  libtpu-0-0-32  libtpu  0.0.32   0.0.52  https://pypi.org/simple",
    ]
    assert "1 line(s) could not be checked:\n  cpu-py311: pytest: GET x failed: boom\n" in text
    assert text.endswith("runtimes not checked (no machine-readable release source): gaudi\n")
    assert render_table([], []).startswith(
        "every pinned package and runtime checked is current, or held back by the support window\n"
    )


def test_releases_a_runtime_holds_back_are_listed_apart_with_the_reason(matrix: Matrix) -> None:
    """runtimes.<id>.hold: newer upstream releases are news, not a lag, for the runtime and the pins it names."""
    hold = Hold(reason="jax 0.8.3 pins libtpu==0.0.32.*", packages=("libtpu",))
    runtime = dataclasses.replace(matrix.runtimes["libtpu-0-0-32"], hold=hold)
    held_matrix = dataclasses.replace(matrix, runtimes={**matrix.runtimes, runtime.id: runtime})
    findings, _ = check_matrix(held_matrix, fake_indexes(), envs=["tpu-jax-0-8"])
    assert [(f.env, f.name, f.held) for f in findings] == [
        ("tpu-jax-0-8", "jax", ""),  # not named by the hold: still an update to make
        ("tpu-jax-0-8", "libtpu", hold.reason),
        ("libtpu-0-0-32", "libtpu", hold.reason),
        ("libtpu-0-0-32", "jax", hold.reason),
    ]
    table = render_table(findings, [])
    assert table.splitlines()[:2] == [
        "KIND     ENV          NAME  CURRENT  LATEST    INDEX",
        "package  tpu-jax-0-8  jax   0.8.3    0.12.0.1  https://pypi.org/simple",
    ]
    assert (
        "3 held back by the support window (news, not a lag):\n"
        "  tpu-jax-0-8: libtpu 0.0.32 -> 0.0.52: jax 0.8.3 pins libtpu==0.0.32.*\n"
    ) in table
    github = render_github(findings)
    assert github.startswith("### jax 0.12.0.1 is out (environment `tpu-jax-0-8` pins 0.8.3)")
    assert "### Held back by the support window" in github
    assert "| libtpu (`libtpu-0-0-32`) | `0.0.32` | `0.0.52` | jax 0.8.3 pins libtpu==0.0.32.* |" in github
    only_held = render_github([f for f in findings if f.held])
    assert only_held.startswith("Nothing to update: every newer release found is held back by the support window.")


# ---- the whole check, with a fake session -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class FakeResponse:
    status_code: int
    text: str = ""
    headers: dict[str, str] = dataclasses.field(default_factory=dict)

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        yield self.text.encode()

    def close(self) -> None:
        pass


@dataclasses.dataclass
class FakeSession:
    """Answers by URL; an exception in `answers` is raised; any other URL is a 404."""

    answers: dict[str, FakeResponse | Exception]
    calls: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def request(self, method: str, url: str, **kwargs: Any) -> FakeResponse:
        assert (method, kwargs["timeout"] > 0, kwargs["stream"]) == ("GET", True, True)
        self.calls.append((url, kwargs["headers"]["Accept"]))
        answer = self.answers.get(url, FakeResponse(404, "Not Found"))
        if isinstance(answer, Exception):
            raise answer
        return answer


CU128 = "https://download.pytorch.org/whl/cu128"
PYPI = "https://pypi.org/simple"
JSON_TYPE = {"Content-Type": "application/vnd.pypi.simple.v1+json"}
PCI_IDS_URL = "https://raw.githubusercontent.com/pciutils/pciids/master/pci.ids"
RELEASES_URL = "https://docs.nvidia.com/datacenter/tesla/drivers/releases.json"
CUDA_TAGS = "https://registry-1.docker.io/v2/nvidia/cuda/tags/list?n=1000"
RATE_LIMITED = "GET https://pypi.org/pypi/ray/json was rate limited (HTTP 429); the index asks to retry after 30 s"


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REFERENCE_MATRIX)


def fake_indexes() -> FakeSession:
    return FakeSession(
        {
            f"{CU128}/torch/": FakeResponse(200, json.dumps(SIMPLE_JSON), JSON_TYPE),
            f"{CU128}/ray/": FakeResponse(403, "AccessDenied"),  # what download.pytorch.org says for "not here"
            "https://pypi.org/pypi/ray/json": FakeResponse(429, "Too Many Requests", {"Retry-After": "30"}),
            "https://pypi.org/pypi/pytest/json": requests.ConnectionError("Connection refused"),
            "https://pypi.org/pypi/jax/json": FakeResponse(200, captured("jax")),
            "https://pypi.org/pypi/libtpu/json": FakeResponse(200, captured("libtpu")),
        }
    )


def test_check_matrix_reports_newer_pins_and_turns_index_errors_into_problems(matrix: Matrix) -> None:
    session = fake_indexes()
    findings, problems = check_matrix(matrix, session, envs=["gpu-nvidia-cu128", "tpu-jax-0-8"])
    assert [(f.kind, f.env, f.name, f.current, f.latest, f.index) for f in findings] == [
        ("package", "gpu-nvidia-cu128", "torch", "2.9.1+cu128", "2.10.0+cu128", CU128),
        ("package", "tpu-jax-0-8", "jax", "0.8.3", "0.12.0.1", PYPI),
        ("package", "tpu-jax-0-8", "libtpu", "0.0.32", "0.0.52", PYPI),
        ("runtime", "libtpu-0-0-32", "libtpu", "0.0.32", "0.0.52", PYPI),
        ("runtime", "libtpu-0-0-32", "jax", "0.8.3", "0.12.0.1", PYPI),
    ]
    assert findings[0].note == "newest for Python 3.12 among +cu128 builds"
    assert problems == [
        Problem(
            env="gpu-nvidia-cu128",
            name="ray",
            index=PYPI,
            message=RATE_LIMITED,
        ),
        Problem(
            env="gpu-nvidia-cu128",
            name="pytest",
            index=PYPI,
            message="GET https://pypi.org/pypi/pytest/json failed: connection refused",
        ),
        Problem(env="tpu-jax-0-8", name="jaxlib", index=PYPI, message=f"no index has jaxlib (asked {PYPI})"),
        Problem(
            env="tpu-jax-0-8",
            name="ray",
            index=PYPI,
            message=RATE_LIMITED,
        ),
        Problem(
            env="tpu-jax-0-8",
            name="pytest",
            index=PYPI,
            message="GET https://pypi.org/pypi/pytest/json failed: connection refused",
        ),
        Problem(env="pci-ids", name="pci.ids", index=PCI_IDS_URL, message=f"GET {PCI_IDS_URL} answered HTTP 404"),
        Problem(
            env="nvidia",
            name="NVIDIA driver branches",
            index=RELEASES_URL,
            message=f"GET {RELEASES_URL} answered HTTP 404",
        ),
        Problem(
            env="cuda-12-8", name="nvidia/cuda tags", index="nvidia/cuda", message=f"GET {CUDA_TAGS} answered HTTP 404"
        ),
    ]
    urls = [url for url, _ in session.calls]
    assert len(urls) == len(set(urls)), "each (index, project) is asked once"
    assert urls[:3] == [f"{CU128}/torch/", f"{CU128}/ray/", "https://pypi.org/pypi/ray/json"]
    assert dict(session.calls)[f"{CU128}/torch/"].startswith("application/vnd.pypi.simple.v1+json")


def test_an_index_that_fails_is_named_and_the_next_one_is_asked(matrix: Matrix) -> None:
    """Behind an unreachable vendor index the environment's other pins are still checked, and the pin whose
    first index failed says so (what that index would have answered is unknown)."""
    session = FakeSession({f"{CU128}/torch/": requests.Timeout("HTTPSConnectionPool(...): Read timed out. (x)")})
    _, problems = check_matrix(matrix, session, envs=["gpu-nvidia-cu128"])
    assert problems[0] == Problem(  # and PyPI has no torch here: nothing else answered
        env="gpu-nvidia-cu128",
        name="torch",
        index=CU128,
        message=f"GET {CU128}/torch/ failed: timed out (nothing came for 15 s)",
    )
    assert "https://pypi.org/pypi/torch/json" in dict(session.calls)
    answered = FakeSession(
        {
            f"{CU128}/torch/": requests.Timeout("Read timed out."),
            "https://pypi.org/pypi/torch/json": _pypi_page("torch", ["2.9.1"]),
        }
    )
    _, problems = check_matrix(matrix, answered, envs=["gpu-nvidia-cu128"])
    assert (
        problems[0].message
        == f"GET {CU128}/torch/ failed: timed out (nothing came for 15 s); the next index answered instead"
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (FakeResponse(200, "{not json"), "GET https://pypi.org/pypi/ray/json answered something unreadable: "),
        (FakeResponse(200, "[]"), "GET https://pypi.org/pypi/ray/json answered something unreadable: the JSON has no"),
        (FakeResponse(503, "busy"), "GET https://pypi.org/pypi/ray/json answered HTTP 503"),
        (FakeResponse(429, "slow down"), "GET https://pypi.org/pypi/ray/json was rate limited (HTTP 429)"),
    ],
)
def test_unreadable_answers_become_problems(matrix: Matrix, answer: FakeResponse, message: str) -> None:
    session = FakeSession({"https://pypi.org/pypi/ray/json": answer})
    _, problems = check_matrix(matrix, session, envs=["cpu-py311"])
    assert problems[0].name == "ray"
    assert problems[0].message.startswith(message)


def test_prereleases_are_reported_only_when_asked(matrix: Matrix) -> None:
    ray: dict[str, object] = {"releases": {"2.60.0": [], "2.61.0rc0": []}}
    session = FakeSession({"https://pypi.org/pypi/ray/json": FakeResponse(200, json.dumps(ray))})
    assert check_matrix(matrix, session, envs=["cpu-py311"])[0] == []
    findings, _ = check_matrix(matrix, session, envs=["cpu-py311"], prereleases=True)
    assert [(f.name, f.latest) for f in findings] == [("ray", "2.61.0rc0")]


def test_an_unknown_env_is_a_usage_error(matrix: Matrix) -> None:
    with pytest.raises(UsageError, match=r"^no environment cpu-py312 in .*matrix.toml \(did you mean cpu-py311\?\)$"):
        check_matrix(matrix, FakeSession({}), envs=["cpu-py312"])


class _CudaSession:
    """PyPI's JSON API for NVIDIA's runtime wheels (versions as listed on 2026-11-29, trimmed)."""

    VERSIONS: ClassVar[dict[str, list[str]]] = {
        "nvidia-cuda-runtime-cu12": ["12.6.77", "12.8.90", "12.9.79"],
        "nvidia-cuda-runtime": ["13.0.96", "13.5.37", "13.6.0rc1"],
    }

    def request(self, method: str, url: str, **kwargs: object) -> FakeResponse:
        name = url.rstrip("/").split("/")[-2]
        versions = self.VERSIONS.get(name)

        def files(version: str) -> list[dict[str, object]]:
            wheel = f"{name}-{version}-py3-none-manylinux_2_28_x86_64.whl"
            return [{"filename": wheel, "requires_python": ">=3", "yanked": False}]

        releases = {v: files(v) for v in versions or []}
        page = {"info": {"name": name, "version": (versions or ["0"])[-1]}, "releases": releases}
        return FakeResponse(200 if versions else 404, json.dumps(page), {"Content-Type": "application/json"})


def test_newer_cuda_releases_come_from_the_runtime_wheels() -> None:

    from accelenv.matrix import load_matrix
    from accelenv.upstream.survey import check_matrix

    matrix = load_matrix(REFERENCE_MATRIX)
    session = _CudaSession()
    findings, _ = check_matrix(matrix, session, envs=["gpu-nvidia-cu130"], pypi_url="http://pypi.invalid")
    cuda = [f for f in findings if f.name.startswith("CUDA")]
    assert [(f.env, f.current, f.latest) for f in cuda] == [("cuda-13-0", "13.0", "13.5")]
    assert cuda[0].key == "runtimes (a new entry beside runtimes.cuda-13-0)"


# ---- issue 12: index settings, resolver order, release sources, reporting ---------------------------------------


def _pypi_page(name: str, versions: list[str], *, summary: str = "", requires: list[str] | None = None) -> FakeResponse:
    releases = {
        v: [{"filename": f"{name.replace('-', '_')}-{v}-py3-none-any.whl", "requires_python": None, "yanked": False}]
        for v in versions
    }
    info = {"name": name, "version": versions[-1], "summary": summary, "requires_dist": requires or []}
    return FakeResponse(200, json.dumps({"info": info, "releases": releases}))


def test_pip_and_uv_index_settings(tmp_path: Path) -> None:
    from accelenv.upstream.settings import IndexSettings, read_index_settings

    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple\nextra-index-url = https://a.example/s\n")
    from_file = read_index_settings({}, [conf])
    assert (from_file.main, from_file.extra, from_file.strategy) == (
        "https://mirror.example/simple",
        ("https://a.example/s",),
        "best-version",
    )
    env_wins = read_index_settings({"PIP_INDEX_URL": "https://b.example/simple"}, [conf])
    assert env_wins.main == "https://b.example/simple"
    uv = read_index_settings(
        {"UV_DEFAULT_INDEX": "https://uv.example/simple", "UV_INDEX": "https://x.example https://y.example"}, [conf]
    )
    assert (uv.main, uv.extra, uv.strategy, uv.origin) == (
        "https://uv.example/simple",
        ("https://x.example", "https://y.example"),
        "first-index",
        "UV_DEFAULT_INDEX, UV_INDEX",
    )
    assert read_index_settings({}, []) == IndexSettings()
    # the environment's own indexes first, then the machine's extra ones, then its main index (the mirror)
    assert uv.indexes_for(None, ["https://download.example/cu128/"]) == (
        "https://download.example/cu128",
        "https://x.example",
        "https://y.example",
        "https://uv.example/simple",
    )
    assert uv.indexes_for("https://own.example/simple", ()) == (
        "https://x.example",
        "https://y.example",
        "https://own.example/simple",
    )


def test_a_mirror_replaces_pypi(matrix: Matrix) -> None:
    from accelenv.upstream.settings import IndexSettings

    mirror = "https://mirror.example/simple"
    session = FakeSession(
        {
            f"{mirror}/ray/": FakeResponse(
                200, json.dumps({"files": [{"filename": "ray-2.61.0-py3-none-any.whl"}]}), JSON_TYPE
            )
        }
    )
    findings, _ = check_matrix(matrix, session, envs=["cpu-py311"], settings=IndexSettings(main=mirror))
    assert [(f.name, f.latest, f.index) for f in findings] == [("ray", "2.61.0", mirror)]
    assert not any("pypi.org" in url for url, _ in session.calls)


def test_best_version_takes_the_newest_across_indexes_and_first_index_the_first(matrix: Matrix) -> None:
    from accelenv.upstream.settings import IndexSettings

    extra = "https://extra.example/simple"
    page = {"files": [{"filename": "ray-2.61.0-py3-none-any.whl"}]}
    answers = {
        f"{extra}/ray/": FakeResponse(200, json.dumps(page), JSON_TYPE),
        "https://pypi.org/pypi/ray/json": _pypi_page("ray", ["2.58.0", "2.62.0"]),
    }
    pip_like = IndexSettings(extra=(extra,), strategy="best-version")
    findings, _ = check_matrix(matrix, FakeSession(dict(answers)), envs=["cpu-py311"], settings=pip_like)
    assert [(f.name, f.latest) for f in findings if f.name == "ray"] == [("ray", "2.62.0")]
    uv_like = IndexSettings(extra=(extra,), strategy="first-index")
    findings, _ = check_matrix(matrix, FakeSession(dict(answers)), envs=["cpu-py311"], settings=uv_like)
    assert [(f.name, f.latest) for f in findings if f.name == "ray"] == [("ray", "2.61.0")]


def test_a_local_index_on_disk(tmp_path: Path, matrix: Matrix) -> None:
    from accelenv.upstream.settings import IndexSettings

    (tmp_path / "simple" / "ray").mkdir(parents=True)
    (tmp_path / "simple" / "ray" / "ray-2.63.0-cp311-cp311-manylinux2014_x86_64.whl").write_bytes(b"")
    local = (tmp_path / "simple").as_uri()
    findings, _ = check_matrix(
        matrix, FakeSession({}), envs=["cpu-py311"], settings=IndexSettings(extra=(local,), strategy="first-index")
    )
    assert [(f.name, f.latest, f.index) for f in findings] == [("ray", "2.63.0", local)]


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            (
                "HTTPSConnectionPool(host='download.pytorch.org', port=443): Max retries exceeded with url: "
                '/whl/cu126/torch/ (Caused by NameResolutionError("<urllib3.connection.HTTPSConnection object at '
                "0x7f>: Failed to resolve 'download.pytorch.org' ([Errno -2] Name or service not known)\"))"
            ),
            "cannot resolve the host name",
        ),
        ("HTTPConnectionPool(host='127.0.0.1', port=9): ... [Errno 111] Connection refused'))", "connection refused"),
        ("HTTPSConnectionPool(host='x', port=443): Read timed out. (read timeout=15)", "timed out"),
        (
            "HTTPSConnectionPool(...): (Caused by ProxyError('Unable to connect to proxy'))",
            "the proxy refused or failed",
        ),
        ("something else entirely", "something else entirely"),
    ],
)
def test_failures_are_one_short_line(error: str, reason: str) -> None:
    from accelenv.netio import short_reason

    assert short_reason(requests.ConnectionError(error)) == reason


def test_a_cuda_line_the_matrix_has_is_never_news_whatever_env_is_chosen() -> None:
    """--env gpu-nvidia-cu128 used to report CUDA 12.x 12.8 -> 12.9 though the matrix has 12.9."""
    matrix = load_matrix(REFERENCE_MATRIX)
    findings, _ = check_matrix(matrix, _CudaSession(), envs=["gpu-nvidia-cu128"], pypi_url="http://pypi.invalid")
    assert [(f.env, f.current, f.latest) for f in findings if f.name.startswith("CUDA")] == [
        ("cuda-13-0", "13.0", "13.5")
    ]


def test_problems_are_grouped_and_reach_every_format(matrix: Matrix) -> None:
    down = requests.ConnectionError("Failed to resolve 'download.pytorch.org'")
    session = FakeSession(
        {
            f"{CU128}/torch/": down,
            f"{CU128}/ray/": down,
            f"{CU128}/pytest/": down,
            "https://pypi.org/pypi/torch/json": _pypi_page("torch", ["2.9.1"]),
            "https://pypi.org/pypi/ray/json": _pypi_page("ray", ["2.60.0"]),
            "https://pypi.org/pypi/pytest/json": _pypi_page("pytest", ["9.2.0"]),
            PCI_IDS_URL: FakeResponse(200, "#\tVersion: 2026.10.24\n10de  NVIDIA Corporation\n"),
            RELEASES_URL: FakeResponse(200, json.dumps({"535": {"type": "lts branch", "driver_info": []}})),
            CUDA_TAGS: FakeResponse(
                200, json.dumps({"name": "nvidia/cuda", "tags": ["12.8.1-cudnn-runtime-ubuntu22.04"]})
            ),
        }
    )
    findings, problems = check_matrix(matrix, session, envs=["gpu-nvidia-cu128"])
    line = (
        f"gpu-nvidia-cu128: torch, ray, pytest: {CU128}: cannot resolve the host name; the next index answered instead"
    )
    assert line in render_table(findings, problems)
    github = render_github(findings, problems)
    assert "### Could not be checked" in github
    assert f"- {line}" in github
    assert github.startswith("No newer releases found. 1 line(s) below could not be checked")


def _headed_counts(text: str) -> list[tuple[int, int]]:
    """Every `N ...:` line that heads an indented list, with the number of indented lines under it."""
    lines = text.splitlines()
    counts = []
    for at, line in enumerate(lines):
        match = re.fullmatch(r"(\d+) .*:", line)
        if match is None:
            continue
        under = 0
        for below in lines[at + 1 :]:
            if not below.startswith("  "):
                break
            under += 1
        counts.append((int(match.group(1)), under))
    return counts


HELD = dataclasses.replace(RAY, held="the support window keeps 2.58")
PYPI_PROBLEMS = [
    Problem(
        env="cpu-py311",
        name=name,
        index="https://pypi.org/simple",
        message=f"GET https://pypi.org/simple/{name}/ failed: boom",
    )
    for name in ("pytest", "ray", "numpy")
]


@pytest.mark.parametrize(
    ("findings", "problems"),
    [
        ([RAY], PYPI_PROBLEMS[:1]),
        ([RAY, HELD], PYPI_PROBLEMS),  # three pins of one environment, one cause: one line
        ([], [*PYPI_PROBLEMS, Problem(env="cpu-py312", name="ray", index="x", message="no index has ray (asked x)")]),
        ([HELD, dataclasses.replace(HELD, name="torch")], PYPI_PROBLEMS[:2]),
    ],
)
def test_every_count_in_the_table_matches_the_lines_under_it(findings: list[Finding], problems: list[Problem]) -> None:
    text = render_table(findings, problems)
    counts = _headed_counts(text)
    assert counts, text
    assert all(stated == shown for stated, shown in counts), text
    github = render_github(findings, problems)
    said = re.search(r"(\d+) line\(s\) below could not be checked", github)
    if said is not None:
        assert int(said.group(1)) == github.count("\n- "), github


def test_grouped_pins_are_counted_as_lines_and_named_as_pins() -> None:
    text = render_table([], PYPI_PROBLEMS)
    assert "1 line(s) could not be checked (3 pins; one line per environment and cause):" in text


def test_release_sources_beyond_the_indexes(matrix: Matrix) -> None:
    """ROCm from JAX's plugin summaries, Neuron from AWS's manifest, new NVIDIA device ids from the driver's
    supported-GPU table, and a framework line newer than every pin (PyPI's torch, a CUDA 13.2 build)."""
    from accelenv.upstream.outdated import ReleaseSourceUrls

    urls = ReleaseSourceUrls(
        neuron_manifest="http://loop.invalid/n2.json",
        nvidia_tags="http://loop.invalid/tags",
        nvidia_readme="http://loop.invalid/{tag}/README.md",
    )
    readme = (
        "| Product Name | GPU IDs |\n| --- | --- |\n| NVIDIA H100 80GB HBM3 | 2330 10DE 16C1 |\n"
        "| NVIDIA B300 SXM6 AC | 3182 |\n| NVIDIA GB400 | 3300 |\n| NVIDIA GeForce RTX 5090 | 2B85 |\n"
    )
    session = FakeSession(
        {
            "https://pypi.org/pypi/jax-rocm10-plugin/json": _pypi_page(
                "jax-rocm10-plugin", ["0.12.0"], summary="JAX Plugin for AMD GPUs (ROCm:10.1.0)"
            ),
            "http://loop.invalid/n2.json": FakeResponse(200, json.dumps({"manifest_version": "2.33.0"})),
            "http://loop.invalid/tags": FakeResponse(200, json.dumps([{"name": "595.45.04"}, {"name": "610.57.04"}])),
            "http://loop.invalid/610.57.04/README.md": FakeResponse(200, readme),
            "https://pypi.org/pypi/torch/json": _pypi_page(
                "torch",
                ["2.9.1", "2.15.0"],
                requires=["cuda-toolkit[cublas,cudart]==13.2.2; platform_system == 'Linux'"],
            ),
        }
    )
    envs = ["gpu-amd-rocm70", "neuron-2-31", "gpu-nvidia-cu128"]
    findings, _ = check_matrix(matrix, session, envs=envs, sources=urls)
    got = {(f.kind, f.env, f.name, f.current, f.latest) for f in findings}
    assert ("runtime", "rocm-7-0", "ROCm 10.x", "none of ROCm 10.x", "10.1") in got
    assert ("runtime", "neuron-2-31", "Neuron SDK 2.x", "2.31", "2.33") in got
    assert ("sku", "nvidia", "NVIDIA GB400 (0x3300)", "not in the matrix", "listed by 610.57.04") in got
    assert not any("RTX 5090" in f.name or "0x3182" in f.name for f in findings)  # GeForce; already a SKU
    torch = next(f for f in findings if f.kind == "framework")
    assert (torch.name, torch.current, torch.latest) == ("torch", "2.10.0", "2.15.0")
    assert "a CUDA 13.2.2 build" in torch.note


@pytest.mark.parametrize("fetch", ["json", "text"])
def test_every_get_names_a_rate_limit_and_a_failed_connection_alike(fetch: str) -> None:
    """The manifest, README and summary fetches answer as the release lookup does: one GET path for all."""
    from accelenv.upstream.indexes import IndexClient

    url = "https://example.org/manifest"
    limited = IndexClient(FakeSession({url: FakeResponse(429, "slow down", {"Retry-After": "30"})}))
    assert getattr(limited, fetch)(url).message == (
        f"GET {url} was rate limited (HTTP 429); the index asks to retry after 30 s"
    )
    down = IndexClient(FakeSession({url: ConnectionError("connection refused")}))
    assert getattr(down, fetch)(url).message == f"GET {url} failed: connection refused"
    assert getattr(IndexClient(FakeSession({})), fetch)(url).message == f"GET {url} answered HTTP 404"
