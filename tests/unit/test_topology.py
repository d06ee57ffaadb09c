"""Interconnect topology: `nvidia-smi topo -m` against real outputs (tests/unit/data/topo, each file's first line says
where it came from), RDMA devices and peer memory on a fake sysfs tree, and the TPU slice shape from the environment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hostkit import make_root, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from accelenv.host.facts import ParseError
from accelenv.host.root import Root
from accelenv.host.topology import (
    GpuTopology,
    IbDevice,
    IbPort,
    Link,
    Nic,
    all_pairs_nvlink,
    efa_devices,
    infiniband_devices,
    min_nvlinks,
    parse_nvidia_topo,
    peermem_loaded,
    tpu_topology,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

DATA = Path(__file__).parent / "data" / "topo"
H20 = "h20-nv18-8nic.txt"
A100 = "a100-nv12-3nic.txt"
RTX6000ADA = "rtx6000ada-pcie-4nic.txt"
OCI18 = "a100-nv12-18nic-oci.txt"


def topo_output(name: str) -> str:
    """A recorded `nvidia-smi topo -m` output, without its `# source:` line."""
    source, _, text = (DATA / name).read_text(encoding="utf-8").partition("\n")
    assert source.startswith("# source: "), f"{name} must start with a '# source:' line"
    return text


def gpus(count: int) -> tuple[str, ...]:
    return tuple(f"GPU{i}" for i in range(count))


def per_gpu(*values: str | None) -> dict[str, str | None]:
    return {f"GPU{i}": value for i, value in enumerate(values)}


# ---- recorded outputs --------------------------------------------------------------------------------------------


def test_h20_eight_gpus_all_nv18_with_eight_nics() -> None:
    topology = parse_nvidia_topo(topo_output(H20))
    assert topology.gpus == gpus(8)
    assert len(topology.links) == 8 * 7
    assert set(topology.links.values()) == {Link(kind="NV", nvlinks=18)}
    assert all_pairs_nvlink(topology)
    assert min_nvlinks(topology) == 18
    # the legend starts at mlx5_1: names come from it, not from the column index
    assert topology.nics == tuple(Nic(name=f"NIC{i}", device=f"mlx5_{i + 1}") for i in range(8))
    assert topology.cpu_affinity == per_gpu(*["0-47,96-143"] * 4, *["48-95,144-191"] * 4)
    assert topology.numa_affinity == per_gpu(*["0"] * 4, *["1"] * 4)
    assert topology.gpu_numa_id == per_gpu(*[None] * 8)
    # each GPU sits on one switch with its own NIC (PIX), its socket's others are NODE, the far socket's SYS
    for g in range(8):
        for n in range(8):
            expected = "PIX" if g == n else "NODE" if g // 4 == n // 4 else "SYS"
            assert topology.nic_links[(f"GPU{g}", f"NIC{n}")].label == expected


def test_a100_eight_gpus_nv12_space_separated() -> None:
    topology = parse_nvidia_topo(topo_output(A100))
    assert topology.gpus == gpus(8)
    assert topology.link("GPU0", "GPU7") == Link(kind="NV", nvlinks=12)
    assert topology.link("GPU7", "GPU0") == Link(kind="NV", nvlinks=12)
    assert topology.link("GPU0", "GPU0") is None
    assert all_pairs_nvlink(topology)
    assert min_nvlinks(topology) == 12
    assert topology.nics == (
        Nic(name="NIC0", device="mlx5_0"),
        Nic(name="NIC1", device="mlx5_3"),
        Nic(name="NIC2", device="mlx5_bond_0"),
    )
    assert topology.cpu_affinity == per_gpu(*["0-31,64-95"] * 4, *["32-63,96-127"] * 4)
    assert topology.numa_affinity == per_gpu(*["0"] * 4, *["1"] * 4)
    assert topology.gpu_numa_id == per_gpu(*[None] * 8)
    assert [topology.nic_links[("GPU0", nic)].label for nic in ("NIC0", "NIC1", "NIC2")] == ["PXB", "SYS", "SYS"]
    assert [topology.nic_links[("GPU6", nic)].label for nic in ("NIC0", "NIC1", "NIC2")] == ["SYS", "NODE", "NODE"]


def test_eight_gpus_with_eighteen_nics() -> None:
    topology = parse_nvidia_topo(topo_output(OCI18))
    assert topology.gpus == gpus(8)
    assert min_nvlinks(topology) == 12
    assert topology.nics == tuple(Nic(name=f"NIC{i}", device=f"mlx5_{i}") for i in range(18))
    assert [topology.nic_links[("GPU6", f"NIC{i}")].label for i in (9, 10, 11, 12, 13)] == ["PXB"] * 4 + ["SYS"]
    assert topology.cpu_affinity == per_gpu(*["48-63"] * 2, *["16-31"] * 2, *["112-127"] * 2, *["80-95"] * 2)
    assert topology.numa_affinity == per_gpu("3", "3", "1", "1", "7", "7", "5", "5")


@pytest.mark.parametrize(
    "fused",
    [("NIC11", "NIC12"), ("NIC10", "NIC11", "NIC12", "NIC13"), ("NIC16", "NIC17"), ("GPU7", "NIC0")],
    ids="".join,
)
def test_header_labels_printed_fused_are_split(fused: tuple[str, ...]) -> None:
    """On 8-GPU hosts with 10+ NICs nvidia-smi can print adjacent header labels with nothing between them
    (issue 15: "NIC11NIC12"). The 18-NIC capture with its header printed that way reads as the capture does."""
    text = topo_output(OCI18)
    header, _, rest = text.partition("\n")
    squeezed = re.sub(r"\s+".join(fused), "".join(fused), header)
    assert "".join(fused) in squeezed.split()
    assert parse_nvidia_topo(squeezed + "\n" + rest) == parse_nvidia_topo(text)


def test_a_fused_header_must_still_name_the_rows() -> None:
    text = topo_output(OCI18)
    header, _, rest = text.partition("\n")
    renamed = header.replace("NIC16   NIC17", "NIC16NIC18")
    with pytest.raises(ParseError, match=r"^nvidia-smi topo -m: line 27: expected a matrix row, found 'NIC17 SYS"):
        parse_nvidia_topo(renamed + "\n" + rest)


def test_rtx6000ada_pcie_only_across_two_sockets() -> None:
    topology = parse_nvidia_topo(topo_output(RTX6000ADA))
    assert topology.gpus == gpus(4)
    assert {pair: link.label for pair, link in topology.links.items() if pair[0] < pair[1]} == {
        ("GPU0", "GPU1"): "NODE",
        ("GPU0", "GPU2"): "SYS",
        ("GPU0", "GPU3"): "SYS",
        ("GPU1", "GPU2"): "SYS",
        ("GPU1", "GPU3"): "SYS",
        ("GPU2", "GPU3"): "NODE",
    }
    assert not all_pairs_nvlink(topology)
    assert min_nvlinks(topology) == 0
    assert topology.nics == tuple(Nic(name=f"NIC{i}", device=f"mlx5_{i}") for i in range(4))
    assert topology.cpu_affinity == per_gpu("0-31", "0-31", "32-63", "32-63")
    assert topology.numa_affinity == per_gpu("0", "0", "1", "1")


# ---- shapes the recorded outputs do not cover ----------------------------------------------------------------------

# Laid out like drivers before the NIC legend: NICs named by their device, only CPU Affinity, a trailing tab on
# NIC rows. Hand-written, not a capture.
LEGACY = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tmlx5_0\tCPU Affinity\n"
    "GPU0\t X \tNV1\tNV1\tNV2\tSYS\t0-15\n"
    "GPU1\tNV1\t X \tNV2\tPHB\tSYS\t0-15\n"
    "GPU2\tNV1\tNV2\t X \tNV2\tSYS\t0-15\n"
    "GPU3\tNV2\tPHB\tNV2\t X \tSYS\t0-15\n"
    "mlx5_0\tSYS\tSYS\tSYS\tSYS\t X \t\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
)


def test_legacy_layout_names_nics_by_device_and_has_no_numa_columns() -> None:
    topology = parse_nvidia_topo(LEGACY)
    assert topology.nics == (Nic(name="mlx5_0", device="mlx5_0"),)
    assert topology.cpu_affinity == per_gpu("0-15", "0-15", "0-15", "0-15")
    assert topology.numa_affinity == per_gpu(None, None, None, None)
    assert topology.link("GPU1", "GPU3") == Link(kind="PHB")
    assert not all_pairs_nvlink(topology)
    assert min_nvlinks(topology) == 0


def test_mixed_nvlink_counts_report_the_fewest() -> None:
    text = LEGACY.replace("PHB", "NV1")
    topology = parse_nvidia_topo(text)
    assert all_pairs_nvlink(topology)
    assert min_nvlinks(topology) == 1


def test_single_gpu_has_no_pair() -> None:
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-191\t0\t\tN/A\n"
    topology = parse_nvidia_topo(text)
    assert topology == GpuTopology(
        gpus=("GPU0",),
        nics=(),
        links={},
        nic_links={},
        cpu_affinity={"GPU0": "0-191"},
        numa_affinity={"GPU0": "0"},
        gpu_numa_id={"GPU0": None},
    )
    assert not all_pairs_nvlink(topology)
    assert min_nvlinks(topology) == 0


def test_prompt_lines_and_ansi_underline_are_skipped() -> None:
    text = "$ nvidia-smi topo -m\n\x1b[4m\tGPU0\tGPU1\tCPU Affinity\x1b[0m\nGPU0\t X \tNV4\t0-7\nGPU1\tNV4\t X \t0-7\n"
    topology = parse_nvidia_topo(text)
    assert topology.gpus == ("GPU0", "GPU1")
    assert min_nvlinks(topology) == 4


ROWS = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV4\t0-7\nGPU1\tNV4\t X \t0-7\n"

BAD_OUTPUTS = [
    ("", "nvidia-smi topo -m: expected a matrix header naming GPU0, found empty output"),
    (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        (
            'nvidia-smi topo -m: expected a matrix header naming GPU0, found "NVIDIA-SMI has failed because it '
            "couldn't communicate with t...\""
        ),
    ),
    ("\tGPU0\tGPU1\tCPU Affinity\n", "nvidia-smi topo -m: no matrix row for GPU0, GPU1 (output cut short?)"),
    (ROWS.rsplit("GPU1", 1)[0], "nvidia-smi topo -m: no matrix row for GPU1 (output cut short?)"),
    (
        "\tGPU0\tGPU1\tNIC0\tCPU Affinity\nGPU0\t X \tNV4\tPIX\t0-7\nGPU1\tNV4\t X \tPIX\t0-7\n",
        "nvidia-smi topo -m: no matrix row for NIC0 (output cut short?)",
    ),
    (
        ROWS.replace("GPU1\tNV4\t X \t0-7", "GPU1\tNV4"),
        (
            "nvidia-smi topo -m: row GPU1: expected 2 cells (one per device column) then at most 1 affinity values, "
            "found 1: 'NV4'"
        ),
    ),
    (
        ROWS.replace("\t0-7\nGPU1", "\t0-7\t0\t1\nGPU1"),
        (
            "nvidia-smi topo -m: row GPU0: expected 2 cells (one per device column) then at most 1 affinity values, "
            "found 5: 'X NV4 0-7 0 1'"
        ),
    ),
    (
        ROWS.replace("GPU0\t X ", "GPU0\tSYS"),
        "nvidia-smi topo -m: row GPU0, column GPU0: expected X on the diagonal, found 'SYS'",
    ),
    (
        ROWS + "GPU1\tNV4\t X \t0-7\n",
        "nvidia-smi topo -m: line 4: a second row for GPU1",
    ),
    (
        ROWS.replace("GPU1\tNV4", "GPU2\tNV4"),
        "nvidia-smi topo -m: line 3: expected a matrix row, found 'GPU2 NV4 X 0-7'",
    ),
    (
        "\tGPU0\tCPU Affinity\tGPU1\n",
        "nvidia-smi topo -m: affinity columns must follow the device columns, found 'GPU0 CPU Affinity GPU1'",
    ),
    ("\tGPU0\tGPU0\n", "nvidia-smi topo -m: a device column is named twice in the header 'GPU0 GPU0'"),
]


UNKNOWN_CELLS = [
    (
        ROWS.replace("NV4\t X", "NV\t X"),
        ("GPU1", "GPU0"),
        "nvidia-smi topo -m: row GPU1, column GPU0: expected NV#, PIX, PXB, PHB, NODE or SYS, found 'NV'",
    ),
    (
        ROWS.replace("NV4\t0-7", "NV0\t0-7"),
        ("GPU0", "GPU1"),
        "nvidia-smi topo -m: row GPU0, column GPU1: expected NV#, PIX, PXB, PHB, NODE or SYS, found 'NV0'",
    ),
    (
        ROWS.replace("NV4\t0-7", "X\t0-7"),
        ("GPU0", "GPU1"),
        "nvidia-smi topo -m: row GPU0, column GPU1: expected NV#, PIX, PXB, PHB, NODE or SYS, found 'X'",
    ),
    (
        ROWS.replace("NV4\t0-7", "\t0-7"),
        ("GPU0", "GPU1"),
        "nvidia-smi topo -m: row GPU0, column GPU1: expected NV#, PIX, PXB, PHB, NODE or SYS, found empty output",
    ),
]


@pytest.mark.parametrize(("text", "pair", "message"), UNKNOWN_CELLS)
def test_an_unreadable_cell_costs_that_link_only(text: str, pair: tuple[str, str], message: str) -> None:
    topology = parse_nvidia_topo(text)
    assert pair not in topology.links
    other = (pair[1], pair[0])
    assert topology.links[other] == Link(kind="NV", nvlinks=4)
    assert topology.cpu_affinity == {"GPU0": "0-7", "GPU1": "0-7"}
    assert topology.notes == (f"{message}; that link is unknown",)
    assert not all_pairs_nvlink(topology)  # a pair not known to be NVLink is not counted as one
    assert min_nvlinks(topology) == 0


@pytest.mark.parametrize(("text", "message"), BAD_OUTPUTS, ids=[f"bad-{i}" for i in range(len(BAD_OUTPUTS))])
def test_unreadable_output_is_refused(text: str, message: str) -> None:
    with pytest.raises(ParseError) as error:
        parse_nvidia_topo(text)
    assert str(error.value) == message


@pytest.mark.parametrize("name", [H20, A100, RTX6000ADA, OCI18])
def test_every_recorded_output_cut_inside_the_matrix_is_refused(name: str) -> None:
    text = topo_output(name)
    matrix_end = len(text[: text.index("\n\nLegend:")].rstrip())  # just after the last row's last cell
    accepted = [cut for cut in range(matrix_end) if outcome(parse_nvidia_topo, text[:cut]) == "ok"]
    assert accepted == []
    assert outcome(parse_nvidia_topo, text[:matrix_end]) == "ok"


@settings(max_examples=300, deadline=None)
@given(
    text=st.one_of(
        st.text(max_size=400),
        st.lists(st.sampled_from(["GPU0", "GPU1", "NIC0", " X ", "NV18", "SYS", "\t", "\n", "N/A", " "])).map(
            lambda cells: "\tGPU0\tGPU1\tNIC0\tCPU Affinity\n" + "".join(cells)
        ),
        st.sampled_from([H20, A100, RTX6000ADA]).flatmap(
            lambda name: st.integers(0, len(topo_output(name))).map(lambda cut: topo_output(name)[:cut])
        ),
    )
)
def test_any_text_gives_a_topology_or_a_parse_error(text: str) -> None:
    message = outcome(parse_nvidia_topo, text)  # any exception but ParseError escapes and fails
    if message != "ok":
        assert message.startswith("nvidia-smi topo -m: ")
        return
    topology = parse_nvidia_topo(text)
    assert topology.gpus
    assert len(topology.links) == len(topology.gpus) * (len(topology.gpus) - 1)
    assert 0 <= min_nvlinks(topology) <= 999


# ---- RDMA devices and peer memory ----------------------------------------------------------------------------------


def ib_port(device: str, number: int, state: str, rate: str, link_layer: str) -> dict[str, str]:
    base = f"/sys/class/infiniband/{device}/ports/{number}"
    return {f"{base}/state": state + "\n", f"{base}/rate": rate + "\n", f"{base}/link_layer": link_layer + "\n"}


def link_driver(host: Path, device: str, driver: str) -> None:
    """/sys/class/infiniband/<device>/device/driver -> ../../../bus/pci/drivers/<driver>, as sysfs links it."""
    (host / "sys/bus/pci/drivers" / driver).mkdir(parents=True, exist_ok=True)
    folder = host / "sys/class/infiniband" / device / "device"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "driver").symlink_to(f"../../../../bus/pci/drivers/{driver}")


@pytest.fixture
def rdma_host(tmp_path: Path) -> Path:
    files: Mapping[str, str] = {
        **ib_port("mlx5_0", 1, "4: ACTIVE", "400 Gb/sec (4X NDR)", "InfiniBand"),
        **ib_port("mlx5_bond_0", 1, "1: DOWN", "10 Gb/sec (1X QDR)", "Ethernet"),
        **ib_port("rdmap16s27", 1, "4: ACTIVE", "100 Gb/sec", "Unspecified"),
        **ib_port("efa_1", 1, "2: INIT", "200 Gb/sec", "Unspecified"),
        **ib_port("roce_x", 1, "4: ACTIVE", "", "Ethernet"),
        **ib_port("roce_x", 2, "ACTIVE", "25 Gb/sec (1X EDR)", "Ethernet"),
        "/sys/class/infiniband/roce_x/ports/10/state": "4: ACTIVE\n",
        "/sys/class/infiniband/roce_x/ports/lost+found/state": "4: ACTIVE\n",
    }
    host = make_root(tmp_path / "host", files=files, modules={"nvidia_peermem": None})
    link_driver(host, "mlx5_0", "mlx5_core")
    link_driver(host, "aws_nic", "efa")
    return host


def test_infiniband_devices_read_every_port(rdma_host: Path) -> None:
    devices = {device.name: device for device in infiniband_devices(Root(rdma_host))}
    assert sorted(devices) == ["aws_nic", "efa_1", "mlx5_0", "mlx5_bond_0", "rdmap16s27", "roce_x"]
    assert devices["mlx5_0"] == IbDevice(
        name="mlx5_0",
        ports=(IbPort(number=1, state="ACTIVE", rate="400 Gb/sec (4X NDR)", link_layer="InfiniBand"),),
        driver="mlx5_core",
        is_efa=False,
    )
    assert devices["mlx5_0"].active
    assert devices["mlx5_0"].ports[0].rate_gbps == 400.0
    assert not devices["mlx5_bond_0"].active
    assert devices["mlx5_bond_0"].ports[0].state == "DOWN"
    roce = devices["roce_x"]
    assert [port.number for port in roce.ports] == [1, 2, 10]
    assert [port.state for port in roce.ports] == ["ACTIVE", "ACTIVE", "ACTIVE"]
    assert [port.rate_gbps for port in roce.ports] == [None, 25.0, None]
    assert roce.ports[2] == IbPort(number=10, state="ACTIVE", rate=None, link_layer=None)


def test_efa_devices_by_name_or_driver(rdma_host: Path) -> None:
    efa = efa_devices(Root(rdma_host))
    assert [device.name for device in efa] == ["aws_nic", "efa_1", "rdmap16s27"]
    assert efa[0] == IbDevice(name="aws_nic", ports=(), driver="efa", is_efa=True)
    assert efa[1].ports == (IbPort(number=1, state="INIT", rate="200 Gb/sec", link_layer="Unspecified"),)
    assert efa[2].active


def test_no_rdma_devices_on_a_bare_host(tmp_path: Path) -> None:
    root = Root(make_root(tmp_path / "bare"))
    assert infiniband_devices(root) == ()
    assert efa_devices(root) == ()
    assert not peermem_loaded(root)


@pytest.mark.parametrize(
    ("modules", "loaded"),
    [({"nvidia_peermem": None}, True), ({"nv_peer_mem": "1.3-0"}, True), ({"nvidia": "570.86.15"}, False)],
)
def test_peermem_loaded(tmp_path: Path, modules: dict[str, str | None], loaded: bool) -> None:
    assert peermem_loaded(Root(make_root(tmp_path / "host", modules=modules))) is loaded


# ---- TPU slice shape -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "topology"),
    [
        ({"TPU_TOPOLOGY": "2x2x1"}, "2x2x1"),
        ({"TPU_TOPOLOGY": " 4X4 "}, "4x4"),
        ({"TPU_TOPOLOGY": "2x2x1", "TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1"}, "2x2x1"),
        ({"TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1"}, "2x2x1"),
        ({"TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1", "TPU_HOST_BOUNDS": "1,1,1"}, "2x2x1"),
        ({"TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1", "TPU_HOST_BOUNDS": "1,1,4"}, "2x2x4"),
        ({"TPU_CHIPS_PER_HOST_BOUNDS": "2,2", "TPU_HOST_BOUNDS": "2,2"}, "4x4"),
        ({"TPU_TOPOLOGY": "v5e-8", "TPU_CHIPS_PER_HOST_BOUNDS": "2,4,1"}, "2x4x1"),
        ({"TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1", "TPU_HOST_BOUNDS": "1,1"}, None),
        ({"TPU_HOST_BOUNDS": "1,1,4"}, None),
        ({"TPU_CHIPS_PER_HOST_BOUNDS": "2,0,1"}, None),
        ({"TPU_CHIPS_PER_HOST_BOUNDS": "two,two,one"}, None),
        ({"TPU_TOPOLOGY": "0x2"}, None),
        ({"TPU_TOPOLOGY": ""}, None),
        ({}, None),
    ],
)
def test_tpu_topology(environ: dict[str, str], topology: str | None) -> None:
    assert tpu_topology(environ) == topology


@settings(max_examples=200, deadline=None)
@given(
    environ=st.dictionaries(
        st.sampled_from(["TPU_TOPOLOGY", "TPU_CHIPS_PER_HOST_BOUNDS", "TPU_HOST_BOUNDS"]),
        st.one_of(st.text(max_size=30), st.from_regex(r"\A[0-9]{1,5}(,[0-9]{1,5}){0,4}\Z")),
    )
)
def test_tpu_topology_never_raises(environ: dict[str, str]) -> None:
    topology = tpu_topology(environ)
    assert topology is None or all(axis.isdigit() and int(axis) > 0 for axis in topology.split("x"))
