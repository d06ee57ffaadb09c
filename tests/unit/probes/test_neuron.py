"""Neuron parsers against real captures (../shared/fixtures, see its SOURCES.md) and small inline ones."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import pytest
from hostkit import capture, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from accelenv.host.facts import DeviceFacts, ParseError
from accelenv.host.probes import neuron

if TYPE_CHECKING:
    from collections.abc import Callable


LS_JSON_TRN1 = "neuron-ls--json-output__unnamed-repo-rust-test__trn1.2xlarge.json"
LS_JSON_TRN2_DOC = "neuron-ls-j__aws-neuron-sdk-docs__trn2n.48xlarge.txt"
LS_TABLES = [
    "neuron-ls__aws-neuron-sdk-docs__trn2n.48xlarge.txt",
    "neuron-ls__aws-neuron-sdk-docs__inf1.6xlarge.txt",
    "neuron-ls__unnamed-repo-workshop__inf2.xlarge.txt",
    "neuron-ls--topology__aws-neuron-sdk-docs__trn1.32xlarge.txt",
]

# Inline captures in the real format: the trn1.2xlarge one verbatim, and trn2n.48xlarge device 0 from the docs.
INLINE_TRN1 = """[
    {
        "neuron_device": 0,
        "bdf": "0000:00:1e.0",
        "cpu_affinity": "0-7",
        "numa_node": "-1",
        "connected_to": null,
        "nc_count": 2,
        "memory_size": 34359738368,
        "neuroncore_ids": [
            0,
            1
        ],
        "neuron_processes": []
    }
]"""
INLINE_TRN2 = """[
  {
      "neuron_device": 0,
      "bdf": "cc:00.0",
      "cpu_affinity": "48-95,144-191",
      "numa_node": "1",
      "connected_to": [12, 3, 4, 1],
      "nc_count": 4,
      "logical_neuroncore_config": 2,
      "memory_size": 103079215104,
      "neuroncore_ids": [0, 1, 2, 3],
      "neuron_processes": [
          {"pid": 113985, "command": "neuron-bench exec --run-as-cc-neff --...", "neuron_runtime_version": "2.0.0"}
      ]
  }
]"""

TRN1_DEVICE = DeviceFacts(
    index=0,
    memory_mib=32768,
    pci_bus_id="0000:00:1e.0",
    extra={"nc_count": "2", "numa_node": "-1", "neuroncore_ids": "0,1"},
)
TRN2_DEVICE_0 = DeviceFacts(
    index=0,
    memory_mib=98304,
    pci_bus_id="0000:cc:00.0",
    extra={
        "nc_count": "4",
        "logical_neuroncore_config": "2",
        "numa_node": "1",
        "neuroncore_ids": "0,1,2,3",
        "connected_to": "12,3,4,1",
    },
)
TRN2_DEVICE_15 = DeviceFacts(
    index=15,
    memory_mib=98304,
    pci_bus_id="0000:f7:00.0",
    extra={
        "nc_count": "4",
        "logical_neuroncore_config": "2",
        "numa_node": "1",
        "neuroncore_ids": "60,61,62,63",
        "connected_to": "11,14,3,12",
    },
)


# ---- neuron-ls --json-output ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [(INLINE_TRN1, (TRN1_DEVICE,)), (INLINE_TRN2, (TRN2_DEVICE_0,)), ("[]", ())],
    ids=["trn1.2xlarge", "trn2n.48xlarge-device-0", "no-devices"],
)
def test_neuron_ls_json_inline(text: str, expected: tuple[DeviceFacts, ...]) -> None:
    assert neuron.parse_neuron_ls_json(text) == expected


def test_neuron_ls_json_trn1_capture() -> None:
    assert neuron.parse_neuron_ls_json(capture(LS_JSON_TRN1)) == (TRN1_DEVICE,)


def test_neuron_ls_json_trn2_doc_example_is_elided() -> None:
    """The docs print `...` between device 0 and 15: not JSON as shown, and read once the elision is dropped."""
    text = capture(LS_JSON_TRN2_DOC)
    with pytest.raises(ParseError, match=r"^neuron-ls --json-output: malformed JSON at line 31, column 3 "):
        neuron.parse_neuron_ls_json(text)
    elided = "\n".join(line for line in text.splitlines() if line.strip() != "...")
    assert neuron.parse_neuron_ls_json(elided) == (TRN2_DEVICE_0, TRN2_DEVICE_15)


@pytest.mark.parametrize("name", LS_TABLES)
def test_neuron_ls_tables_are_not_json(name: str) -> None:
    with pytest.raises(ParseError, match=r"^neuron-ls --json-output: "):
        neuron.parse_neuron_ls_json(capture(name))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "neuron-ls --json-output: expected JSON output, found empty output"),
        ("{}", "neuron-ls --json-output: expected a list of Neuron device objects, found an object"),
        ("[null]", "neuron-ls --json-output: expected an object for device entry 0, found null"),
        (
            '[{"bdf": "cc:00.0"}]',
            "neuron-ls --json-output: device entry 0: expected a 'neuron_device' number, found the keys: bdf",
        ),
        (
            '[{"neuron_device": 0, "nc_count": "four"}]',
            "neuron-ls --json-output: device entry 0: 'nc_count': expected a whole number, found 'four'",
        ),
        (
            '[{"neuron_device": 0, "connected_to": 3}]',
            "neuron-ls --json-output: device entry 0: 'connected_to': expected a list of numbers or null, found '3'",
        ),
        (
            '[{"neuron_device": 0, "memory_size": -1}]',
            "neuron-ls --json-output: device entry 0: 'memory_size': expected a whole number, found '-1'",
        ),
        ("[\n  {\n", "neuron-ls --json-output: the output ends inside the JSON document (truncated), found '[ {'"),
    ],
)
def test_neuron_ls_json_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=f"^{re.escape(message)}$"):
        neuron.parse_neuron_ls_json(text)


# ---- /sys/module/neuron/version --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [("2.26.5.0\n", "2.26.5.0"), ("2.19.64.0", "2.19.64.0")])
def test_module_version(text: str, expected: str) -> None:
    assert neuron.parse_module_version(text) == expected


@pytest.mark.parametrize("text", ["", "\n", "neuron", "2", "2.26.5.0 extra"])
def test_module_version_garbage(text: str) -> None:
    with pytest.raises(ParseError, match=r"^/sys/module/neuron/version: expected a version such as '2\.26\.5\.0'"):
        neuron.parse_module_version(text)


# ---- never anything but ParseError ---------------------------------------------------------------------------------

PARSERS: dict[str, Callable[[str], object]] = {
    "neuron-ls-json": neuron.parse_neuron_ls_json,
    "module-version": neuron.parse_module_version,
}
JSON_KEYS = st.sampled_from(
    ["neuron_device", "bdf", "numa_node", "connected_to", "nc_count", "logical_neuroncore_config", "memory_size",
     "neuroncore_ids", "neuron_processes", "cpu_affinity"]
)  # fmt: skip
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(JSON_KEYS | st.text(max_size=6), children, max_size=6)
    ),
    max_leaves=40,
)


@pytest.mark.parametrize("parser", PARSERS.values(), ids=PARSERS.keys())
@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_random_text_gives_facts_or_parse_error(parser: Callable[[str], object], text: str) -> None:
    assert outcome(parser, text)


@settings(max_examples=200, deadline=None)
@given(value=JSON_VALUES)
def test_random_json_gives_facts_or_parse_error(value: object) -> None:
    assert outcome(neuron.parse_neuron_ls_json, json.dumps(value))


@pytest.mark.parametrize(
    ("parser", "name"),
    [
        (neuron.parse_neuron_ls_json, LS_JSON_TRN1),
        (neuron.parse_neuron_ls_json, LS_JSON_TRN2_DOC),
        (neuron.parse_neuron_ls_json, LS_TABLES[0]),
        (neuron.parse_module_version, LS_JSON_TRN1),
    ],
)
def test_truncated_captures_give_facts_or_parse_error(parser: Callable[[str], object], name: str) -> None:
    text = capture(name)

    @settings(max_examples=200, deadline=None)
    @given(cut=st.integers(min_value=0, max_value=len(text)))
    def check(cut: int) -> None:
        assert outcome(parser, text[:cut])

    check()


@pytest.mark.parametrize("text", [INLINE_TRN1, INLINE_TRN2])
def test_truncated_inline_captures_give_facts_or_parse_error(text: str) -> None:
    for cut in range(len(text) + 1):
        assert outcome(neuron.parse_neuron_ls_json, text[:cut])
