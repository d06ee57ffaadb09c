"""Gaudi parsers against real captures (../shared/fixtures, see its SOURCES.md) and small inline ones."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from hostkit import capture, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from accelenv.host.facts import DeviceFacts, ParseError
from accelenv.host.probes import gaudi

if TYPE_CHECKING:
    from collections.abc import Callable


CSV_GAUDI3 = "hl-smi-Q-csv-noheader__all-smi-unittest__2x-HL-325L-Gaudi3__1.22.1.txt"
# The query all-smi ran for that capture (src/device/hlsmi/config.rs); power.max is not in Habana's documented list.
CSV_GAUDI3_FIELDS = (
    "index", "uuid", "name", "driver_version", "memory.total", "memory.used", "memory.free", "power.draw",
    "power.max", "temperature.aip", "utilization.aip",
)  # fmt: skip
TABLE_GAUDI2_1_12 = "hl-smi__unnamed-repo-gaudi2poc1-notes__8x-HL-225-Gaudi2__1.12.1.txt"
TABLE_GAUDI2_1_17 = "hl-smi__intel-openshift-docs__2x-HL-225-Gaudi2__1.17.1.txt"
TABLE_GAUDI2_1_22 = "hl-smi__ray-docs__8x-HL-225-Gaudi2__1.22.1.txt"
TABLE_GAUDI2E_1_23 = "hl-smi__unnamed-repo-gaudi2e-cn-guide__8x-HL-288E__1.23.0.txt"
LOG_GAUDI2_1_12 = "hl-smi-L-i__unnamed-repo-gaudi2poc1-notes__HL-225-Gaudi2__1.12.1.txt"

# Inline captures in the real formats. The CSV uses HL_QUERY_FIELDS with figures from the 1.22.1 captures (Ray
# docs table: HL-225 at 0000:33:00.0 and 0000:9a:00.0, 98304 MiB; all-smi: driver 1.22.1-97ec1a4). The uuids
# follow the AIP UUID format of the 1.12.1 log (01P0-HL2080A0-15-TF8A81-09-07-06), digits changed per device.
INLINE_CSV = """\
0, HL-225, 0000:33:00.0, 1.22.1-97ec1a4, 98304 MiB, 01P0-HL2080A0-15-TF8A81-09-07-06
1, HL-225, 0000:9a:00.0, 1.22.1-97ec1a4, 98304 MiB, 01P0-HL2080A0-15-TF8A81-09-07-07
"""
INLINE_TABLE = """\
+-----------------------------------------------------------------------------+
| HL-SMI Version:                              hl-1.22.1-fw-61.4.2.1          |
| Driver Version:                                     1.22.1-97ec1a4          |
| Nic Driver Version:                                 1.22.1-97ec1a4          |
|-------------------------------+----------------------+----------------------+
| AIP  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncor-Events|
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | AIP-Util  Compute M. |
|===============================+======================+======================|
|   0  HL-225              N/A  | 0000:33:00.0     N/A |                   2  |
| N/A   22C   P0   88W /  600W  |   768MiB /  98304MiB |     0%            0% |
|-------------------------------+----------------------+----------------------+
"""


def gaudi2(index: int, bus_id: str, uuid: str) -> DeviceFacts:
    return DeviceFacts(
        index=index,
        name="HL-225",
        arch="gaudi2",
        memory_mib=98304,
        pci_bus_id=bus_id,
        uuid=uuid,
        extra={"driver_version": "1.22.1-97ec1a4"},
    )


def test_hl_smi_args_query_documented_fields() -> None:
    assert gaudi.hl_smi_args() == ["-Q", "index,name,bus_id,driver_version,memory.total,uuid", "-f", "csv,noheader"]


# ---- hl-smi -Q ... -f csv,noheader -------------------------------------------------------------------------------


def test_hl_smi_csv_inline() -> None:
    assert gaudi.parse_hl_smi_csv(INLINE_CSV) == (
        gaudi2(0, "0000:33:00.0", "01P0-HL2080A0-15-TF8A81-09-07-06"),
        gaudi2(1, "0000:9a:00.0", "01P0-HL2080A0-15-TF8A81-09-07-07"),
    )


def test_hl_smi_csv_gaudi3_capture() -> None:
    devices = gaudi.parse_hl_smi_csv(capture(CSV_GAUDI3), CSV_GAUDI3_FIELDS)
    assert devices == tuple(
        DeviceFacts(
            index=index,
            name="HL-325L",
            arch="gaudi3",
            memory_mib=131072,
            uuid=uuid,
            extra={"driver_version": "1.22.1-97ec1a4"},
        )
        for index, uuid in enumerate(["01P4-HL3090A0-18-U4V193-22-07-00", "01P4-HL3090A0-18-U4V298-03-04-04"])
    )


def test_hl_smi_csv_with_header_and_without_index() -> None:
    text = "name, bus_id, memory.total\nHL-288E, 0000:2A:00.0, N/A\nHL-205, N/A, 32 GiB\n"
    assert gaudi.parse_hl_smi_csv(text, ("name", "bus_id", "memory.total")) == (
        DeviceFacts(index=0, name="HL-288E", arch="gaudi2", pci_bus_id="0000:2a:00.0"),
        DeviceFacts(index=1, name="HL-205", memory_mib=32768),
    )


@pytest.mark.parametrize(
    ("model", "arch"),
    [
        ("HL-225", "gaudi2"),
        ("HL-225B", "gaudi2"),
        ("HL-288E", "gaudi2"),
        ("HL-325L", "gaudi3"),
        ("HL-328", "gaudi3"),
        ("HL-338", "gaudi3"),
        ("HL-388", "gaudi3"),
        ("hl-325l", "gaudi3"),
        ("HL-205", None),
        ("N/A", None),
        (None, None),
    ],
)
def test_arch_from_model(model: str | None, arch: str | None) -> None:
    assert gaudi.arch_from_model(model) == arch


CSV_WHAT = "hl-smi -Q index,name,bus_id,driver_version,memory.total,uuid -f csv,noheader"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", f"{CSV_WHAT}: expected one line per device, found empty output"),
        (
            "0, HL-225, 0000:33:00.0",
            f"{CSV_WHAT}: expected 6 comma-separated values on line 1, found 3: '0, HL-225, 0000:33:00.0'",
        ),
        ("x, HL-225, 0000:33:00.0, 1.22.1, 98304 MiB, u", f"{CSV_WHAT}: line 1: expected a device index, found 'x'"),
        (
            "0, HL-225, 33, 1.22.1, 98304 MiB, u",
            f"{CSV_WHAT}: line 1: expected a PCI address such as 0000:43:00.0 for bus_id, found '33'",
        ),
        (
            "0, HL-225, N/A, 1.22.1, lots, u",
            f"{CSV_WHAT}: line 1: expected memory.total such as '131072 MiB', found 'lots'",
        ),
    ],
)
def test_hl_smi_csv_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=f"^{re.escape(message)}$"):
        gaudi.parse_hl_smi_csv(text)


def test_hl_smi_csv_table_output_is_an_error() -> None:
    with pytest.raises(ParseError, match=r"expected 6 comma-separated values on line 1, found 1: '\+---"):
        gaudi.parse_hl_smi_csv(capture(TABLE_GAUDI2_1_22))


# ---- plain hl-smi ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "driver", "software"),
    [
        (TABLE_GAUDI2_1_12, "1.12.1-cb7a7bc", "1.12.1"),
        (TABLE_GAUDI2_1_17, "1.17.1-78932ae", "1.17.1"),
        (TABLE_GAUDI2_1_22, "1.22.1-97ec1a4", "1.22.1"),
        (TABLE_GAUDI2E_1_23, "1.23.0-2eae87a", "1.23.0"),
        (LOG_GAUDI2_1_12, "1.12.1-cb7a7bc", "1.12.1"),
    ],
)
def test_hl_smi_table_captures(name: str, driver: str, software: str) -> None:
    assert gaudi.parse_hl_smi_table(capture(name)) == (driver, software)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (INLINE_TABLE, ("1.22.1-97ec1a4", "1.22.1")),
        ("| Nic Driver Version:   1.22.1-97ec1a4 |\n| HL-SMI Version:  hl-1.22.1-fw-61.4.2.1 |", (None, "1.22.1")),
        ("| Driver Version:                                     1.17.1-78932ae          |", ("1.17.1-78932ae", None)),
    ],
    ids=["table", "nic-driver-is-not-the-driver", "driver-only"],
)
def test_hl_smi_table_inline(text: str, expected: tuple[str | None, str | None]) -> None:
    assert gaudi.parse_hl_smi_table(text) == expected


@pytest.mark.parametrize("text", ["", "hl-smi: command not found", "HL-SMI Version: unknown"])
def test_hl_smi_table_errors(text: str) -> None:
    with pytest.raises(ParseError, match=r"^hl-smi: expected 'HL-SMI Version: hl-<version>-fw-<firmware>' and "):
        gaudi.parse_hl_smi_table(text)


# ---- never anything but ParseError ---------------------------------------------------------------------------------

PARSERS: dict[str, Callable[[str], object]] = {
    "hl-smi-csv": gaudi.parse_hl_smi_csv,
    "hl-smi-table": gaudi.parse_hl_smi_table,
}
CELLS = st.sampled_from(["0", "7", "HL-225", "HL-325L", "0000:33:00.0", "N/A", "98304 MiB", "1 GB", "", "-1", "x"])
CSV_ROWS = st.lists(st.lists(CELLS | st.text(max_size=8), min_size=6, max_size=6), max_size=4)


@pytest.mark.parametrize("parser", PARSERS.values(), ids=PARSERS.keys())
@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_random_text_gives_facts_or_parse_error(parser: Callable[[str], object], text: str) -> None:
    assert outcome(parser, text)


@settings(max_examples=200, deadline=None)
@given(rows=CSV_ROWS)
def test_random_csv_rows_give_facts_or_parse_error(rows: list[list[str]]) -> None:
    assert outcome(gaudi.parse_hl_smi_csv, "\n".join(", ".join(row) for row in rows))


@pytest.mark.parametrize(
    ("parser", "name"),
    [
        (gaudi.parse_hl_smi_csv, CSV_GAUDI3),
        (gaudi.parse_hl_smi_table, TABLE_GAUDI2_1_22),
        (gaudi.parse_hl_smi_table, LOG_GAUDI2_1_12),
        (gaudi.parse_hl_smi_csv, TABLE_GAUDI2E_1_23),
    ],
)
def test_truncated_captures_give_facts_or_parse_error(parser: Callable[[str], object], name: str) -> None:
    text = capture(name)

    @settings(max_examples=200, deadline=None)
    @given(cut=st.integers(min_value=0, max_value=len(text)))
    def check(cut: int) -> None:
        assert outcome(parser, text[:cut])

    check()


@pytest.mark.parametrize(
    ("parser", "text"), [(gaudi.parse_hl_smi_csv, INLINE_CSV), (gaudi.parse_hl_smi_table, INLINE_TABLE)]
)
def test_truncated_inline_captures_give_facts_or_parse_error(parser: Callable[[str], object], text: str) -> None:
    for cut in range(len(text) + 1):
        assert outcome(parser, text[:cut])
