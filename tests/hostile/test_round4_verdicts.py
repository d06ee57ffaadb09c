"""Issue 41, verdicts that lie and limits that disagree: a Ray node's answer is judged by its own checks, never by
the verdict it states; an environment id is held to the one limit every use of it can take (an
`accelenv.io/env.<id>` label name is at most 63 characters, of which `env.` takes four)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hypothesis import given, settings
from hypothesis import strategies as st
from minimatrix import MINI

from accelenv.check.labels import PREFIX, key_problem, labelled
from accelenv.cluster.node_answer import STATUSES, answer_problem, answer_verdict
from accelenv.cluster.ray import CONFORMING, _check_nodes
from accelenv.matrix import validate_text
from accelenv.results.schema import RECORD_ID
from accelenv.schema_values import ENV_ID, ENV_ID_MAX, ENV_LABEL, LABEL_NAME_MAX

SHIPPED_TEXT = (Path(__file__).resolve().parents[2] / "matrix.toml").read_text(encoding="utf-8")  # has the cpu family

if TYPE_CHECKING:
    import pytest

# ---------------------------------------------------------------------------------------------------- node answers


def _check(status: str, n: int) -> dict[str, str]:
    return {"id": f"c{n}", "status": status, "expected": "", "found": "", "message": "", "fix": ""}


def _answer(claimed: str, statuses: list[str]) -> dict[str, Any]:
    return {
        "node_id": "n1",
        "verdict": claimed,
        "checks": [_check(s, i) for i, s in enumerate(statuses)],
        "devices": 0,
        "driver": None,
        "skus": [],
        "seconds": 0.5,
    }


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["pass", "warn", "fail"]), st.lists(st.sampled_from(STATUSES), max_size=6))
def test_a_node_conforms_only_when_none_of_its_own_checks_failed(claimed: str, statuses: list[str]) -> None:
    """Every combination of a stated verdict and the statuses of the node's own checks."""
    answer = _answer(claimed, statuses)
    assert answer_problem(answer) is None
    found = answer_verdict(claimed, answer["checks"])
    worst = "fail" if "fail" in [claimed, *statuses] else "warn" if "warn" in [claimed, *statuses] else "pass"
    assert found == worst
    assert (found in CONFORMING) == ("fail" not in [claimed, *statuses])


class _Ref:
    def __init__(self, answer: object) -> None:
        self.answer = answer


class _FakeRay:
    """The four calls `_check_nodes` makes, for one alive CPU node (as tests/hostile/test_node_answers.py)."""

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def nodes(self) -> list[dict[str, Any]]:
        return [{"NodeID": "n1", "Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {}}]

    def wait(self, refs: list[_Ref], **_: object) -> tuple[list[_Ref], list[_Ref]]:
        return refs, []

    def get(self, ref: _Ref) -> object:
        return ref.answer


def test_check_ray_counts_no_node_whose_checks_failed_as_conforming(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelenv.cluster import ray as cluster

    answer = _answer("pass", ["pass", "fail"])  # the node says pass; its own second check failed

    class Remote:
        def options(self, **_: object) -> Remote:
            return self

        def remote(self, *_: object) -> _Ref:
            return _Ref(answer)

    monkeypatch.setattr(cluster, "_remote_check", Remote)
    (result,) = _check_nodes(
        _FakeRay(answer), lambda **_: None, SHIPPED_TEXT, "cpu", "cpu", timeout=5, roots=None, delays=None
    )
    assert result.verdict == "fail"
    assert "c1" in result.failing


# ---------------------------------------------------------------------------------------------------- id limits


def test_the_limit_is_the_label_names() -> None:
    assert ENV_ID_MAX == LABEL_NAME_MAX - len(ENV_LABEL) == 59
    longest, over = "e" * ENV_ID_MAX, "e" * (ENV_ID_MAX + 1)
    assert key_problem(f"{PREFIX}{ENV_LABEL}{longest}") is None
    assert key_problem(f"{PREFIX}{ENV_LABEL}{over}") is not None
    assert re.fullmatch(ENV_ID, longest)
    assert not re.fullmatch(ENV_ID, over)


def _matrix_with_env(env_id: str) -> str:
    return MINI.replace("gpu-nvidia-cu132", env_id)


def test_the_matrix_refuses_an_environment_id_no_label_key_can_hold() -> None:
    assert "gpu-nvidia-cu132" in MINI
    over = "gpu-nvidia-cu132-" + "x" * (ENV_ID_MAX + 1 - len("gpu-nvidia-cu132-"))
    problems = [p for p in validate_text(_matrix_with_env(over)).problems if p.rule != "unpinned"]
    assert any(f"at most {ENV_ID_MAX} characters" in p.message for p in problems), problems


def test_an_environment_id_the_matrix_takes_makes_a_label_and_a_record_id() -> None:
    longest = "gpu-nvidia-cu132-" + "x" * (ENV_ID_MAX - len("gpu-nvidia-cu132-"))
    problems = [p for p in validate_text(_matrix_with_env(longest)).problems if p.severity.name == "ERROR"]
    assert problems == []
    found = labelled({f"{PREFIX}{ENV_LABEL}{longest}": "pass"})
    assert found.labels == {f"{PREFIX}{ENV_LABEL}{longest}": "pass"}
    assert re.fullmatch(RECORD_ID, f"{longest}-20261201T000000Z-0a1b2c3d")
