"""The device wiring choice (build/wiring.py), family by family, on host trees made here: CDI first, the older
wiring otherwise, a refusal where neither can give the devices."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelenv.build.wiring import EngineCaps, choose
from accelenv.host.cdi import CdiSpec
from accelenv.host.root import Root
from accelenv.matrix import Matrix, load_matrix

REPO = Path(__file__).resolve().parents[2]
DOCKER_20 = EngineCaps(host="unix:///x", product="Docker", version="20.10.24", cdi_spec_dirs=(), runtimes=("runc",))
DOCKER_28 = EngineCaps(
    host="unix:///x", product="Docker", version="28.2.2", cdi_spec_dirs=("/etc/cdi", "/var/run/cdi"), runtimes=("runc",)
)
GAUDI_SPEC = CdiSpec(
    path="/etc/cdi/intel.com-gaudi.yaml",
    cdi_version="0.6.0",
    kind="intel.com/gaudi",
    devices=("0000-19-00-0-0x1020", "0000-1a-00-0-0x1020"),
)
AMD_SPEC = CdiSpec(path="/etc/cdi/amd.json", cdi_version="0.6.0", kind="amd.com/gpu", devices=("0", "1", "all"))


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")


def tree(tmp_path: Path, *nodes: str) -> Root:
    for node in nodes:
        (tmp_path / node.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / node.lstrip("/")).touch()
    return Root(tmp_path)


def test_amd_needs_kfd_not_just_a_dri_node(tmp_path: Path, matrix: Matrix) -> None:
    amd = matrix.families["amd"]
    refused = choose(amd, DOCKER_20, (), tree(tmp_path, "/dev/dri/card0"), {}, driver=None)  # an Intel iGPU's /dev/dri
    assert refused.refusal.startswith("no CDI: Docker 20.10.24 does not report it")
    assert "this host has no /dev/kfd" in refused.refusal
    wired = choose(amd, DOCKER_20, (), tree(tmp_path, "/dev/kfd", "/dev/dri/renderD128"), {}, driver=None)
    assert (wired.way, wired.devices, wired.refusal) == ("nodes", ("/dev/dri", "/dev/kfd"), "")


def test_amd_cdi_follows_the_visible_devices(tmp_path: Path, matrix: Matrix) -> None:
    amd = matrix.families["amd"]
    root = tree(tmp_path)
    assert choose(amd, DOCKER_28, (AMD_SPEC,), root, {}, driver=None).cdi_devices == ("amd.com/gpu=all",)
    assert choose(amd, DOCKER_28, (AMD_SPEC,), root, {"HIP_VISIBLE_DEVICES": "1,0"}, driver=None).cdi_devices == (
        "amd.com/gpu=1",
        "amd.com/gpu=0",
    )
    unknown = choose(amd, DOCKER_28, (AMD_SPEC,), root, {"HIP_VISIBLE_DEVICES": "7"}, driver=None)
    assert "no CDI: HIP_VISIBLE_DEVICES=7 names 7, which /etc/cdi/amd.json does not list" in unknown.refusal


def test_gaudi_cdi_asks_for_every_device_of_a_spec_without_all(tmp_path: Path, matrix: Matrix) -> None:
    wiring = choose(matrix.families["gaudi"], DOCKER_28, (GAUDI_SPEC,), tree(tmp_path), {}, driver=None)
    assert wiring.way == "cdi"
    assert wiring.cdi_devices == ("intel.com/gaudi=0000-19-00-0-0x1020", "intel.com/gaudi=0000-1a-00-0-0x1020")
    assert wiring.runtime is None


def test_a_stale_spec_is_not_used(tmp_path: Path, matrix: Matrix) -> None:
    stale = CdiSpec(
        path="/var/run/cdi/nvidia.yaml",
        cdi_version="0.5.0",
        kind="nvidia.com/gpu",
        devices=("0", "all"),
        missing=("/usr/lib/x86_64-linux-gnu/libcuda.so.575.64.03",),
        missing_count=1,
    )
    toolkit = EngineCaps(
        host="unix:///x", product="Docker", version="28.2.2", cdi_spec_dirs=("/etc/cdi",), runtimes=("nvidia", "runc")
    )
    wiring = choose(matrix.families["nvidia"], toolkit, (stale,), tree(tmp_path), {}, driver=None)
    assert wiring.way == "gpus"
    assert "the nvidia.com/gpu spec /var/run/cdi/nvidia.yaml is stale (1 host path(s) it mounts are gone)" in (
        wiring.reason
    )


def test_neuron_keeps_device_nodes_and_says_why(tmp_path: Path, matrix: Matrix) -> None:
    wiring = choose(matrix.families["neuron"], DOCKER_28, (), tree(tmp_path, "/dev/neuron0"), {}, driver=None)
    assert wiring.devices == ("/dev/neuron0",)
    assert wiring.reason == (
        "device nodes /dev/neuron0 (AWS Trainium and Inferentia has no CDI spec kind (no vendor generator writes "
        "one): device nodes as found)"
    )


def test_podman_cdi_needs_4_1(matrix: Matrix, tmp_path: Path) -> None:
    old = EngineCaps(host="unix:///x", product="Podman", version="4.0.3", cdi_spec_dirs=("/etc/cdi",), runtimes=())
    wiring = choose(matrix.families["amd"], old, (AMD_SPEC,), tree(tmp_path), {}, driver=None)
    assert wiring.refusal.startswith("no CDI: Podman 4.0.3 takes no CDI names (Podman 4.1 and newer do)")


def test_a_spec_generated_for_another_driver_is_not_used(tmp_path: Path, matrix: Matrix) -> None:
    """After a driver upgrade that left the old libraries in place, the spec still names them: the container would
    get the old driver's libraries, so the spec is not used (check's container.cdi fails it with the same fix)."""
    old = CdiSpec(
        path="/etc/cdi/nvidia.yaml",
        cdi_version="0.5.0",
        kind="nvidia.com/gpu",
        devices=("0", "all"),
        driver_version="570.133.20",
    )
    nvidia = matrix.families["nvidia"]
    root = tree(tmp_path, "/dev/nvidia0", "/dev/nvidiactl")
    upgraded = choose(nvidia, DOCKER_28, (old,), root, {}, driver="580.95.05")  # the report's driver, as check's
    assert upgraded.way != "cdi"
    assert (
        "the nvidia.com/gpu spec /etc/cdi/nvidia.yaml was generated for driver 570.133.20, and driver 580.95.05 "
        "is loaded"
    ) in (upgraded.reason + upgraded.refusal)
    assert choose(nvidia, DOCKER_28, (old,), root, {}, driver="570.133.20").cdi_devices == ("nvidia.com/gpu=all",)
