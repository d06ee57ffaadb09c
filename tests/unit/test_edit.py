"""accelenv add: entries land after their section's last entry, the rest of the file is untouched, and a matrix
that would not validate is never written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from reference import REFERENCE_MATRIX

from accelenv.cli import main
from accelenv.errors import UsageError
from accelenv.matrix.edit import plan_add, plan_attach
from accelenv.matrix.edit_values import parse_value, typed_value

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    path = tmp_path / "matrix.toml"
    shutil.copy(REFERENCE_MATRIX, path)
    return path


MI300A = [
    "family=amd",
    'name="AMD Instinct MI300A"',
    "arch=gfx942",
    'product_names=["*MI300A*"]',
    'pci_device_ids=["0x74a0"]',
    'sources=["rocm-gpu-specs"]',
]


def test_add_a_sku_keeps_everything_else(matrix: Path) -> None:
    before = matrix.read_text()
    assert main(["--matrix", str(matrix), "add", "sku", "mi300a", *MI300A]) == 0
    after = matrix.read_text()
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    assert added[0] == "[skus.mi300a]"
    assert 'pci_device_ids = ["0x74a0"]' in added
    # every original line is still there, in order
    remaining = iter(after.splitlines())
    assert all(any(line == other for other in remaining) for line in before.splitlines())
    assert after.index("[skus.mi300a]") < after.index("[runtimes.cuda-12-6]")
    assert main(["--matrix", str(matrix), "validate"]) == 0


def test_a_wrong_entry_is_refused_and_nothing_written(matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = matrix.read_text()
    bad = [a.replace("0x74a0", "0x74a1").replace("gfx942", "sm_90") for a in MI300A]
    assert main(["--matrix", str(matrix), "add", "sku", "mi300a", *bad]) == 1
    err = capsys.readouterr().err
    assert "skus.mi300a.arch: 'sm_90' is not a amd architecture name" in err
    assert "'0x74a1' already identifies SKU 'mi300x'" in err
    assert matrix.read_text() == before


def test_dry_run_prints_a_diff(matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = matrix.read_text()
    assert main(["--matrix", str(matrix), "add", "sku", "mi300a", *MI300A, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- a/matrix.toml\n+++ b/matrix.toml\n")
    assert "+[skus.mi300a]" in out
    assert matrix.read_text() == before


def test_an_env_from_a_template_does_not_take_the_default(matrix: Path) -> None:
    assert main(["--matrix", str(matrix), "add", "env", "gpu-nvidia-cu128-b", "--from", "gpu-nvidia-cu128",
                 'description="a copy"']) == 0  # fmt: skip
    text = matrix.read_text()
    block = text[text.index("[envs.gpu-nvidia-cu128-b]") :]
    assert "default" not in block.split("\n[", 1)[0]
    assert main(["--matrix", str(matrix), "validate"]) == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["add", "sku", "h100-sxm", "family=nvidia"], "skus.h100-sxm already exists"),
        (["add", "env", "x", "--from", "gpu-nvidia-cu12"], "--from gpu-nvidia-cu12: no envs.gpu-nvidia-cu12"),
        (["add", "sku", "x", "family"], "'family': expected KEY=VALUE"),
    ],
)
def test_usage_errors(matrix: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(["--matrix", str(matrix), *argv]) == 2
    assert message in capsys.readouterr().err


def test_values_are_toml_or_plain_strings() -> None:
    assert parse_value('["a", "b"]') == ["a", "b"]
    assert parse_value("95830") == 95830
    assert parse_value("gfx942") == "gfx942"
    assert parse_value("true") is True


# ---------------------------------------------------------------------------------------------------- placement


def _order(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("[skus.", "[envs.", "[runtimes.", "# ---- "))]


@pytest.mark.parametrize(
    ("argv", "after", "before"),
    [
        (["add", "sku", "mi300a", *MI300A], "[skus.mi350x]", "# ---- Google TPU"),
        (["add", "sku", "b300a", "--from", "b300", 'name="B300A"', 'product_names=["NVIDIA B300A"]',
          'driver_min="580.82.07"'], "[skus.rtx-pro-6000-maxq]", "# ---- AMD Instinct"),
        (["add", "runtime", "cuda-13-1", "--from", "cuda-13-0", 'name="CUDA 13.1"', "version=13.1.0",
          "wheel_tag=cu131", "driver.min=580.95.05",
          'base_images."ubuntu24.04"={ repository = "nvidia/cuda", tag = "13.1.0-base-ubuntu24.04" }'],
         "[runtimes.cuda-13-0]", "[runtimes.rocm-6-3]"),
        (["add", "env", "gpu-nvidia-cu128-b", "--from", "gpu-nvidia-cu128", 'description="a copy"'],
         "[envs.gpu-nvidia-cu126]", "[envs.gpu-amd-rocm64]"),
    ],
    ids=["amd-sku", "nvidia-sku", "runtime", "env"],
)  # fmt: skip
def test_a_new_entry_lands_with_its_family(matrix: Path, argv: list[str], after: str, before: str) -> None:
    assert main(["--matrix", str(matrix), *argv]) == 0
    order = _order(matrix.read_text())
    section = {"sku": "skus", "runtime": "runtimes", "env": "envs"}[argv[1]]

    def at(prefix: str) -> int:
        return next(i for i, line in enumerate(order) if line.startswith(prefix))

    assert at(after) < at(f"[{section}.{argv[2]}]") < at(before)


def test_a_new_familys_first_sku_gets_its_own_banner() -> None:
    from minimatrix import MINI

    text = MINI.replace("[skus.h100]", "# ---- NVIDIA ----------\n\n[skus.h100]").replace(
        "[skus.mi300x]", "# ---- AMD -------------\n\n[skus.mi300x]"
    )
    text += '\n[families.demo]\nname = "Demo accelerator"\nmaturity = "experimental"\nsession = "demo"\n'
    text += 'runtime_kind = "demo"\narch_pattern = "demo[0-9]+"\n'
    new = plan_add(text, "sku", "demo1", ["family=demo", 'name="Demo 1"', "arch=demo1"], None).text
    assert "# ---- Demo accelerator -" in new
    lines = new.splitlines()
    banner = next(i for i, line in enumerate(lines) if line.startswith("# ---- Demo"))
    assert lines[banner + 2] == "[skus.demo1]"
    assert lines.index("[skus.mi300x]") < banner
    assert lines[banner].endswith("----")


def test_without_banners_a_new_familys_entry_goes_after_the_section() -> None:
    from minimatrix import MINI

    text = MINI + '\n[families.demo]\nname = "Demo"\nmaturity = "experimental"\nsession = "demo"\n'
    text += 'runtime_kind = "demo"\narch_pattern = "demo[0-9]+"\n'
    new = plan_add(text, "sku", "demo1", ["family=demo", 'name="Demo 1"', "arch=demo1"], None).text
    assert new.index("[skus.mi300x]") < new.index("[skus.demo1]") < new.index("[drivers.amdgpu-rocm-6-4]")
    assert "# ----" not in new


# ---------------------------------------------------------------------------------------------------- --from


def test_from_copies_only_shared_facts_and_says_so(matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["add", "sku", "rtx-pro-4500", "--from", "rtx-pro-6000-server", 'name="NVIDIA RTX PRO 4500"',
            'product_names=["NVIDIA RTX PRO 4500"]', "driver_min=580.65.06", "--env", "gpu-nvidia-cu128"]  # fmt: skip
    assert main(["--matrix", str(matrix), *argv]) == 0
    out = capsys.readouterr().out
    assert "copied from rtx-pro-6000-server: family, arch\n" in out
    assert (
        "not copied (facts of rtx-pro-6000-server itself; give them): name, ray_accelerator_type, product_names, "
        "pci_device_ids" in out
    )
    # Ray's name is the device's own too: the SKU says neither it nor why there is none, and `add` says so
    assert "warning: skus.rtx-pro-4500: says neither what Ray calls it nor why Ray has no name for it" in out
    text = matrix.read_text()
    entry = text[text.index("[skus.rtx-pro-4500]") :].split("\n\n", 1)[0]
    assert "memory_mib" not in entry
    assert "sources" not in entry
    assert "pci_device_ids" not in entry
    assert 'driver_min = "580.65.06"' in entry  # a string key takes the text as written
    assert "put it in gpu-nvidia-cu128" in out


def test_key_with_nothing_after_the_equals_sign_unsets_it(matrix: Path) -> None:
    args = ["add", "sku", "gh200-x", "--from", "gh200", 'name="GH200 X"', 'product_names=["GH200 X"]',
            "driver_min=560.28.03", "host_arch="]  # fmt: skip
    assert main(["--matrix", str(matrix), *args, "--dry-run"]) == 0
    assert main(["--matrix", str(matrix), *args[:-1], "memory_mib=", "--dry-run"]) == 2


def test_from_is_refused_for_kinds_without_shared_facts(matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--matrix", str(matrix), "add", "family", "demo", "--from", "amd"]) == 2
    assert "--from copies SKUs, runtimes and environments" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("assignment", "says"),
    [
        ("pci_device_ids=0x74a0", ("skus.x.pci_device_ids is a list of quoted strings, not the integer 0x74a0; "
         "write pci_device_ids='[\"0x74a0\"]'")),
        ("memory_mib=lots", "skus.x.memory_mib is an integer, not the text 'lots'; write memory_mib=81559"),
        ("host_arch=aarch64", "skus.x.host_arch is a list of quoted strings, not the text 'aarch64'"),
    ],
)  # fmt: skip
def test_values_are_typed_by_the_schema(assignment: str, says: str) -> None:
    key, _, value = assignment.partition("=")
    with pytest.raises(UsageError) as error:
        typed_value("sku", key, value, "x")
    assert says in str(error.value)


def test_string_keys_take_the_text_as_written() -> None:
    assert typed_value("sku", "driver_min", "570") == "570"
    assert typed_value("sku", "arch", "0x10") == "0x10"
    assert typed_value("runtime", "driver.min", "575.51.03") == "575.51.03"
    assert typed_value("runtime", 'base_images."ubuntu24.04".tag', "12.9") == "12.9"
    assert typed_value("sku", "memory_mib", "81559") == 81559


def test_refusals_show_the_problems_and_do_not_send_to_validate(
    matrix: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [a.replace('"0x74a0"', '"0x74A0"') for a in MI300A]
    assert main(["--matrix", str(matrix), "add", "sku", "mi300a", *bad]) == 1
    err = capsys.readouterr().err
    assert (
        f"{matrix}: error: skus.mi300a.pci_device_ids[0]: '0x74A0' is not valid here: expected a PCI id in "
        "lower-case hex, like 0x2330 (lower-case: write '0x74a0')"
    ) in err
    assert "nothing written (skus.mi300a): fix what is shown above" in err
    assert "accelenv validate" not in err


# ---------------------------------------------------------------------------------------------------- attach


def test_attach_and_detach(matrix: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = matrix.read_text()
    assert main(["--matrix", str(matrix), "add", "sku", "mi300a", *MI300A]) == 0
    assert "warning: skus.mi300a: no environment lists this SKU" in capsys.readouterr().out
    assert main(["--matrix", str(matrix), "attach", "mi300a", "gpu-amd-rocm64", "gpu-amd-rocm70"]) == 0
    assert "put mi300a in gpu-amd-rocm64, gpu-amd-rocm70" in capsys.readouterr().out
    text = matrix.read_text()
    assert main(["--matrix", str(matrix), "attach", "mi300a", "gpu-amd-rocm64"]) == 0  # idempotent
    assert "envs.gpu-amd-rocm64 already lists mi300a; nothing to do there" in capsys.readouterr().out
    assert matrix.read_text() == text
    assert main(["--matrix", str(matrix), "detach", "mi300a", "gpu-amd-rocm64", "gpu-amd-rocm70"]) == 0
    assert main(["--matrix", str(matrix), "detach", "mi300a", "gpu-amd-rocm64"]) == 0
    assert "envs.gpu-amd-rocm64 does not list mi300a" in capsys.readouterr().out
    lines = set(matrix.read_text().splitlines())
    assert set(before.splitlines()) <= lines  # every list is back as it was


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["attach", "mi300", "gpu-amd-rocm64"], 2, "no SKU 'mi300' under [skus]; did you mean 'mi300x'?"),
        (["attach", "mi300x", "gpu-amd-rocm46"], 2, "no environment 'gpu-amd-rocm46' under [envs]; did you mean"),
        (["attach", "b200", "gpu-nvidia-cu126"], 1, "B200 (b200, sm_100) is not supported by CUDA 12.6"),
        (["attach", "b200", "gpu-amd-rocm64"], 1, "SKU 'b200' is a 'nvidia' device; this environment is 'amd'"),
    ],
)
def test_attach_refuses(
    matrix: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, says: str
) -> None:
    before = matrix.read_text()
    assert main(["--matrix", str(matrix), *argv]) == code
    assert says in capsys.readouterr().err
    assert matrix.read_text() == before


def test_attach_keeps_the_layout() -> None:
    from minimatrix import MINI

    text = MINI.replace('skus = ["h100", "b300"]', 'skus = [\n  "h100",\n  "b300",\n]')
    new = plan_attach(text, "b300", ["gpu-nvidia-cu132"], detach=True).text
    assert 'skus = [\n  "h100",\n]' in new
    new = plan_attach(new, "b300", ["gpu-nvidia-cu132"], detach=False).text
    assert new == text
    diff_lines = [line for line in new.splitlines() if line not in text.splitlines()]
    assert diff_lines == []
