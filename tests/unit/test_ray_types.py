"""Ray's name for every SKU (`ray_accelerator_type`) against Ray 2.60's own code, and `check --ray`'s comparison of
each node's Ray view (resource, label, start-up labels) with what the node is."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import pytest

from accelenv.cluster.accelerator_types import ExpectedRay, expected_ray, ray_type_problems
from accelenv.cluster.node_answer import answer_problem, node_labels_of, ray_findings
from accelenv.cluster.ray import _result
from accelenv.host.report import Accelerator, Device
from accelenv.matrix import Matrix, load_matrix

try:  # imported at collection: Ray's import subclasses subprocess.Popen, which the unit tests' guard replaces
    accelerators: Any = importlib.import_module("ray._private.accelerators")
    neuron_core: Any = importlib.import_module("ray.util.accelerators").AWS_NEURON_CORE
except ImportError:  # pragma: no cover - without accelenv[ray]
    accelerators = neuron_core = None

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")


def test_every_sku_says_what_ray_calls_it_or_why_not(matrix: Matrix) -> None:
    for sku in matrix.skus.values():
        assert bool(sku.ray_accelerator_type) != bool(sku.no_ray_accelerator_type), sku.id


def test_the_matrix_agrees_with_rays_own_code(matrix: Matrix) -> None:
    if accelerators is None:
        pytest.skip("needs ray (accelenv[ray])")
    nvidia_gpu, amd_gpu, tpu = accelerators.nvidia_gpu, accelerators.amd_gpu, accelerators.tpu
    compared = 0
    for sku in matrix.skus.values():
        if not sku.ray_accelerator_type:
            continue
        if sku.family == "nvidia":
            for pattern in sku.product_names:  # Ray names the GPU after its NVML product name
                name = re.sub(r"\*.*", " X", pattern).strip()
                ray_name = nvidia_gpu.NvidiaGPUAcceleratorManager._gpu_name_to_accelerator_type(name)
                assert sku.ray_type(None) == ray_name, (sku.id, pattern)
                compared += 1
        elif sku.family == "amd":  # Ray looks the PCI device id up in amd_product_dict; an id not there gets none
            for device in {*sku.pci_device_ids, *sku.ray_accelerator_type}:
                assert sku.ray_type(device) == amd_gpu.amd_product_dict.get(device), (sku.id, device)
                compared += 1
        elif sku.family == "tpu":  # TPU- and the generation of the pod type
            pod = sku.product_names[0].replace("*", "8")
            assert sku.ray_type(None) == "TPU-" + tpu.normalize_tpu_accelerator_type(pod).split("-")[0].upper()
            compared += 1
        elif sku.family == "neuron":
            assert sku.ray_type(None) == neuron_core
            compared += 1
    assert compared >= 50


def _acc(family: str, sku: str | None, pci: str | None, count: int = 8) -> Accelerator:
    devices = tuple(
        Device(index=i, name=None, arch=None, memory_mib=None, pci_bus_id=None, pci_device_id=pci, uuid=None, sku=sku)
        for i in range(count)
    )
    return Accelerator(family=family, driver_version="1", runtime_version=None, devices=devices, source="t", errors=())


@pytest.mark.parametrize(
    ("family", "sku", "pci", "want"),
    [
        ("nvidia", "h100-sxm", "0x2330", (True, "H100")),
        ("nvidia", "a100-pcie-80gb", "0x20b5", (True, "A100")),
        ("amd", "mi300x", "0x74a1", (True, "AMD-Instinct-MI300X-OAM")),
        ("amd", "mi300x", "0x74b5", (True, None)),  # the virtual function: Ray names none
        ("amd", "mi308x", "0x74a2", (True, "AMD-Instinct-MI308X-OAM")),  # not Ray's AMD_INSTINCT_MI308x constant
        ("neuron", "trn2", "0x7364", (True, "aws-neuron-core")),
        ("gaudi", "gaudi3", "0x1060", (False, None)),
        ("nvidia", None, "0x9999", (False, None)),
    ],
)
def test_expected_ray_type(
    matrix: Matrix, family: str, sku: str | None, pci: str, want: tuple[bool, str | None]
) -> None:
    expected = expected_ray(matrix, _acc(family, sku, pci))
    assert (expected.known, expected.accelerator_type) == want


@pytest.mark.parametrize(
    ("types", "label", "problems"),
    [
        (["H100"], "H100", []),
        (["H100"], None, []),
        (["A100"], "H100", [("fail", "Ray reports accelerator_type A100; the node's SKU h100-sxm is H100 to Ray")]),
        ([], None, [("warn", "Ray reports no accelerator_type; the node's SKU h100-sxm is H100 to Ray")]),
        (
            ["H100"],
            "A100",
            [("fail", "Ray's label ray.io/accelerator-type='A100'; the node's SKU h100-sxm is 'H100' to Ray")],
        ),
        (
            ["H100", "A100"],
            "H100",
            [("fail", "Ray reports accelerator_type H100, A100; the node's SKU h100-sxm is H100 to Ray")],
        ),
    ],
)
def test_ray_type_problems(types: list[str], label: str | None, problems: list[tuple[str, str]]) -> None:
    view = ExpectedRay(resource="GPU", known=True, accelerator_type="H100", sku="h100-sxm")
    assert ray_type_problems(view, types, label) == problems


def test_nothing_to_compare_when_the_matrix_does_not_know() -> None:
    view = ExpectedRay(resource="HPU", known=False, accelerator_type=None, sku="gaudi3")
    assert ray_type_problems(view, ["Intel-GAUDI3"], "Intel-GAUDI3") == []


def answer(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "node_id": "n1",
        "verdict": "pass",
        "checks": [{"id": "a", "status": "pass", "expected": "", "found": "", "message": "", "fix": ""}],
        "devices": 8,
        "driver": "590.48.01",
        "skus": ["h100-sxm"],
        "seconds": 0.5,
        "labels": {"accelenv.io/driver": "590.48.01", "accelenv.io/family": "nvidia"},
        "ray_expected": {"resource": "GPU", "accelerator_type": "H100", "known": True, "sku": "h100-sxm", "why": ""},
    }
    data.update(changes)
    return data


def node(resources: dict[str, float], labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"NodeID": "n1", "NodeManagerAddress": "127.0.0.1", "Alive": True, "Resources": resources, "Labels": labels}


def test_a_wrong_accelerator_type_resource_fails_the_node_with_the_fix() -> None:
    result = _result(node({"GPU": 8.0, "accelerator_type:A100": 1.0}), answer(), "nvidia", "GPU")
    assert result.verdict == "fail"
    assert result.failing == ["ray.accelerator_type"]
    check = next(c for c in result.checks if c["id"] == "ray.accelerator_type")
    assert check["expected"] == "H100"
    assert check["found"] == "A100"
    assert "--resources" in check["fix"]


def test_the_right_type_passes() -> None:
    result = _result(
        node({"GPU": 8.0, "accelerator_type:H100": 1.0}, {"ray.io/accelerator-type": "H100"}), answer(), "nvidia", "GPU"
    )
    assert result.verdict == "pass"
    assert result.failing == []


def test_a_driver_upgraded_under_a_running_node_is_drift_with_the_restart_fix() -> None:
    started = {"accelenv.io/driver": "570.124.06", "accelenv.io/family": "nvidia", "ray.io/accelerator-type": "H100"}
    result = _result(node({"GPU": 8.0, "accelerator_type:H100": 1.0}, started), answer(), "nvidia", "GPU")
    assert result.verdict == "fail"
    assert result.failing == ["ray.labels"]
    check = next(c for c in result.checks if c["id"] == "ray.labels")
    assert check["found"] == "accelenv.io/driver='570.124.06' at start, '590.48.01' now"
    assert "ray start --labels-file" in check["fix"]


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ([], "a list, not a mapping"),
        (answer(verdict="great"), "verdict 'great' is not one of pass, warn, fail"),
        (answer(devices=True), "devices is a bool"),
        (answer(devices=-1), "devices -1 is out of range"),
        ({k: v for k, v in answer().items() if k != "checks"}, "no checks"),
        (answer(checks=[{"id": 1}]), "checks[0] is not a check"),
        (answer(labels={"k": 1}), "labels holds something other than label keys and values"),
        (answer(labels={"k": "v" * 64}), "labels holds something other than label keys and values"),
        (answer(ray_expected={"known": "yes"}), "ray_expected is not Ray's expected view"),
        (answer(skus=[None]), "skus holds something other than short text"),
        (answer(), None),
    ],
)
def test_a_bad_answer_makes_the_node_unreadable(data: object, problem: str | None) -> None:
    assert answer_problem(data) == problem


def test_ray_findings_skip_what_is_unknown() -> None:
    data = answer(ray_expected=None, labels={})
    assert ray_findings(data, ["A100"], {}) == []
    assert node_labels_of({"Labels": ["x"]}) == {}


def test_a_hand_set_gpu_count_without_a_type_warns() -> None:
    result = _result(node({"GPU": 8.0}), answer(), "nvidia", "GPU")
    assert result.verdict == "warn"
    assert result.failing == []


@pytest.mark.parametrize(
    ("line", "errors"),
    [
        (
            'ray_accelerator_type = "H100 SXM"',
            [
                (
                    "matrix.toml:{line}: error: skus.t4.ray_accelerator_type: 'H100 SXM' is not valid here: "
                    "expected a Ray accelerator type such as H100"
                ),
                "matrix.toml:{line}: error: skus.t4.ray_accelerator_type: expected object, found str 'H100 SXM'",
            ],
        ),
        (
            'ray_accelerator_type = "T4"\nno_ray_accelerator_type = "why"',
            [
                (
                    "matrix.toml:{next}: error: skus.t4.no_ray_accelerator_type: has both ray_accelerator_type and "
                    "no_ray_accelerator_type: keep Ray's name, or the reason there is none"
                )
            ],
        ),
    ],
)
def test_a_bad_ray_accelerator_type_is_refused_with_its_key_path(line: str, errors: list[str]) -> None:
    from accelenv.matrix.load import validate_text

    text = (REPO / "matrix.toml").read_text(encoding="utf-8")
    at = text.splitlines().index('ray_accelerator_type = "T4"') + 1
    validation = validate_text(text.replace('ray_accelerator_type = "T4"', line, 1))
    shown = [p.render("matrix.toml") for p in validation.problems if p.is_error]
    assert shown == [e.replace("{line}", str(at)).replace("{next}", str(at + 1)) for e in errors]


def test_a_sku_that_says_neither_is_a_change_warning_strict_refuses() -> None:
    from accelenv.matrix.load import validate_text
    from accelenv.matrix.problems import Category

    text = (REPO / "matrix.toml").read_text(encoding="utf-8")
    at = text.splitlines().index('ray_accelerator_type = "T4"') + 1
    validation = validate_text(text.replace('ray_accelerator_type = "T4"\n', "", 1))
    [problem] = [p for p in validation.problems if p.rule == "ray-accelerator-type"]
    assert (problem.path, problem.is_error, problem.category) == ("skus.t4", False, Category.CHANGE)
    assert problem.line == at - 4  # the SKU's table header
    assert problem.message.startswith("says neither what Ray calls it nor why Ray has no name for it")


def test_show_inspect_and_the_page_carry_rays_name(tmp_path: Path, matrix: Matrix) -> None:
    import io
    import json

    import jsonschema

    from accelenv.cli import main
    from accelenv.host.report import Container, HostReport, Limits, OsInfo, PythonInfo
    from accelenv.host.schema import inspect_schema
    from accelenv.host.snapshot import save_snapshot
    from accelenv.plan.page import page_data

    out = io.StringIO()
    assert main(["--matrix", str(REPO / "matrix.toml"), "show", "gpu-amd", "--json"], out=out) == 0
    skus = {s["id"]: s for s in json.loads(out.getvalue())["skus"]}
    assert skus["mi300x"]["ray_accelerator_type"] == {
        "0x74a1": "AMD-Instinct-MI300X-OAM",
        "0x74a9": "AMD-Instinct-MI300X-HF",
    }
    out = io.StringIO()
    assert main(["--matrix", str(REPO / "matrix.toml"), "show", "gpu-nvidia"], out=out) == 0
    assert "NVIDIA H100 SXM5 80GB (sm_90, " in out.getvalue()
    assert "Ray: H100)" in out.getvalue()

    page = {s["id"]: s for s in page_data(matrix, None)["skus"]}
    assert page["trn2"]["ray"] == {"*": "aws-neuron-core"}
    assert page["gaudi3"]["ray"] is None

    report = HostReport(
        root="/",
        os=OsInfo(id="debian", version_id="12", pretty_name=None, kernel=None, glibc=None, arch="x86_64"),
        python=PythonInfo(version="3.11.2", implementation="CPython", executable="python3", distributions={}),
        accelerators=(_acc("nvidia", "h100-sxm", "0x2330", count=2),),
        environment={},
        limits=Limits(shm_bytes=None, memlock_bytes=None, memlock_unlimited=True),
        container=Container(inside_container=False, docker_socket=False, nvidia_container_toolkit=False, cdi_specs=()),
    )
    snap = tmp_path / "node.json"
    save_snapshot(report, snap)
    out = io.StringIO()
    assert main(["--matrix", str(REPO / "matrix.toml"), "inspect", "--json", "--snapshot", str(snap)], out=out) == 0
    data = json.loads(out.getvalue())
    jsonschema.Draft202012Validator(inspect_schema()).validate(data)
    assert data["accelerators"][0]["ray"] == {
        "resource": "GPU",
        "accelerator_type": "H100",
        "known": True,
        "sku": "h100-sxm",
        "why": "",
    }
