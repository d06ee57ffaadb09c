"""Interconnect topology: how GPUs reach each other and the network, and what the host offers for RDMA.

Three sources, each read separately:

- `nvidia-smi topo -m`: the GPU/NIC matrix -> `parse_nvidia_topo` (pure; raises `ParseError` and nothing else).
- sysfs under a `Root`: InfiniBand/RoCE/EFA devices (`/sys/class/infiniband`) and the GPUDirect RDMA peer-memory
  module (`/sys/module/nvidia_peermem`) -> `infiniband_devices`, `efa_devices`, `peermem_loaded`.
- the TPU runtime's environment -> `tpu_topology`.

The sysfs readers and `tpu_topology` never raise: what is missing or unreadable is absent from the result.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, get_args

from accelenv.host.facts import ParseError
from accelenv.host.probes._text import excerpt
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from accelenv.host.root import Root

WHAT = "nvidia-smi topo -m"

# How two devices reach each other, nearest first. `NV` is a bonded set of NVLinks (printed NV1 .. NV18); SOC is
# what drivers before NODE existed printed for SYS.
LinkKind = Literal["NV", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"]
_PCIE_KINDS: dict[str, LinkKind] = {kind: kind for kind in get_args(LinkKind) if kind != "NV"}

# Matrix columns after the devices, in the order nvidia-smi prints them (older drivers stop after the first one).
AFFINITY_COLUMNS: tuple[str, ...] = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # some drivers underline the header row
_HEADER_TOKEN = re.compile("|".join(AFFINITY_COLUMNS) + r"|\S+")
_GPU_LABEL = re.compile(r"GPU\d+")
_NIC_LABEL = re.compile(r"NIC\d+")
# Adjacent device labels printed without space between them ("NIC11NIC12"): nvidia-smi on 8-GPU hosts with 10+ NICs
_FUSED_LABELS = re.compile(r"(?:(?:GPU|NIC)\d{1,4}){2,64}")
_LABEL = re.compile(r"(?:GPU|NIC)\d{1,4}")
_NVLINK = re.compile(r"NV(\d{1,3})")
_NIC_LEGEND = re.compile(r"\s*(NIC\d+):\s*(\S+)\s*")
_LEGEND = re.compile(r"\s*(?:NIC\s+)?Legend:", re.IGNORECASE)
_STOP_LABEL = re.compile(r"(?<!\S)(?:GPU|NIC)\d{1,4}|(?<!\S)(?:CPU Affinity|NUMA Affinity|GPU NUMA ID)")


@frozen
class Link:
    """One cell of the matrix: the path between two devices."""

    kind: LinkKind
    nvlinks: int = 0  # the number of bonded NVLinks when kind is NV, else 0

    @property
    def label(self) -> str:
        """The cell as nvidia-smi prints it: NV18, PIX, SYS ..."""
        return f"NV{self.nvlinks}" if self.kind == "NV" else self.kind


@frozen
class Nic:
    name: str  # the matrix label: NIC0; drivers before the NIC legend label the column with the device (mlx5_0)
    device: str | None  # the RDMA device (mlx5_0, mlx5_bond_0), None when the legend does not name it


@frozen
class GpuTopology:
    """What `nvidia-smi topo -m` says. Affinity values are kept as printed (`0-47,96-143`); `N/A` is None."""

    gpus: tuple[str, ...]  # GPU0, GPU1 ... in matrix order
    nics: tuple[Nic, ...]
    links: Mapping[tuple[str, str], Link]  # ordered pairs of distinct GPUs whose cell could be read -> the cell
    nic_links: Mapping[tuple[str, str], Link]  # (GPU, NIC name) -> the cell in the GPU's row
    cpu_affinity: Mapping[str, str | None]
    numa_affinity: Mapping[str, str | None]
    gpu_numa_id: Mapping[str, str | None]
    notes: tuple[str, ...] = ()  # cells that could not be read (each costs that one fact)

    def link(self, a: str, b: str) -> Link | None:
        return self.links.get((a, b))

    @property
    def complete(self) -> bool:
        """Every ordered pair of GPUs has a readable cell."""
        return len(self.links) == len(self.gpus) * (len(self.gpus) - 1)


def all_pairs_nvlink(topology: GpuTopology) -> bool:
    """Every pair of GPUs is joined by NVLink (directly or through NVSwitch). False with fewer than two GPUs (there is
    no NVLink to rely on) and when a pair's cell could not be read (it is not known to be NVLink)."""
    links = topology.links.values()
    return len(topology.gpus) >= 2 and topology.complete and all(link.kind == "NV" for link in links)


def min_nvlinks(topology: GpuTopology) -> int:
    """The fewest bonded NVLinks between any two GPUs: 0 when a pair has none, its cell could not be read, or there
    is no pair."""
    if not topology.complete:
        return 0
    return min((link.nvlinks for link in topology.links.values()), default=0)


def parse_nvidia_topo(text: str) -> GpuTopology:
    """Read `nvidia-smi topo -m` (lines before the matrix and the legends after it are skipped, the NIC legend names
    each NICn). Header labels printed fused (`NIC11NIC12`, on hosts with 10+ NICs) are split.

    Columns are read by the tab structure nvidia-smi prints (one tab between cells, two after NUMA Affinity), so an
    empty cell (CPU Affinity on some multi-socket nodes) is an empty cell, never a shift of every later column. A
    capture whose tabs became spaces at 8-column stops is read by those stops; only output whose whitespace was
    collapsed is split on runs of whitespace. Every device column needs its row and the diagonal X, so output cut
    short is refused rather than read as a smaller machine; a cell that is empty or unknown costs that link only
    (it is left out of `links`, and `notes` says why)."""
    lines = [line.rstrip("\r") for line in _ANSI.sub("", text).splitlines()]
    start = next((i for i, line in enumerate(lines) if _is_header(line)), None)
    if start is None:
        raise ParseError(f"{WHAT}: expected a matrix header naming GPU0, found {excerpt(text)}")
    header = [label for token in _HEADER_TOKEN.findall(lines[start]) for label in _labels(token)]
    devices = [token for token in header if token not in AFFINITY_COLUMNS]
    extras = [token for token in header if token in AFFINITY_COLUMNS]
    if header != devices + extras:
        raise ParseError(f"{WHAT}: affinity columns must follow the device columns, found {excerpt(lines[start])}")
    if len(set(devices)) != len(devices):
        raise ParseError(f"{WHAT}: a device column is named twice in the header {excerpt(lines[start])}")

    rows, end = _rows(lines, start, devices)
    missing = [device for device in devices if device not in rows]
    if missing:
        raise ParseError(f"{WHAT}: no matrix row for {', '.join(missing)} (output cut short?)")

    split = _splitter(lines[start])
    cells: dict[tuple[str, str], Link] = {}
    values: dict[str, dict[str, str | None]] = {column: {} for column in AFFINITY_COLUMNS}
    notes: list[str] = []
    for row in devices:
        tokens = split(rows[row])[1:]
        affinity = _affinity_cells(tokens[len(devices) :], extras)
        if len(tokens) < len(devices) or affinity is None:
            raise ParseError(
                f"{WHAT}: row {row}: expected {len(devices)} cells (one per device column) then at most "
                f"{len(extras)} affinity values, found {len(tokens)}: {excerpt(' '.join(tokens))}"
            )
        for column, cell in zip(devices, tokens, strict=False):
            try:
                link = _cell(row, column, cell)
            except ParseError as error:
                if row == column:
                    raise
                notes.append(f"{error}; that link is unknown")
                continue
            if link is not None:
                cells[(row, column)] = link
        for column, value in zip(extras, affinity, strict=False):
            values[column][row] = None if value in ("", "N/A") else value

    gpus = tuple(device for device in devices if _GPU_LABEL.fullmatch(device))
    legend = {match[1]: match[2] for line in lines[end:] if (match := _NIC_LEGEND.fullmatch(line))}
    nics = tuple(
        Nic(name=name, device=legend.get(name, None if _NIC_LABEL.fullmatch(name) else name))
        for name in devices
        if name not in gpus
    )
    return GpuTopology(
        gpus=gpus,
        nics=nics,
        links={(a, b): cells[(a, b)] for a in gpus for b in gpus if a != b and (a, b) in cells},
        nic_links={(gpu, nic.name): cells[(gpu, nic.name)] for gpu in gpus for nic in nics if (gpu, nic.name) in cells},
        cpu_affinity={gpu: values["CPU Affinity"].get(gpu) for gpu in gpus},
        numa_affinity={gpu: values["NUMA Affinity"].get(gpu) for gpu in gpus},
        gpu_numa_id={gpu: values["GPU NUMA ID"].get(gpu) for gpu in gpus},
        notes=tuple(notes),
    )


def _splitter(header: str) -> Callable[[str], list[str]]:
    """How this capture's rows split into cells: by tabs when the header has them; by 8-column tab stops when the
    tabs became spaces (every header label starts on a stop); else on runs of whitespace."""
    if "\t" in header:
        return lambda line: [cell.strip() for cell in line.split("\t")]
    labels = list(_STOP_LABEL.finditer(header))
    if labels and header[:1] == " " and all(label.start() % 8 == 0 for label in labels):
        return lambda line: [cell.strip() for cell in _retabbed(line).split("\t")]
    return str.split


def _retabbed(line: str) -> str:
    """A line whose tabs were expanded to 8-column stops, with its tabs back: a run of spaces that reaches k stops
    was k tabs (and the spaces after the last stop lead the next cell, as in nvidia-smi's ` X `)."""
    out: list[str] = []
    position = 0
    for match in re.finditer(r" +", line):
        begin, end = match.span()
        out.append(line[position:begin])
        stops = end // 8 - begin // 8
        out.append("\t" * stops + " " * (end - (end // 8) * 8) if stops else line[begin:end])
        position = end
    out.append(line[position:])
    return "".join(out)


def _affinity_cells(cells: list[str], extras: Sequence[str]) -> list[str] | None:
    """The affinity values of a row, one per affinity column: nvidia-smi pads NUMA Affinity with a second tab, and a
    line may end in tabs. None when more values are left than there are columns."""
    cells = list(cells)
    while len(cells) > len(extras) and cells and cells[-1] == "":
        cells.pop()
    if "NUMA Affinity" in extras:
        padding = extras.index("NUMA Affinity") + 1
        while len(cells) > len(extras) and padding < len(cells) and cells[padding] == "":
            del cells[padding]
    return cells if len(cells) <= len(extras) else None


def _labels(token: str) -> list[str]:
    """A header token as the column labels it holds: `NIC11NIC12` (two labels printed fused) is NIC11 and NIC12."""
    return _LABEL.findall(token) if _FUSED_LABELS.fullmatch(token) else [token]


def _is_header(line: str) -> bool:
    """The header starts with GPU0 and, unlike GPU0's own row, has no X in it."""
    tokens = line.split()
    return bool(tokens) and tokens[0] == "GPU0" and "X" not in tokens


def _rows(lines: Sequence[str], start: int, devices: Sequence[str]) -> tuple[dict[str, str], int]:
    """The matrix rows after the header (whole lines), by label, and the index of the first line after the matrix."""
    rows: dict[str, str] = {}
    index = start + 1
    while index < len(lines):
        line = lines[index]
        tokens = line.split()
        if not tokens:
            if rows:
                break
        elif _LEGEND.match(line):
            break
        elif tokens[0] not in devices:
            raise ParseError(f"{WHAT}: line {index + 1}: expected a matrix row, found {excerpt(line)}")
        elif tokens[0] in rows:
            raise ParseError(f"{WHAT}: line {index + 1}: a second row for {tokens[0]}")
        else:
            rows[tokens[0]] = line
        index += 1
    return rows, index


def _cell(row: str, column: str, cell: str) -> Link | None:
    """One matrix cell: None on the diagonal (which must read X), else the link."""
    if row == column:
        if cell != "X":
            raise ParseError(f"{WHAT}: row {row}, column {column}: expected X on the diagonal, found {excerpt(cell)}")
        return None
    kind = _PCIE_KINDS.get(cell)
    if kind is not None:
        return Link(kind=kind)
    nvlink = _NVLINK.fullmatch(cell)
    if nvlink is not None and int(nvlink[1]) > 0:
        return Link(kind="NV", nvlinks=int(nvlink[1]))
    raise ParseError(
        f"{WHAT}: row {row}, column {column}: expected NV#, PIX, PXB, PHB, NODE or SYS, found {excerpt(cell)}"
    )


# ---- RDMA devices and peer memory (sysfs) ----------------------------------------------------------------------

INFINIBAND_CLASS = "/sys/class/infiniband"
EFA_DRIVER = "efa"
EFA_NAME_PREFIXES: tuple[str, ...] = ("rdmap", "efa_")
# nvidia_peermem ships with the driver since 470; nv_peer_mem is the older Mellanox module that does the same job.
PEERMEM_MODULES: tuple[str, ...] = ("nvidia_peermem", "nv_peer_mem")

_RATE_GBPS = re.compile(r"(\d{1,6}(?:\.\d{1,3})?)\s*Gb/sec")


@frozen
class IbPort:
    number: int
    state: str | None  # ACTIVE, DOWN, INIT, ARMED: the name in `4: ACTIVE`
    rate: str | None  # as sysfs has it: "400 Gb/sec (4X NDR)"
    link_layer: str | None  # InfiniBand, Ethernet (RoCE), Unspecified (EFA)

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"

    @property
    def rate_gbps(self) -> float | None:
        match = _RATE_GBPS.match(self.rate or "")
        return float(match[1]) if match else None


@frozen
class IbDevice:
    """One RDMA device under /sys/class/infiniband: a ConnectX HCA (mlx5_0), a RoCE bond, or an AWS EFA adapter."""

    name: str
    ports: tuple[IbPort, ...]
    driver: str | None  # the PCI driver bound to it (mlx5_core, efa), when sysfs links it
    is_efa: bool

    @property
    def active(self) -> bool:
        return any(port.active for port in self.ports)


def infiniband_devices(root: Root) -> tuple[IbDevice, ...]:
    """Every device under /sys/class/infiniband, by name, with its ports in number order."""
    return tuple(_ib_device(root, name) for name in root.listdir(INFINIBAND_CLASS))


def efa_devices(root: Root) -> tuple[IbDevice, ...]:
    """The AWS Elastic Fabric Adapters among the RDMA devices."""
    return tuple(device for device in infiniband_devices(root) if device.is_efa)


def peermem_loaded(root: Root) -> bool:
    """A GPUDirect RDMA peer-memory module is loaded (it shows under /sys/module)."""
    return any(root.exists(f"/sys/module/{module}") for module in PEERMEM_MODULES)


def _ib_device(root: Root, name: str) -> IbDevice:
    base = f"{INFINIBAND_CLASS}/{name}"
    numbers = sorted(int(entry) for entry in root.listdir(f"{base}/ports") if entry.isdigit() and len(entry) < 6)
    ports = tuple(
        IbPort(
            number=number,
            state=_port_state(root.read_value(f"{base}/ports/{number}/state")),
            rate=root.read_value(f"{base}/ports/{number}/rate"),
            link_layer=root.read_value(f"{base}/ports/{number}/link_layer"),
        )
        for number in numbers
    )
    driver = root.link_name(f"{base}/device/driver")
    is_efa = name.startswith(EFA_NAME_PREFIXES) or driver == EFA_DRIVER
    return IbDevice(name=name, ports=ports, driver=driver, is_efa=is_efa)


def _port_state(value: str | None) -> str | None:
    """`4: ACTIVE` -> ACTIVE (a bare name is kept as it is)."""
    if value is None:
        return None
    return value.rpartition(":")[2].strip() or None


# ---- TPU slice shape (environment) -----------------------------------------------------------------------------

_TPU_TOPOLOGY = re.compile(r"\d{1,4}(?:x\d{1,4}){1,3}")
_TPU_BOUNDS = re.compile(r"\d{1,4}(?:,\d{1,4}){1,3}")


def tpu_topology(environ: Mapping[str, str]) -> str | None:
    """The TPU slice shape such as `2x2x1`: TPU_TOPOLOGY when it reads as one, else TPU_CHIPS_PER_HOST_BOUNDS
    (`2,2,1`) times TPU_HOST_BOUNDS per axis when both are set and agree in rank, else the chips-per-host bounds
    alone (a single host). None when nothing usable is set."""
    topology = environ.get("TPU_TOPOLOGY", "").strip().lower()
    if _TPU_TOPOLOGY.fullmatch(topology) and all(int(axis) > 0 for axis in topology.split("x")):
        return topology
    chips = _bounds(environ.get("TPU_CHIPS_PER_HOST_BOUNDS"))
    if chips is None:
        return None
    hosts = _bounds(environ.get("TPU_HOST_BOUNDS"))
    if hosts is not None:
        if len(hosts) != len(chips):
            return None
        chips = tuple(c * h for c, h in zip(chips, hosts, strict=True))
    return "x".join(str(axis) for axis in chips)


def _bounds(value: str | None) -> tuple[int, ...] | None:
    text = (value or "").strip()
    if not _TPU_BOUNDS.fullmatch(text):
        return None
    axes = tuple(int(axis) for axis in text.split(","))
    return axes if all(axis > 0 for axis in axes) else None


# ---- what a report keeps ---------------------------------------------------------------------------------------


def summary(root: Root, environ: Mapping[str, str], topo_text: str | None) -> dict[str, object]:
    """The host's topology as plain data for the report: GPU links (when `nvidia-smi topo -m` answered), RDMA
    devices, peer memory, and the TPU slice shape. Never raises: an unreadable matrix becomes `gpu_error`."""
    data: dict[str, object] = {
        "infiniband": [
            {
                "name": d.name,
                "active": d.active,
                "efa": d.is_efa,
                "link_layer": next((p.link_layer for p in d.ports if p.link_layer), None),
                "rate": next((p.rate for p in d.ports if p.rate), None),
            }
            for d in infiniband_devices(root)
        ],
        "peermem": peermem_loaded(root),
        "tpu_topology": tpu_topology(environ),
    }
    if topo_text:
        try:
            gpus = parse_nvidia_topo(topo_text)
        except ParseError as error:
            data["gpu_error"] = str(error)
        else:
            gpu: dict[str, object] = {
                "gpus": len(gpus.gpus),
                "all_pairs_nvlink": all_pairs_nvlink(gpus),
                "min_nvlinks": min_nvlinks(gpus),
                "links": {f"{a}-{b}": link.label for (a, b), link in sorted(gpus.links.items()) if a < b},
                "numa_affinity": dict(gpus.numa_affinity),
            }
            if gpus.notes:
                gpu["notes"] = list(gpus.notes)  # the cells that could not be read
            data["gpu"] = gpu
    return data
