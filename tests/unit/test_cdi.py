"""CDI specs: the YAML subset reader, the spec summary the probe keeps, and `container.cdi` on real spec files
(tests/unit/data/cdi, see SOURCES.md there): current, generated for another driver, naming a missing library."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from accelenv.check.checks import check
from accelenv.check.container import container_cdi
from accelenv.check.verdict import Finding, Status
from accelenv.host.cdi import CdiSpec, parse, read_specs
from accelenv.host.cdi_yaml import YamlError, loads
from accelenv.host.report import Accelerator, Container, HostReport, Limits, OsInfo, PythonInfo
from accelenv.host.root import Root
from accelenv.host.snapshot import load_snapshot, save_snapshot
from accelenv.matrix import Matrix, load_matrix

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "cdi"
SPEC_575 = DATA / "nvidia-575.64.03.yaml"  # nvidia-ctk output, driver 575.64.03, cdiVersion 0.5.0
SPEC_570 = DATA / "nvidia-570.133.20.yaml"  # nvidia-ctk output on a g4dn.xlarge (T4), driver 570.133.20


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")  # the shipped families: their CDI kinds and generators


# ------------------------------------------------------------------------------------------ the YAML reader


def test_the_reader_reads_real_nvidia_ctk_output() -> None:
    spec = loads(SPEC_575.read_text())
    assert isinstance(spec, dict)
    assert spec["cdiVersion"] == "0.5.0"
    assert spec["kind"] == "nvidia.com/gpu"
    edits = spec["containerEdits"]
    assert isinstance(edits, dict)
    assert isinstance(edits["mounts"], list)
    assert isinstance(edits["hooks"], list)
    assert len(edits["mounts"]) == 48  # grep -c "  - containerPath" in the file
    assert edits["mounts"][0] == {
        "containerPath": "/run/nvidia-persistenced/socket",
        "hostPath": "/run/nvidia-persistenced/socket",
        "options": ["ro", "nosuid", "nodev", "bind", "noexec"],
    }
    assert edits["hooks"][2]["args"] == [  # type: ignore[index,call-overload]
        "nvidia-cdi-hook",
        "enable-cuda-compat",
        "--host-driver-version=575.64.03",
    ]
    devices = spec["devices"]
    assert isinstance(devices, list)
    assert [d["name"] for d in devices] == ["0", "GPU-520e01f2-cf30-6396-abef-e8e9a5233b0e", "all"]  # type: ignore[index,call-overload]
    assert devices[0]["containerEdits"]["hooks"][1]["args"][3] == "755"  # type: ignore[index,call-overload]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a: 1\nb: x y\n", {"a": "1", "b": "x y"}),
        ("a:\n- 1\n- '2'\n", {"a": ["1", "2"]}),  # Go's yaml: the dash under its key
        ('a:\n  - b: c\n    d: [e, "f, g"]\n', {"a": [{"b": "c", "d": ["e", "f, g"]}]}),
        ('# comment\n---\na: "x # y" # comment\nb: ~\nc: {}\n', {"a": "x # y", "b": None, "c": {}}),
        ("a: 'it''s'\nb: \"\\u00e9\\t\"\n", {"a": "it's", "b": "\u00e9\t"}),
        ("- a::b\n- --link\n", ["a::b", "--link"]),
        ("a:\nb: 1\n", {"a": None, "b": "1"}),
    ],
)
def test_the_reader_reads_its_subset(text: str, value: object) -> None:
    assert loads(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x 1\n", "line 1: an anchor ('&x 1') is not read"),
        ("a: *x\n", "line 1: an alias ('*x') is not read"),
        ("a: !!str 1\n", "line 1: a tag ('!!str 1') is not read"),
        ("a: |\n  text\n", "line 1: a block scalar ('|') is not read"),
        ("a: b\n  c\n", "line 2: a scalar continues onto another line"),
        ("a: 1\na: 2\n", "line 2: the key 'a' is given twice"),
        ("a: 1\n---\nb: 2\n", "line 2: more than one document (or a document end marker)"),
        ("a:\n\t- 1\n", "line 2: a tab in the indentation"),
        ('a: "open\n', "line 1: a quoted scalar does not end on its line"),
        ("a: [[1]]\n", "line 1: nested flow collections are not read"),
        ("a: 1\n   b: 2\n", "line 2: a scalar continues onto another line"),
        ("", "the document is empty"),
    ],
)
def test_the_reader_refuses_what_it_does_not_read(text: str, message: str) -> None:
    with pytest.raises(YamlError) as caught:
        loads(text)
    assert str(caught.value) == message


def test_a_json_spec_is_read_as_json() -> None:
    text = json.dumps({"cdiVersion": "0.6.0", "kind": "amd.com/gpu", "devices": [{"name": "all"}]})
    assert parse("/etc/cdi/amd.json", text)["kind"] == "amd.com/gpu"


# ------------------------------------------------------------------------------------------ the summary


def host_with(tmp_path: Path, spec: Path, *, drop: tuple[str, ...] = ()) -> Root:
    """A host tree holding `spec` as /var/run/cdi/nvidia.yaml and every host path it names except `drop`."""
    base = tmp_path / "host"
    target = base / "var/run/cdi/nvidia.yaml"
    target.parent.mkdir(parents=True)
    target.write_text(spec.read_text())
    document: Any = loads(spec.read_text())
    edits = [document["containerEdits"], *(d["containerEdits"] for d in document["devices"])]
    for edit in edits:
        for entry in [*edit.get("mounts", []), *edit.get("deviceNodes", []), *edit.get("hooks", [])]:
            host = entry.get("hostPath") or entry["path"]
            if host not in drop:
                (base / host.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
                (base / host.lstrip("/")).touch()
    return Root(base)


def test_the_summary_names_driver_devices_and_missing_paths(tmp_path: Path) -> None:
    gone = "/usr/lib/x86_64-linux-gnu/libcuda.so.575.64.03"
    (spec,) = read_specs(host_with(tmp_path, SPEC_575, drop=(gone,)))
    assert spec == CdiSpec(
        path="/var/run/cdi/nvidia.yaml",
        cdi_version="0.5.0",
        kind="nvidia.com/gpu",
        devices=("0", "GPU-520e01f2-cf30-6396-abef-e8e9a5233b0e", "all"),
        driver_version="575.64.03",
        paths=56,
        missing=(gone,),
        missing_count=1,
    )


def test_the_t4_spec_carries_its_driver_too(tmp_path: Path) -> None:
    (spec,) = read_specs(host_with(tmp_path, SPEC_570))
    assert (spec.cdi_version, spec.driver_version, spec.devices[-1], spec.missing_count) == (
        "0.6.0",
        "570.133.20",
        "all",
        0,
    )


# ------------------------------------------------------------------------------------------ container.cdi


def report(specs: tuple[CdiSpec, ...], driver: str | None) -> HostReport:
    return HostReport(
        root="/",
        os=OsInfo(id="ubuntu", version_id="24.04", pretty_name=None, kernel=None, glibc="2.39", arch="x86_64"),
        python=PythonInfo(version="3.12.3", implementation="CPython", executable="python3", distributions={}),
        accelerators=(
            Accelerator(
                family="nvidia", driver_version=driver, runtime_version=None, devices=(), source="t", errors=()
            ),
        ),
        environment={},
        limits=Limits(shm_bytes=None, memlock_bytes=None, memlock_unlimited=False),
        container=Container(
            inside_container=False,
            docker_socket=False,
            nvidia_container_toolkit=True,
            cdi_specs=tuple(s.path for s in specs),
            cdi=specs,
        ),
    )


def cdi_findings(matrix: Matrix, specs: tuple[CdiSpec, ...], driver: str | None) -> list[Finding]:
    return container_cdi(matrix.families["nvidia"], report(specs, driver))


def test_a_current_spec_passes(tmp_path: Path, matrix: Matrix) -> None:
    specs = read_specs(host_with(tmp_path, SPEC_575))
    (finding,) = cdi_findings(matrix, specs, "575.64.03")
    assert finding.status is Status.PASS
    assert finding.found == (
        "/var/run/cdi/nvidia.yaml: cdiVersion 0.5.0, 3 device(s), driver 575.64.03, all 56 host paths present"
    )


def test_a_spec_generated_for_another_driver_fails_with_the_regenerate_command(tmp_path: Path, matrix: Matrix) -> None:
    specs = read_specs(host_with(tmp_path, SPEC_570))
    (finding,) = cdi_findings(matrix, specs, "580.95.05")  # the driver was upgraded after the spec was written
    assert (finding.id, finding.status) == ("container.cdi", Status.FAIL)
    assert finding.expected == "/var/run/cdi/nvidia.yaml generated for the loaded driver 580.95.05"
    assert finding.found == "generated for driver 570.133.20"
    assert finding.fix == (
        "nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml "
        "(toolkit 1.18+: systemctl restart nvidia-cdi-refresh)"
    )


def test_a_spec_naming_a_missing_library_fails(tmp_path: Path, matrix: Matrix) -> None:
    gone = ("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.575.64.03", "/usr/bin/nvidia-smi")
    specs = read_specs(host_with(tmp_path, SPEC_575, drop=gone))
    (finding,) = cdi_findings(matrix, specs, "575.64.03")
    assert finding.status is Status.FAIL
    assert finding.found == "2 missing: /usr/bin/nvidia-smi, /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.575.64.03"
    assert finding.fix.startswith("nvidia-ctk cdi generate")


def test_a_spec_that_does_not_parse_fails_and_other_kinds_only_warn(matrix: Matrix) -> None:
    broken = CdiSpec(path="/etc/cdi/nvidia.yaml", error="does not parse: line 3: an alias ('*x') is not read")
    other = CdiSpec(path="/etc/cdi/amd.json", kind="amd.com/gpu", cdi_version="0.6.0", error="lists no devices")
    findings = cdi_findings(matrix, (broken, other), None)
    assert [(f.status, f.found) for f in findings] == [
        (Status.FAIL, "/etc/cdi/nvidia.yaml does not parse: line 3: an alias ('*x') is not read"),
        (Status.WARN, "/etc/cdi/amd.json lists no devices"),
    ]
    assert findings[1].fix == "rewrite or remove /etc/cdi/amd.json"


def test_an_unknown_cdi_version_fails_and_a_newer_one_warns(matrix: Matrix) -> None:
    base = CdiSpec(path="/etc/cdi/x.yaml", kind="example.com/dev", devices=("a",))
    findings = cdi_findings(
        matrix, (dataclasses.replace(base, cdi_version="0.0.9"), dataclasses.replace(base, cdi_version="1.1.0")), None
    )
    assert [f.status for f in findings] == [Status.FAIL, Status.WARN]


def test_no_spec_no_finding_and_the_check_runs_it(tmp_path: Path, matrix: Matrix) -> None:
    assert cdi_findings(matrix, (), "575.64.03") == []
    specs = read_specs(host_with(tmp_path, SPEC_570))
    findings = check(matrix, matrix.envs["gpu-nvidia-cu132"], report(specs, "580.95.05"))
    assert [f.status for f in findings if f.id == "container.cdi"] == [Status.FAIL]


def test_a_snapshot_carries_the_summary(tmp_path: Path, matrix: Matrix) -> None:
    specs = read_specs(host_with(tmp_path, SPEC_575, drop=("/usr/bin/nvidia-smi",)))
    save_snapshot(report(specs, "580.95.05"), tmp_path / "snap.json")
    replayed = load_snapshot(tmp_path / "snap.json")
    assert replayed.container.cdi == specs
    assert [f.status for f in cdi_findings(matrix, replayed.container.cdi, "580.95.05")] == [Status.FAIL, Status.FAIL]


def test_a_stale_spec_where_the_generator_does_not_write_is_also_to_be_removed(tmp_path: Path, matrix: Matrix) -> None:
    """The generator's command writes /var/run/cdi/nvidia.yaml: a stale /etc/cdi/nvidia.yaml would still be read
    after it ran, so the fix says to remove it too."""
    root = host_with(tmp_path, SPEC_570)
    moved = tmp_path / "host" / "etc" / "cdi" / "nvidia.yaml"
    moved.parent.mkdir(parents=True)
    (tmp_path / "host" / "var" / "run" / "cdi" / "nvidia.yaml").rename(moved)
    (finding,) = cdi_findings(matrix, read_specs(root), "580.95.05")
    assert finding.status is Status.FAIL
    assert finding.fix.startswith("nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml")
    assert finding.fix.endswith(", then remove /etc/cdi/nvidia.yaml (the engine reads it too)")
