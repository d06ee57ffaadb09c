"""Inside the pod: `check` reads the DRA device metadata files (KEP-5304's layout, as the Kubernetes docs give
it) through the Root and compares what the scheduler allocated with the environment and the node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hostkit import FakeRunner, Pci, capture, make_root, reorder_query

from accelenv.check.verdict import Status
from accelenv.cli import main
from accelenv.host.discover import discover
from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.report import HostReport, PythonInfo
from accelenv.host.root import Root
from accelenv.k8s.allocated import METADATA_ROOT, allocated_findings, parse_metadata, read_allocation
from accelenv.matrix import Matrix, load_matrix

REPO = Path(__file__).resolve().parents[2]
H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"
TEMPLATE = f"{METADATA_ROOT}/resourceclaimtemplates/accelerators/accelerators/gpu.nvidia.com-metadata.json"


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")


def metadata(devices: list[dict[str, Any]], version: str = "v1beta1") -> str:
    return json.dumps(
        {
            "kind": "DeviceMetadata",
            "apiVersion": f"metadata.resource.k8s.io/{version}",
            "metadata": {"name": "worker-0-accelerators-x7k2p", "namespace": "ray", "uid": "c7e7", "generation": 1},
            "podClaimName": "accelerators",
            "requests": [{"name": "accelerators", "devices": devices}],
        }
    )


def gpu(name: str = "NVIDIA H100 80GB HBM3", version: str = "590.48.1") -> dict[str, Any]:
    attributes = {"productName": {"string": name}, "driverVersion": {"version": version}, "type": {"string": "gpu"}}
    return {"driver": "gpu.nvidia.com", "pool": "node-1", "name": "gpu-0", "attributes": attributes}


def node(tmp: Path, matrix: Matrix, files: dict[str, str]) -> tuple[Root, HostReport]:
    rows = reorder_query(capture("nvidia-smi-query-gpu-csv__" + H100), QUERY_FIELDS)
    outputs = {
        "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): rows,
        "nvidia-smi --version": capture("nvidia-smi--version__" + H100),
    }
    root = make_root(
        tmp,
        pci=[Pci("0000:00:09.0", "0x10de", "0x2330", driver="nvidia")],
        modules={"nvidia": "590.48.01"},
        files=files,
    )
    python = PythonInfo(version="3.12.3", implementation="CPython", executable="python3", distributions={})
    report = discover(
        matrix, root=Root(root), runner=FakeRunner(outputs), environ={}, families=["nvidia"], python=python
    )
    return Root(root), report


def judge(tmp: Path, matrix: Matrix, files: dict[str, str], env: str = "gpu-nvidia-cu132") -> list[Any]:
    root, report = node(tmp, matrix, files)
    return allocated_findings(matrix, matrix.envs[env], report, read_allocation(root))


def test_no_metadata_no_finding(tmp_path: Path, matrix: Matrix) -> None:
    assert judge(tmp_path, matrix, {}) == []


def test_what_the_claim_allocated_matches_the_environment_and_the_node(tmp_path: Path, matrix: Matrix) -> None:
    # a v1alpha1 object the reader does not take first, then the v1beta1 one: the stream the docs describe
    stream = metadata([gpu()]) + "\n" + metadata([gpu(name="x")], version="v0")
    [finding] = judge(tmp_path, matrix, {TEMPLATE: stream})
    assert (finding.id, finding.status, finding.found) == ("dra.allocation", Status.PASS, "1 device(s): h100-sxm")


@pytest.mark.parametrize(
    ("device", "message"),
    [
        (gpu(name="NVIDIA L40S"), "the claim allocated l40s, but this pod sees h100-sxm"),
        (gpu(name="NVIDIA GeForce RTX 4090"), "not the environment's: gpu-0 is no SKU of the matrix"),
        (gpu(version="595.71.5"), "allocated by driver 595.71.5 (the ResourceSlice), but this node runs 590.48.01"),
    ],
)
def test_a_claim_and_a_node_that_disagree_fail_in_the_pod(
    tmp_path: Path, matrix: Matrix, device: dict[str, Any], message: str
) -> None:
    [finding] = judge(tmp_path, matrix, {TEMPLATE: metadata([device])})
    assert finding.status is Status.FAIL
    assert message in finding.message


def test_devices_of_another_driver_only(tmp_path: Path, matrix: Matrix) -> None:
    other = {"driver": "gpu.amd.com", "pool": "p", "name": "gpu-0-128", "attributes": {}}
    path = f"{METADATA_ROOT}/resourceclaims/claim/req/gpu.amd.com-metadata.json"
    [finding] = judge(tmp_path, matrix, {path: metadata([other])})
    assert (finding.status, finding.message) == (Status.FAIL, "the claim allocated no gpu.nvidia.com device")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{", "not a JSON stream"),
        ('{"kind": "DeviceMetadata", "apiVersion": "metadata.resource.k8s.io/v9"}', "no DeviceMetadata object"),
        (
            '{"kind": "DeviceMetadata", "apiVersion": "metadata.resource.k8s.io/v1beta1", "requests": 3}',
            "requests is not a list",
        ),
        (metadata([{"driver": "gpu.nvidia.com"}]), "a device without a driver or a name"),
        ("[]" * 9, "more than 8 objects"),
    ],
)
def test_malformed_metadata_is_a_named_failure(tmp_path: Path, matrix: Matrix, text: str, problem: str) -> None:
    [finding] = judge(tmp_path, matrix, {TEMPLATE: text})
    assert finding.status is Status.FAIL
    assert problem in finding.found
    with pytest.raises(ValueError, match=problem.split(":", maxsplit=1)[0]):
        parse_metadata(text, TEMPLATE)


def test_a_fifo_or_a_link_out_of_the_root_is_not_read(tmp_path: Path, matrix: Matrix) -> None:
    import os

    root, _ = node(tmp_path / "host", matrix, {})
    folder = root.resolve(TEMPLATE).parent
    folder.mkdir(parents=True)
    os.mkfifo(folder / "gpu.nvidia.com-metadata.json")
    outside = tmp_path / "outside.json"
    outside.write_text(metadata([gpu()]))
    (folder / "x-metadata.json").symlink_to(outside)
    allocation = read_allocation(root)
    assert allocation.devices == ()
    assert len(allocation.problems) == 2


def test_check_reports_the_allocation(tmp_path: Path, matrix: Matrix, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_root(tmp_path, files={TEMPLATE: metadata([gpu(name="NVIDIA GeForce RTX 4090")])})
    code = main(["--matrix", str(REPO / "matrix.toml"), "check", "gpu-nvidia-cu132", "--root", str(root), "--json"])
    checks = {c["id"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    assert code == 1
    assert checks["dra.allocation"]["status"] == "fail"
