"""Rules a vendor's change meets (issue 16): a repeated SKU in an environment is one problem, not also a false
"no default environment"; a product-name glob that matches another SKU's name is refused; a SKU no environment
lists is a warning unless its notes say why; an upper-case PCI id is told to be lower-case."""

from __future__ import annotations

import pytest
from minimatrix import MINI

from accelenv.matrix import validate_text
from accelenv.matrix.problems import Category, Severity


def problems(text: str) -> list[tuple[str, str, str]]:
    return [(p.path, str(p.severity), p.message) for p in validate_text(text).problems if p.rule not in ("unpinned",)]


def test_the_mini_matrix_is_clean() -> None:
    assert problems(MINI) == []


def test_a_repeated_sku_is_one_problem() -> None:
    text = MINI.replace('skus = ["mi300x"]', 'skus = ["mi300x", "mi300x"]')
    assert problems(text) == [
        ("envs.gpu-amd-rocm70.skus[1]", "error", "lists 'mi300x' twice (also at [0]): keep one"),
    ]


def test_an_environment_the_schema_refuses_hides_no_default() -> None:
    # the family's only environment is refused (a wrong tier): no conclusion about its default or its SKUs
    text = MINI.replace('ci_tier = "nightly"', 'ci_tier = "often"')
    found = problems(text)
    assert [path for path, _, _ in found] == ["envs.gpu-amd-rocm70.ci_tier"]


OVERLAP = """
[skus.mi300a]
family = "amd"
name = "AMD Instinct MI300A"
arch = "gfx942"
product_names = ["*MI300A*"]
pci_device_ids = ["0x74a0"]
sources = ["notes"]

[skus.mi300]
family = "amd"
name = "AMD Instinct MI300"
arch = "gfx942"
product_names = ["*MI300*"]
sources = ["notes"]
"""


def test_a_glob_that_matches_another_skus_name_is_refused() -> None:
    text = MINI.replace('skus = ["mi300x"]', 'skus = ["mi300x", "mi300a", "mi300"]') + OVERLAP
    found = [(path, message) for path, severity, message in problems(text) if severity == "error"]
    assert found == [
        (
            "skus.mi300.product_names[0]",
            (
                "'*MI300*' also matches 'AMD Instinct MI300X', a name of SKU 'mi300x': a host device must match one "
                "SKU only; make the pattern name this model alone (e.g. the full product name)"
            ),
        ),
        (
            "skus.mi300.product_names[0]",
            (
                "'*MI300*' also matches 'AMD Instinct MI300A', a name of SKU 'mi300a': a host device must match one "
                "SKU only; make the pattern name this model alone (e.g. the full product name)"
            ),
        ),
    ]


@pytest.mark.parametrize(
    ("mine", "theirs"),
    [
        (["*MI210*"], ["*MI250X*"]),  # `*A*` and `*B*` share "AB", but no product is called both
        (["*MI250", "*MI250 *"], ["*MI250X*"]),
        (["NVIDIA GH200 144G*"], ["NVIDIA GH200 480GB"]),
        (["v5p-*"], ["v5litepod-*"]),
    ],
)
def test_globs_that_only_overlap_on_names_no_device_has_pass(mine: list[str], theirs: list[str]) -> None:
    extra = f"""
[skus.one]
family = "amd"
name = "One"
arch = "gfx942"
no_ray_accelerator_type = "no PCI id given"
product_names = {mine!r}
sources = ["notes"]

[skus.two]
family = "amd"
name = "Two"
arch = "gfx942"
no_ray_accelerator_type = "no PCI id given"
product_names = {theirs!r}
sources = ["notes"]
""".replace("'", '"')
    text = MINI.replace('skus = ["mi300x"]', 'skus = ["mi300x", "one", "two"]') + extra
    assert problems(text) == []


def test_a_sku_in_no_environment_is_a_change_warning_unless_its_notes_say_why() -> None:
    text = MINI.replace('skus = ["h100", "b300"]', 'skus = ["h100"]')
    validation = validate_text(text)
    [problem] = [p for p in validation.problems if p.rule == "sku-environment"]
    assert (problem.path, problem.severity, problem.category) == ("skus.b300", Severity.WARNING, Category.CHANGE)
    assert problem.message.startswith("no environment lists this SKU: `accelenv attach b300 ENV...`")
    explained = text.replace(
        'driver_min = "580.82.07"', 'driver_min = "580.82.07"\nnotes = "No environment: the test has none for it."'
    )
    assert [p for p in validate_text(explained).problems if p.rule == "sku-environment"] == []


def test_the_shipped_inf1_states_why_it_has_no_environment() -> None:
    from pathlib import Path

    shipped = (Path(__file__).resolve().parents[2] / "matrix.toml").read_text(encoding="utf-8")
    assert [p for p in validate_text(shipped).problems if p.rule == "sku-environment"] == []


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ('pci_device_ids = ["0x74a1"]', 'pci_device_ids = ["0x74A1"]',
         "'0x74A1' is not valid here: expected a PCI id in lower-case hex, like 0x2330 (lower-case: write '0x74a1')"),
        ("[skus.mi300x]", "[skus.MI300X]",
         ("'MI300X' is not a valid key: expected a lower-case id: letters, digits and dashes (lower-case: write "
          "'mi300x')")),
    ],
)  # fmt: skip
def test_upper_case_ids_are_told_the_lower_case_form(old: str, new: str, says: str) -> None:
    assert any(says in message for _, _, message in problems(MINI.replace(old, new)))
