"""`accelenv labels`: node labels from the findings `check` returns, on the real captures of every family, and the
rules every key and value keeps (Ray's label_utils, Kubernetes), whatever the tools print."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hostkit import FakeRunner, Pci, capture, gaudi2_hl_smi_csv, make_root, reorder_query
from hypothesis import given
from hypothesis import strategies as st

from accelenv.check.checks import check
from accelenv.check.labels import (
    NAME,
    LabelSet,
    drift,
    encode_value,
    key_problem,
    labelled,
    node_labels,
    render,
)
from accelenv.check.node_labels import fabric_domain, labels_for
from accelenv.errors import UsageError
from accelenv.host.discover import discover
from accelenv.host.fabric import parse_fabric
from accelenv.host.probes.gaudi import hl_smi_args
from accelenv.host.probes.nvidia import QUERY_FIELDS
from accelenv.host.report import HostReport, PythonInfo
from accelenv.host.root import Root
from accelenv.host.run import ToolResult
from accelenv.matrix import Matrix, load_matrix

yaml: Any = importlib.import_module("yaml")  # PyYAML, a dependency of Ray; no stubs
try:  # imported at collection: Ray's import subclasses subprocess.Popen, which the unit tests' guard replaces
    label_utils: Any = importlib.import_module("ray._private.label_utils")
except ImportError:  # pragma: no cover - without accelenv[ray]
    label_utils = None

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data" / "fabric"
GB200_CLIQUE = DATA / "nvidia-smi-q__accelenv-derived__4x-GB200-NVL72-clique__590.48.01.txt"
H100 = "nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt"
L40S = "nvidia_gpu_exporter__nvidia-l40s__595.80__linux-x86_64.txt"
MI300X = (
    '{"gpu_data": [{"gpu": 0, "asic": {"market_name": "AMD Instinct MI300X", "device_id": "0x74a1", '
    '"target_graphics_version": "gfx942:sramecc+:xnack-"}, "bus": {"bdf": "0000:26:00.0"}, '
    '"vram": {"size": {"value": 196592, "unit": "MB"}}}]}'
)
if TYPE_CHECKING:
    from collections.abc import Callable

P = "accelenv.io/"
AMD_VERSION = next(
    line.replace("6.10.5", "6.16.6")
    for line in capture("amd-smi-version__k8s-device-plugin-issue157-and-legacy-rocm-build-issue4759.txt").splitlines()
    if "amdgpu version: 6.10.5" in line
)


@pytest.fixture(scope="module")
def matrix() -> Matrix:
    return load_matrix(REPO / "matrix.toml")


def _host(
    tmp_path: Path,
    matrix: Matrix,
    family: str,
    *,
    outputs: dict[str, str],
    pci: list[Pci],
    modules: dict[str, str],
    environ: dict[str, str] | None = None,
    distributions: dict[str, list[str]] | None = None,
) -> HostReport:
    root = make_root(tmp_path / family, pci=pci, modules=dict(modules))
    python = PythonInfo(
        version="3.12.3", implementation="CPython", executable="python3", distributions=distributions or {}
    )
    return discover(
        matrix, root=Root(root), runner=FakeRunner(outputs), environ=environ or {}, families=[family], python=python
    )


def nvidia(tmp_path: Path, matrix: Matrix, name: str, pci: str, driver: str) -> HostReport:
    return _host(
        tmp_path,
        matrix,
        "nvidia",
        outputs={
            "nvidia-smi --query-gpu=" + ",".join(QUERY_FIELDS): reorder_query(
                capture("nvidia-smi-query-gpu-csv__" + name), QUERY_FIELDS
            ),
            "nvidia-smi --version": capture("nvidia-smi--version__" + name),
        },
        pci=[Pci("0000:00:09.0", "0x10de", pci, driver="nvidia")],
        modules={"nvidia": driver},
    )


def amd(tmp_path: Path, matrix: Matrix) -> HostReport:
    return _host(
        tmp_path,
        matrix,
        "amd",
        outputs={"amd-smi static": MI300X, "amd-smi version": AMD_VERSION},
        pci=[Pci("0000:26:00.0", "0x1002", "0x74a1", klass="0x120000", driver="amdgpu")],
        modules={"amdgpu": "6.16.6"},
    )


def neuron(tmp_path: Path, matrix: Matrix) -> HostReport:
    return _host(
        tmp_path,
        matrix,
        "neuron",
        outputs={"neuron-ls": capture("neuron-ls--json-output__unnamed-repo-rust-test__trn1.2xlarge.json")},
        pci=[Pci("0000:00:1e.0", "0x1d0f", "0x7164", klass="0x088000", driver="neuron")],
        modules={"neuron": "2.31.7.0"},
    )


def gaudi(tmp_path: Path, matrix: Matrix) -> HostReport:
    return _host(
        tmp_path,
        matrix,
        "gaudi",
        outputs={
            "hl-smi " + hl_smi_args()[0]: gaudi2_hl_smi_csv(),
            "hl-smi": capture("hl-smi__ray-docs__8x-HL-225-Gaudi2__1.22.1.txt"),
        },
        pci=[Pci("0000:33:00.0", "0x1da3", "0x1020", klass="0x120000", driver="habanalabs")],
        modules={"habanalabs": "1.22.1"},
    )


def tpu(tmp_path: Path, matrix: Matrix) -> HostReport:
    return _host(
        tmp_path,
        matrix,
        "tpu",
        outputs={"tpu-info --version": capture("tpu-info--version__cloud-accelerator-diagnostics-README__v6e.txt")},
        pci=[Pci(f"0000:00:0{i}.0", "0x1ae0", "0x006f", klass="0x120000", driver="vfio-pci") for i in range(4, 8)],
        modules={},
        environ={
            "TPU_ACCELERATOR_TYPE": "v6e-16",
            "TPU_NAME": "my-slice-7",
            "TPU_WORKER_ID": "2",
            "TPU_TOPOLOGY": "4x4",
        },
        distributions={"libtpu": ["0.0.50.1"]},
    )


def labels(matrix: Matrix, report: HostReport, fabric: str | None = None) -> dict[str, str]:
    runner = FakeRunner({"nvidia-smi -q": fabric}) if fabric is not None else None
    found, _ = labels_for(matrix, report, runner=runner, fabric=fabric is not None)
    return found.labels


HOSTS: dict[str, Callable[[Path, Matrix], HostReport]] = {
    "amd": amd,
    "neuron": neuron,
    "gaudi": gaudi,
    "tpu": tpu,
}
FACTS = {
    # (family, sku, arch, devices, device memory, driver, runtime) as the captures show them
    "h100": {
        "family": "nvidia",
        "sku": "h100-sxm",
        "arch": "sm_90",
        "devices": "1",
        "device-memory-mib": "81559",
        "driver": "590.48.01",
        "runtime": "13.1",
    },
    "amd": {
        "family": "amd",
        "sku": "mi300x",
        "arch": "gfx942",
        "devices": "1",
        "device-memory-mib": "196592",
        "driver": "6.16.6",
        "runtime": "6.4.1",
    },
    "neuron": {
        "family": "neuron",
        "sku": "trn1",
        "arch": "neuroncore-v2",
        "devices": "1",
        "device-memory-mib": "32768",
        "driver": "2.31.7.0",
        "scale-up-devices": "1",  # neuron-ls -j's one device: a group of one (host/links.py)
    },
    "gaudi": {
        "family": "gaudi",
        "sku": "gaudi2",
        "arch": "gaudi2",
        "devices": "2",
        "device-memory-mib": "98304",
        "driver": "1.22.1-97ec1a4",
        "runtime": "1.22.1",
    },
    "tpu": {
        "family": "tpu",
        "sku": "tpu-v6e",
        "arch": "v6e",
        "devices": "4",
        "runtime": "0.0.50.1",
        "tpu-slice": "my-slice-7",
        "tpu-topology": "4x4",
        "tpu-worker-id": "2",
    },
}


def make(name: str, tmp_path: Path, matrix: Matrix) -> HostReport:
    if name == "h100":
        return nvidia(tmp_path, matrix, H100, "0x2330", "590.48.01")
    return HOSTS[name](tmp_path, matrix)


@pytest.mark.parametrize("name", sorted(FACTS))
def test_label_sets_on_real_captures(tmp_path: Path, matrix: Matrix, name: str) -> None:
    report = make(name, tmp_path, matrix)
    found = labels(matrix, report)
    facts = {k.removeprefix(P): v for k, v in found.items() if not k.startswith(P + "env.")}
    assert facts == FACTS[name]
    family = FACTS[name]["family"]
    # a view, not a judge: one label per environment of the family, the verdict of check's own findings
    from accelenv.check.verdict import verdict

    envs = {k.removeprefix(P + "env."): v for k, v in found.items() if k.startswith(P + "env.")}
    expected = {e.id: str(verdict(check(matrix, e, report))) for e in matrix.envs.values() if e.family == family}
    assert envs == expected
    assert envs


def test_the_verdict_labels_follow_the_findings(tmp_path: Path, matrix: Matrix) -> None:
    from accelenv.check.verdict import Finding, Status

    report = make("h100", tmp_path, matrix)
    warn = [Finding(id="a", status=Status.WARN, expected="", found="", message="")]
    fail = [*warn, Finding(id="b", status=Status.FAIL, expected="", found="", message="")]
    found = node_labels(report, {"x": [], "y": warn, "z": fail}, family="nvidia")
    assert [found.labels[P + f"env.{e}"] for e in "xyz"] == ["pass", "warn", "fail"]


def test_a_cpu_host_is_labelled_cpu_with_its_machine(tmp_path: Path, matrix: Matrix) -> None:
    report = _host(tmp_path, matrix, "cpu", outputs={}, pci=[], modules={})
    found = labels(matrix, report)
    assert found[P + "family"] == "cpu"
    assert found[P + "devices"] == "0"
    assert set(found) >= {P + "env.cpu-py311"}


def test_gb200_nvl72_fabric_gives_the_nvlink_domain(tmp_path: Path, matrix: Matrix) -> None:
    gpus = parse_fabric(GB200_CLIQUE.read_text())
    assert len(gpus) == 4
    assert all(g.registered for g in gpus)
    found = labels(matrix, make("h100", tmp_path, matrix), fabric=GB200_CLIQUE.read_text())
    assert found[P + "nvlink-cluster"] == "7c3e9a4b-51d2-4f08-b6e1-2a9d0c5f8e13"
    assert found[P + "nvlink-clique"] == "32766"
    assert found[P + "nvlink-domain"] == "7c3e9a4b-51d2-4f08-b6e1-2a9d0c5f8e13.32766"
    assert found["ray.io/gpu-domain"] == found[P + "nvlink-domain"]  # Ray's topology label, from the verified fabric


@pytest.mark.parametrize(
    "name",
    [
        "nvidia-smi-q__nvidia_gpu_exporter__nvidia-h100-80gb-hbm3__590.48.01__linux-x86_64.txt",  # all-zero UUID
        "nvidia-smi-q__nvidia_gpu_exporter__nvidia-h200__590.48.01__linux-x86_64.txt",
        "nvidia-smi-q__nvidia_gpu_exporter__nvidia-l40s__595.80__linux-x86_64.txt",
        "nvidia-smi-a__thamada-nvidia-smi__H100SXMx8.txt",
    ],
)
def test_real_captures_without_a_multi_node_fabric_have_no_domain(tmp_path: Path, matrix: Matrix, name: str) -> None:
    found = labels(matrix, make("h100", tmp_path, matrix), fabric=capture(name))
    assert not [k for k in found if "nvlink" in k or "gpu-domain" in k]


@pytest.mark.parametrize(
    ("change", "domain"),
    [
        (lambda t: t, True),
        (lambda t: t.replace("7c3e9a4b-51d2-4f08-b6e1-2a9d0c5f8e13", "00000000-0000-0000-0000-000000000000"), False),
        (lambda t: t.replace("In Progress", "x").replace("Completed", "In Progress", 1), False),  # one GPU pending
        (lambda t: t.replace("32766", "32765", 1), False),  # GPUs in two cliques: no one domain
        (lambda t: t.replace("7c3e9a4b-51d2-4f08-b6e1-2a9d0c5f8e13", 'x\n"ray.io/a": "b"', 1), False),
    ],
)
def test_the_domain_needs_every_gpu_registered_in_one_clique(change: object, domain: bool) -> None:
    from accelenv.host.fabric import nvlink_domain

    text = change(GB200_CLIQUE.read_text())  # type: ignore[operator]
    assert (nvlink_domain(parse_fabric(text)) is not None) is domain


def test_fabric_faults_are_notes_not_errors(tmp_path: Path, matrix: Matrix) -> None:
    report = make("h100", tmp_path, matrix)
    domain, why = fabric_domain(report, FakeRunner({"nvidia-smi -q": "garbage"}))
    assert domain is None
    assert why is not None
    assert "nvidia-smi -q" in why
    domain, why = fabric_domain(report, None)
    assert domain is None
    assert why == "no nvidia-smi -q output (a snapshot without it)"


# ---- encoding and the rules of keys and values ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("590.48.01", "590.48.01"),
        ("", ""),
        ("1.22.1-97ec1a4", "1.22.1-97ec1a4"),
        ("570.124.06+cu128", "570.124.06_cu128-" + __import__("hashlib").sha256(b"570.124.06+cu128").hexdigest()[:10]),
        ("-x-", "x-" + __import__("hashlib").sha256(b"-x-").hexdigest()[:10]),
        ("+", "x-" + __import__("hashlib").sha256(b"+").hexdigest()[:10]),
    ],
)
def test_values_that_do_not_fit_are_encoded_deterministically(value: str, encoded: str) -> None:
    assert encode_value(value) == encoded


def test_encoded_values_of_different_text_stay_apart() -> None:
    long_name = "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition, a name longer than sixty-three characters"
    assert len(encode_value(long_name)) <= 63
    assert encode_value("a+b") != encode_value("a b")


@given(st.text(max_size=300))
def test_every_value_encodes_to_a_valid_label_value(text: str) -> None:
    value = encode_value(text)
    assert value == "" or NAME.fullmatch(value)
    assert encode_value(text) == value


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("accelenv.io/env.cpu-py311", None),
        ("ray.io/accelerator-type", "ray.io/accelerator-type: the ray.io/ prefix is Ray's own"),
        (
            "accelenv.io/env.bad-",
            "accelenv.io/env.bad-: the name 'env.bad-' is not at most 63 of [A-Za-z0-9._-], alphanumeric at both ends",
        ),
        ("Bad_Prefix/x", "Bad_Prefix/x: the prefix 'Bad_Prefix' is not a DNS subdomain"),
        (
            "accelenv.io/" + "x" * 64,
            (
                f"accelenv.io/{'x' * 64}: the name {'x' * 64!r} is not at most 63 of [A-Za-z0-9._-], "
                "alphanumeric at both ends"
            ),
        ),
    ],
)
def test_keys_follow_rays_and_kubernetes_rules(key: str, problem: str | None) -> None:
    assert key_problem(key) == problem


def test_a_bad_key_is_a_usage_error_naming_it() -> None:
    with pytest.raises(UsageError, match=r"cannot make node labels: ray.io/x: the ray.io/ prefix is Ray's own"):
        labelled({"ray.io/x": "1"})


def injected(tmp_path: Path, matrix: Matrix) -> LabelSet:
    report = make("h100", tmp_path, matrix)
    acc = report.accelerators[0]
    import dataclasses

    evil = dataclasses.replace(acc, driver_version='590\n"ray.io/accelerator-type": "H100"\nx: "y')
    report = dataclasses.replace(report, accelerators=(evil,))
    return node_labels(report, {}, family="nvidia")


@pytest.mark.parametrize("fmt", ["ray", "ray-env", "nfd", "json"])
def test_tool_output_cannot_inject_a_key(tmp_path: Path, matrix: Matrix, fmt: str) -> None:
    found = injected(tmp_path, matrix)
    text = render(found, fmt, header="h")
    if fmt == "ray":
        parsed = yaml.safe_load(text)
    elif fmt == "ray-env":
        parsed = json.loads(text)
    elif fmt == "json":
        parsed = json.loads(text)["labels"]
    else:
        parsed = dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("#"))
    assert parsed == found.labels
    assert all(k.startswith(P) for k in parsed)
    assert P + "driver" in found.encoded  # the original is kept in the json format


@pytest.mark.parametrize("name", ["gaudi", "tpu", "h100", "amd", "neuron"])
def test_the_ray_files_are_what_rays_own_parsers_accept(tmp_path: Path, matrix: Matrix, name: str) -> None:
    if label_utils is None:
        pytest.skip("the Ray parser checks need ray (accelenv[ray])")
    found = labels_for(matrix, make(name, tmp_path, matrix))[0]
    path = tmp_path / "labels.yaml"
    path.write_text(render(found, "ray", header="generated\nby a test"))
    assert label_utils.parse_node_labels_from_yaml_file(str(path)) == found.labels
    assert label_utils.parse_node_labels_json(render(found, "ray-env", header="")) == found.labels
    # every value is quoted: a bare 8 or true would not be a string to Ray's YAML parser
    assert all(line.startswith("#") or line.count('"') == 4 for line in path.read_text().splitlines())


def test_nfd_feature_file_lines() -> None:
    text = render(labelled({P + "devices": "8", P + "family": "nvidia"}), "nfd", header="accelenv")
    assert text == "# accelenv\naccelenv.io/devices=8\naccelenv.io/family=nvidia\n"


def test_an_unknown_format_is_refused() -> None:
    with pytest.raises(UsageError, match="unknown label format 'xml'"):
        render(labelled({}), "xml", header="")


# ---- drift ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("recorded", "now", "changes"),
    [
        (
            {P + "driver": "570.1", P + "family": "nvidia"},
            {P + "driver": "580.2", P + "family": "nvidia"},
            ["accelenv.io/driver='570.1' at start, '580.2' now"],
        ),
        ({P + "driver": "570.1", P + "family": "nvidia"}, {P + "driver": "570.1", P + "family": "nvidia"}, []),
        (
            {P + "family": "nvidia"},
            {P + "family": "nvidia", P + "devices": "8"},
            ["accelenv.io/devices missing at start, '8' now"],
        ),
        ({}, {P + "devices": "8"}, []),  # a node started without accelenv labels: nothing to drift from
        ({P + "env.other": "pass", P + "family": "nvidia"}, {P + "env.mine": "fail", P + "family": "nvidia"}, []),
        # a cpu environment judged on a GPU node: only the verdicts compare
        (
            {P + "family": "nvidia", P + "devices": "8", P + "env.cpu-py311": "pass"},
            {P + "family": "cpu", P + "devices": "0", P + "env.cpu-py311": "fail"},
            ["accelenv.io/env.cpu-py311='pass' at start, 'fail' now"],
        ),
    ],
)
def test_drift(recorded: dict[str, str], now: dict[str, str], changes: list[str]) -> None:
    assert drift(recorded, now) == changes


def test_the_nodes_own_word_comes_before_the_metadata_servers(tmp_path: Path, matrix: Matrix) -> None:
    found = labels_for(matrix, make("tpu", tmp_path, matrix), metadata={"tpu-slice": "other", "zone": "z"})[0]
    assert found.labels[P + "tpu-slice"] == "my-slice-7"
    assert found.labels[P + "zone"] == "z"


def test_labels_command_writes_a_snapshots_labels_atomically(tmp_path: Path, matrix: Matrix) -> None:
    from accelenv.cli import main
    from accelenv.host.snapshot import save_snapshot

    report = make("tpu", tmp_path, matrix)
    snap = tmp_path / "node.json"
    save_snapshot(report, snap)
    out = tmp_path / "labels.yaml"
    import io

    buffer = io.StringIO()
    code = main(
        [
            "--matrix",
            str(REPO / "matrix.toml"),
            "labels",
            "--snapshot",
            str(snap),
            "--format",
            "ray",
            "-o",
            str(out),
            "--env",
            "tpu-jax-0-12",
        ],
        out=buffer,
    )
    assert code == 0, buffer.getvalue()
    assert buffer.getvalue() == f"{out}: 9 label(s)\n"
    parsed = yaml.safe_load(out.read_text())
    assert parsed[P + "tpu-slice"] == "my-slice-7"
    from accelenv.check.subject import judge_with_own_python
    from accelenv.check.verdict import verdict

    # a snapshot recorded the Python that took it, not the environment's: the label is the host checks' verdict
    findings, judged = judge_with_own_python(matrix, matrix.envs["tpu-jax-0-12"], report, host="h", own=None)
    assert parsed[P + "env.tpu-jax-0-12"] == str(verdict(findings))
    assert judged.kind == "not judged"
    assert "# env.tpu-jax-0-12: judged: snapshot " in out.read_text()
    assert "the Python checks were not judged: a snapshot records the Python that took it" in out.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".labels")] == []


def test_labels_refuses_an_unknown_environment(tmp_path: Path) -> None:
    import io

    from accelenv.cli import main

    code = main(
        ["--matrix", str(REPO / "matrix.toml"), "labels", "--env", "gpu-nvidia-cu999", "--snapshot", "x"],
        out=io.StringIO(),
    )
    assert code == 2


def test_a_result_tool_is_not_needed_for_a_snapshot_without_fabric(tmp_path: Path, matrix: Matrix) -> None:
    report = make("h100", tmp_path, matrix)
    import dataclasses

    raw = {
        "nvidia-smi-q": ToolResult(
            argv=("nvidia-smi", "-q"), returncode=0, stdout=GB200_CLIQUE.read_text(), stderr="", seconds=0.1, fault=None
        )
    }
    report = dataclasses.replace(report, raw={**report.raw, **raw})
    domain, why = fabric_domain(report, None)
    assert why is None
    assert domain is not None
    assert domain.clique_id == "32766"


@given(st.text(max_size=2000))
def test_the_fabric_parser_refuses_or_returns_only_valid_shapes(text: str) -> None:
    from accelenv.host.facts import ParseError

    try:
        gpus = parse_fabric("Driver Version : 590.48.01\nGPU 00000000:00:09.0\n    Fabric\n" + text)
    except ParseError:
        return
    for gpu in gpus:
        assert gpu.cluster_uuid is None or NAME.fullmatch(gpu.cluster_uuid)
        assert gpu.clique_id is None or gpu.clique_id.isdigit()
