"""Classes of command-line behaviour (issue 39): the exit status is the verdict's whatever the pipe does, every
subcommand answers a bad flag with its own usage, and a cell cut to fit says so."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference import REFERENCE_MATRIX

from accelenv.cli import COMMANDS, build_parser, main
from accelenv.cli.host import ray_rows
from accelenv.cluster.ray import NodeResult
from accelenv.excerpts import MARK, clip
from accelenv.host.report import Accelerator, Container, Device, HostReport, Limits, OsInfo, PythonInfo
from accelenv.host.snapshot import save_snapshot

REPO = Path(__file__).resolve().parents[2]
SHIPPED = str(REPO / "matrix.toml")


class ClosedPipe(io.StringIO):
    """Standard output whose reader goes away after `keep` characters (`| head -c N`; 0 is `| true`)."""

    def __init__(self, keep: int) -> None:
        super().__init__()
        self.keep = keep

    def write(self, text: str) -> int:
        if self.tell() + len(text) > self.keep:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(text)

    def flush(self) -> None:
        if self.tell() >= self.keep:
            raise BrokenPipeError(32, "Broken pipe")


@pytest.fixture(scope="module")
def failing_snapshot(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two H100s whose driver is far below every CUDA runtime's floor: `check gpu-nvidia-cu132` fails."""
    devices = tuple(
        Device(
            index=i,
            name=None,
            arch="sm_90",
            memory_mib=None,
            pci_bus_id=None,
            pci_device_id="0x2330",
            uuid=None,
            sku="h100-sxm",
        )
        for i in range(2)
    )
    report = HostReport(
        root="/",
        os=OsInfo(id="debian", version_id="12", pretty_name=None, kernel=None, glibc=None, arch="x86_64"),
        python=PythonInfo(version="3.11.2", implementation="CPython", executable="python3", distributions={}),
        accelerators=(
            Accelerator(
                family="nvidia",
                driver_version="470.42.01",
                runtime_version=None,
                devices=devices,
                source="nvidia-smi",
                errors=(),
            ),
        ),
        environment={},
        limits=Limits(shm_bytes=None, memlock_bytes=None, memlock_unlimited=True),
        container=Container(inside_container=False, docker_socket=False, nvidia_container_toolkit=False, cdi_specs=()),
    )
    path = tmp_path_factory.mktemp("pipe") / "node.json"
    save_snapshot(report, path)
    return str(path)


def command_lines(snapshot: str) -> list[list[str]]:
    """Commands that print and end with a verdict: failing ones and passing ones."""
    return [
        ["--matrix", SHIPPED, "check", "gpu-nvidia-cu132", "--snapshot", snapshot],
        ["--matrix", SHIPPED, "check", "gpu-nvidia-cu132", "--snapshot", snapshot, "--json"],
        ["--matrix", SHIPPED, "check", "gpu-nvidia-cu132", "--snapshot", snapshot, "--host-only"],
        ["--matrix", SHIPPED, "which", "--snapshot", snapshot],
        ["--matrix", SHIPPED, "labels", "--snapshot", snapshot, "--env", "gpu-nvidia-cu132"],
        ["--matrix", str(REFERENCE_MATRIX), "validate", "--strict"],
        ["--matrix", str(REFERENCE_MATRIX), "validate", "--strict", "--json"],
        ["--matrix", SHIPPED, "validate"],
        ["--matrix", SHIPPED, "list"],
        ["--matrix", SHIPPED, "show", "gpu-nvidia-cu132"],
        ["--matrix", SHIPPED, "show", "no-such-env"],
    ]


@pytest.mark.parametrize("keep", [0, 1, 40])
def test_the_exit_status_is_the_verdicts_whatever_the_pipe_does(failing_snapshot: str, keep: int) -> None:
    statuses = []
    for argv in command_lines(failing_snapshot):
        whole = io.StringIO()
        expected = main(argv, out=whole)
        assert main(argv, out=ClosedPipe(keep)) == expected, (argv, keep)
        statuses.append(expected)
    assert statuses[0] == 1
    assert statuses[5] == 1
    assert 0 in statuses


def _minimal_words(name: str) -> list[str]:
    """The command `name` with a value for each argument it requires (positional, or a required option), a choice
    where it has choices."""
    parser = build_parser(name)
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    words = [name]
    for action in sub.choices[name]._actions:
        if action.nargs in ("?", "*", argparse.REMAINDER) or (action.option_strings and not action.required):
            continue
        value = str(next(iter(action.choices))) if action.choices else "x"
        words += action.option_strings[:1] + [value] * (action.nargs if isinstance(action.nargs, int) else 1)
    return words


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_bad_flag_gets_the_subcommands_usage(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--matrix", SHIPPED, *_minimal_words(name), "--no-such-flag"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: accelenv {name} "), err
    assert f"accelenv {name}: error: unrecognized arguments: --no-such-flag" in err


@given(st.text(alphabet="ab .,-", max_size=60), st.integers(min_value=1, max_value=40))
def test_clip_keeps_whole_words_or_says_it_cut(text: str, limit: int) -> None:
    shown = clip(text, limit)
    assert len(shown) <= limit
    if shown == text:
        return
    assert shown.endswith(MARK)
    kept = shown.removesuffix(MARK).rstrip()
    assert text.startswith(kept)
    if " " in text[1:limit]:  # a word boundary within reach: the cut is there, no word is split
        assert text[len(kept) :].startswith(" ")


def test_the_ray_table_marks_what_it_cut() -> None:
    failing = [f"requirements.package-{i} heartbeat timed out" for i in range(6)]
    node = NodeResult(node_id="f" * 56, address="127.0.0.1", reachable=True, verdict="fail", failing=failing)
    (row,) = ray_rows([node])
    assert row[0] == "f" * 12 + MARK
    assert row[-1].endswith(MARK)
    assert len(row[-1]) <= 100
    assert ", ".join(failing).startswith(row[-1].removesuffix(MARK).rstrip())
    assert row[-1].removesuffix(MARK).rstrip().split(" ")[-1] in ", ".join(failing).split(" ")


@pytest.mark.parametrize("matrix", [SHIPPED, str(REFERENCE_MATRIX)])
def test_validates_counts_match_what_they_list(matrix: str) -> None:
    """The summary's registry-warning count is the sum of the grouped lines' counts, and each line's count is the
    subjects it names plus its `and N more`."""
    import re

    out = io.StringIO()
    main(["--matrix", matrix, "validate"], out=out)
    text = out.getvalue()
    said = re.search(r"(\d+) of them need registry access", text)
    assert said is not None, text
    lines = [line for line in text.splitlines() if line.startswith("warning (registry): ")]
    total = 0
    for line in lines:
        match = re.fullmatch(r"warning \(registry\): (\d+) [^:]+: (.+?)(?: and (\d+) more)?; fix: .+", line)
        assert match is not None, line
        count, names, more = int(match.group(1)), match.group(2).split(", "), int(match.group(3) or 0)
        assert count == len(names) + more, line
        total += count
    assert total == int(said.group(1)), text
