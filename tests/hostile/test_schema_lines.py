"""Item 5: no schema pattern lets a line break through. jsonschema matches with `re.search`, where `$` also
matches before a final newline, so `[envs."cpu-evil\\n"]` used to validate and `render` split CMD, LABEL and ENV
lines. Now every pattern must match the whole value, and the published patterns refuse line breaks themselves."""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

import pytest
import tomlkit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import reference_document

from accelenv.matrix import validate_text
from accelenv.matrix.schema import matrix_schema
from accelenv.matrix.schema_check import strict_validator
from accelenv.schema_values import TEXT_BLOCK

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x85", "\u2028", "\u2029"]


def _changed(change: Callable[[Any], None]) -> str:
    document = reference_document()
    change(document)
    return tomlkit.dumps(document)


def _new_env(document: Any) -> None:
    env = copy.deepcopy(document["envs"]["cpu-py311"])
    del env["default"]
    document["envs"]["cpu-evil\n"] = env


def _set(*path: str, value: Any) -> Callable[[Any], None]:
    def change(document: Any) -> None:
        node = document
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _rename(section: str, old: str, new: str) -> Callable[[Any], None]:
    def change(document: Any) -> None:
        document[section][new] = copy.deepcopy(document[section][old])

    return change


CASES = {
    "env id": (_new_env, 'envs."cpu-evil\\n"'),
    "description": (_set("envs", "cpu-py311", "description", value="CPU only\n"), "envs.cpu-py311.description"),
    "sku id": (_rename("skus", "l4", "l4\n"), 'skus."l4\\n"'),
    "sku name": (_set("skus", "l4", "name", value="NVIDIA L4\n"), "skus.l4.name"),
    "image repository": (
        _set("runtimes", "cuda-12-8", "base_images", "ubuntu24.04", "repository", value="nvidia/cuda\n"),
        "runtimes.cuda-12-8.base_images.ubuntu24.04.repository",
    ),
    "image tag": (
        _set("runtimes", "cuda-12-8", "base_images", "ubuntu24.04", "tag", value="12.8.1-base\n"),
        "runtimes.cuda-12-8.base_images.ubuntu24.04.tag",
    ),
    "container_env value": (
        _set("families", "nvidia", "container_env", "NVIDIA_VISIBLE_DEVICES", value="all\n"),
        "families.nvidia.container_env.NVIDIA_VISIBLE_DEVICES",
    ),
    "container_env name": (
        _set("families", "nvidia", "container_env", "EVIL\n", value="1"),
        'families.nvidia.container_env."EVIL\\n"',
    ),
    "index_url": (
        _set("envs", "gpu-nvidia-cu128", "requirements", "index_url", value="https://pypi.org/simple\n"),
        "envs.gpu-nvidia-cu128.requirements.index_url",
    ),
    "component name": (
        _set("runtimes", "cuda-12-8", "components", "nccl\n", value="2.25.1"),
        'runtimes.cuda-12-8.components."nccl\\n"',
    ),
    "component version": (
        _set("runtimes", "cuda-12-8", "components", "nccl", value="2.25.1\n"),
        "runtimes.cuda-12-8.components.nccl",
    ),
    "requirement": (
        _set("envs", "cpu-py311", "requirements", "packages", value=["pytest==8.3.4\n"]),
        "envs.cpu-py311.requirements.packages[0]",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_trailing_newline_is_refused(case: str) -> None:
    change, path = CASES[case]
    problems = [p for p in validate_text(_changed(change)).problems if p.is_error]
    assert path in [p.path for p in problems if p.rule == "schema"], [p.render("m") for p in problems]


def _patterns(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            else:
                yield from _patterns(value)
    elif isinstance(node, list):
        for item in node:
            yield from _patterns(item)


PATTERNS = sorted(set(_patterns(matrix_schema())))


def test_every_pattern_is_anchored() -> None:
    assert PATTERNS
    for pattern in PATTERNS:
        assert pattern.startswith("^"), pattern
        assert pattern.endswith("$"), pattern


@pytest.mark.parametrize("pattern", [p for p in PATTERNS if p != TEXT_BLOCK])
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], deadline=None)
@given(data=st.data())
def test_no_pattern_admits_a_line_break(pattern: str, data: st.DataObject) -> None:
    """Any value a pattern accepts, with a line break anywhere in it, is refused: by our validator (whole-string
    match) and by the pattern itself under ECMA-262 rules (no `$` before a final newline; checked with \\Z)."""
    value = data.draw(st.from_regex(re.compile(pattern), fullmatch=True), label="value")
    where = data.draw(st.integers(min_value=0, max_value=len(value)), label="where")
    brk = data.draw(st.sampled_from(LINE_BREAKS), label="break")
    broken = value[:where] + brk + value[where:]
    schema = {"type": "string", "pattern": pattern}
    assert strict_validator(schema).is_valid(value)
    assert not strict_validator(schema).is_valid(value + "\n"), repr(value + "\n")  # the reported case
    assert not strict_validator(schema).is_valid(broken), repr(broken)
    ecma = re.compile(pattern[:-1] + r"\Z")  # $ as ECMA-262 means it: the very end
    assert not ecma.search(broken), repr(broken)


def test_notes_may_span_lines_but_not_carry_control_characters() -> None:
    schema = {"type": "string", "pattern": TEXT_BLOCK}
    assert strict_validator(schema).is_valid("line one\nline two\n")
    for bad in ("a\rb", "a\x1b[31mb", "a\u2028b", "a\u202eb", "a\x85b"):
        assert not strict_validator(schema).is_valid(bad), repr(bad)


def test_render_of_a_refused_matrix_writes_nothing(tmp_path: Any) -> None:
    from accelenv.cli import main

    path = tmp_path / "matrix.toml"
    path.write_text(_changed(_new_env))
    assert main(["--matrix", str(path), "render"]) == 1
    assert not (tmp_path / "images").exists()
