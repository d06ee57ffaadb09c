"""What `check --ray` makes of one node's answer: whether it is readable at all, and where Ray's picture of the node
(its `accelerator_type:*` resource, its `ray.io/accelerator-type` label, the accelenv labels it was started with)
disagrees with what the node is now. Pure: the answer and `ray.nodes()` entries are plain data.

A node's answer is untrusted (it comes from whatever runs on that node): one of the wrong shape makes that node
unreadable, never the run.
"""

from __future__ import annotations

from typing import Any

from accelenv.check.labels import drift
from accelenv.cluster.accelerator_types import RAY_TYPE_LABEL, ExpectedRay, ray_type_problems
from accelenv.excerpts import clip

VERDICTS = ("pass", "warn", "fail")
STATUSES = ("pass", "warn", "fail", "skip")
MAX_ITEMS = 4096
MAX_TEXT = 4096
_CHECK_KEYS = ("id", "status", "expected", "found", "message", "fix")


def answer_problem(data: object) -> str | None:
    """Why `data` is not an answer `_check_here` gives, or None."""
    if not isinstance(data, dict):
        return f"a {type(data).__name__}, not a mapping"
    wants: dict[str, tuple[type, ...]] = {
        "node_id": (str,),
        "verdict": (str,),
        "checks": (list,),
        "devices": (int,),
        "driver": (str, type(None)),
        "skus": (list,),
        "seconds": (int, float),
    }
    for key, kinds in wants.items():
        if key not in data:
            return f"no {key}"
        if not isinstance(data[key], kinds) or isinstance(data[key], bool):
            return f"{key} is a {type(data[key]).__name__}"
    if data["verdict"] not in VERDICTS:
        return f"verdict {clip(str(data['verdict']), 40)!r} is not one of {', '.join(VERDICTS)}"
    if not 0 <= data["devices"] <= MAX_ITEMS:
        return f"devices {data['devices']} is out of range"
    if not 0 <= data["seconds"] < float("inf"):  # NaN and infinity fail this too
        return f"seconds {data['seconds']!r} is out of range"
    if len(data["checks"]) > MAX_ITEMS or len(data["skus"]) > MAX_ITEMS:
        return "too many checks or SKUs"
    for i, item in enumerate(data["checks"]):
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in _CHECK_KEYS):
            return f"checks[{i}] is not a check"
        if item["status"] not in STATUSES or any(len(item[k]) > MAX_TEXT for k in _CHECK_KEYS):
            return f"checks[{i}] has a bad status or an overlong text"
    if not all(isinstance(s, str) and len(s) <= 200 for s in data["skus"]):
        return "skus holds something other than short text"
    labels = data.get("labels", {})
    if not isinstance(labels, dict) or len(labels) > MAX_ITEMS:
        return "labels is not a mapping"
    if not all(isinstance(k, str) and isinstance(v, str) and len(k) <= 317 and len(v) <= 63 for k, v in labels.items()):
        return "labels holds something other than label keys and values"
    if not isinstance(data.get("topology", {}), dict):
        return "topology is not a mapping"  # its contents are drawn by cluster/view.py, which bounds and escapes them
    expected = data.get("ray_expected")
    if expected is not None and not (
        isinstance(expected, dict)
        and isinstance(expected.get("known"), bool)
        and isinstance(expected.get("accelerator_type"), str | type(None))
        and isinstance(expected.get("sku"), str | type(None))
    ):
        return "ray_expected is not Ray's expected view"
    return None


def answer_verdict(claimed: str, checks: list[dict[str, Any]]) -> str:
    """A node's verdict as its checks make it: the worst status among them (a skip counts for nothing), and never
    better than the node claims. An answer saying `pass` whose own checks list a failure is a failing node."""
    statuses = {claimed, *(c["status"] for c in checks)}
    return next(v for v in ("fail", "warn", "pass") if v in statuses or v == "pass")


def node_labels_of(node: dict[str, Any]) -> dict[str, str]:
    """The labels Ray keeps for a node (`ray.nodes()`'s `Labels`), text only."""
    labels = node.get("Labels") or {}
    if not isinstance(labels, dict):
        return {}
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def ray_findings(data: dict[str, Any], ray_types: list[str], labels: dict[str, str]) -> list[dict[str, str]]:
    """Checks of Ray's view against the node, in the shape of `check --json`'s: `ray.accelerator_type` (Ray's type
    against the node's SKU) and `ray.labels` (the accelenv labels the node started with against what it is now)."""
    found = []
    expected = data.get("ray_expected")
    if expected is not None:
        view = ExpectedRay(
            resource=None,
            known=expected["known"],
            accelerator_type=expected["accelerator_type"],
            sku=expected["sku"],
        )
        problems = ray_type_problems(view, ray_types, labels.get(RAY_TYPE_LABEL))
        statuses = {status for status, _ in problems}
        if view.known:
            found.append(
                {
                    "id": "ray.accelerator_type",
                    "status": "fail" if "fail" in statuses else "warn" if statuses else "pass",
                    "expected": view.accelerator_type or "none",
                    "found": ", ".join(ray_types) or "none",
                    "message": "; ".join(m for _, m in problems) or "Ray's accelerator type matches the node's SKU",
                    "fix": (
                        "start the node without a hand-set accelerator_type resource or GPU count (`ray start` "
                        "without --resources '{\"accelerator_type:...\": ...}' or --num-gpus, so Ray detects the "
                        "devices), or fix the SKU's ray_accelerator_type in matrix.toml if Ray's name for it changed"
                        if problems
                        else ""
                    ),
                }
            )
    now = data.get("labels") or {}
    if any(k.startswith("accelenv.io/") for k in labels):
        changed = drift(labels, now)
        found.append(
            {
                "id": "ray.labels",
                "status": "fail" if changed else "pass",
                "expected": "the node's accelenv labels say what it is now",
                "found": "; ".join(changed) or "they do",
                "message": (
                    "the node changed since it started (its labels are set once, at `ray start`): " + "; ".join(changed)
                    if changed
                    else "the node's accelenv labels match it"
                ),
                "fix": (
                    "relabel by restarting the node: `accelenv labels --format ray -o labels.yaml` and "
                    "`ray stop && ray start --labels-file labels.yaml ...` (Ray 2.60 cannot change a live node's "
                    "labels; on KubeRay, delete the pod so its init container writes them again)"
                    if changed
                    else ""
                ),
            }
        )
    return found
