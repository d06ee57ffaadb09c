"""Malformed and contradictory matrices: each is refused with the right key path, line and message.

Every case starts from the shipped matrix.toml (real SKUs and runtimes) and breaks one thing, the way a vendor
engineer editing it by hand might. The CLI must answer with exit 1 and a message, never a traceback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import tomlkit
from reference import REFERENCE_MATRIX, reference_document

import accelenv.matrix.load
from accelenv.cli import main
from accelenv.errors import MatrixInvalidError
from accelenv.matrix import Validation, load_matrix, read_matrix, validate_text

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[2]
SHIPPED = (REFERENCE_MATRIX).read_text(encoding="utf-8")

Doc = Any  # a tomlkit document: dict-like, keeps formatting so line numbers stay meaningful


def _edit(change: Callable[[Doc], None]) -> Callable[[], str]:
    def make() -> str:
        doc = reference_document()  # SHIPPED, parsed once
        change(doc)
        return tomlkit.dumps(doc)

    return make


def _text(old: str, new: str) -> Callable[[], str]:
    def make() -> str:
        assert old in SHIPPED, old
        return SHIPPED.replace(old, new, 1)

    return make


def _append(text: str) -> Callable[[], str]:
    return lambda: SHIPPED + "\n" + text


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[], str]
    path: str  # the dotted key path of the (first) error
    message: str  # a piece of its message
    line_has: str | None = None  # text that the reported line must contain (None: no line expected)


def _add_sku(env: str, sku: str) -> Callable[[Doc], None]:
    return lambda d: d["envs"][env]["skus"].append(sku)


def _set(*path_and_value: Any) -> Callable[[Doc], None]:
    *path, value = path_and_value

    def change(d: Doc) -> None:
        node = d
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _delete(*path: str) -> Callable[[Doc], None]:
    def change(d: Doc) -> None:
        node = d
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return change


def _delete_all(*paths: tuple[str, ...]) -> Callable[[Doc], None]:
    def change(d: Doc) -> None:
        for path in paths:
            _delete(*path)(d)

    return change


def _pkg(env: str, index: int, value: str) -> Callable[[Doc], None]:
    return lambda d: d["envs"][env]["requirements"]["packages"].__setitem__(index, value)


CASES = [
    # --- architecture support: the rules the issue names, with real SKUs and runtimes ---------------------
    Case(
        "b200-in-cuda-12-6",
        _edit(_add_sku("gpu-nvidia-cu126", "b200")),
        "envs.gpu-nvidia-cu126.skus[11]",
        "NVIDIA B200 (b200, sm_100) is not supported by CUDA 12.6 Update 3 (cuda-12-6)",
        "skus",
    ),
    Case(
        "mi355x-on-rocm-6-4",
        _edit(_add_sku("gpu-amd-rocm64", "mi355x")),
        "envs.gpu-amd-rocm64.skus[2]",
        "gfx950) is not supported by ROCm 6.4.1 (rocm-6-4), whose architectures are gfx908, gfx90a, gfx942, "
        "gfx1030, gfx1100; use a runtime that lists it (rocm-7-0)",
        "skus",
    ),
    Case(
        "b300-on-cuda-12-8",
        _edit(_add_sku("gpu-nvidia-cu128", "b300")),
        "envs.gpu-nvidia-cu128.skus[17]",
        "use a runtime that lists it (cuda-12-9, cuda-13-0)",
        "skus",
    ),
    Case(
        "volta-gone-in-cuda-13",
        _edit(_set("runtimes", "cuda-13-0", "architectures", ["sm_70", "sm_90"])),
        "envs.gpu-nvidia-cu130.skus[0]",
        "(a100-sxm4-80gb, sm_80) is not supported by CUDA 13.0",
        "skus",
    ),
    # --- local version labels ------------------------------------------------------------------------
    Case(
        "cpu-torch-in-cuda-env",
        _edit(_pkg("gpu-nvidia-cu128", 0, "torch==2.9.1+cpu")),
        "envs.gpu-nvidia-cu128.requirements.packages[0]",
        "'torch==2.9.1+cpu' is a +cpu build, but the runtime cuda-12-8 takes +cu128 builds: "
        "pin torch==2.9.1+cu128 or change the runtime",
        "requirements.packages",
    ),
    Case(
        "cu126-torch-in-cu128-env",
        _edit(_pkg("gpu-nvidia-cu128", 0, "torch==2.9.1+cu126")),
        "envs.gpu-nvidia-cu128.requirements.packages[0]",
        "is a +cu126 build, but the runtime cuda-12-8 takes +cu128 builds",
        "requirements.packages",
    ),
    Case(
        "label-without-index",
        _edit(_delete("envs", "gpu-amd-rocm64", "requirements", "extra_index_urls")),
        "envs.gpu-amd-rocm64.requirements.packages[0]",
        "comes from a vendor index, but the environment declares none",
        "requirements.packages",
    ),
    Case(
        "label-on-unlabelled-runtime",
        _edit(_pkg("neuron-2-31", 0, "torch-neuronx==2.9.0.2.15.32035+cu128")),
        "envs.neuron-2-31.requirements.packages[0]",
        "runtime neuron-2-31 declares no wheel_tag",
        "requirements.packages",
    ),
    # --- pins ----------------------------------------------------------------------------------------
    Case(
        "unpinned",
        _edit(_pkg("cpu-py311", 0, "ray>=2.60")),
        "envs.cpu-py311.requirements.packages[0]",
        "'ray>=2.60' is not pinned: write one exact pin, e.g. ray==<version>",
        "requirements.packages",
    ),
    Case(
        "wildcard-pin",
        _edit(_pkg("tpu-jax-0-8", 2, "libtpu==0.0.32.*")),
        "envs.tpu-jax-0-8.requirements.packages[2]",
        "'libtpu==0.0.32.*' is not pinned",
        "requirements.packages",
    ),
    Case(
        "pinned-twice",
        _edit(lambda d: d["envs"]["cpu-py311"]["requirements"]["packages"].append("Ray==2.59.0")),
        "envs.cpu-py311.requirements.packages[2]",
        "'Ray' is already required at packages[0]",
        "requirements.packages",
    ),
    # --- schema: shapes, unknown keys, patterns ----------------------------------------------------------
    Case(
        "unknown-key-suggests",
        _text('skus = ["cpu-x86-64", "cpu-aarch64"]', 'skuz = ["cpu-x86-64", "cpu-aarch64"]'),
        "envs.cpu-py311.skuz",
        "unknown key 'skuz'; did you mean 'skus'?",
        "skuz",
    ),
    Case(
        "unknown-runtime-key",
        _text('architectures = ["x86_64", "aarch64"]', 'archs = ["x86_64", "aarch64"]'),
        "runtimes.cpu.archs",
        "unknown key 'archs'; did you mean 'architectures'?",
        "archs",
    ),
    Case(
        "missing-runtime",
        _edit(_delete("envs", "gaudi-1-23", "runtime")),
        "envs.gaudi-1-23",
        "missing required key 'runtime' (Runtime id (under [runtimes]).)",
        "[envs.gaudi-1-23]",
    ),
    Case(
        "shell-in-requirement",
        _edit(_pkg("cpu-py311", 0, "ray==2.60.0;rm -rf /")),
        "envs.cpu-py311.requirements.packages[0]",
        "'ray==2.60.0;rm -rf /' is not valid here: expected a requirement like torch==2.9.1+cu128",
        "requirements.packages",
    ),
    Case(
        "environment-marker",
        _edit(_pkg("cpu-py311", 0, 'ray==2.60.0; python_version > "3"')),
        "envs.cpu-py311.requirements.packages[0]",
        "(no spaces, no environment markers)",
        "requirements.packages",
    ),
    Case(
        "space-in-id",
        _append('[skus."h100 sxm"]\nfamily = "nvidia"\nname = "x"\narch = "sm_90"\n'),
        "skus.h100 sxm",
        "'h100 sxm' is not a valid key: expected a lower-case id",
        '[skus."h100 sxm"]',
    ),
    Case(
        "control-character",
        _text('description = "Ray on CPU, Python 3.11', 'description = "Ray on CPU,\\u0007 Python 3.11'),
        "envs.cpu-py311.description",
        "expected one line of text",
        "description",
    ),
    Case(
        "tier-typo",
        _edit(_set("envs", "cpu-py311", "ci_tier", "nigthly")),
        "envs.cpu-py311.ci_tier",
        "'nigthly' is not one of 'pr', 'nightly', 'release'; did you mean 'nightly'?",
        "ci_tier",
    ),
    Case(
        "memory-as-text",
        _edit(_set("skus", "h200", "memory_mib", "141GB")),
        "skus.h200.memory_mib",
        "expected integer, found str '141GB'",
        "memory_mib",
    ),
    Case(
        "fake-digest",
        _text(
            'tag = "3.11-slim-bookworm", python = "3.11" }',
            'tag = "3.11-slim-bookworm", python = "3.11", digest = "sha256:abc" }',
        ),
        "runtimes.cpu.base_images.debian12.digest",
        "'sha256:abc' is not valid here: expected sha256: and 64 hex digits",
        "base_images",
    ),
    Case(
        "plain-http-index",
        _edit(
            _set(
                "envs",
                "gpu-amd-rocm64",
                "requirements",
                "extra_index_urls",
                ["http://download.pytorch.org/whl/rocm6.4"],
            )
        ),
        "envs.gpu-amd-rocm64.requirements.extra_index_urls[0]",
        "expected an https:// URL",
        "extra_index_urls",
    ),
    Case(
        "empty-architectures",
        _edit(_set("runtimes", "rocm-7-0", "architectures", [])),
        "runtimes.rocm-7-0.architectures",
        "must not be empty",
        "architectures",
    ),
    Case(
        "schema-version",
        _text("schema_version = 1", "schema_version = 2"),
        "schema_version",
        "must be 1, found 2",
        "schema_version",
    ),
    # --- references --------------------------------------------------------------------------------------
    Case(
        "runtime-typo",
        _edit(_set("envs", "gpu-nvidia-cu126", "runtime", "cuda-12-7")),
        "envs.gpu-nvidia-cu126.runtime",
        "runtime 'cuda-12-7' is not defined under [runtimes]; did you mean 'cuda-12-",
        "runtime",
    ),
    Case(
        "sku-typo",
        _edit(_add_sku("gpu-nvidia-cu129", "h300")),
        "envs.gpu-nvidia-cu129.skus[7]",
        "SKU 'h300' is not defined under [skus]; did you mean 'h200'?",
        "skus",
    ),
    Case(
        "source-typo",
        _edit(_set("skus", "l4", "sources", ["cuda-gpu"])),
        "skus.l4.sources[0]",
        "source 'cuda-gpu' is not defined under [sources]; did you mean 'cuda-gpus'?",
        "sources",
    ),
    Case(
        "family-mismatch-runtime",
        _edit(_set("envs", "gpu-nvidia-cu126", "runtime", "rocm-6-4")),
        "envs.gpu-nvidia-cu126.runtime",
        "runtime 'rocm-6-4' belongs to family 'amd', but the environment is 'nvidia'",
        "runtime",
    ),
    Case(
        "amd-sku-in-nvidia-env",
        _edit(_add_sku("gpu-nvidia-cu128", "mi300x")),
        "envs.gpu-nvidia-cu128.skus[17]",
        "SKU 'mi300x' is a 'amd' device; this environment is 'nvidia'",
        "skus",
    ),
    # --- defaults and uniqueness ---------------------------------------------------------------------------
    Case(
        "two-defaults",
        _edit(_set("envs", "gpu-nvidia-cu130", "default", True)),
        "envs.gpu-nvidia-cu130.default",
        "family 'nvidia' already has default environment 'gpu-nvidia-cu128'; keep one",
        "default",
    ),
    Case(
        "no-default",
        _edit(_delete("envs", "gpu-amd-rocm64", "default")),
        "envs.gpu-amd-rocm64.default",
        "family 'amd' has no default environment: set default = true on one of gpu-amd-rocm64, gpu-amd-rocm70",
        "[envs.gpu-amd-rocm64]",
    ),
    Case(
        "pci-id-claimed-twice",
        _edit(_set("skus", "h200-nvl", "pci_device_ids", ["0x2335"])),
        "skus.h200-nvl.pci_device_ids[0]",
        "'0x2335' already identifies SKU 'h200'",
        "pci_device_ids",
    ),
    Case(
        "env-named-like-session",
        _text("[envs.gaudi-1-23]", "[envs.gaudi]"),
        "envs.gaudi",
        "environment id 'gaudi' collides with the nox session of family 'gaudi'",
        "[envs.gaudi]",
    ),
    Case(
        "unidentifiable-sku",
        _edit(_delete_all(("skus", "l4", "product_names"), ("skus", "l4", "pci_device_ids"))),
        "skus.l4",
        "no product_names and no pci_device_ids",
        "[skus.l4]",
    ),
    # --- architecture names, wheel tags, drivers, platforms, images ---------------------------------------
    Case(
        "arch-name-typo",
        _edit(_set("skus", "h100-nvl", "arch", "sm90")),
        "skus.h100-nvl.arch",
        "'sm90' is not a nvidia architecture name (expected sm_[0-9]{2,3})",
        "arch",
    ),
    Case(
        "bad-arch-pattern",
        _edit(_set("families", "gaudi", "arch_pattern", "gaudi[0-9")),
        "families.gaudi.arch_pattern",
        "'gaudi[0-9' is not a valid regular expression",
        "arch_pattern",
    ),
    Case(
        "wheel-tag-mismatch",
        _edit(_set("runtimes", "cuda-12-9", "wheel_tag", "cu12")),
        "runtimes.cuda-12-9.wheel_tag",
        "'cu12' does not match version 12.9.1: families.nvidia.wheel_tag_format gives 'cu129'",
        "wheel_tag",
    ),
    Case(
        "compat-floor-above-floor",
        _edit(_set("runtimes", "cuda-12-8", "driver", "compat_min", "580.65.06")),
        "runtimes.cuda-12-8.driver.compat_min",
        "compat_min 580.65.06 is above min 570.124.06",
        "driver",
    ),
    Case(
        "empty-driver-range",
        _edit(_set("runtimes", "cuda-13-0", "driver", "max", "580")),
        "runtimes.cuda-13-0.driver.max",
        "max 580 is not above the floor 580.65.06: no driver could satisfy this runtime",
        "driver",
    ),
    Case(
        "sku-floor-above-ceiling",
        _edit(_set("runtimes", "cuda-12-8", "driver", "max", "575")),
        "envs.gpu-nvidia-cu128.skus[14]",
        "NVIDIA RTX PRO 6000 Blackwell Server Edition needs driver >= 575.57.08, but cuda-12-8 accepts only drivers "
        "below 575",
        "skus",
    ),
    Case(
        "grace-on-amd64-only",
        _edit(_set("envs", "gpu-nvidia-cu129", "platforms", ["linux/amd64"])),
        "envs.gpu-nvidia-cu129.skus[2]",
        "NVIDIA GH200 Grace Hopper Superchip hosts are aarch64, but the environment is built for linux/amd64",
        "skus",
    ),
    Case(
        "os-without-image",
        _edit(_set("envs", "gpu-nvidia-cu130", "os", "ubuntu20.04")),
        "envs.gpu-nvidia-cu130.os",
        "runtime 'cuda-13-0' has no base image for 'ubuntu20.04'; it has ubuntu22.04, ubuntu24.04",
        "os",
    ),
    Case(
        "no-python-on-the-base",
        _edit(_set("envs", "gpu-nvidia-cu126", "os", "ubuntu22.04")),
        "envs.gpu-nvidia-cu126.python",
        "no Python 3.12 on nvidia/cuda:12.6.3-cudnn-runtime-ubuntu22.04: the image ships no Python and Ubuntu 22.04 "
        "LTS provides 3.10; use python = '3.10' or a base image with 3.12",
        "python",
    ),
    Case(
        "unknown-os",
        _edit(_delete("os", "debian12")),
        "envs.cpu-py311.os",
        "OS base 'debian12' is not defined under [os]",
        "os",
    ),
    Case(
        "source-without-location",
        _edit(_delete("sources", "cuda-gpus", "url")),
        "sources.cuda-gpus",
        "a source needs a url, or `where`",
        "[sources.cuda-gpus]",
    ),
    # --- not TOML at all ---------------------------------------------------------------------------------
    Case(
        "toml-syntax",
        _text('python = "3.11"', 'python = "3.11'),
        "",
        "not valid TOML: Illegal character",
        'python = "3.11',
    ),
    Case(
        "toml-duplicate-table",
        _append('[envs.cpu-py311]\nfamily = "cpu"\n'),
        "",
        "not valid TOML",
        "[envs.cpu-py311]",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_refused_with_key_path_and_line(case: Case) -> None:
    text = case.make()
    validation = validate_text(text, source="matrix.toml")
    errors = [p for p in validation.problems if p.is_error]
    assert errors, f"{case.id}: expected a refusal, got none"
    matching = [p for p in errors if p.path == case.path and case.message in p.message]
    assert matching, f"{case.id}: no error at {case.path!r} with {case.message!r}; got:\n" + "\n".join(
        p.render("matrix.toml") for p in errors
    )
    problem = matching[0]
    if case.line_has is not None:
        assert problem.line is not None, f"{case.id}: no line number"
        assert case.line_has in text.splitlines()[problem.line - 1], (case.id, problem.line)


def test_there_are_at_least_25_refusals() -> None:
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES[::4], ids=[c.id for c in CASES[::4]])
def test_cli_refuses_without_traceback(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(case.make(), encoding="utf-8")
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert f"error: {case.path}:" in out if case.path else "error: not valid TOML" in out
    assert next(line for line in out.splitlines() if ": valid: " in line or ": invalid: " in line).startswith(
        f"{path}: invalid: "
    )
    assert main(["validate", str(path), "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)
    assert any(p["path"] == case.path and p["severity"] == "error" for p in problems)
    assert {"path", "line", "severity", "rule", "message"} <= set(problems[0])


def test_every_error_is_reported_at_once() -> None:
    doc = tomlkit.parse(SHIPPED)
    doc["envs"]["gpu-nvidia-cu126"]["skus"].append("b200")  # rule error
    doc["envs"]["cpu-py311"]["ci_tier"] = "weekly"  # schema error in another entry
    doc["skus"]["l4"]["memory_mib"] = "lots"  # schema error in a SKU the cu126 env uses
    validation: Validation = validate_text(tomlkit.dumps(doc))
    paths = {p.path for p in validation.problems if p.is_error}
    assert {"envs.gpu-nvidia-cu126.skus[11]", "envs.cpu-py311.ci_tier", "skus.l4.memory_mib"} <= paths
    # the SKU broken by the schema is not reported again as an unknown reference
    assert not [p for p in validation.problems if p.rule == "reference" and "'l4'" in p.message]


def test_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "matrix.toml"
    path.write_bytes(b"schema_version = 1\n\xff\xfe")
    assert main(["validate", str(path)]) == 1
    assert "not UTF-8 text" in capsys.readouterr().out


def test_missing_file_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.toml")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_a_validated_matrix_is_remembered_by_its_exact_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("ACCELENV_NO_CACHE", raising=False)
    path = tmp_path / "matrix.toml"
    path.write_text(SHIPPED, encoding="utf-8")
    first = load_matrix(path)
    assert len(list((tmp_path / "cache" / "accelenv" / "validated").iterdir())) == 1

    def no_validation(_: str, source: str = "") -> Validation:
        raise AssertionError("a remembered matrix is not validated again")

    monkeypatch.setattr(accelenv.matrix.load, "validate_text", no_validation)
    assert load_matrix(path) == first
    # different text, no marker: validated again (and refused here, since validation is what is not wanted)
    path.write_text(SHIPPED + "\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="not validated again"):
        load_matrix(path)


def test_read_matrix_refuses_unreadable_text(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_bytes(b"schema_version = 1\n\xff\xfe")
    with pytest.raises(MatrixInvalidError) as refused:
        read_matrix(path)
    assert refused.value.problems[0].message.startswith("cannot be read: 'utf-8' codec can't decode")
    path.write_text(SHIPPED + "\n[families.nvidia]\n", encoding="utf-8")
    with pytest.raises(MatrixInvalidError) as refused:
        read_matrix(path)
    assert refused.value.problems[0].message.startswith("cannot be read: Cannot declare ('families', 'nvidia') twice")
