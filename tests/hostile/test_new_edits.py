"""`accelenv attach`, `detach` and `add ... --from/key=` with hostile ids, values and matrices: every refusal is a
clean error on one line per problem, nothing is written unless the whole edit validates, and what a user wrote
in an environment's `skus` is never replaced by the edit."""

from __future__ import annotations

import contextlib
import os
import stat
import subprocess
from typing import TYPE_CHECKING

import pytest
from hostilekit import accelenv, accelenv_here, assert_clean_error

from accelenv.cli import main
from accelenv.errors import UsageError, WriteFailedError
from accelenv.matrix.edit import attach_to_file

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

CU129 = 'skus = ["h100-sxm", "h200", "gh200", "b200", "gb200", "b300", "rtx-pro-6000-server"]'
NEW_L5 = ["add", "sku", "l5", "--from", "l4", 'name="L5"', 'product_names=["*L5*"]', 'pci_device_ids=["0x27b9"]']


def _edit(matrix: Path, old: str, new: str) -> bytes:
    text = matrix.read_text()
    assert old in text
    matrix.write_text(text.replace(old, new, 1))
    return matrix.read_bytes()


def _one_problem_per_line(stderr: str) -> None:
    for line in stderr.splitlines():
        assert line.startswith(("accelenv: ", "/")), stderr  # no continuation line from an id with a newline


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["attach", "\u217c4", "gpu-nvidia-cu129"], "no SKU '\u217c4' under [skus]; did you mean 'l4'?"),
        (["attach", "\uff4c4", "gpu-nvidia-cu129"], "did you mean 'l4'?"),  # a full-width l
        (["attach", "", "gpu-nvidia-cu129"], "no SKU '' under [skus]; known: "),
        (["attach", "../x", "gpu-nvidia-cu129"], "no SKU '../x' under [skus]"),
        (["attach", "l4", "x.y"], "no environment 'x.y' under [envs]"),
        (["attach", "l4", 'x"y\n[envs.z]'], "no environment 'x\"y\\n[envs.z]' under [envs]"),
        (["detach", "l4", "gpu\x1b[2J"], "no environment 'gpu\\x1b[2J' under [envs]"),
        (["attach", "l4", "a" * 100_000], "no environment '" + "a" * 80 + "...' under [envs]"),
        (
            ["add", "sku", "\u217c5", "family=nvidia"],
            "'\u217c5' is not a valid sku id: expected lower-case letters, digits and dashes (write 'l5')",
        ),
        (
            ["add", "sku", "x" * 5000],
            "'" + "x" * 80 + "...' is not a valid sku id: expected lower-case letters, digits and dashes, at most 64",
        ),
        (["add", "sku", "l5", "--from", "\u217c4"], "--from '\u217c4': no skus.'\u217c4'; did you mean 'l4'?"),
        (["add", "sku", "l5", "--from", "l5"], "--from l5: no skus.l5"),
        (["add", "sku", "l5", "--from", "x\ny"], "--from 'x\\ny': no skus.'x\\ny'"),
        (["add", "sku", "l4", "--from", "l4"], "skus.l4 already exists"),
        (["add", "os", "../x"], "'../x' is not a valid os id"),
        ([*NEW_L5, "driver.min="], "driver.min=: nothing to unset, the new entry has no driver.min (--from l4 did"),
        ([*NEW_L5, "nonexistent="], "nonexistent=: nothing to unset"),
        ([*NEW_L5, "archx="], "did you mean 'arch='?"),
        ([*NEW_L5, 'a."b\nc"=1'], "is not a key: write a name or a dotted path"),
        ([*NEW_L5, '"=1'], "'\"' is not a key"),
        ([*NEW_L5, "=1"], "'=1': expected KEY=VALUE"),
        ([*NEW_L5, "name.x=1"], "name.x: name is a string, not a table"),
    ],
)
def test_hostile_ids_and_keys_are_clean_one_line_errors(matrix: Path, argv: list[str], says: str) -> None:
    before = matrix.read_bytes()
    result = accelenv_here("--matrix", str(matrix), *argv)
    assert_clean_error(result, code=2, says=says)
    _one_problem_per_line(result.stderr)
    assert len(result.stderr) < 2000
    assert matrix.read_bytes() == before


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([*NEW_L5, "family="], "skus.l5: missing required key 'family'"),
        ([*NEW_L5, "arch="], "skus.l5: missing required key 'arch'"),
        ([*NEW_L5, "name='x\"\n[families.evil]'"], "skus.l5.name: "),
        ([*NEW_L5[:5], 'name="""x\n[families.evil]\nname = "e"\n"""'], "expected one line of text"),
        ([*NEW_L5, 'name="\x1b[2J"'], "skus.l5.name: '\"\\x1b[2J\"' is not valid here"),
        ([*NEW_L5, "driver.min.x=1"], "skus.l5.driver: unknown key 'driver'; did you mean 'driver_min'?"),
        ([*NEW_L5, 'foo.bar.baz="1"'], "skus.l5.foo: unknown key 'foo'"),
        ([*NEW_L5, 'host_arch=["x86_64", 1]'], "skus.l5.host_arch[1]: expected string, found int 1"),
        (
            ["add", "env", "e1", "--from", "gpu-nvidia-cu129", 'description="d"', "requirements.packages="],
            "envs.e1.requirements: missing required key 'packages'",
        ),
        (["add", "source", "s1", 'url="javascript:alert(1)"', 'title="t"'], "expected an https:// URL"),
    ],
)
def test_values_that_would_break_the_matrix_are_refused(matrix: Path, argv: list[str], says: str) -> None:
    before = matrix.read_bytes()
    result = accelenv_here("--matrix", str(matrix), *argv)
    assert_clean_error(result, code=1, says=says)
    assert "nothing written" in result.stderr
    assert matrix.read_bytes() == before
    assert "[families.evil]" not in matrix.read_text()


@pytest.mark.parametrize(
    ("skus", "what"),
    [
        ('skus = "h100-sxm"', "a string"),
        ('skus = { a = "h100-sxm" }', "a table"),
        ('skus.a = "h100-sxm"', "a table"),
        ("skus = 5", "an integer"),
    ],
)
@pytest.mark.parametrize("command", ["attach", "detach"])
def test_skus_that_is_not_a_list_is_never_overwritten(matrix: Path, skus: str, what: str, command: str) -> None:
    """Before: `attach l4 env` replaced `skus = "h100-sxm"` (or a table) with `["l4"]`, losing what was there."""
    before = _edit(matrix, CU129, skus)
    result = accelenv_here("--matrix", str(matrix), command, "l4", "gpu-nvidia-cu129")
    assert_clean_error(result, code=2, says=f"envs.gpu-nvidia-cu129.skus is {what}, not a list of SKU ids")
    assert "not a list of SKU ids" in result.stderr
    assert matrix.read_bytes() == before


def test_skus_as_an_array_of_tables_is_a_clean_error(matrix: Path) -> None:
    """Before: an internal error (tomlkit: Unsupported insert value type)."""
    text = matrix.read_text().replace(CU129, "", 1)
    text = text.replace(
        "[envs.gpu-amd-rocm64]", '[[envs.gpu-nvidia-cu129.skus]]\nid = "h100-sxm"\n\n[envs.gpu-amd-rocm64]'
    )
    matrix.write_text(text)
    before = matrix.read_bytes()
    result = accelenv("--matrix", str(matrix), "attach", "l4", "gpu-nvidia-cu129")
    assert_clean_error(result, code=2, says="envs.gpu-nvidia-cu129.skus is a list of tables, not a list of SKU ids")
    assert matrix.read_bytes() == before


def test_detach_takes_out_every_copy_of_a_duplicate(matrix: Path) -> None:
    """Before: only the first `l4` went; the environment still listed it, and detach said it took it out."""
    _edit(matrix, CU129, 'skus = ["h100-sxm", "l4", "h200", "l4"]')
    assert main(["--matrix", str(matrix), "detach", "l4", "gpu-nvidia-cu129"]) == 0
    assert 'skus = ["h100-sxm", "h200"]' in matrix.read_text()


@pytest.mark.parametrize(
    ("skus", "says"),
    [
        ('skus = ["h100-sxm", 1, "l4"]', "envs.gpu-nvidia-cu129.skus[1]: expected string, found int 1"),
        ('skus = ["h100-sxm", [1], "l4"]', "envs.gpu-nvidia-cu129.skus[1]: expected string, found list [1]"),
    ],
)
def test_non_strings_in_skus_are_reported_not_written(matrix: Path, skus: str, says: str) -> None:
    before = _edit(matrix, CU129, skus)
    result = accelenv("--matrix", str(matrix), "detach", "l4", "gpu-nvidia-cu129")
    assert_clean_error(result, code=1, says=says)
    assert matrix.read_bytes() == before


def test_comments_inside_a_multi_line_skus_list_survive(matrix: Path) -> None:
    _edit(matrix, CU129, 'skus = [\n  "h100-sxm", # hopper\n  # the small one\n  "l4", # here\n  "h200",\n]')
    assert main(["--matrix", str(matrix), "detach", "l4", "gpu-nvidia-cu129"]) == 0
    assert main(["--matrix", str(matrix), "attach", "b200", "gpu-nvidia-cu129"]) == 0
    text = matrix.read_text()
    assert "# hopper" in text
    assert "# the small one" in text
    assert '"l4"' not in text.split("[envs.gpu-nvidia-cu129]")[1].split("[envs.")[0]
    assert main(["--matrix", str(matrix), "validate"]) == 0


def test_a_matrix_invalid_before_the_edit_is_not_written(matrix: Path) -> None:
    before = _edit(matrix, "[envs.gpu-nvidia-cu129]\n", "[envs.gpu-nvidia-cu129]\nbogus = 1\n")
    result = accelenv("--matrix", str(matrix), "attach", "l4", "gpu-nvidia-cu129")
    assert_clean_error(result, code=1, says="envs.gpu-nvidia-cu129.bogus: unknown key 'bogus'")
    assert "nothing written" in result.stderr
    assert matrix.read_bytes() == before


def test_dry_run_writes_nothing(matrix: Path) -> None:
    before = matrix.read_bytes()
    for argv in (["attach", "l4", "gpu-nvidia-cu129"], ["detach", "h200", "gpu-nvidia-cu129"], [*NEW_L5, "--dry-run"]):
        result = accelenv("--matrix", str(matrix), *argv, *(["--dry-run"] if argv[0] != "add" else []))
        assert result.returncode in (0, 1), result.stderr  # add: l5's sources are missing, so it is refused
        assert "Traceback" not in result.stderr
    assert matrix.read_bytes() == before
    assert sorted(p.name for p in matrix.parent.iterdir()) == ["matrix.toml"]


@contextlib.contextmanager
def unwritable(folder: Path) -> Iterator[None]:
    """`folder` where nothing can be created: mode 0500, and for root (whom modes do not stop) the immutable
    attribute, which stops root too (`chattr +i`, as CI runs as root)."""
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    immutable = os.geteuid() == 0
    if immutable:
        done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, text=True, check=False, timeout=30)
        if done.returncode != 0:
            folder.chmod(stat.S_IRWXU)
            pytest.fail(f"root needs the immutable attribute to make a folder unwritable: {done.stderr.strip()}")
    try:
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True, timeout=30)
        folder.chmod(stat.S_IRWXU)


def test_a_matrix_in_a_folder_that_cannot_be_written_is_a_clean_error(matrix: Path) -> None:
    before = matrix.read_bytes()
    with unwritable(matrix.parent):
        result = accelenv("--matrix", str(matrix), "attach", "l4", "gpu-nvidia-cu129")
    assert_clean_error(result, code=1, says="cannot write")
    assert "nothing was changed" in result.stderr
    assert matrix.read_bytes() == before


def test_attach_writes_through_a_symlinked_matrix(matrix: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.toml"
    link.symlink_to(matrix)
    assert main(["--matrix", str(link), "attach", "l4", "gpu-nvidia-cu129"]) == 0
    assert link.is_symlink()
    assert '"l4"' in matrix.read_text().split("[envs.gpu-nvidia-cu129]")[1].split("[envs.")[0]


def test_a_matrix_changed_between_read_and_write_is_not_written_over(
    matrix: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An editor saves while attach computes its edit: the edit is refused, the editor's text stays."""
    from accelenv.matrix import edit

    real = edit.plan_attach
    saved = matrix.read_text().replace("# Environments.", "# Environments (edited meanwhile).", 1)

    def plan_then_someone_saves(*args: object, **kwargs: object) -> edit.Edit:
        result = real(*args, **kwargs)  # type: ignore[arg-type]
        matrix.write_text(saved)
        return result

    monkeypatch.setattr(edit, "plan_attach", plan_then_someone_saves)
    with pytest.raises(WriteFailedError, match="changed while accelenv was editing it; nothing was written"):
        attach_to_file(matrix, "l4", ["gpu-nvidia-cu129"], detach=False, dry_run=False)
    assert matrix.read_text() == saved


def test_attach_refusals_are_usage_errors_in_process(matrix: Path) -> None:
    matrix.write_text(matrix.read_text().replace(CU129, 'skus = "h100-sxm"', 1))
    with pytest.raises(UsageError, match=r"skus is a string, not a list of SKU ids"):
        attach_to_file(matrix, "l4", ["gpu-nvidia-cu129"], detach=False, dry_run=True)
