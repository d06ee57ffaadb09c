"""Issue 28, internal errors: every numeric option of every command is validated by one of the argparse types of
cli/common.py (`seconds`, `count`, `fraction`, `days`, `duration`, `shm_size`); `refresh --timeout nan` (and -1,
0) is a usage error, never accepted or a traceback.

The test walks the whole parser (`build_parser("*")`), so an option added later is enumerated too."""

from __future__ import annotations

import argparse

import pytest
from hostilekit import accelenv, assert_clean_error

from accelenv.cli import build_parser
from accelenv.cli.common import count, days, duration, fraction, seconds, shm_size

NUMBER_TYPES = {
    seconds: ("nan", "inf", "-1", "0", "1e400", "ten", ""),
    count: ("-1", "1.5", "nan", "٣", ""),
    fraction: ("nan", "inf", "-0.1", "1", "1e400", "ten", ""),
    days: ("nan", "inf", "-1", "0", "1e400", "ten", ""),
    duration: ("nan", "inf", "-1", "0", "0d", "1e400", "7x", "ten", ""),
    shm_size: ("lots", "-1g", "nan", "1.5g", "16 g", "16g\n", ""),
}


def _options() -> list[tuple[str, argparse.Action]]:
    parser = build_parser("*")
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += [(name, a) for a in sub._actions if a.type is not None]
    return found


def test_every_typed_option_is_a_validated_number_or_text() -> None:
    """No option takes `int` or `float` raw: those accept nan, inf and negatives."""
    loose = [
        f"{command} {'/'.join(a.option_strings) or a.dest}: {getattr(a.type, '__name__', a.type)}"
        for command, a in _options()
        if a.type not in NUMBER_TYPES and a.type is not str
    ]
    assert loose == []


def test_the_enumeration_finds_the_options() -> None:
    names = {(command, a.dest) for command, a in _options()}
    assert {("refresh", "timeout"), ("check", "timeout"), ("lock", "timeout"), ("prune", "keep")} <= names


CASES = [
    (command, action.option_strings[0], bad)
    for command, action in _options()
    if action.type in NUMBER_TYPES and action.option_strings
    for bad in NUMBER_TYPES[action.type]
]


@pytest.mark.parametrize(("command", "option", "bad"), CASES)
def test_every_numeric_option_refuses_bad_numbers(command: str, option: str, bad: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser(command).parse_args([command, f"{option}={bad}"])
    assert exit_info.value.code == 2


@pytest.mark.parametrize("bad", ["nan", "-1", "0"])
def test_refresh_timeout_nan_is_a_usage_error(matrix: object, bad: str) -> None:
    result = accelenv("--matrix", str(matrix), "refresh", "--dry-run", f"--timeout={bad}")
    assert_clean_error(result, code=2, says="--timeout")
