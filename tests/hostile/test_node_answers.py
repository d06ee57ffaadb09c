"""Issue 28, internal errors: one Ray node answering in another shape (another accelenv version) makes that node
unreadable, never the whole cluster check. The answers are enumerated by taking a good answer apart key by key.

No Ray here: `_check_nodes` is driven by a small fake of the four calls it makes, and every answer passes the
validation point `cluster.node_answer.answer_problem` the real run uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from accelenv.cluster.node_answer import answer_problem
from accelenv.cluster.ray import _check_nodes

SHIPPED_TEXT = (Path(__file__).resolve().parents[2] / "matrix.toml").read_text(encoding="utf-8")  # has the cpu family

GOOD: dict[str, Any] = {
    "node_id": "n1",
    "verdict": "pass",
    "checks": [
        {
            "id": "driver.present",
            "status": "pass",
            "expected": "a driver",
            "found": "none needed",
            "message": "ok",
            "fix": "",
        }
    ],
    "devices": 0,
    "driver": None,
    "skus": [],
    "seconds": 0.5,
}


def _broken() -> list[tuple[str, object]]:
    cases: list[tuple[str, object]] = [("a list", ["n1"]), ("a string", "pass"), ("nothing", None)]
    for key, good in GOOD.items():
        cases.append((f"no {key}", {k: v for k, v in GOOD.items() if k != key}))
        for wrong in ("text", 3, None, [1], {"a": 1}, True, float("nan")):
            if (key == "driver" and (wrong is None or isinstance(wrong, str))) or (key == "seconds" and wrong == 3):
                continue  # a driver version or none, a whole number of seconds: valid
            if isinstance(wrong, type(good)) and not isinstance(wrong, bool) and wrong == wrong:  # noqa: PLR0124
                continue
            cases.append((f"{key}={wrong!r}", {**GOOD, key: wrong}))
    cases += [("checks of strings", {**GOOD, "checks": ["x"]}), ("verdict 'maybe'", {**GOOD, "verdict": "maybe"})]
    return cases


def test_the_good_answer_is_good() -> None:
    assert answer_problem(GOOD) is None


@pytest.mark.parametrize(("label", "answer"), _broken(), ids=[label for label, _ in _broken()])
def test_every_broken_answer_is_named(label: str, answer: object) -> None:
    assert answer_problem(answer) is not None, label


class _Ref:
    def __init__(self, answer: object) -> None:
        self.answer = answer


class _Remote:
    def options(self, **_: object) -> _Remote:
        return self

    def remote(self, *_: object) -> _Ref:
        raise AssertionError("replaced per node below")


class _FakeRay:
    """ray.nodes / wait / cancel / get over two alive nodes, each answering what it was given."""

    def __init__(self, answers: dict[str, object]) -> None:
        self.answers = answers

    def nodes(self) -> list[dict[str, Any]]:
        return [{"NodeID": n, "Alive": True, "NodeManagerAddress": f"10.0.0.{i}", "Resources": {}}
                for i, n in enumerate(self.answers)]  # fmt: skip

    def wait(self, refs: list[_Ref], **_: object) -> tuple[list[_Ref], list[_Ref]]:
        return refs, []

    def cancel(self, ref: _Ref, **_: object) -> None:
        raise AssertionError("nothing is pending")

    def get(self, ref: _Ref) -> object:
        return ref.answer


def test_one_node_in_another_shape_is_that_node_unreadable(monkeypatch: pytest.MonkeyPatch) -> None:
    from accelenv.cluster import ray as cluster

    answers: dict[str, object] = {"n1": GOOD, "n2": {"node_id": "n2", "result": "ok", "version": 2}}
    order = iter(answers.values())

    class Remote(_Remote):
        def remote(self, *_: object) -> _Ref:
            return _Ref(next(order))

    monkeypatch.setattr(cluster, "_remote_check", Remote)
    results = _check_nodes(
        _FakeRay(answers), lambda **_: None, SHIPPED_TEXT, "cpu", "cpu", timeout=5, roots=None, delays=None
    )
    by_node = {r.node_id: r for r in results}
    assert by_node["n1"].verdict == "pass"
    assert by_node["n2"].verdict == "unreachable"
    assert "the node's answer is unreadable (no verdict)" in by_node["n2"].problems[0]
