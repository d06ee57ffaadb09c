"""Ray Direct Transport as matrix data and in the records: the rule on a family's transports, the check of a
transport's Python stack, transfer figures' names, known upstream defects read back, and the recipe per record."""

from __future__ import annotations

import re
from typing import Any

import pytest
from minimatrix import MINI

from accelenv.check.transports import transport_findings
from accelenv.check.verdict import Status
from accelenv.matrix import validate_text
from accelenv.matrix.transports import TRANSPORTS, usable
from accelenv.results.record import Figure, Record
from accelenv.results.schema import TRANSFER
from accelenv.results.transports import (
    defect_message,
    defect_of,
    figure_name,
    parse_figure_name,
    recipes,
)

NVIDIA_ENV = 'ci_tier = "pr"\n'
AMD_ENV = 'ci_tier = "nightly"\n'


def _rdt_problems(text: str) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in validate_text(text).problems if p.rule == "rdt-transport"]


@pytest.mark.parametrize("declared", ['["NCCL"]', '["CUDA_IPC", "NIXL"]', '["NCCL", "NIXL", "CUDA_IPC"]'])
def test_an_nvidia_environment_may_declare_the_cuda_transports(declared: str) -> None:
    text = MINI.replace(NVIDIA_ENV, f"{NVIDIA_ENV}transports = {declared}\n", 1)
    assert _rdt_problems(text) == []
    assert validate_text(text).problems == validate_text(MINI).problems


def test_gloo_moves_cpu_tensors_only_and_the_rule_says_which_fit() -> None:
    text = MINI.replace(NVIDIA_ENV, f'{NVIDIA_ENV}transports = ["NCCL", "GLOO"]\n', 1)
    ((path, message),) = _rdt_problems(text)
    assert path == "envs.gpu-nvidia-cu132.transports[1]"
    assert message.startswith("GLOO moves cpu tensors only, and a nvidia environment's tensors are on torch device")
    assert message.endswith("declare one of CUDA_IPC, NCCL, NIXL")


def test_an_unknown_transport_is_refused_by_the_schema() -> None:
    text = MINI.replace(NVIDIA_ENV, f'{NVIDIA_ENV}transports = ["RDMA"]\n', 1)
    assert any("transports" in p.path for p in validate_text(text).problems)


@pytest.mark.parametrize(
    ("family", "transport", "ok"),
    [
        ("cpu", "GLOO", True),
        ("cpu", "NIXL", True),
        ("cpu", "NCCL", False),
        ("nvidia", "CUDA_IPC", True),
        ("nvidia", "GLOO", False),
        ("tpu", "NIXL", False),
        ("gaudi", "NCCL", False),
        ("neuron", "GLOO", False),
    ],
)
def test_usable_follows_rays_registration(family: str, transport: str, ok: bool) -> None:
    assert usable(family, transport) is ok


def test_every_transport_needs_torch() -> None:
    assert all(("torch",) in t.packages for t in TRANSPORTS.values())


class _Env:
    id = "gpu-nvidia-cu132"
    transports = ("NCCL", "CUDA_IPC")


class _Python:
    def __init__(self, distributions: dict[str, list[str]]) -> None:
        self.distributions = distributions


class _Report:
    def __init__(self, distributions: dict[str, list[str]]) -> None:
        self.python = _Python(distributions)


def test_check_names_the_missing_package_of_a_transport() -> None:
    found = list(transport_findings(_Env(), _Report({"torch": ["2.15.0"]})))  # type: ignore[arg-type]
    nccl, ipc = found
    assert (nccl.id, nccl.status) == ("rdt.nccl", Status.WARN)
    assert nccl.found == "missing: cupy-cuda12x or cupy-cuda13x or cupy"
    assert "envs/gpu-nvidia-cu132/requirements.lock" in nccl.fix
    assert (ipc.id, ipc.status, ipc.found) == ("rdt.cuda_ipc", Status.PASS, "torch 2.15.0")


def test_without_torch_the_transport_is_not_judged_and_says_so() -> None:
    (finding,) = transport_findings(_Cpu(), _Report({"ray": ["2.60.0"]}))  # type: ignore[arg-type]
    assert (finding.id, finding.status, finding.found) == ("rdt.gloo", Status.SKIP, "torch not installed")
    assert "envs/cpu-py311/requirements.lock" in finding.fix


class _Cpu:
    id = "cpu-py311"
    transports = ("GLOO",)


def test_check_passes_a_transport_whose_packages_are_there() -> None:
    report = _Report({"torch": ["2.15.0"], "cupy-cuda13x": ["14.0.0"]})
    assert [f.status for f in transport_findings(_Env(), report)] == [Status.PASS, Status.PASS]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("transport", "scope", "size"), [("GLOO", "node", 4 << 20), ("object_store", "cluster", 1 << 28)]
)
def test_figure_names_round_trip_and_match_the_schema(transport: str, scope: str, size: int) -> None:
    name = figure_name(transport, scope, size)
    assert re.fullmatch(TRANSFER.strip("^$"), name)
    assert parse_figure_name(name) == (transport.lower(), scope, size)


@pytest.mark.parametrize(("scope", "size"), [("rack", 1 << 20), ("node", 1000), ("node", 0)])
def test_a_figure_name_refuses_what_it_cannot_say(scope: str, size: int) -> None:
    with pytest.raises(ValueError, match=r"scope|whole number of MiB"):
        figure_name("GLOO", scope, size)


def test_a_known_defect_is_one_line_and_reads_back() -> None:
    line = defect_message("ray-project/ray#66264", "a receiver\n  not enabled hangs")
    assert line == "known upstream defect: ray-project/ray#66264: a receiver not enabled hangs"
    assert defect_of("Failed: " + line) == ("ray-project/ray#66264", "a receiver not enabled hangs")
    unfiled = defect_message("ray-project/ray (not filed)", "stale group")
    assert defect_of(unfiled) == ("ray-project/ray (not filed)", "stale group")
    assert defect_of("AssertionError: 1 == 2") is None
    assert defect_of(None) is None
    with pytest.raises(ValueError, match="neither"):
        defect_message("see the chat", "x")


def test_a_failure_that_names_its_defect_gives_the_record_its_defect() -> None:
    """The plugin turns the failure line into the record's `defect` (issue link for a filed one), so `results` and
    the page show it as any marked test's; a failure that names none has none."""
    from accelenv.results.plugin import _named_defect

    filed = (
        f"tests/devices/test_conformance_rdt.py:40: in test\nFailed: {defect_message('ray-project/ray#66264', 'hang')}"
    )
    assert _named_defect(filed) == {
        "url": "https://github.com/ray-project/ray/issues/66264",
        "description": "ray-project/ray#66264: hang",
    }
    unfiled = defect_message("ray-project/ray (not filed)", "stale default process group")
    assert _named_defect("E " + unfiled) == {
        "url": None,
        "description": "ray-project/ray (not filed): stale default process group",
    }
    assert _named_defect("AssertionError: known upstream defect in words only") is None
    assert _named_defect("") is None


def _figure(name: str, value: float) -> Figure:
    return Figure(
        name=name,
        value=value,
        unit="GB/s",
        dtype="fp32",
        devices=2,
        samples=3,
        peak=None,
        fraction=None,
        min_fraction=None,
        warning=None,
    )


def _record(rid: str, finished: int, tests: list[dict[str, Any]], perf: tuple[Figure, ...]) -> Record:
    return Record(
        path=f"{rid}.result.json",
        id=rid,
        env="cpu-py311",
        lock_sha256=None,
        family="cpu",
        sku="cpu-x86-64",
        device_count=0,
        driver=None,
        nodes=2,
        verdict="pass",
        outcome="failed",
        runner=None,
        note=None,
        tests=(),
        started=finished - 60,
        finished=finished,
        run_url=None,
        perf=perf,
        frameworks_differ=(),
        data={"tests": tests},
    )


def test_the_recipe_is_the_newest_rdt_record_with_ratios_recomputed() -> None:
    rdt = "tests/devices/test_conformance_rdt.py::"
    defect = defect_message("ray-project/ray#66264", "hangs")
    tests: list[dict[str, Any]] = [
        {"id": rdt + "test_rdt_tensors_arrive_bit_identical[node]", "outcome": "passed", "reason": None},
        {"id": rdt + "test_rdt_receiver_not_enabled_is_named_within_a_bound", "outcome": "failed", "reason": defect},
        {
            "id": rdt + "test_rdt_groups_created_and_destroyed_leave_nothing_behind",
            "outcome": "failed",
            "reason": "AssertionError: sockets",
        },
        {"id": "tests/devices/test_cpu_devices.py::test_ray", "outcome": "passed", "reason": None},
    ]
    perf = (
        _figure("transfer.gloo.cluster.64mib", 2.0),
        _figure("transfer.object_store.cluster.64mib", 0.5),
        _figure("transfer.gloo.node.4mib", 1.0),
        _figure("matmul", 9.0),
    )
    old = _record("cpu-py311-20261201T000000Z-00000000", 1000, tests, ())
    new = _record("cpu-py311-20261202T000000Z-00000000", 2000, tests, perf)
    other = _record("cpu-py311-20261203T000000Z-00000000", 3000, tests[-1:], ())  # no RDT test: no recipe
    (recipe,) = recipes([new, old, other], {("cpu-x86-64", "cluster"): 8.0})
    assert recipe.record == new.id
    assert recipe.passed == ("test_rdt_tensors_arrive_bit_identical[node]",)
    assert recipe.failed == ("test_rdt_groups_created_and_destroyed_leave_nothing_behind",)
    assert [(d.test, d.reference) for d in recipe.defects] == [
        ("test_rdt_receiver_not_enabled_is_named_within_a_bound", "ray-project/ray#66264")
    ]
    cluster, node = recipe.transfers
    assert (cluster.transport, cluster.scope, cluster.size_bytes) == ("GLOO", "cluster", 64 << 20)
    assert (cluster.vs_object_store, cluster.fraction_of_peak) == (4.0, 0.25)
    assert (node.object_store_gb_s, node.vs_object_store, node.peak_gb_s) == (None, None, None)


def test_the_interconnect_peak_is_half_the_datasheets_both_ways_figure() -> None:
    from pathlib import Path

    from accelenv.matrix import load_matrix
    from accelenv.results.transports import interconnect_peaks

    peaks = interconnect_peaks(load_matrix(Path(__file__).resolve().parents[2] / "matrix.toml"))
    assert peaks[("h200", "node")] == 450
    assert ("cpu-x86-64", "node") not in peaks


def test_an_environment_says_why_it_has_no_transport_or_declares_some_not_both() -> None:
    reason = 'no_transports = "not proven"\n'
    assert _rdt_problems(MINI.replace(AMD_ENV, AMD_ENV + reason, 1)) == []
    both = MINI.replace(NVIDIA_ENV, f'{NVIDIA_ENV}transports = ["NCCL"]\n{reason}', 1)
    assert _rdt_problems(both) == [
        ("envs.gpu-nvidia-cu132.no_transports", "declares transports and says why it has none: keep one of them")
    ]


def test_every_shipped_environment_declares_transports_or_says_why_not() -> None:
    from pathlib import Path

    from accelenv.matrix import load_matrix

    matrix = load_matrix(Path(__file__).resolve().parents[2] / "matrix.toml")
    assert [e.id for e in matrix.envs.values() if not e.transports and not e.no_transports] == []


def test_the_page_shows_each_recipe_with_its_declared_stack_figures_and_named_defects() -> None:
    """The Transports section is the recipe as data: what the environment declares and needs, what the newest RDT
    record reached beside the object store, and each failure with its defect linked; a record's text is escaped."""
    from pathlib import Path

    from accelenv.matrix import load_matrix
    from accelenv.plan.recipes import html_section

    matrix = load_matrix(Path(__file__).resolve().parents[2] / "matrix.toml")
    rdt = "tests/devices/test_conformance_rdt.py::"
    tests: list[dict[str, Any]] = [
        {"id": rdt + "test_rdt_tensors_arrive_bit_identical[node]", "outcome": "passed", "reason": None},
        {
            "id": rdt + "test_rdt_receiver_not_enabled_is_named_within_a_bound",
            "outcome": "failed",
            "reason": defect_message("ray-project/ray#66264", "<script>hang</script>"),
        },
    ]
    perf = (_figure("transfer.gloo.cluster.64mib", 2.0), _figure("transfer.object_store.cluster.64mib", 0.5))
    page = "\n".join(html_section(matrix, [_record("cpu-py311-20261202T000000Z-00000000", 2000, tests, perf)]))
    assert "<code>cpu-py311</code> on" in page
    assert "transports declared: GLOO" in page
    assert "RDT tests passed: 1, failed: 1" in page
    assert "<td>GLOO</td><td>cluster</td><td>64 MiB</td><td>2 GB/s</td><td>4.0x</td>" in page
    assert 'href="https://github.com/ray-project/ray/issues/66264"' in page
    assert "<script>" not in page
    assert html_section(matrix, [_record("cpu-py311-20261203T000000Z-00000000", 3000, tests[:0], ())]) == []
