"""The shape of one node's answer to a cluster check, validated before anything reads it.

A node may run another accelenv version (or anything else that answers the remote call): an answer in another
shape makes that node unreadable, with the first difference named, instead of crashing the whole cluster check.
"""

from __future__ import annotations

VERDICTS = frozenset({"pass", "warn", "fail", "skip"})
_MAX_ITEMS = 10_000


def answer_problem(data: object) -> str | None:
    """What is wrong with a node's answer (None: it has the shape `_check_here` returns)."""
    if not isinstance(data, dict):
        return f"expected an object, got {type(data).__name__}"
    expected: dict[str, tuple[type, ...]] = {
        "node_id": (str,),
        "verdict": (str,),
        "checks": (list,),
        "devices": (int,),
        "driver": (str, type(None)),
        "skus": (list,),
        "seconds": (int, float),
    }
    for key, types in expected.items():
        if key not in data:
            return f"{key} is missing"
        value = data[key]
        if not isinstance(value, types) or isinstance(value, bool):
            return f"{key} is {type(value).__name__}, not {' or '.join(t.__name__ for t in types)}"
    if data["verdict"] not in VERDICTS:
        return f"verdict is {str(data['verdict'])[:40]!r}, not one of {', '.join(sorted(VERDICTS))}"
    if data["devices"] < 0 or not 0 <= data["seconds"] < float("inf"):
        return "devices or seconds is out of range"
    if len(data["checks"]) > _MAX_ITEMS or len(data["skus"]) > _MAX_ITEMS:
        return "more checks or SKUs than any host has"
    if not all(isinstance(s, str) for s in data["skus"]):
        return "skus holds something other than names"
    for index, item in enumerate(data["checks"]):
        if not (isinstance(item, dict) and isinstance(item.get("id"), str) and isinstance(item.get("status"), str)):
            return f"checks[{index}] has no id and status"
    return None
