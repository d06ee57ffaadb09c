"""The schema/ files, generated: the matrix's JSON Schema and those of accelenv's machine-readable outputs
(`inspect --json`, `check --json`, `check --ray --json`).

The output schemas are contracts for CI and tooling: fields are only added, never renamed or retyped, without a
version bump. `accelenv schema --write` writes them all to schema/, as `render` writes Dockerfiles.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from accelenv.host.schema import BASE, Json, inspect_schema, obj, str_map, strings
from accelenv.matrix.schema import matrix_schema
from accelenv.results.schema import result_schema

if TYPE_CHECKING:
    from collections.abc import Callable


def check_schema() -> Json:
    statuses = ["pass", "warn", "fail", "skip"]
    status: Json = {"type": "string", "enum": statuses, "description": "Outcome."}
    finding = obj(
        "One check.",
        {
            "id": {"type": "string", "description": "Stable check id, e.g. driver.version, requirements.torch."},
            "status": status,
            "expected": {"type": "string", "description": "What the environment declares."},
            "found": {"type": "string", "description": "What the host shows."},
            "message": {"type": "string", "description": "The finding in words."},
            "fix": {"type": "string", "description": "What to do; empty when nothing is to be done."},
        },
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE + "check.schema.json",
        "title": "accelenv check --json",
        "description": "The verdict of one environment on one host (or snapshot).",
        "type": "object",
        "additionalProperties": False,
        "required": ["env", "verdict", "source", "counts", "checks"],
        "properties": {
            "env": {"type": "string", "description": "Environment id."},
            "verdict": {**status, "enum": ["pass", "warn", "fail"], "description": "fail if any check failed."},
            "source": {"type": "string", "description": "The host or snapshot judged."},
            "judged": obj(
                "What the verdict judged: the host (or snapshot, or image) and which Python its Python checks judged.",
                {
                    "host": {"type": "string", "description": "The machine judged, in words."},
                    "python_kind": {
                        "enum": ["interpreter", "virtualenv", "image", "not judged"],
                        "description": (
                            "interpreter: a plain Python; virtualenv: a virtualenv (the environment's session's, "
                            "or the one running accelenv); image: the image's own; not judged: the Python checks "
                            "were left out (python is then why)."
                        ),
                    },
                    "python": {"type": "string", "description": "The interpreter judged, or why none was."},
                },
            ),
            "counts": obj(
                "Checks per status.",
                {
                    s: {"type": "integer", "minimum": 0, "description": f"Checks with status {s}."}
                    for s in status["enum"]
                },
            ),
            "checks": {"type": "array", "description": "Every check, in order.", "items": finding},
        },
    }


def cluster_schema() -> Json:
    node = {
        "type": "object",
        "description": "One node's result.",
        "additionalProperties": False,
        "required": ["node_id", "address", "reachable", "verdict", "failing", "problems", "checks"],
        "properties": {
            "node_id": {"type": "string", "description": "Ray node id."},
            "address": {"type": "string", "description": "The node's IP address as Ray reports it."},
            "reachable": {"type": "boolean", "description": "False when the node died or did not answer in time."},
            "verdict": {
                "enum": ["pass", "warn", "fail", "unreachable", "dead", "drained"],
                "description": (
                    "The node's verdict: dead when Ray marks it dead (before the check, or by the time the answers "
                    "are in); drained when the autoscaler removed it for being idle (not counted)."
                ),
            },
            "failing": {"type": "array", "items": {"type": "string"}, "description": "Ids of failing checks."},
            "devices": {"type": "integer", "description": "Devices of the environment's family the node shows."},
            "driver": {"type": ["string", "null"], "description": "The node's driver version."},
            "skus": {"type": "array", "items": {"type": "string"}, "description": "SKUs seen on the node."},
            "ray_count": {"type": ["number", "null"], "description": "Ray's resource count (GPU, TPU, ...)."},
            "ray_types": {"type": "array", "items": {"type": "string"}, "description": "accelerator_type:* names."},
            "problems": {"type": "array", "items": {"type": "string"}, "description": "Ray's view vs the node's."},
            "checks": {
                "type": "array",
                "description": (
                    "The node's checks, as in check --json, then Ray's view of the node: ray.accelerator_type "
                    "(Ray's accelerator_type:* resource and ray.io/accelerator-type label against the node's SKU) "
                    "and ray.labels (the accelenv labels the node started with against what it is now)."
                ),
            },
            "seconds": {"type": "number", "description": "Time the node's check took."},
            "labels": str_map(
                "The node's labels in Ray that place it in a domain (cluster/domains.py).", {"type": "string"}
            ),
            "topology": {
                "type": "object",
                "description": "The node's devices and links in the neutral form of inspect's topology.devices.",
            },
            "signature": {
                "type": "array",
                "description": "(driver, device count, SKUs, [check id, status] pairs): what the majority is of.",
            },
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE + "cluster.schema.json",
        "title": "accelenv check --ray --json",
        "description": "The verdict of one environment on every node of a Ray cluster.",
        "type": "object",
        "additionalProperties": False,
        "required": ["env", "cluster", "nodes"],
        "properties": {
            "env": {"type": "string", "description": "Environment id."},
            "cluster": obj(
                "The cluster view.",
                {
                    "nodes": {
                        "type": "integer",
                        "description": "Nodes checked or known dead (alive when the check started, plus dead ones).",
                    },
                    "conforming": {"type": "integer", "description": "Nodes whose verdict is pass or warn."},
                    "unreachable": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Node ids with no answer to trust (dead ones included).",
                    },
                    "dead": {"type": "array", "items": {"type": "string"}, "description": "Node ids Ray marks dead."},
                    "drained": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Node ids the autoscaler removed for being idle (not counted in nodes).",
                    },
                    "majority": {"type": ["array", "null"], "description": "The most common node signature."},
                    "differ_from_majority": {"type": "array", "items": {"type": "string"}, "description": "Node ids."},
                    "differences": str_map(
                        "Node id -> what differs from the majority: `requirements.pytest: fail (majority: pass)`.",
                        {"type": "array", "items": {"type": "string"}},
                    ),
                    "disagreements": str_map(
                        "With no majority (a signature more nodes share than any other, and at least two): each "
                        "fact or check the nodes do not agree on -> node id -> its value.",
                        {"type": "object", "additionalProperties": {"type": "string"}},
                    ),
                    "domains": {
                        "type": "array",
                        "description": "The domains the nodes form (NVLink domain, rack, block, slice, zone, "
                        "placement group), each judged whole.",
                        "items": obj(
                            "One domain.",
                            {
                                "kind": {"type": "string", "description": "nvlink, rack, block, slice, zone, ..."},
                                "name": {"type": "string", "description": "The label value that names it."},
                                "nodes": {"type": "array", "items": {"type": "string"}, "description": "Node ids."},
                                "verdicts": str_map("Node id -> verdict.", {"type": "string"}),
                                "expected": {"type": ["integer", "null"], "description": "Nodes it should hold."},
                                "expected_from": {"type": "string", "description": "Where that figure comes from."},
                                "complete": {"type": "boolean", "description": "Every node it should hold answers."},
                                "problems": strings("incomplete: ...; divided: drivers/verdicts ..."),
                            },
                        ),
                    },
                },
            ),
            "nodes": {"type": "array", "description": "One entry per node.", "items": node},
        },
    }


SCHEMAS: dict[str, Callable[[], Json]] = {
    "matrix.schema.json": matrix_schema,
    "inspect.schema.json": inspect_schema,
    "check.schema.json": check_schema,
    "cluster.schema.json": cluster_schema,
    "result.schema.json": result_schema,
}


def schema_files() -> dict[str, str]:
    """File name -> exact content, for every schema accelenv publishes."""
    return {name: json.dumps(build(), indent=2) + "\n" for name, build in SCHEMAS.items()}
