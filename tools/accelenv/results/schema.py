"""The JSON Schema of a conformance result record (schema/result.schema.json).

A record is what one session run of an environment's device suite proves: which environment (its lock and
image), on which host (SKU, device count, driver, from the snapshot the run took), the `check` verdict, every
test's outcome and the performance figures. Records are read back as untrusted input, so the schema is strict:
ids are anchored patterns, free text has no control characters and a bounded length, numbers are finite.
"""

from __future__ import annotations

from typing import Any

from accelenv.schema_values import ENV_ID

Json = dict[str, Any]
BASE = "https://accelenv.dev/schema/"
FORMAT = "accelenv-result/1"

ID = r"^[a-z0-9][a-z0-9.-]{0,62}$"
RECORD_ID = ENV_ID.removesuffix("$") + r"-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}$"  # the environment's id, a time, a nonce
SHA256 = r"^[0-9a-f]{64}$"
TIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
LINE = r"^[^\x00-\x1f\x7f]*$"
TRANSFER = r"^transfer\.[a-z0-9_]{1,30}\.(node|cluster)\.[0-9]{1,7}mib$"  # accelenv.results.transports
MAX_LINE = 2000
OUTCOMES = ("passed", "failed", "not_proven", "incomplete", "inconclusive")
TEST_OUTCOMES = ("passed", "failed", "skipped", "error", "incomplete")


def _text(description: str, *, max_length: int = MAX_LINE) -> Json:
    return {"type": "string", "description": description, "pattern": LINE, "maxLength": max_length}


def _nullable(schema: Json) -> Json:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    return {**schema, "type": [*kinds, "null"]}


def _obj(description: str, properties: dict[str, Json]) -> Json:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


def _number(description: str) -> Json:
    return {"type": "number", "minimum": 0, "description": description}


def result_schema() -> Json:
    test = _obj(
        "One test of the suite.",
        {
            "id": _text("The pytest node id.", max_length=500),
            "outcome": {
                "type": "string",
                "enum": list(TEST_OUTCOMES),
                "description": "Outcome; incomplete: the run ended (interrupted, or died) before the test did.",
            },
            "reason": _nullable(_text("Why it was skipped, or the first line of its failure.")),
            "seconds": _number("Wall time of the test, call phase."),
        },
    )
    test["properties"]["defect"] = _nullable(
        _obj(
            "A failure with a named cause: a known upstream defect (optional; only on a failed or errored test).",
            {
                "url": _nullable({**_text("The upstream issue (https)."), "pattern": r"^https://[^\s<>\"']+$"}),
                "description": _text("What the defect is, precisely, where no issue is filed.", max_length=500),
            },
        )
    )
    figure = _obj(
        "One performance figure: the median of timed repetitions after warm-up.",
        {
            "name": {
                "type": "string",
                "anyOf": [
                    {"enum": ["matmul", "memory_bandwidth", "allreduce_busbw"]},
                    {"pattern": TRANSFER, "description": "transfer.<transport>.<node|cluster>.<size>mib (RDT)"},
                ],
                "description": "What was measured.",
            },
            "value": _number("The median."),
            "unit": {"type": "string", "enum": ["TFLOP/s", "GB/s"], "description": "Unit of value and peak."},
            "dtype": {"type": "string", "pattern": ID, "description": "The dtype measured (bf16, fp32)."},
            "devices": {"type": "integer", "minimum": 1, "description": "Devices taking part."},
            "samples": {"type": "integer", "minimum": 1, "description": "Timed repetitions behind the median."},
            "peak": _nullable(_number("The SKU's documented peak from the matrix; null when it has none.")),
            "fraction": _nullable(_number("value / peak; null without a peak.")),
            "min_fraction": _nullable(_number("The environment's stated fraction of peak; null when unstated.")),
            "warning": _nullable(_text("Set when the figure is below the stated fraction, or has no peak.")),
        },
    )
    figure["properties"]["spread"] = _nullable(
        _number("(max - min) / median of the timed repetitions (optional): a drop within it is noise.")
    )
    framework = _obj(
        "The framework the run used, against the environment's pin.",
        {
            "name": {"type": "string", "pattern": ID, "description": "Distribution name, e.g. torch."},
            "version": _nullable(_text("Installed version; null when not installed.", max_length=100)),
            "pinned": _nullable(_text("The environment's pin (==x.y.z); null when it pins none.", max_length=100)),
            "matches_pin": {"type": "boolean", "description": "False when the installed version is not the pin."},
        },
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE + "result.schema.json",
        "title": "accelenv conformance result record",
        "description": "One session run of an environment's device suite on one host, or one Ray cluster.",
        "type": "object",
        "additionalProperties": False,
        "required": ["format", "id", "env", "host", "check", "outcome", "tests", "perf", "started", "finished"],
        "properties": {
            "format": {"const": FORMAT, "description": "This schema's name and version."},
            "id": {"type": "string", "pattern": RECORD_ID, "description": "Record id: env, UTC start, random."},
            "run_url": _nullable({**_text("CI run that wrote it (https only)."), "pattern": r"^https://[^\s<>\"']+$"}),
            "env": _obj(
                "The environment the run proves.",
                {
                    "id": {"type": "string", "pattern": ENV_ID, "description": "Environment id from the matrix."},
                    "lock_sha256": _nullable({"type": "string", "pattern": SHA256, "description": "Its lock file."}),
                    "image": _nullable(_text("The image the run ran in (ACCELENV_IMAGE), or null on the host.")),
                    "frameworks": {
                        "type": "array",
                        "description": "Installed framework versions beside the environment's pins.",
                        "items": framework,
                    },
                },
            ),
            "host": _obj(
                "The host, from the snapshot the run took before its tests.",
                {
                    "family": {"type": "string", "pattern": ID, "description": "Family id."},
                    "sku": _nullable({"type": "string", "pattern": ID, "description": "Matrix SKU of the devices."}),
                    "device_count": {"type": "integer", "minimum": 0, "description": "Devices seen."},
                    "driver": _nullable(_text("Host driver version.", max_length=100)),
                    "nodes": {"type": "integer", "minimum": 1, "description": "Ray nodes the suite ran across."},
                },
            ),
            "check": _obj(
                "accelenv check of the environment against that snapshot.",
                {
                    "verdict": {"type": "string", "enum": ["pass", "warn", "fail"], "description": "The verdict."},
                    "failed": {
                        "type": "array",
                        "description": "Ids of failed checks.",
                        "items": {"type": "string", "pattern": r"^[A-Za-z0-9_.:-]{1,100}$"},
                    },
                },
            ),
            "outcome": {
                "type": "string",
                "enum": list(OUTCOMES),
                "description": "passed: tests passed, none failed, errored or was cut short, and the check did not "
                "fail; failed: a test failed or errored, a test file did not import, the check failed, or nothing "
                "was tested; not_proven: the hardware is absent and its tests skipped as asked "
                "(--skip-missing-hardware); incomplete: the run began and never completed (it died, or was "
                "cancelled); inconclusive: older records' word for not_proven.",
            },
            "runner": _nullable(
                _text(
                    "The CI runner or agent (or host) the run ran on: RUNNER_NAME, BUILDKITE_AGENT_NAME.",
                    max_length=200,
                )
            ),
            "note": _nullable(_text("Why the outcome is what it is, when the tests alone do not say.")),
            "tests": {"type": "array", "description": "Every test, in order.", "items": test, "maxItems": 10000},
            "perf": {"type": "array", "description": "Performance figures.", "items": figure, "maxItems": 100},
            "started": {"type": "string", "pattern": TIME, "description": "Start, UTC, RFC 3339."},
            "finished": {"type": "string", "pattern": TIME, "description": "End, UTC, RFC 3339."},
        },
    }
