"""The shipped matrix: valid, complete as the project promises, and each fact where the rules expect it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from accelenv.matrix import Matrix, Severity, load_matrix, validate_file
from accelenv.matrix.model import LiteralVersion
from accelenv.matrix.paths import lock_path
from accelenv.matrix.requirement_rules import wheel_tag_for
from accelenv.matrix.schema import schema_text
from accelenv.plan.lock import LockState, glibc_of, lock_state
from accelenv.plan.schemas import SCHEMAS, schema_files

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


def test_every_family_has_a_default_environment(matrix: Matrix) -> None:
    for family in matrix.families.values():
        assert matrix.default_env(family.id) is not None, f"{family.id}: `nox -s {family.session}` has nothing to run"


def test_every_default_environment_is_locked_for_every_platform(matrix: Matrix) -> None:
    """`nox -s <family>` from a fresh clone gets to the host check: its lock is committed, current, and covers
    each platform the environment declares."""
    for family in matrix.families.values():
        env = matrix.default_env(family.id)
        assert env is not None
        assert lock_state(REPO, env, glibc_of(matrix, env)) is LockState.CURRENT, f"run `accelenv lock {env.id}`"
        header = lock_path(REPO, env.id).read_text(encoding="utf-8").splitlines()[2]
        assert header.startswith(f"# python {env.python}; platforms {', '.join(sorted(env.platforms))};"), header
        assert "--hash=sha256:" in lock_path(REPO, env.id).read_text(encoding="utf-8")


def test_the_support_window_holds(matrix: Matrix) -> None:
    """README "Support window": one release per line, no runtime without an environment unless it is its
    family's newest, at most three lines per family."""
    validation = validate_file(REPO / "matrix.toml")
    assert [p.render("matrix.toml") for p in validation.problems if p.rule == "support-window"] == []
    used = {env.runtime for env in matrix.envs.values()}
    for family in matrix.families.values():
        runtimes = [rt for rt in matrix.runtimes.values() if rt.family == family.id and rt.version is not None]
        assert len(runtimes) <= 3, f"{family.id}: {[rt.id for rt in runtimes]}"
        newest = max(runtimes, key=lambda rt: rt.version or LiteralVersion("0"), default=None)
        assert all(rt.id in used or rt is newest for rt in runtimes)


def test_every_sku_has_a_driver_floor_or_a_stated_reason(matrix: Matrix) -> None:
    for sku in matrix.skus.values():
        family = matrix.families[sku.family]
        if family.kernel_modules:
            has_floor = sku.driver_min is not None
            assert has_floor or sku.no_driver_min or family.no_sku_driver_min, sku.id
            assert not (has_floor and sku.no_driver_min), sku.id
    # NVIDIA floors are per SKU: the family gives no blanket reason
    assert not matrix.families["nvidia"].no_sku_driver_min
    assert all(s.driver_min or s.no_driver_min for s in matrix.skus.values() if s.family == "nvidia")


def test_the_nvidia_default_is_pypis_torch_on_cuda_13_and_a_cuda_12_line_remains(matrix: Matrix) -> None:
    default = matrix.default_env("nvidia")
    assert default is not None
    torch = next(r for r in default.requirements.packages if r.name == "torch")
    assert not default.requirements.extra_index_urls  # PyPI's own build
    assert not default.requirements.index_url
    runtime = matrix.runtimes[default.runtime]
    assert runtime.version is not None
    assert runtime.version.major == 13
    assert str(runtime.driver.compat_min) == "580.65.06"  # CUDA 13.x minor-version compatibility: R580 and newer
    assert "+" not in str(torch.specifier)
    # drivers below R580 (R535 LTSB, R570, R575) still have a CUDA 12 environment
    older = [e for e in matrix.envs.values() if e.family == "nvidia" and matrix.runtimes[e.runtime].driver.compat_min]
    assert any(str(matrix.runtimes[e.runtime].driver.compat_min) == "525.60.13" for e in older)


@pytest.mark.parametrize(
    ("sku", "arch", "pci"),
    [
        # SKUs users run, with the ids host tools report (pci.ids, NVIDIA's README, Google's tpu-info, AWS's driver)
        ("h20", "sm_90", "0x2329"),
        ("h100-96gb", "sm_90", "0x233d"),
        ("l40", "sm_89", "0x26b5"),
        ("a10", "sm_86", "0x2236"),
        ("a10g", "sm_86", "0x2237"),
        ("a40", "sm_86", "0x2235"),
        ("rtx-6000-ada", "sm_89", "0x26b1"),
        ("t4", "sm_75", "0x1eb8"),
        ("gb300", "sm_103", "0x31c2"),
        ("gb10", "sm_121", "0x2e12"),
        ("hgx-b200-168gb", "sm_100", "0x2909"),
        ("mi300a", "gfx942", "0x74a0"),
        ("mi300x", "gfx942", "0x74b5"),  # the virtual function cloud VMs show
        ("mi308x", "gfx942", "0x74a2"),
        ("mi250x", "gfx90a", "0x7408"),
        ("mi210", "gfx90a", "0x740f"),
        ("mi100", "gfx908", "0x738c"),
        ("tpu-v4", "v4", "0x005e"),
        ("inf1", "neuroncore-v1", "0x7064"),
    ],
)
def test_skus_users_run(matrix: Matrix, sku: str, arch: str, pci: str) -> None:
    assert matrix.skus[sku].arch == arch
    assert pci in matrix.skus[sku].pci_device_ids
    assert matrix.skus[sku].sources, "every SKU cites a source"


def test_every_sku_but_legacy_inf1_is_in_an_environment(matrix: Matrix) -> None:
    in_env = {s for env in matrix.envs.values() for s in env.skus}
    assert {s for s in matrix.skus if s not in in_env} == {"inf1"}
    assert "No environment" in matrix.skus["inf1"].notes


@pytest.mark.parametrize(
    ("sku", "floor"),
    [
        # open kernel modules README history: the release from which every later release lists the device
        ("b300", "580.95.05"),
        ("gb300", "580.95.05"),
        ("rtx-pro-6000-workstation", "570.133.07"),
        ("rtx-pro-6000-maxq", "570.133.07"),
        ("h200-nvl", "565.57.01"),
        ("b200", "570.133.20"),  # NVIDIA's GPU Operator statement is above the listing
    ],
)
def test_nvidia_floors_from_the_driver_listings(matrix: Matrix, sku: str, floor: str) -> None:
    assert str(matrix.skus[sku].driver_min) == floor


def test_runtime_facts_from_their_sources(matrix: Matrix) -> None:
    cuda = [rt for rt in matrix.runtimes.values() if rt.family == "nvidia"]
    for rt in cuda:
        assert rt.version is not None
        if rt.version.major >= 13:
            assert not {"sm_50", "sm_60", "sm_70", "sm_72"} & set(rt.architectures)  # 13.0 dropped them
            assert "sm_101" not in rt.architectures  # renumbered sm_110
    assert matrix.runtimes["cuda-13-2"].components["nvcc"] == "13.2.86"  # cuda-toolkit 13.2.2 wheel METADATA
    # AMD: hosts report amdgpu module versions (6.x, 7.x), never AMD's 30.x release numbers
    for rt in matrix.runtimes.values():
        if rt.family == "amd":
            assert rt.driver.releases
            assert not rt.driver.accepted
            assert all(LiteralVersion(matrix.drivers[d].reports).major < 30 for d in rt.driver.releases)
    # Neuron: a floor with backward compatibility, not one exact driver and not a token 2.0
    for rt in matrix.runtimes.values():
        if rt.family == "neuron":
            assert rt.driver.min is not None
            assert rt.driver.min > LiteralVersion("2.20")
            assert not rt.driver.accepted
    assert "PCIe card" not in matrix.skus["gaudi3"].notes.split("HL-338")[0]


def test_literal_versions_print_as_written(matrix: Matrix) -> None:
    floor = matrix.skus["rtx-pro-6000-maxq"].driver_min
    assert str(floor) == "570.133.07"
    assert floor == LiteralVersion("570.133.7")
    assert floor > LiteralVersion("570.86.10")
    assert wheel_tag_for("cu{major}{minor}", LiteralVersion("13.2.2")) == "cu132"
    assert wheel_tag_for("rocm{major}.{minor}", LiteralVersion("10.0.0")) == "rocm10.0"


@pytest.mark.parametrize(
    ("reported", "sku"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA B300 SXM6 AC", "b300"),
        ("NVIDIA GH200 480GB", "gh200"),
        ("Tesla T4", "t4"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
        ("AMD Instinct MI300X OAM", "mi300x"),
        ("AMD Instinct MI350X", "mi350x"),
        ("Arcturus GL-XL [Instinct MI100]", "mi100"),
        ("AMD Instinct MI250", "mi250"),
        ("AMD Instinct MI250X", "mi250x"),
        ("HL-325L", "gaudi3"),
        ("HL-225", "gaudi2"),
        ("v5litepod-8", "tpu-v5e"),
        ("v4-8", "tpu-v4"),
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
    # a reader must be able to open every source: a URL, or a path in a repository; no search-index ids
    assert [s.id for s in matrix.sources.values() if s.where and "find_string" in s.where] == []


def test_schema_accepts_the_shipped_matrix_as_json() -> None:
    import tomllib

    import jsonschema

    document = tomllib.loads((REPO / "matrix.toml").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(json.loads(schema_text())).validate(document)


def test_gpu_images_carry_each_library_once(matrix: Matrix) -> None:
    """NVIDIA runtimes start from NVIDIA's -base- images (cudart and cuda-compat only: cuDNN, cuBLAS and NCCL come
    from the torch wheel's nvidia-* dependencies), and an environment on a base that brings PyTorch pins none.
    Every accelerator runtime says in `libraries` where its libraries come from."""
    for runtime in matrix.runtimes.values():
        if runtime.family == "nvidia":
            for image in runtime.base_images.values():
                assert image.repository == "nvidia/cuda"
                assert "-base-" in image.tag, f"{runtime.id}: {image.tag} carries CUDA libraries the wheels bring"
        if runtime.family != "cpu":
            assert runtime.libraries is not None, runtime.id
            assert runtime.libraries.base, runtime.id
    for env in matrix.envs.values():
        libraries = matrix.runtimes[env.runtime].libraries
        if libraries is not None and any("PyTorch" in item for item in libraries.base):
            assert "torch" not in {name.lower() for name, _ in env.requirements.pins}, env.id


def test_bases_that_ship_the_environments_python_need_no_os_lock(matrix: Matrix) -> None:
    """Intel's Ubuntu 24.04 Gaudi 1.23 image has Python 3.12 (its support matrix, and Setup_and_Install's Dockerfile
    installs noble's python3): no OS-package lock. 1.24.1's is not verified, so it keeps one."""
    from accelenv.plan.render import os_packages

    assert os_packages(matrix, matrix.envs["gaudi-1-23"]) == ()
    assert os_packages(matrix, matrix.envs["gaudi-1-24"]) != ()
