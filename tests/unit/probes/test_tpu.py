"""TPU lookups and the tpu-info parser against real captures (../shared/fixtures, see its SOURCES.md)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest
from hostkit import capture, make_root, outcome
from hypothesis import given, settings
from hypothesis import strategies as st

from accelenv.host.facts import ParseError
from accelenv.host.probes import ProbeContext, tpu
from accelenv.host.root import Root
from accelenv.host.run import ToolResult

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


VERSION_V6E = "tpu-info--version__cloud-accelerator-diagnostics-README__v6e.txt"
STATIC_V6E = "tpu-info__cloud-accelerator-diagnostics-README__v6e-4chips.txt"
PROCESS_8CHIPS = "tpu-info--process__cloud-accelerator-diagnostics-README__8chips.txt"

# Inline capture in the `tpu-info --version` format, with the figures of the README example.
INLINE_VERSION = """\
- tpu-info version: 0.8.0
- libtpu version: 0.0.18
- accelerator type: v6e
"""
# `tpu-info --version` under Python 3.12+ with a libtpu of 0.0.20 or older: the README's "Incompatible Environment
# (Python 3.12+)" example, AI-Hypercomputer/cloud-accelerator-diagnostics tpu_info/README.md @ fe85c12527bd (the
# lines tpu_info/cli.py prints when cli_helper.is_incompatible_python_version() holds).
INCOMPATIBLE_VERSION = """\
- tpu-info version: 0.8.0
- libtpu version: N/A (incompatible environment)
- accelerator type: N/A (incompatible environment)
"""


# ---- generations -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("device_id", "generation"),
    [("0x005e", "v4"), ("0x0062", "v5p"), ("0x0063", "v5e"), ("0x006f", "v6e"), ("0x0076", "tpu7x"), ("0x0027", None)],
)
def test_pci_device_ids_follow_tpu_info(device_id: str, generation: str | None) -> None:
    assert tpu.TPU_PCI_DEVICE_IDS[device_id] == generation
    assert tpu.generation_from_pci_ids(device_id) == generation


@pytest.mark.parametrize(
    ("device_id", "subsystem_id", "generation"),
    [
        ("0x0027", "0x004e", "v2"),
        ("0x0027", "0x004F", "v3"),
        ("0x0027", "0x0050", None),
        ("0x6F", None, "v6e"),
        ("006f", "0x004e", "v6e"),
        ("0x10de", None, None),
        ("not an id", None, None),
    ],
)
def test_generation_from_pci_ids(device_id: str, subsystem_id: str | None, generation: str | None) -> None:
    assert tpu.generation_from_pci_ids(device_id, subsystem_id) == generation


@pytest.mark.parametrize(
    ("accelerator_type", "generation"),
    [
        ("v5litepod-8", "v5e"),
        ("v5litepod-256", "v5e"),
        ("v5p-8", "v5p"),
        ("v6e-4", "v6e"),
        ("v6e", "v6e"),
        ("tpu7x-8", "tpu7x"),
        ("v4-16", "v4"),
        ("v3-8", "v3"),
        ("v2-8", "v2"),
        (" V6E-8\n", "v6e"),
        ("v9-8", None),
        ("v6e-", None),
        ("tpu-v6e-slice", None),
        ("N/A", None),
        ("", None),
    ],
)
def test_generation_from_accelerator_type(accelerator_type: str, generation: str | None) -> None:
    assert tpu.generation_from_accelerator_type(accelerator_type) == generation


# ---- tpu-info --version --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [(VERSION_V6E, ("0.0.18", "v6e")), (STATIC_V6E, ("0.0.19.dev20250721+nightly", "v6e"))],
)
def test_tpu_info_captures(name: str, expected: tuple[str | None, str | None]) -> None:
    assert tpu.parse_tpu_info_version(capture(name)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (INLINE_VERSION, ("0.0.18", "v6e")),
        ("- tpu-info version: 0.8.0\n- libtpu version: N/A\n- accelerator type: N/A\n", (None, None)),
        ("Libtpu version: 0.0.19.dev20250721+nightly\nAccelerator type: v6e\n", ("0.0.19.dev20250721+nightly", "v6e")),
    ],
    ids=["version", "libtpu-not-loadable", "static-mode-header"],
)
def test_tpu_info_inline(text: str, expected: tuple[str | None, str | None]) -> None:
    assert tpu.parse_tpu_info_version(text) == expected


def test_tpu_info_in_an_incompatible_environment_is_unknown_not_an_error() -> None:
    assert tpu.parse_tpu_info_version(INCOMPATIBLE_VERSION) == (None, None)
    assert tpu.parse_tpu_info_version("- libtpu version: unknown (package metadata not found)\n") == (None, None)


def test_the_probe_reads_libtpu_elsewhere_when_tpu_info_cannot_say(tmp_path: Path) -> None:
    result = ToolResult(
        argv=("tpu-info", "--version"), returncode=0, stdout=INCOMPATIBLE_VERSION, stderr="", seconds=0.1, fault=None
    )
    ctx = ProbeContext(
        root=Root(make_root(tmp_path)), environ={"TPU_ACCELERATOR_TYPE": "v6e-4"}, distributions={"libtpu": ["0.0.17"]}
    )
    view = tpu.TpuProbe().interpret(ctx, {"tpu-info-version": result})
    assert view.errors == ()
    assert (view.runtime_version, view.extra["accelerator_type"], view.extra["generation"]) == (
        "0.0.17",
        "v6e-4",
        "v6e",
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "tpu-info --version: expected 'libtpu version:' and 'accelerator type:' lines, found empty output"),
        (
            "- tpu-info version: 0.8.0",
            (
                "tpu-info --version: expected 'libtpu version:' and 'accelerator type:' lines, "
                "found '- tpu-info version: 0.8.0'"
            ),
        ),
        ("- libtpu version: latest", "tpu-info --version: expected a version after 'libtpu version:', found 'latest'"),
    ],
)
def test_tpu_info_errors(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=f"^{re.escape(message)}$"):
        tpu.parse_tpu_info_version(text)


def test_tpu_info_process_table_is_an_error() -> None:
    with pytest.raises(ParseError, match=r"^tpu-info --version: expected 'libtpu version:'"):
        tpu.parse_tpu_info_version(capture(PROCESS_8CHIPS))


# ---- never anything but ParseError ---------------------------------------------------------------------------------

PARSERS: dict[str, Callable[[str], object]] = {
    "tpu-info-version": tpu.parse_tpu_info_version,
    "accelerator-type": tpu.generation_from_accelerator_type,
    "pci-ids": tpu.generation_from_pci_ids,
}


@pytest.mark.parametrize("parser", PARSERS.values(), ids=PARSERS.keys())
@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_random_text_gives_facts_or_parse_error(parser: Callable[[str], object], text: str) -> None:
    assert outcome(parser, text)


@pytest.mark.parametrize("name", [VERSION_V6E, STATIC_V6E])
def test_truncated_captures_give_facts_or_parse_error(name: str) -> None:
    text = capture(name)

    @settings(max_examples=200, deadline=None)
    @given(cut=st.integers(min_value=0, max_value=len(text)))
    def check(cut: int) -> None:
        assert outcome(tpu.parse_tpu_info_version, text[:cut])

    check()


def test_truncated_inline_capture_gives_facts_or_parse_error() -> None:
    for cut in range(len(INLINE_VERSION) + 1):
        assert outcome(tpu.parse_tpu_info_version, INLINE_VERSION[:cut])
