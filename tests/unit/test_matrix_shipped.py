"""The shipped matrix: valid, complete as the project promises, and each fact where the rules expect it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from accelenv.contracts import SCHEMAS, schema_files
from accelenv.matrix import Matrix, Severity, load_matrix, validate_file
from accelenv.matrix.model import LiteralVersion
from accelenv.matrix.rules import wheel_tag_for
from accelenv.matrix.schema import schema_text

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")


def test_shipped_matrix_has_no_errors() -> None:
    validation = validate_file(REPO / "matrix.toml")
    errors = [p.render("matrix.toml") for p in validation.problems if p.is_error]
    assert errors == []
    # the only warnings allowed are base images that still wait for a digest (no registry is reachable here)
    assert {p.rule for p in validation.problems if p.severity is Severity.WARNING} <= {"unpinned"}


@pytest.mark.parametrize(("name", "text"), sorted(schema_files().items()))
def test_schema_files_are_current(name: str, text: str) -> None:
    assert (REPO / "schema" / name).read_text(encoding="utf-8") == text, "run `accelenv schema --write`"


def test_matrix_points_editors_at_the_schema() -> None:
    first = (REPO / "matrix.toml").read_text(encoding="utf-8").splitlines()[0]
    assert first == "#:schema ./schema/matrix.schema.json"


def _walk(node: Any, path: str) -> list[str]:
    """Paths of properties without a description, and objects that accept unknown keys."""
    missing = []
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node and node.get("additionalProperties") is not False:
            missing.append(f"{path}: additionalProperties is not false")
        for name, sub in node.get("properties", {}).items():
            if "description" not in sub:
                missing.append(f"{path}.{name}: no description")
            missing += _walk(sub, f"{path}.{name}")
        for key in ("$defs", "items", "additionalProperties"):
            value = node.get(key)
            if isinstance(value, dict):
                children = value.items() if key == "$defs" else [(key, value)]
                for name, sub in children:
                    missing += _walk(sub, f"{path}.{name}")
    return missing


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_schema_property_is_described_and_closed(name: str) -> None:
    schema = SCHEMAS[name]()
    jsonschema.validators.validator_for(schema).check_schema(schema)  # valid against the 2020-12 metaschema
    assert _walk(schema, "#") == []
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_families_and_defaults(matrix: Matrix) -> None:
    assert set(matrix.families) == {"nvidia", "amd", "tpu", "neuron", "gaudi", "cpu"}
    sessions = {f.session for f in matrix.families.values()}
    assert sessions == {"cpu", "gpu-nvidia", "gpu-amd", "tpu", "neuron", "gaudi"}
    for family in matrix.families.values():
        default = matrix.default_env(family.id)
        assert default is not None, family.id
    assert sum(1 for e in matrix.envs.values() if e.family == "nvidia") >= 3


REQUIRED_SKUS = {
    # the SKUs the project promises, by the architecture the rules rely on
    "a100-sxm4-80gb": "sm_80",
    "h100-sxm": "sm_90",
    "h100-nvl": "sm_90",
    "h200": "sm_90",
    "gh200": "sm_90",
    "l4": "sm_89",
    "l40s": "sm_89",
    "b200": "sm_100",
    "gb200": "sm_100",
    "b300": "sm_103",
    "rtx-pro-6000-server": "sm_120",
    "mi300x": "gfx942",
    "mi325x": "gfx942",
    "mi355x": "gfx950",
    "tpu-v5e": "v5e",
    "tpu-v5p": "v5p",
    "tpu-v6e": "v6e",
    "tpu7x": "tpu7x",
    "trn1": "neuroncore-v2",
    "trn2": "neuroncore-v3",
    "inf2": "neuroncore-v2",
    "gaudi2": "gaudi2",
    "gaudi3": "gaudi3",
}


@pytest.mark.parametrize(("sku", "arch"), sorted(REQUIRED_SKUS.items()))
def test_required_skus(matrix: Matrix, sku: str, arch: str) -> None:
    assert matrix.skus[sku].arch == arch
    assert matrix.skus[sku].sources, "every SKU cites a source"


def test_required_runtimes(matrix: Matrix) -> None:
    versions = {(rt.family, str(rt.version)) for rt in matrix.runtimes.values()}
    for expected in [
        ("nvidia", "12.6.3"),
        ("nvidia", "12.8.1"),
        ("nvidia", "12.9.1"),
        ("nvidia", "13.0.0"),
        ("gaudi", "1.22.0"),
        ("gaudi", "1.23.0"),
    ]:
        assert expected in versions
    assert {v.rpartition(".")[0] for f, v in versions if f == "amd"} == {"6.3", "6.4", "7.0"}
    assert len([1 for f, _ in versions if f == "neuron"]) >= 2
    assert len([1 for f, _ in versions if f == "tpu"]) >= 2


@pytest.mark.parametrize(
    ("runtime", "floor", "compat"),
    [
        # CUDA release notes: toolkit driver per release; minor-version compatibility floor for 12.x
        ("cuda-12-6", "560.35.05", "525.60.13"),
        ("cuda-12-8", "570.124.06", "525.60.13"),
        ("cuda-12-9", "575.57.08", "525.60.13"),
        ("cuda-13-0", "580.65.06", None),
    ],
)
def test_cuda_driver_floors(matrix: Matrix, runtime: str, floor: str, compat: str | None) -> None:
    driver = matrix.runtimes[runtime].driver
    assert str(driver.min) == floor
    assert (str(driver.compat_min) if driver.compat_min else None) == compat


def test_blackwell_and_hopper_support_by_cuda_version(matrix: Matrix) -> None:
    archs = {rt.id: set(rt.architectures) for rt in matrix.runtimes.values() if rt.family == "nvidia"}
    assert "sm_100" not in archs["cuda-12-6"]
    assert {"sm_100", "sm_120"} <= archs["cuda-12-8"]
    assert "sm_103" not in archs["cuda-12-8"]
    assert "sm_103" in archs["cuda-12-9"]
    assert "sm_70" not in archs["cuda-13-0"]
    assert "sm_101" not in archs["cuda-13-0"]
    assert "sm_110" in archs["cuda-13-0"]


def test_wheel_tags_follow_versions(matrix: Matrix) -> None:
    assert wheel_tag_for("cu{major}{minor}", LiteralVersion("12.8.1")) == "cu128"
    assert wheel_tag_for("rocm{major}.{minor}", LiteralVersion("6.4.1")) == "rocm6.4"
    assert matrix.runtimes["rocm-7-0"].wheel_tag == "rocm7.0"


def test_literal_versions_print_as_written(matrix: Matrix) -> None:
    floor = matrix.runtimes["cuda-12-8"].driver.min
    assert str(floor) == "570.124.06"
    assert floor == LiteralVersion("570.124.6")
    assert floor > LiteralVersion("570.86.10")


@pytest.mark.parametrize(
    ("reported", "sku"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA B300 SXM6 AC", "b300"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("AMD Instinct MI300X OAM", "mi300x"),
        ("AMD Instinct MI350X", "mi350x"),
        ("HL-325L", "gaudi3"),
        ("HL-225", "gaudi2"),
        ("v5litepod-8", "tpu-v5e"),
        ("tpu7x-8", "tpu7x"),
        ("nvidia  h200", "h200"),  # whitespace and case do not matter
    ],
)
def test_product_names_match_real_tool_output(matrix: Matrix, reported: str, sku: str) -> None:
    matches = [s.id for s in matrix.skus.values() if s.matches_name(reported)]
    assert matches == [sku]


def test_no_fake_digests_and_every_source_is_used(matrix: Matrix) -> None:
    text = (REPO / "matrix.toml").read_text(encoding="utf-8")
    assert "sha256:" not in text  # no digest could be verified here: they are left out, not invented
    validation = validate_file(REPO / "matrix.toml")
    assert not [p for p in validation.problems if p.rule == "unused-source"]
    assert all(s.url or s.where for s in matrix.sources.values())


def test_schema_accepts_the_shipped_matrix_as_json() -> None:
    import tomllib

    import jsonschema

    document = tomllib.loads((REPO / "matrix.toml").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(json.loads(schema_text())).validate(document)
