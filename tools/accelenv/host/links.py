"""One neutral topology for every family: devices (NUMA node, CPU affinity, nearest NICs), the links between them
(kind, and the count, weight or hops where the tool says), the scale-up groups they form, and a slice shape.

Each family's tool says it its own way; each reader here is pure and reads what that tool printed:

- NVIDIA: `nvidia-smi topo -m` (`host/topology.py` parses the matrix): NVLink pairs with their bonded link count,
  PCIe paths, the NICs nearest each GPU (the PIX/PXB/PHB/NODE cells, nearest first), NUMA and CPU affinity;
- AMD: `amd-smi topology` (first) or `rocm-smi --showtopo`: the link type (XGMI, PCIE), weight and hops of every
  pair, amd-smi's NUMA bandwidth (`min-max`, as printed), each GPU's PCI address or NUMA node;
- Neuron: `neuron-ls --json-output`: each device's `connected_to` (NeuronLink), NUMA node, CPU affinity;
- Gaudi: `hl-smi topo -c -N`: each module's CPU and NUMA affinity; hl-smi prints no link matrix, so no link is
  claimed (the scale-up ports are not in its output);
- TPU: the slice shape (ICI), from the runtime's environment (`topology.tpu_topology`).

`groups` are the sets of devices joined by scale-up links (NVLink, xGMI, NeuronLink), each sorted; a device
without any is a group of one. A reader raises `ParseError` on output that is not its tool's; one unreadable cell
costs that link only (`notes`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Literal

from accelenv.host.facts import ParseError
from accelenv.host.probes._text import excerpt
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from accelenv.host.facts import DeviceFacts
    from accelenv.host.topology import GpuTopology

LinkKind = Literal["nvlink", "xgmi", "neuronlink", "ici", "pcie"]
SCALE_UP: frozenset[str] = frozenset({"nvlink", "xgmi", "neuronlink", "ici"})
# nvidia-smi's PCIe path classes, nearest first: a NIC at one of the first four is "near" its GPU
NEAR_PATHS = ("PIX", "PXB", "PHB", "NODE")
MAX_DEVICES = 1024


@frozen
class NearNic:
    name: str  # NIC0, or the device where the legend names none
    device: str | None  # mlx5_0
    path: str  # PIX, PXB, PHB, NODE


@frozen
class DeviceNode:
    id: str  # GPU0, neuron3, module5, chip0
    index: int
    numa: str | None = None
    cpu_affinity: str | None = None
    bus: str | None = None
    nics: tuple[NearNic, ...] = ()


@frozen
class DeviceLink:
    a: str
    b: str
    kind: LinkKind
    count: int | None = None  # bonded links (NVLink NV18 -> 18)
    weight: int | None = None  # rocm-smi's weight
    hops: int | None = None
    path: str | None = None  # a PCIe link's path class as nvidia-smi prints it (PIX ... SYS)
    bandwidth: str | None = None  # amd-smi's NUMA bandwidth, `min-max` as it prints it


@frozen
class Topology:
    family: str
    source: str
    devices: tuple[DeviceNode, ...]
    links: tuple[DeviceLink, ...] = ()
    shape: str | None = None  # a TPU slice's ICI shape: 2x2x1
    notes: tuple[str, ...] = ()
    links_known: bool = True  # False where the tool prints no links at all (hl-smi)

    @property
    def groups(self) -> list[list[str]]:
        """The scale-up groups: devices joined (directly or through others) by scale-up links."""
        parent = {d.id: d.id for d in self.devices}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for link in self.links:
            if link.kind in SCALE_UP and link.a in parent and link.b in parent:
                parent[find(link.a)] = find(link.b)
        found: dict[str, list[str]] = {}
        for device in self.devices:
            found.setdefault(find(device.id), []).append(device.id)
        return sorted((members for members in found.values()), key=lambda g: (-len(g), g))

    @property
    def scale_up(self) -> str | None:
        """The scale-up link kind when one group holds every device (and there are two or more), else None."""
        if self.shape:
            return "ici"
        groups = self.groups
        if len(self.devices) < 2 or len(groups) != 1:
            return None
        kinds = {link.kind for link in self.links if link.kind in SCALE_UP}
        return kinds.pop() if len(kinds) == 1 else None

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "family": self.family,
            "source": self.source,
            "devices": [_device_json(d) for d in self.devices],
            "links": [{k: v for k, v in vars(link).items() if v is not None} for link in self.links],
            "links_known": self.links_known,
            "groups": self.groups,
            "scale_up": self.scale_up,
        }
        if self.shape:
            data["shape"] = self.shape
        if self.notes:
            data["notes"] = list(self.notes)
        return data


def _device_json(device: DeviceNode) -> dict[str, Any]:
    data: dict[str, Any] = {"id": device.id, "index": device.index}
    data.update({k: v for k in ("numa", "cpu_affinity", "bus") if (v := getattr(device, k)) is not None})
    data["nics"] = [vars(nic) for nic in device.nics]
    return data


# ---- NVIDIA ----------------------------------------------------------------------------------------------------


def from_nvidia(topo: GpuTopology) -> Topology:
    """The neutral form of a parsed `nvidia-smi topo -m`: NVLink and PCIe links between GPUs, each GPU's nearest NICs
    (those on its nearest path class, when that is PIX, PXB, PHB or NODE), its NUMA node and CPU affinity."""
    devices = []
    for index, gpu in enumerate(topo.gpus):
        paths = {
            nic.name: topo.nic_links[(gpu, nic.name)].label for nic in topo.nics if (gpu, nic.name) in topo.nic_links
        }
        near = [p for p in NEAR_PATHS if p in paths.values()]
        nearest = near[0] if near else None
        nics = tuple(
            NearNic(name=nic.name, device=nic.device, path=paths[nic.name])
            for nic in topo.nics
            if nearest is not None and paths.get(nic.name) == nearest
        )
        numa = topo.gpu_numa_id.get(gpu) or topo.numa_affinity.get(gpu)
        devices.append(DeviceNode(id=gpu, index=index, numa=numa, cpu_affinity=topo.cpu_affinity.get(gpu), nics=nics))
    links = []
    for (a, b), link in sorted(topo.links.items()):
        if a < b:
            if link.kind == "NV":
                links.append(DeviceLink(a=a, b=b, kind="nvlink", count=link.nvlinks))
            else:
                links.append(DeviceLink(a=a, b=b, kind="pcie", path=link.label))
    return Topology(family="nvidia", source="nvidia-smi topo -m", devices=tuple(devices), links=tuple(links),
                    notes=topo.notes)  # fmt: skip


# ---- AMD -------------------------------------------------------------------------------------------------------

ROCM_WHAT = "rocm-smi --showtopo"
_SECTION = re.compile(r"\A=+\s*(?P<title>[A-Za-z][A-Za-z ]*?)\s*=+\s*\Z")
_GPU = re.compile(r"GPU(\d{1,4})")
_ROCM_NUMA = re.compile(r"\AGPU\s*\[?(?P<gpu>\d{1,4})\]?\s*:\s*\(Topology\) Numa Node:\s*(?P<node>-?\d{1,4})\s*\Z")
_ROCM_KINDS: dict[str, LinkKind] = {"XGMI": "xgmi", "PCIE": "pcie"}


def parse_rocm_showtopo(text: str) -> Topology:
    """`rocm-smi --showtopo`: the Link Type matrix (required), Weight and Hops (where printed), Numa Nodes."""
    sections = _rocm_sections(text)
    kinds = sections.get("Link Type between two GPUs")
    if kinds is None:
        raise ParseError(f"{ROCM_WHAT}: expected a 'Link Type between two GPUs' section, found {excerpt(text)}")
    gpus, types = _rocm_matrix(kinds, "Link Type")
    weights = _rocm_numbers(sections.get("Weight between two GPUs"), "Weight")
    hops = _rocm_numbers(sections.get("Hops between two GPUs"), "Hops")
    numa: dict[str, str] = {}
    for line in sections.get("Numa Nodes", []):
        match = _ROCM_NUMA.match(line.strip())
        if match and int(match["node"]) >= 0:
            numa[f"GPU{int(match['gpu'])}"] = match["node"]
    links, notes = [], []
    for (a, b), cell in sorted(types.items()):
        if _index(a) >= _index(b):
            continue
        kind = _ROCM_KINDS.get(cell.upper())
        if kind is None:
            notes.append(f"{ROCM_WHAT}: {a}-{b}: unknown link type {excerpt(cell)}; that link is unknown")
            continue
        links.append(DeviceLink(a=a, b=b, kind=kind, weight=weights.get((a, b)), hops=hops.get((a, b))))
    devices = tuple(DeviceNode(id=g, index=_index(g), numa=numa.get(g)) for g in gpus)
    return Topology(family="amd", source=ROCM_WHAT, devices=devices, links=tuple(links), notes=tuple(notes))


AMD_SMI_WHAT = "amd-smi topology"
_BDF = re.compile(r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
_TABLE = re.compile(r"\A(?P<title>[A-Z][A-Z -]{0,40}) TABLE:\s*\Z")
_BANDWIDTH = re.compile(r"\d{1,9}-\d{1,9}")


def parse_amd_smi_topology(text: str) -> Topology:
    """`amd-smi topology` (its tables by PCI address): LINK TYPE (required), WEIGHT, HOPS, NUMA BW."""
    tables: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _TABLE.match(line.strip())
        if match:
            current = tables.setdefault(match["title"], [])
        elif not line.strip() or line.strip().startswith("Legend"):
            current = None  # a table ends at a blank line, the next table or the legend
        elif current is not None:
            current.append(line)
    kinds = tables.get("LINK TYPE")
    if kinds is None:
        raise ParseError(f"{AMD_SMI_WHAT}: expected a 'LINK TYPE TABLE:', found {excerpt(text)}")
    buses, types = _bdf_matrix(kinds, "LINK TYPE")
    ids = {bus: f"GPU{i}" for i, bus in enumerate(buses)}
    weights = _bdf_matrix(tables["WEIGHT"], "WEIGHT")[1] if "WEIGHT" in tables else {}
    hops = _bdf_matrix(tables["HOPS"], "HOPS")[1] if "HOPS" in tables else {}
    bandwidth = _bdf_matrix(tables["NUMA BW"], "NUMA BW")[1] if "NUMA BW" in tables else {}
    links, notes = [], []
    for (a, b), cell in sorted(types.items()):
        if buses.index(a) >= buses.index(b):
            continue
        kind = _ROCM_KINDS.get(cell.upper())
        if kind is None:
            notes.append(f"{AMD_SMI_WHAT}: {a}-{b}: unknown link type {excerpt(cell)}; that link is unknown")
            continue
        weight, hop, bw = weights.get((a, b), ""), hops.get((a, b), ""), bandwidth.get((a, b), "")
        links.append(
            DeviceLink(
                a=ids[a],
                b=ids[b],
                kind=kind,
                weight=int(weight) if weight.isdigit() and len(weight) < 7 else None,
                hops=int(hop) if hop.isdigit() and len(hop) < 7 else None,
                bandwidth=bw if _BANDWIDTH.fullmatch(bw) else None,
            )
        )
    devices = tuple(DeviceNode(id=ids[bus], index=i, bus=bus.lower()) for i, bus in enumerate(buses))
    return Topology(family="amd", source=AMD_SMI_WHAT, devices=devices, links=tuple(links), notes=tuple(notes))


def _bdf_matrix(lines: Sequence[str], what: str) -> tuple[list[str], dict[tuple[str, str], str]]:
    header = lines[0].split() if lines else []
    if not header or not all(_BDF.fullmatch(token) for token in header) or len(header) > MAX_DEVICES:
        raise ParseError(
            f"{AMD_SMI_WHAT}: {what}: expected a header of PCI addresses, found {excerpt(' '.join(header))}"
        )
    return header, _square_cells(header, lines[1:], f"{AMD_SMI_WHAT}: {what}")


def _square_cells(header: list[str], lines: Sequence[str], where: str) -> dict[tuple[str, str], str]:
    """(row, column) -> cell of a device-by-device table whose rows are named as its header's columns: every
    device a row of exactly one cell per column (else a ParseError saying `where`), the diagonal left out."""
    rows: dict[str, list[str]] = {}
    for line in lines:
        tokens = line.split()
        if tokens and tokens[0] in header:
            if len(tokens) != len(header) + 1:
                raise ParseError(f"{where}: row {tokens[0]}: expected {len(header)} cells, found {excerpt(line)}")
            rows[tokens[0]] = tokens[1:]
    missing = [device for device in header if device not in rows]
    if missing:
        raise ParseError(f"{where}: no row for {', '.join(missing)} (output cut short?)")
    return {
        (row, column): value
        for row, values in rows.items()
        for column, value in zip(header, values, strict=True)
        if row != column
    }


def _rocm_sections(text: str) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        match = _SECTION.match(line.strip())
        if match:
            current = sections.setdefault(match["title"], [])
        elif current is not None and line.strip():
            current.append(line)
    return sections


def _rocm_matrix(lines: Sequence[str], what: str) -> tuple[list[str], dict[tuple[str, str], str]]:
    header = lines[0].split() if lines else []
    if not header or not all(_GPU.fullmatch(token) for token in header) or len(header) > MAX_DEVICES:
        raise ParseError(f"{ROCM_WHAT}: {what}: expected a header of GPU columns, found {excerpt(' '.join(header))}")
    return header, _square_cells(header, lines[1:], f"{ROCM_WHAT}: {what}")  # the header's tokens are GPU names


def _rocm_numbers(lines: Sequence[str] | None, what: str) -> dict[tuple[str, str], int]:
    if not lines:
        return {}
    _, cells = _rocm_matrix(lines, what)
    return {pair: int(value) for pair, value in cells.items() if value.isdigit() and len(value) < 7}


def _index(device: str) -> int:
    return int(re.sub(r"\D", "", device) or 0)


# ---- Neuron ----------------------------------------------------------------------------------------------------


def from_neuron(devices: Iterable[DeviceFacts]) -> Topology:
    """The neutral form of `neuron-ls --json-output` as the Neuron probe read it: NeuronLink between each device and
    those in its `connected_to`, each device's NUMA node (-1: none) and PCI address."""
    found = list(devices)[:MAX_DEVICES]
    ids = {d.index for d in found}
    nodes = []
    pairs: set[tuple[int, int]] = set()
    notes = []
    for device in found:
        numa = device.extra.get("numa_node")
        nodes.append(
            DeviceNode(
                id=f"neuron{device.index}",
                index=device.index,
                numa=numa if numa and not numa.startswith("-") else None,
                cpu_affinity=device.extra.get("cpu_affinity"),
                bus=device.pci_bus_id,
            )
        )
        for peer in (int(p) for p in device.extra.get("connected_to", "").split(",") if p.strip().isdigit()):
            if peer in ids and peer != device.index:
                pairs.add((min(device.index, peer), max(device.index, peer)))
            else:
                notes.append(f"neuron-ls: device {device.index} is connected to {peer}, which it does not list")
    links = tuple(DeviceLink(a=f"neuron{a}", b=f"neuron{b}", kind="neuronlink") for a, b in sorted(pairs))
    return Topology(family="neuron", source="neuron-ls --json-output", devices=tuple(nodes), links=links,
                    notes=tuple(notes))  # fmt: skip


# ---- Gaudi -----------------------------------------------------------------------------------------------------

HL_WHAT = "hl-smi topo -c -N"
_HL_ROW = re.compile(r"\A\s*(?P<module>\d{1,3})\s+(?P<cpus>\d[\d,\- ]*?)\s+(?P<numa>-?\d{1,4})\s*\Z")


def parse_hl_topo(text: str) -> Topology:
    """`hl-smi topo -c -N`: each module's CPU affinity and NUMA node. No links: hl-smi prints none."""
    if "modID" not in text:
        raise ParseError(f"{HL_WHAT}: expected its table (a modID column), found {excerpt(text)}")
    devices = []
    for line in text.splitlines():
        match = _HL_ROW.match(line)
        if match:
            module = int(match["module"])
            numa = match["numa"] if not match["numa"].startswith("-") else None
            cpus = re.sub(r"\s+", "", match["cpus"])
            devices.append(DeviceNode(id=f"module{module}", index=module, numa=numa, cpu_affinity=cpus))
    if not devices:
        raise ParseError(f"{HL_WHAT}: no module rows, found {excerpt(text)}")
    return Topology(family="gaudi", source=HL_WHAT, devices=tuple(devices[:MAX_DEVICES]), links_known=False,
                    notes=("hl-smi prints no link matrix: the scale-up links are not claimed",))  # fmt: skip


# ---- TPU -------------------------------------------------------------------------------------------------------


def from_tpu(chips: int, shape: str | None) -> Topology:
    """A TPU host's chips and the slice's ICI shape (the runtime's word; the per-chip links are not printed)."""
    devices = tuple(DeviceNode(id=f"chip{i}", index=i) for i in range(min(chips, MAX_DEVICES)))
    return Topology(family="tpu", source="TPU runtime environment", devices=devices, shape=shape, links_known=False)


# ---- what a report keeps ---------------------------------------------------------------------------------------


def neutral(outputs: Mapping[str, Mapping[str, str]], tpu_chips: int, tpu_shape: str | None) -> dict[str, Any]:
    """family -> its neutral topology (as JSON) or `{"error": why}`, for the families whose tool said something.
    `outputs` is family -> command key -> what the tool printed (only commands that ran and exited 0)."""
    from accelenv.host.probes.neuron import parse_neuron_ls_json
    from accelenv.host.topology import parse_nvidia_topo

    readers: dict[tuple[str, str], Callable[[str], Topology]] = {
        ("nvidia", "nvidia-smi-topo"): lambda text: from_nvidia(parse_nvidia_topo(text)),
        ("amd", "amd-smi-topology"): parse_amd_smi_topology,
        ("amd", "rocm-smi-topo"): parse_rocm_showtopo,
        ("neuron", "neuron-ls"): lambda text: from_neuron(parse_neuron_ls_json(text, [])),
        ("gaudi", "hl-smi-topo"): parse_hl_topo,
    }
    found: dict[str, Any] = {}
    for (family, key), read in readers.items():
        text = outputs.get(family, {}).get(key)
        if text and (family not in found or "error" in found[family]):  # amd-smi answered: rocm-smi is not read
            try:
                found[family] = read(text).as_json()
            except ParseError as error:
                found[family] = {"error": str(error)}
    if tpu_chips or tpu_shape:
        found["tpu"] = from_tpu(tpu_chips, tpu_shape).as_json()
    return found
