"""Issue 41, hangs: the CDI reader (host/cdi_yaml.py), which every `check` runs over /etc/cdi and /var/run/cdi before
a session, is linear in its input: every line shape that made the old key pattern retry a run of spaces is read or
refused at the 4 MiB read limit within a subprocess deadline, nesting is bounded (no RecursionError), and the new
one-pass key reader says what the old pattern said on every line. Cost figures: benchmarks/cdi_yaml_cost.py."""

from __future__ import annotations

import contextlib
import re
import string
import types
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
from hostilekit import accelenv
from hypothesis import given, settings
from hypothesis import strategies as st

from accelenv.host import cdi_yaml
from accelenv.host.cdi_yaml import MAX_DEPTH, YamlError, loads

if TYPE_CHECKING:
    from accelenv.host.cdi import CdiSpec
    from accelenv.host.report import HostReport

# The key pattern the reader used before (quadratic on a run of spaces): the reference for what a key is.
OLD_KEY = re.compile(
    r"""\A(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s'"#\[\]{},&*!|>%@`-][^#]*?|-[^\s#][^#]*?)"""
    r"""\s*:(?:\s+(?P<rest>.*))?\Z"""
)
LIMIT = 4 * 1024 * 1024 - 64  # under the 4 MiB a spec file may hold


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=" \t:#-'\"\\ab,[]{}&", max_size=14).map(lambda s: s.strip()))
def test_the_key_reader_agrees_with_the_old_pattern(text: str) -> None:
    old = OLD_KEY.match(text)
    new = cdi_yaml._key(text)
    if old is None:
        assert new is None, text
    else:
        assert new is not None, text
        assert (new[0].strip(), new[1]) == (old["key"].strip(), old["rest"] or None), text


def hostile_lines() -> dict[str, str]:
    n = LIMIT
    return {
        "spaces in a key": "a" + " " * n + "b: c",
        "spaces and no colon": "a" + " " * n + "b",
        "colons without space": "a" + ":x" * (n // 2),
        "a long plain value": "key: " + "v" * n,
        "a long quoted value": 'key: "' + "v" * n + '"',
        "a long flow sequence": "key: [" + "a," * (n // 2) + "a]",
        "many quoted items": "key: [" + '"a",' * (n // 4) + '"a"]',
        "nested dashes": "- " * (n // 2) + "a",
        "spaced colons": "a" + " :" * (n // 2),
        "an unended quote": "key: '" + "a" * n,
        "many lines": "- a\n" * (n // 4),
    }


@pytest.mark.parametrize("name", sorted(hostile_lines()))
def test_a_hostile_line_at_the_read_limit_is_read_or_refused(name: str) -> None:
    with contextlib.suppress(YamlError):  # a refusal naming the line is an answer too
        loads(hostile_lines()[name])


def test_nesting_is_refused_past_the_bound_not_by_recursion() -> None:
    deep = "".join(f"{' ' * i}k{i}:\n" for i in range(MAX_DEPTH + 5)) + " " * (MAX_DEPTH + 5) + "v\n"
    with pytest.raises(YamlError, match=f"more than {MAX_DEPTH} deep"):
        loads(deep)
    with pytest.raises(YamlError, match="deep"):
        loads("- " * 5000 + "a")


@pytest.mark.parametrize("name", ["spaces in a key", "a long quoted value", "many quoted items"])
def test_check_reads_a_hostile_spec_in_etc_cdi_without_hanging(name: str, matrix: Path, tmp_path: Path) -> None:
    """Before, a 96 KiB line of spaces cost 27 s and one at the limit hours; the deadline here is the subprocess's."""
    root = tmp_path / "host"
    (root / "etc" / "cdi").mkdir(parents=True)
    (root / "etc" / "cdi" / "hostile.yaml").write_text(hostile_lines()[name] + "\n")
    result = accelenv("--matrix", str(matrix), "check", "cpu-py311", "--root", str(root), timeout=120)
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr


def test_the_reader_still_reads_what_generators_write() -> None:
    text = 'cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ndevices:\n- name: "0"\n  containerEdits:\n    mounts:\n'
    text += "    - hostPath: /dev/x\n      options: [ro, nosuid, 'a,b']\n"
    assert loads(text) == {
        "cdiVersion": "0.5.0",
        "kind": "nvidia.com/gpu",
        "devices": [
            {"name": "0", "containerEdits": {"mounts": [{"hostPath": "/dev/x", "options": ["ro", "nosuid", "a,b"]}]}}
        ],
    }
    assert set(string.whitespace) & set(cdi_yaml._NOT_FIRST) == set()


# ---------------------------------------------------------------------------------------------------- what a spec gives


def _spec_giving(mount: str, options: str = "[rbind]", node: str | None = None) -> str:
    edits = f"    mounts:\n    - hostPath: {mount}\n      containerPath: /x\n      options: {options}\n"
    if node:
        edits += f"    deviceNodes:\n    - path: {node}\n"
    return f"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n  containerEdits:\n{edits}"


SENSITIVE = [
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/etc/shadow",
    "/etc/sudoers.d/ci",
    "/root/.ssh/id_ed25519",
    "/home/ci/.ssh",
    "/home/ci/.kube/config",
    "/var/lib/kubelet/pki",
    "/",
    "//",
    "/etc",
    "/etc/../etc/shadow",
    "/proc",
    "/sys",
    "/dev",
    "/usr",
]
HARMLESS = [
    "/usr/lib/x86_64-linux-gnu/libcuda.so.575.64.03",
    "/usr/bin/nvidia-smi",
    "/run/nvidia-persistenced/socket",
    "/lib/firmware/nvidia/575.64.03/gsp_ga10x.bin",
    "/dev/nvidia0",
    "/etc/vulkan/icd.d/nvidia_icd.json",
]


class _Report:
    """What container_cdi reads of a report: the specs, and no accelerator (no driver to compare)."""

    def __init__(self, spec: CdiSpec) -> None:
        self.container = types.SimpleNamespace(cdi=(spec,))

    def accelerator(self, family: str) -> None:
        return None


@pytest.mark.parametrize("path", SENSITIVE)
def test_a_spec_giving_containers_a_sensitive_host_path_is_unhealthy(path: str, tmp_path: Path) -> None:
    from reference import REFERENCE_MATRIX

    from accelenv.check.container import container_cdi
    from accelenv.check.verdict import Status
    from accelenv.host.cdi import summarise
    from accelenv.host.root import Root
    from accelenv.matrix import load_matrix

    spec = summarise("/etc/cdi/nvidia.yaml", _spec_giving(path), Root(tmp_path))
    assert spec.error == ""
    assert spec.sensitive == (f"{path} (read-write)",)
    family = load_matrix(REFERENCE_MATRIX).families["nvidia"]
    findings = container_cdi(family, cast("HostReport", _Report(spec)))
    assert [f.status for f in findings if path in f.found] == [Status.FAIL]
    assert not any(f.status is Status.PASS for f in findings)


@pytest.mark.parametrize("path", HARMLESS)
def test_what_generators_mount_is_not_sensitive(path: str) -> None:
    from accelenv.host.cdi_mounts import sensitive_path

    assert not sensitive_path(path)


def test_a_read_only_mount_and_a_device_node_are_named_as_such() -> None:
    from accelenv.host.cdi_mounts import sensitive_edits

    edits = [
        {"mounts": [{"hostPath": "/etc/shadow", "options": ["ro", "bind"]}], "deviceNodes": [{"path": "/dev/mem"}]}
    ]
    assert sensitive_edits(edits) == ["/etc/shadow (read-only)", "/dev/mem (device node)"]


def test_the_shipped_spec_captures_are_not_sensitive() -> None:
    from hostilekit import REPO

    from accelenv.host.cdi import summarise
    from accelenv.host.root import Root

    for path in sorted((REPO / "tests" / "unit" / "data" / "cdi").glob("*.yaml")):
        assert summarise(str(path), path.read_text(), Root(Path("/nonexistent"))).sensitive == (), path.name
