"""One neutral topology from every family's real captures: NVIDIA `topo -m` (links, NIC affinity, NUMA), AMD
`rocm-smi --showtopo` (xGMI hives), Neuron `neuron-ls -j` (connected_to), Gaudi `hl-smi topo -c -N` (affinity only)
and the TPU slice shape; and what discovery keeps of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostkit import FakeRunner, Pci, capture, make_root

from accelenv.host import links
from accelenv.host.facts import ParseError
from accelenv.host.probes.neuron import parse_neuron_ls_json
from accelenv.host.topology import parse_nvidia_topo

DATA = Path(__file__).parent / "data"
TOPO = DATA / "topo"
AMD_TWO_HIVES = DATA / "topology/rocm-smi-showtopo__findstring-58579790270__8x-gpu280-two-xgmi-hives.txt"
AMD_ALL8 = DATA / "topology/rocm-smi-showtopo__findstring-52123097921__8x-MI308X-0x74a2.txt"
AMD_MI100 = DATA / "topology/rocm-smi-showtopo-EXCERPT__ROCm-ROCm-issue1503__2x-MI100-whitespace-collapsed.txt"
GAUDI = DATA / "topology/hl-smi-topo-c-N__findstring-1745285868__8x-Gaudi.txt"


def test_nvidia_h20_links_nics_and_numa() -> None:
    topo = links.from_nvidia(parse_nvidia_topo((TOPO / "h20-nv18-8nic.txt").read_text()))
    data = topo.as_json()
    assert len(topo.devices) == 8
    assert {(link.kind, link.count) for link in topo.links} == {("nvlink", 18)}
    assert len(topo.links) == 28  # every pair once
    assert topo.groups == [[f"GPU{i}" for i in range(8)]]
    assert topo.scale_up == "nvlink"
    assert data["devices"][0]["nics"] == [{"name": "NIC0", "device": "mlx5_1", "path": "PIX"}]  # the legend's NIC0
    assert data["devices"][0]["numa"] == "0"
    assert data["devices"][0]["cpu_affinity"] == "0-47,96-143"


def test_nvidia_pcie_only_has_no_scale_up() -> None:
    topo = links.from_nvidia(parse_nvidia_topo((TOPO / "rtx6000ada-pcie-4nic.txt").read_text()))
    assert {link.kind for link in topo.links} == {"pcie"}
    assert topo.scale_up is None
    assert all(len(group) == 1 for group in topo.groups)
    assert all(link.path in ("PIX", "PXB", "PHB", "NODE", "SYS") for link in topo.links)


def test_amd_two_xgmi_hives() -> None:
    topo = links.parse_rocm_showtopo(AMD_TWO_HIVES.read_text())
    assert topo.groups == [["GPU0", "GPU1", "GPU2", "GPU3"], ["GPU4", "GPU5", "GPU6", "GPU7"]]
    assert topo.scale_up is None  # two hives: no one group holds every GPU
    xgmi = [link for link in topo.links if link.kind == "xgmi"]
    assert len(xgmi) == 12
    assert {(link.weight, link.hops) for link in xgmi} == {(15, 1)}
    assert {(link.weight, link.hops) for link in topo.links if link.kind == "pcie"} == {(72, 3)}
    assert [d.numa for d in topo.devices] == ["0"] * 4 + ["1"] * 4


def test_amd_all_pairs_xgmi_and_collapsed_whitespace() -> None:
    topo = links.parse_rocm_showtopo(AMD_ALL8.read_text())
    assert topo.scale_up == "xgmi"
    assert len(topo.links) == 28
    mi100 = links.parse_rocm_showtopo(AMD_MI100.read_text())
    assert [(link.a, link.b, link.kind) for link in mi100.links] == [("GPU0", "GPU1", "pcie")]
    assert mi100.devices[0].numa is None  # the excerpt has no NUMA section


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rocm-smi: command not found", "expected a 'Link Type between two GPUs' section"),
        ("==== Link Type between two GPUs ====\n  GPU0 GPU1\nGPU0 0 XGMI\n", r"no row for GPU1 \(output cut short\?\)"),
        ("==== Link Type between two GPUs ====\n  GPU0 GPU1\nGPU0 0 XGMI XGMI\nGPU1 XGMI 0\n", "row GPU0: expected 2"),
        ("==== Link Type between two GPUs ====\nfoo bar\n", "expected a header of GPU columns"),
    ],
)
def test_amd_output_that_is_not_a_topology_is_refused(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        links.parse_rocm_showtopo(text)


def test_amd_an_unknown_link_type_costs_that_link() -> None:
    text = AMD_ALL8.read_text().replace("GPU0   0            XGMI", "GPU0   0            WARP", 1)
    topo = links.parse_rocm_showtopo(text)
    assert len(topo.links) == 27
    assert topo.notes == ("rocm-smi --showtopo: GPU0-GPU1: unknown link type 'WARP'; that link is unknown",)


def test_neuron_connected_to_from_the_docs_capture() -> None:
    text = "\n".join(line for line in capture("neuron-ls-j__aws-neuron-sdk-docs__trn2n.48xlarge.txt").splitlines()
                     if line.strip() != "...")  # fmt: skip
    topo = links.from_neuron(parse_neuron_ls_json(text, []))
    assert [d.id for d in topo.devices] == ["neuron0", "neuron15"]
    assert [d.numa for d in topo.devices] == ["1", "1"]
    assert topo.links == ()  # 0 and 15 are not neighbours; their neighbours are elided from the docs' listing
    assert "neuron-ls: device 0 is connected to 12, which it does not list" in topo.notes


def test_neuron_a_trn_ring_is_one_group() -> None:
    entries = ",".join(
        f'{{"neuron_device": {i}, "bdf": "{i + 16:02x}:00.0", "numa_node": "{i // 8}", "nc_count": 4, '
        f'"memory_size": 103079215104, "connected_to": [{(i - 1) % 16}, {(i + 1) % 16}]}}'
        for i in range(16)
    )
    topo = links.from_neuron(parse_neuron_ls_json(f"[{entries}]", []))
    assert len(topo.links) == 16
    assert topo.scale_up == "neuronlink"
    single = links.from_neuron(
        parse_neuron_ls_json(capture("neuron-ls--json-output__unnamed-repo-rust-test__trn1.2xlarge.json"), [])
    )
    assert single.links == ()
    assert single.devices[0].numa is None  # "-1": no NUMA node


def test_gaudi_affinity_and_no_claimed_links() -> None:
    topo = links.parse_hl_topo(GAUDI.read_text())
    assert [d.numa for d in topo.devices] == ["0"] * 4 + ["1"] * 4
    assert topo.devices[4].cpu_affinity == "40-79,120-159"
    data = topo.as_json()
    assert data["links_known"] is False
    assert data["scale_up"] is None
    with pytest.raises(ParseError, match="expected its table"):
        links.parse_hl_topo(capture("hl-smi__ray-docs__8x-HL-225-Gaudi2__1.22.1.txt"))


def test_tpu_shape() -> None:
    data = links.from_tpu(4, "2x2x1").as_json()
    assert (data["shape"], data["scale_up"], len(data["devices"])) == ("2x2x1", "ici", 4)


def test_discovery_keeps_the_neutral_topology(tmp_path: Path) -> None:
    from accelenv.host.discover import discover
    from accelenv.host.root import Root
    from accelenv.matrix import load_matrix

    matrix = load_matrix(Path(__file__).resolve().parents[2] / "matrix.toml")
    pci = [Pci(f"0000:{0x10 + i:02x}:00.0", "0x1002", "0x74a1", driver="amdgpu") for i in range(8)]
    root = make_root(tmp_path, pci=pci, modules={"amdgpu": None})
    runner = FakeRunner({"rocm-smi --showtopo": AMD_TWO_HIVES.read_text()})
    report = discover(matrix, root=Root(root), runner=runner, environ={}, families=["amd"])
    found = report.topology["devices"]["amd"]
    assert found["groups"] == [["GPU0", "GPU1", "GPU2", "GPU3"], ["GPU4", "GPU5", "GPU6", "GPU7"]]
    assert report.raw["rocm-smi-topo"].stdout == AMD_TWO_HIVES.read_text()  # a snapshot replays it
    assert not [e for e in report.accelerator("amd").errors if "showtopo" in e]  # type: ignore[union-attr]


def test_requires_and_labels_read_the_neutral_topology(tmp_path: Path) -> None:
    import dataclasses

    from accelenv.check.checks import check
    from accelenv.check.node_labels import labels_for
    from accelenv.host.discover import discover
    from accelenv.host.root import Root
    from accelenv.matrix import load_matrix
    from accelenv.matrix.model import Requires

    matrix = load_matrix(Path(__file__).resolve().parents[2] / "matrix.toml")
    pci = [Pci(f"0000:{0x10 + i:02x}:00.0", "0x1002", "0x74a1", driver="amdgpu") for i in range(8)]
    root = make_root(tmp_path, pci=pci, modules={"amdgpu": None})
    runner = FakeRunner({"rocm-smi --showtopo": AMD_TWO_HIVES.read_text()})
    report = discover(matrix, root=Root(root), runner=runner, environ={}, families=["amd"])
    env = next(e for e in matrix.envs.values() if e.family == "amd")

    def judged(requires: Requires) -> tuple[str, str]:
        found = {f.id: f for f in check(matrix, dataclasses.replace(env, requires=requires), report)}
        return str(found["topology.scale_up"].status), found["topology.scale_up"].found

    assert judged(Requires(scale_up_devices=4)) == ("pass", "8 devices, scale-up groups of 4, 4")
    assert judged(Requires(scale_up_devices=8))[0] == "fail"
    assert judged(Requires(scale_up="xgmi"))[0] == "fail"  # two hives: not every GPU on one
    labels = labels_for(matrix, report, [env])[0].labels
    assert labels["accelenv.io/scale-up-devices"] == "4"
    assert "accelenv.io/scale-up" not in labels


AMD_SMI_8 = DATA / "topology/amd-smi-topology__amdsmi-CHANGELOG__8x-MI300X-class.txt"
AMD_SMI_2 = DATA / "topology/amd-smi-topology__findstring-57129709323__2x-pcie.txt"


def test_amd_smi_topology_with_bandwidth() -> None:
    topo = links.parse_amd_smi_topology(AMD_SMI_8.read_text())
    assert topo.scale_up == "xgmi"
    assert len(topo.links) == 28
    assert {(link.weight, link.hops, link.bandwidth) for link in topo.links} == {(15, 1, "50000-50000")}
    assert [d.bus for d in topo.devices][:2] == ["0000:0c:00.0", "0000:22:00.0"]
    pcie = links.parse_amd_smi_topology(AMD_SMI_2.read_text())
    assert [(link.a, link.b, link.kind, link.weight, link.hops, link.bandwidth) for link in pcie.links] == [
        ("GPU0", "GPU1", "pcie", 40, 2, None)  # NUMA BW N/A
    ]
    with pytest.raises(ParseError, match="expected a 'LINK TYPE TABLE:'"):
        links.parse_amd_smi_topology(AMD_TWO_HIVES.read_text())
    cut = AMD_SMI_8.read_text().split("NUMA BW")[0].rsplit("\n0000:df", 1)[0]
    with pytest.raises(ParseError, match=r"LINK TYPE: no row for 0000:df:00.0 \(output cut short\?\)"):
        links.parse_amd_smi_topology(cut)


def test_amd_smi_is_read_first_and_rocm_smi_where_it_is_not(tmp_path: Path) -> None:
    both = {"amd": {"amd-smi-topology": AMD_SMI_8.read_text(), "rocm-smi-topo": AMD_TWO_HIVES.read_text()}}
    assert links.neutral(both, 0, None)["amd"]["source"] == "amd-smi topology"
    broken = {"amd": {"amd-smi-topology": "amd-smi: not supported", "rocm-smi-topo": AMD_TWO_HIVES.read_text()}}
    assert links.neutral(broken, 0, None)["amd"]["source"] == "rocm-smi --showtopo"
