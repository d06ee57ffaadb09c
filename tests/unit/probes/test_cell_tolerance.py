"""One unreadable value costs that fact only: properties over real captures of every family (../shared/fixtures and
tests/unit/data, see their SOURCES.md).

Any single cell of a capture (a CSV value, a JSON leaf, a `key: value` line's value, a topo -m cell) replaced by a
vendor placeholder or by garbage without the format's delimiter or a newline changes at most the facts that cell
gives; a table with one empty cell keeps every other column in place.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hostkit import capture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelenv.host.probes import amd, gaudi, neuron, nvidia, tpu
from accelenv.host.probes._text import placeholder, product_name
from accelenv.host.topology import GpuTopology, parse_nvidia_topo

if TYPE_CHECKING:
    from accelenv.host.facts import DeviceFacts

TOPO = Path(__file__).resolve().parents[1] / "data" / "topo"
PLACEHOLDERS = [
    "[N/A]",
    "N/A",
    "[Not Supported]",
    "[Unknown Error]",
    "Unknown",
    "",
    "0x1002",
    "[Insufficient Permissions]",
]
FACTS = ("index", "name", "arch", "memory_mib", "pci_bus_id", "pci_device_id", "uuid")


def garbage(delimiters: str) -> st.SearchStrategy[str]:
    """Text without the format's delimiter and without any line break (str.splitlines' separators included)."""
    return st.text(
        st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"), blacklist_characters=delimiters), max_size=24
    )


def changed(before: DeviceFacts, after: DeviceFacts) -> set[str]:
    found = {name for name in FACTS if getattr(before, name) != getattr(after, name)}
    found |= {
        f"extra.{key}"
        for key in before.extra.keys() | after.extra.keys()
        if before.extra.get(key) != after.extra.get(key)
    }
    return found


def at_most_one_device_changed(
    before: tuple[DeviceFacts, ...], after: tuple[DeviceFacts, ...], position: int, allowed: set[str] | None
) -> None:
    assert len(after) == len(before)
    for number, (old, new) in enumerate(zip(before, after, strict=True)):
        if number != position:
            assert new == old
        elif allowed is not None:
            assert changed(old, new) <= allowed, (changed(old, new), allowed)


# ---- CSV: nvidia-smi --query-gpu and hl-smi -Q ---------------------------------------------------------------------

NVIDIA_QUERIES = [
    "nvidia-smi-query-gpu-csv__nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt",
    "nvidia-smi-query-gpu-csv__nvidia_gpu_exporter__nvidia-h100-mig__590.48.01__linux-x86_64.txt",
    "nvidia-smi-query-gpu-csv__nvidia_gpu_exporter__nvidia-l40s__595.80__linux-x86_64.txt",
    "nvidia-smi-query-gpu-csv__nvidia_gpu_exporter__nvidia-geforce-rtx-2080-super__610.62__windows-x86_64.txt",
    "nvidia-smi-query-gpu-csv__unnamed-repo-XE9780-perf-test__7x-B300-SXM6-AC__610.57.04.txt",
]
# the DeviceFacts facts each --query-gpu field gives
NVIDIA_FACT = {
    "index": "index",
    "name": "name",
    "compute_cap": "arch",
    "memory.total": "memory_mib",
    "pci.bus_id": "pci_bus_id",
    "pci.device_id": "pci_device_id",
    "uuid": "uuid",
}


def _fact_of(field: str) -> set[str]:
    name = nvidia._field_name(field)
    if name in NVIDIA_FACT:
        return {NVIDIA_FACT[name]}
    return {f"extra.{name}"}


@pytest.mark.parametrize("fixture", NVIDIA_QUERIES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_query_gpu_one_bad_cell_costs_that_fact(fixture: str, data: st.DataObject) -> None:
    text = capture(fixture)
    lines = text.splitlines()
    fields = tuple(lines[0].split(", "))
    before = nvidia.parse_query_gpu(text, fields, [])
    row = data.draw(st.integers(1, len(lines) - 1))
    column = data.draw(st.integers(0, len(fields) - 1))
    value = data.draw(st.one_of(st.sampled_from(PLACEHOLDERS), garbage(",")))
    cells = lines[row].split(", ")
    cells[column] = value
    lines[row] = ", ".join(cells)
    notes: list[str] = []
    after = nvidia.parse_query_gpu("\n".join(lines), fields, notes)
    at_most_one_device_changed(before, after, row - 1, _fact_of(fields[column]))
    if placeholder(value):
        assert notes == []  # a vendor placeholder is "no value", not a fault


@pytest.mark.parametrize("value", ["0x2330", "[Unknown Error]", "[N/A]", "garbage"])
def test_query_gpu_an_odd_device_id_keeps_every_device_and_the_driver(value: str) -> None:
    line = (
        f"0, NVIDIA H100 80GB HBM3, 00000000:00:09.0, {value}, GPU-00000000-0000-0000-0000-000000000000, "
        "81559, 9.0, 590.48.01, Disabled\n"
    )
    notes: list[str] = []
    devices = nvidia.parse_query_gpu(line + line.replace("0, ", "1, ", 1), nvidia.QUERY_FIELDS, notes)
    assert [d.index for d in devices] == [0, 1]
    for device in devices:
        assert device.name == "NVIDIA H100 80GB HBM3"
        assert device.extra["driver_version"] == "590.48.01"
        assert device.memory_mib == 81559
        assert device.pci_device_id == ("0x2330" if value == "0x2330" else None)
    bad = "expected a PCI id like '0x233010DE' or '0x2330', found 'garbage'; left unknown"
    expected = [f"nvidia-smi --query-gpu, GPU line {n}: {bad}" for n in (1, 2)]
    assert notes == (expected if value == "garbage" else [])


HL_FIELDS = (
    "index", "uuid", "name", "driver_version", "memory.total", "memory.used", "memory.free", "power.draw",
    "power.max", "temperature.aip", "utilization.aip",
)  # fmt: skip
HL_FACT = {"index": {"index"}, "uuid": {"uuid"}, "name": {"name", "arch"}, "memory.total": {"memory_mib"}}


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_hl_smi_one_bad_cell_costs_that_fact(data: st.DataObject) -> None:
    text = capture("hl-smi-Q-csv-noheader__all-smi-unittest__2x-HL-325L-Gaudi3__1.22.1.txt")
    lines = text.splitlines()
    before = gaudi.parse_hl_smi_csv(text, HL_FIELDS, [])
    row = data.draw(st.integers(0, len(lines) - 1))
    column = data.draw(st.integers(0, len(HL_FIELDS) - 1))
    cells = lines[row].split(", ")
    cells[column] = data.draw(st.one_of(st.sampled_from(PLACEHOLDERS), garbage(",")))
    lines[row] = ", ".join(cells)
    after = gaudi.parse_hl_smi_csv("\n".join(lines), HL_FIELDS, [])
    field = HL_FIELDS[column]
    at_most_one_device_changed(before, after, row, HL_FACT.get(field, {f"extra.{field}"}))


# ---- JSON: amd-smi static, rocm-smi, neuron-ls ----------------------------------------------------------------------


def _leaves(value: object, path: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    if isinstance(value, dict):
        return [leaf for key, item in value.items() for leaf in _leaves(item, (*path, key))]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in _leaves(item, (*path, index))]
    return [path]


def _replaced(document: object, path: tuple[object, ...], value: object) -> object:
    copy = json.loads(json.dumps(document))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return copy


Parse = Callable[[str, list[str]], tuple["DeviceFacts", ...]]
DeviceOf = Callable[[tuple[object, ...]], int]  # which device a leaf belongs to (-1: none, or not known)


def _card(path: tuple[object, ...]) -> int:
    return int(str(path[0])[4:]) if str(path[0]).startswith("card") else -1


# No public amd-smi static capture is valid JSON as a whole (they are excerpts), so amd-smi static is our CPX one.
JSON_CAPTURES: list[tuple[str, Parse, DeviceOf]] = [
    ("amd-smi-static-json__own__MI300X-CPX-NPS4.json", amd.parse_amd_smi_static_json, lambda p: int(str(p[0]))),
    ("rocm-smi-json__telegraf__mi100_rocm602.json", lambda t, n: amd.parse_rocm_smi_json(t, n).devices, _card),
    ("rocm-smi-json__telegraf__rx6700xt_rocm612.json", lambda t, n: amd.parse_rocm_smi_json(t, n).devices, _card),
    ("rocm-smi-json__telegraf__vega-20-WKS-GL-XE.json", lambda t, n: amd.parse_rocm_smi_json(t, n).devices, _card),
    (
        "neuron-ls--json-output__unnamed-repo-rust-test__trn1.2xlarge.json",
        neuron.parse_neuron_ls_json,
        lambda p: int(str(p[0])),
    ),
]


def _json_capture(name: str) -> object:
    text = capture(name) if not name.endswith("CPX-NPS4.json") else (DATA / name).read_text(encoding="utf-8")
    start = min(i for i in (text.find("["), text.find("{")) if i >= 0)
    return json.loads(text[start:])


DATA = Path(__file__).resolve().parents[1] / "data" / "captures"


@pytest.mark.parametrize(("fixture", "parse", "device_of"), JSON_CAPTURES, ids=[c[0][:40] for c in JSON_CAPTURES])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_json_one_bad_leaf_costs_that_device_at_most_one_fact(
    fixture: str,
    parse: Parse,
    device_of: DeviceOf,
    data: st.DataObject,
) -> None:
    document = _json_capture(fixture)
    before = parse(json.dumps(document), [])
    path = data.draw(st.sampled_from(_leaves(document)))
    value = data.draw(st.one_of(st.sampled_from(PLACEHOLDERS), garbage(""), st.integers(-5, 2**40)))
    after = parse(json.dumps(_replaced(document, path, value)), [])
    assert len(after) == len(before)
    position = device_of(path)
    for number, (old, new) in enumerate(zip(before, after, strict=True)):
        if position >= 0 and number != position:
            assert new == old
        facts = {fact for fact in changed(old, new) if not fact.startswith("extra.")}
        # one leaf gives one fact (a gfx target gives arch, a market name the name), and extra at most one key
        assert len(facts) <= 1, (path, facts)
        assert len({fact for fact in changed(old, new) if fact.startswith("extra.")}) <= 1


def test_amd_smi_static_in_cpx_nps4_is_eight_gpus_of_one_package() -> None:
    text = (DATA / "amd-smi-static-json__own__MI300X-CPX-NPS4.json").read_text(encoding="utf-8")
    devices = amd.parse_amd_smi_static_json(text, [])
    assert [d.index for d in devices] == list(range(8))
    assert {(d.name, d.arch, d.pci_device_id, d.memory_mib) for d in devices} == {
        ("AMD Instinct MI300X", "gfx942", "0x74a1", 24576)
    }
    assert {(d.extra["compute_partition"], d.extra["memory_partition"]) for d in devices} == {("CPX", "NPS4")}


# ---- key: value lines: tpu-info --version ---------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(value=st.one_of(st.sampled_from(PLACEHOLDERS), garbage("")), line=st.sampled_from([1, 2]))
def test_tpu_info_version_one_bad_value_costs_that_fact(value: str, line: int) -> None:
    text = capture("tpu-info--version__cloud-accelerator-diagnostics-README__v6e.txt")
    lines = text.splitlines()
    key = lines[line + 1].partition(":")[0]
    lines[line + 1] = f"{key}: {value}"
    libtpu, accelerator = tpu.parse_tpu_info_version("\n".join(lines), [])
    if "libtpu" in key:
        assert accelerator == "v6e"
    else:
        assert libtpu == "0.0.18"


# ---- topo -m: a cell replaced, a cell emptied --------------------------------------------------------------------


def _view(topology: GpuTopology) -> dict[str, object]:
    return {
        **{f"link {a}-{b}": link for (a, b), link in topology.links.items()},
        **{f"nic {a}-{b}": link for (a, b), link in topology.nic_links.items()},
        **{f"cpu {g}": v for g, v in topology.cpu_affinity.items()},
        **{f"numa {g}": v for g, v in topology.numa_affinity.items()},
        **{f"gpu-numa {g}": v for g, v in topology.gpu_numa_id.items()},
    }


def _cell_key(label: str, name: str) -> str:
    if name == "CPU Affinity":
        return f"cpu {label}"
    if name == "NUMA Affinity":
        return f"numa {label}"
    if name == "GPU NUMA ID":
        return f"gpu-numa {label}"
    return f"{'link' if name.startswith('GPU') else 'nic'} {label}-{name}"


def _tabbed(name: str) -> tuple[list[str], int]:
    """A real topo capture as tab-separated lines (the space-aligned ones with their tabs back), and the header's
    line number."""
    from accelenv.host.topology import _retabbed

    lines = (TOPO / name).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"] and "X" not in line.split())
    if "\t" not in lines[start]:
        lines = [_retabbed(line) for line in lines]
    return lines, start


def _matrix_cells(lines: list[str], start: int) -> list[tuple[int, int, str]]:
    """(line, cell, column name) of every cell in the GPU rows but the label and the diagonal; nvidia-smi's padding
    tab after NUMA Affinity (an empty cell that is no column) is not one."""
    header = [c.strip() for c in lines[start].split("\t")][1:]
    devices = [name for name in header if not name.endswith(("Affinity", "NUMA ID"))]
    affinity = header[len(devices) :]
    found = []
    for number in range(start + 1, len(lines)):
        cells = [c.strip() for c in lines[number].split("\t")]
        if not cells[0].startswith("GPU"):
            break
        names = list(devices)
        rest = cells[1 + len(devices) :]
        for name in affinity:
            names.append(name)
            if name == "NUMA Affinity" and len(rest) > len(affinity):
                names.append("")  # the padding
        found += [
            (number, column, name)
            for column, name in enumerate(names, start=1)
            if name and column < len(cells) and cells[column] != "X"
        ]
    return found


TOPO_CAPTURES = ["h20-nv18-8nic.txt", "a100-nv12-3nic.txt", "rtx6000ada-pcie-4nic.txt"]


@pytest.mark.parametrize("name", TOPO_CAPTURES)
def test_topo_an_empty_cell_anywhere_keeps_every_other_column_in_place(name: str) -> None:
    lines, start = _tabbed(name)
    spaced = "\t" not in (TOPO / name).read_text(encoding="utf-8")
    before = _view(parse_nvidia_topo("\n".join(lines)))
    for number, column, column_name in _matrix_cells(lines, start):
        cells = lines[number].split("\t")
        label = cells[0].strip()
        cells[column] = ""
        edited = [*lines[:number], "\t".join(cells), *lines[number + 1 :]]
        text = "\n".join(line.expandtabs(8) if spaced else line for line in edited)
        after = _view(parse_nvidia_topo(text))
        key = _cell_key(label, column_name)
        assert {k: v for k, v in after.items() if k != key} == {k: v for k, v in before.items() if k != key}, key
        assert after.get(key) is None


@pytest.mark.parametrize("name", ["h20-nv18-8nic.txt"])
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_topo_one_bad_cell_costs_that_fact(name: str, data: st.DataObject) -> None:
    lines, start = _tabbed(name)
    before = _view(parse_nvidia_topo("\n".join(lines)))
    number, column, column_name = data.draw(st.sampled_from(_matrix_cells(lines, start)))
    cells = lines[number].split("\t")
    label = cells[0].strip()
    cells[column] = data.draw(st.one_of(st.sampled_from(PLACEHOLDERS), garbage("\t")))
    text = "\n".join([*lines[:number], "\t".join(cells), *lines[number + 1 :]])
    after = _view(parse_nvidia_topo(text))
    key = _cell_key(label, column_name)
    assert {k: v for k, v in after.items() if k != key} == {k: v for k, v in before.items() if k != key}


# ---- the placeholder rule ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "0x1002",
        "0x74A1",
        "0x233010DE",
        "N/A",
        "[N/A]",
        "[Not Supported]",
        "[Unknown Error]",
        "Unknown",
        "",
        " ",
        "4098",
    ],
)
def test_placeholders_are_not_product_names(value: str) -> None:
    assert product_name(value) is None


@pytest.mark.parametrize(
    ("value", "name"),
    [
        ("AMD Instinct MI300X", "AMD Instinct MI300X"),
        ("HL-325L", "HL-325L"),
        ("NVIDIA  H100", "NVIDIA H100"),
        ("A100", "A100"),
    ],
)
def test_names_are_kept(value: str, name: str) -> None:
    assert product_name(value) == name
