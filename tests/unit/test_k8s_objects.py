"""The generated Kubernetes objects, validated offline and strictly: Kubernetes' own kinds with kubernetes-validate
against the Kubernetes 1.37 schemas (a kind it has no schema for is an error, never its warning and exit 0), the
custom resources with jsonschema against their CRD's OpenAPI schema (KubeRay v1.7.0, node-feature-discovery
v0.19.0, from ACCELENV_RESEARCH_DATA) with unknown fields refused, as `kubectl apply --validate=strict` refuses
them. And the files follow the matrix: a matrix edit changes them, `render --check` refuses a stale one.
"""

from __future__ import annotations

import copy
import os
import shutil
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelenv.cli import main
from accelenv.k8s import objects
from accelenv.k8s.dra import selection
from accelenv.matrix import Matrix, load_matrix
from accelenv.matrix.load import model_from_text
from accelenv.plan.render import human_tag, render_plan

REPO = Path(__file__).resolve().parents[2]
KUBERNETES = "1.37.0"
RESEARCH = Path(os.environ.get("ACCELENV_RESEARCH_DATA", REPO.parent / "shared" / "research" / "data"))
CRDS = {
    "RayCluster": ("kuberay-v1.7.0/ray.io_rayclusters.yaml", "v1"),
    "RayJob": ("kuberay-v1.7.0/ray.io_rayjobs.yaml", "v1"),
    "NodeFeatureRule": ("nfd-v0.19.0/nfd-api-crds.yaml", "v1alpha1"),
}


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")


def generated(matrix: Matrix) -> dict[str, dict[str, Any]]:
    plan = render_plan(matrix, [])
    return {path: yaml.safe_load(text) for path, text in plan.files.items() if "/k8s/" in path}


@cache
def crd_schema(kind: str) -> dict[str, Any]:
    file, version = CRDS[kind]
    path = RESEARCH / file
    if not path.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{path} is missing (CI needs ACCELENV_RESEARCH_DATA)")
        pytest.skip(f"{path} not available")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the CRDs are 17,000 lines
    for document in yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader):
        if document and document["spec"]["names"]["kind"] == kind:
            served = next(v for v in document["spec"]["versions"] if v["name"] == version)
            schema: dict[str, Any] = closed(served["schema"]["openAPIV3Schema"])
            return schema
    raise AssertionError(f"no CRD for {kind} in {path}")


def closed(schema: Any) -> Any:
    """The schema with unknown fields refused wherever the CRD lists the fields (the API server prunes them
    silently; strict field validation refuses them)."""
    if isinstance(schema, list):
        return [closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: closed(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def test_every_gpu_environment_has_its_objects(matrix: Matrix) -> None:
    files = generated(matrix)
    kinds: dict[str, set[str]] = {}
    for path, data in files.items():
        kinds.setdefault(path.split("/")[1], set()).add(data["kind"])
    expected = {"DeviceClass", "ResourceClaimTemplate", "RayCluster", "RayJob", "NodeFeatureRule"}
    families = {"nvidia", "amd", "gaudi"}
    assert kinds == {e.id: expected for e in matrix.envs.values() if e.family in families}


def test_core_objects_validate_against_kubernetes_1_37(matrix: Matrix) -> None:
    import kubernetes_validate

    checked = 0
    for path, data in generated(matrix).items():
        if data["kind"] in CRDS:
            # the pod templates inside KubeRay's objects are core objects too
            spec = data["spec"].get("rayClusterSpec", data["spec"]) if data["kind"] != "NodeFeatureRule" else None
            if spec is None:
                continue
            templates = [spec["headGroupSpec"]["template"], *(g["template"] for g in spec["workerGroupSpecs"])]
            for i, template in enumerate(templates):
                pod = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": f"t{i}"}, "template": template}
                kubernetes_validate.validate(pod, KUBERNETES, strict=True)  # raises on any problem
                checked += 1
            continue
        try:
            kubernetes_validate.validate(data, KUBERNETES, strict=True)
        except kubernetes_validate.SchemaNotFoundError as error:  # a warning and exit 0 on the command line
            pytest.fail(f"{path}: no Kubernetes {KUBERNETES} schema for {data['kind']}: {error}")
        checked += 1
    assert checked >= 4 * 6


def test_kubernetes_validate_refuses_what_kubernetes_refuses(matrix: Matrix) -> None:
    import kubernetes_validate

    data = next(d for d in generated(matrix).values() if d["kind"] == "ResourceClaimTemplate")
    broken = copy.deepcopy(data)
    broken["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES, strict=True)
    unknown = {**data, "kind": "NoSuchKind"}
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        kubernetes_validate.validate(unknown, KUBERNETES, strict=True)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_custom_resources_validate_against_their_crds(matrix: Matrix, kind: str) -> None:
    import jsonschema

    schema = crd_schema(kind)
    validator = jsonschema.Draft202012Validator(schema)
    found = [(p, d) for p, d in generated(matrix).items() if d["kind"] == kind]
    assert found
    for path, data in found:
        errors = sorted(validator.iter_errors(data), key=str)
        assert not errors, f"{path}: " + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    # the closed schema refuses a field the CRD does not have
    bad = copy.deepcopy(found[0][1])
    bad["spec"]["noSuchField"] = True
    assert list(validator.iter_errors(bad))


def test_the_worker_group_checks_before_ray_starts(matrix: Matrix) -> None:
    env = matrix.envs["gpu-nvidia-cu132"]
    data = objects.ray_cluster(env, image=human_tag("accelenv", matrix, env))
    group = data["spec"]["workerGroupSpecs"][0]
    pod = group["template"]["spec"]
    init = pod["initContainers"][0]
    assert init["command"][-1] == (
        "accelenv check gpu-nvidia-cu132 && accelenv labels --env gpu-nvidia-cu132 --format ray "
        f"-o {objects.LABELS_FILE}"
    )
    assert init["terminationMessagePolicy"] == "FallbackToLogsOnError"  # the failing checks in the pod's status
    assert group["rayStartParams"] == {"labels-file": objects.LABELS_FILE}
    assert pod["resourceClaims"] == [{"name": "accelerators", "resourceClaimTemplateName": "accelenv-gpu-nvidia-cu132"}]
    assert init["resources"] == pod["containers"][0]["resources"] == {"claims": [{"name": "accelerators"}]}
    assert data["spec"]["rayVersion"] == "2.60.0"


def _edited(old: str, new: str) -> Matrix:
    text = (REPO / "matrix.toml").read_text(encoding="utf-8")
    assert old in text
    return model_from_text(text.replace(old, new, 1))


def test_a_raised_floor_changes_the_claims_with_no_hand_edit(matrix: Matrix) -> None:
    before = render_plan(matrix, []).files
    raised = _edited(
        'driver = { min = "595.71.05", compat_min = "580.65.06"',
        'driver = { min = "595.71.05", compat_min = "580.95.05"',
    )
    after = render_plan(raised, []).files
    path = "envs/gpu-nvidia-cu132/k8s/deviceclass.yaml"
    old_floor, new_floor = 'semver("580.65.6")', 'semver("580.95.5")'
    assert old_floor in before[path]
    # the runtime's floor moved: fewer clauses on the old one (a SKU's own floor may still be 580.65.06), more on
    # the new one
    assert after[path].count(old_floor) < before[path].count(old_floor)
    assert after[path].count(new_floor) > before[path].count(new_floor)
    changed = {p for p in before if before[p] != after.get(p)}
    assert path in changed


def test_a_new_sku_changes_the_claims_with_no_hand_edit(matrix: Matrix) -> None:
    from celkit import selects, semver

    sku = (
        '[skus.test-gpu]\nfamily = "nvidia"\nname = "NVIDIA Test GPU"\narch = "sm_90"\nray_accelerator_type = "H100"\n'
        'product_names = ["NVIDIA Test GPU 96GB"]\npci_device_ids = ["0x2399"]\ndriver_min = "596.10.05"\n'
        'sources = ["cuda-gpus"]\nnotes = "test"\n\n[skus.h100-sxm]'
    )
    text = (REPO / "matrix.toml").read_text(encoding="utf-8")
    edited = model_from_text(
        text.replace("[skus.h100-sxm]", sku, 1).replace('"t4", "a10",', '"test-gpu", "t4", "a10",', 1)
    )
    path = "envs/gpu-nvidia-cu132/k8s/deviceclass.yaml"
    assert render_plan(edited, []).files[path] != render_plan(matrix, []).files[path]

    def device(name: str, version: str) -> dict[str, Any]:
        attrs = {"type": "gpu", "productName": name, "driverVersion": semver(version)}
        return {"driver": "gpu.nvidia.com", "attributes": {"gpu.nvidia.com": attrs}}

    for model, selectors in ((edited, True), (matrix, False)):
        expressions = [s.expression for s in selection(model, model.envs["gpu-nvidia-cu132"]).selectors]
        assert selects(expressions, device("NVIDIA Test GPU 96GB", "596.10.5")) is selectors
        assert not selects(expressions, device("NVIDIA Test GPU 96GB", "596.10.4"))  # below the new SKU's floor
        assert selects(expressions, device("NVIDIA H100 80GB HBM3", "596.10.4"))


def test_render_check_refuses_a_stale_or_orphaned_k8s_file(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "envs").mkdir(parents=True)
    shutil.copy(REPO / "matrix.toml", repo / "matrix.toml")
    assert main(["--matrix", str(repo / "matrix.toml"), "render"]) == 0
    path = repo / "envs/gpu-nvidia-cu132/k8s/deviceclass.yaml"
    assert path.is_file()
    assert main(["--matrix", str(repo / "matrix.toml"), "render", "--check"]) == 0
    path.write_text(path.read_text().replace("595.71.5", "595.71.6"))
    orphan = repo / "envs/gpu-nvidia-cu132/k8s/old.yaml"
    orphan.write_text(f"# {objects.GENERATED_BY}\nkind: ConfigMap\n")
    assert main(["--matrix", str(repo / "matrix.toml"), "render", "--check"]) == 1
    assert main(["--matrix", str(repo / "matrix.toml"), "render"]) == 0
    assert not orphan.exists()
    assert "595.71.5" in path.read_text()


def test_k8s_command_prints_the_objects_for_kubectl(capsys: pytest.CaptureFixture[str]) -> None:
    matrix_path = str(REPO / "matrix.toml")
    assert main(["--matrix", matrix_path, "k8s", "gpu-amd-rocm714", "--repository", "registry.example/accelenv"]) == 0
    documents = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in documents] == [
        "DeviceClass",
        "ResourceClaimTemplate",
        "RayCluster",
        "RayJob",
        "NodeFeatureRule",
    ]
    worker = documents[2]["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert worker["containers"][0]["image"].startswith("registry.example/accelenv:gpu-amd-rocm714")
    assert main(["--matrix", matrix_path, "k8s", "gaudi-1-24", "--only", "nfd"]) == 0
    assert [d["kind"] for d in yaml.safe_load_all(capsys.readouterr().out)] == ["NodeFeatureRule"]
    assert main(["--matrix", matrix_path, "k8s", "cpu-py312"]) == 2
    assert "envs.cpu-py312: no DRA driver is described for family 'cpu'" in capsys.readouterr().err
