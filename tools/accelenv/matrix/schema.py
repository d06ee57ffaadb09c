"""The JSON Schema (2020-12) of `matrix.toml`, built here from the tables below and written to
`schema/matrix.schema.json`.

The schema is the first gate: shapes, closed vocabularies, and patterns that keep control characters,
whitespace and shell metacharacters out of every value that ends up in a Dockerfile or a shell. Each property
carries a `description` (editors show it) and, where a pattern guards it, an `x-hint` saying in words what is
expected; validation messages use the hint instead of the raw regular expression (`schema_check.py`).

One table per kind of entry: the hardware half (families, SKUs, driver releases) in `schema_hardware.py`, the
runtimes, environments, OS bases and sources here. Each property is built by the helper of `schema_values.py`
that says what it is: `line` (one line of text), `block` (notes), `text` (a pattern and the words that explain
it), `item`, `flag`, `choice`, `url`, `python`. The closed vocabularies the model also knows (maturity, CI
tier, framework source) are the model's enums.
"""

from __future__ import annotations

import json
from functools import cache

from accelenv.matrix.model import PLATFORM_MACHINES, CiTier, FrameworkSource
from accelenv.matrix.schema_hardware import driver_release, family, sku
from accelenv.schema_values import (
    ARCH,
    DIGEST,
    ENV_ID,
    ENV_ID_MAX,
    ID,
    IMAGE_REPOSITORY,
    IMAGE_TAG,
    OS_LABEL,
    REQUIREMENT,
    TEST_PATH,
    TEXT_LINE,
    TOOL,
    URL,
    VERSION,
    WHEEL_TAG,
    Json,
    array,
    block,
    choice,
    entry,
    flag,
    ids,
    item,
    line,
    owners,
    python,
    sources,
    table_of,
    text,
    url,
)

SCHEMA_ID = "https://accelenv.dev/schema/matrix.schema.json"
SCHEMA_VERSION = 1


def _image() -> Json:
    return entry(
        "A container base image; the digest pins it (accelenv pin fills it in).",
        {
            "repository": text(
                "Image repository, with registry host when not Docker Hub.",
                IMAGE_REPOSITORY,
                "an image repository such as nvidia/cuda",
            ),
            "tag": text("Image tag, kept for readers when a digest pins the image.", IMAGE_TAG, "an image tag"),
            "digest": text("Digest of the image index (sha256:...).", DIGEST, "sha256: and 64 hex digits"),
            "python": python(
                "The Python version the image ships (left out when it ships none, as nvidia/cuda images)."
            ),
        },
        required=("repository", "tag"),
    )


def _driver() -> Json:
    return entry(
        "The host driver this runtime needs.",
        {
            "min": text(
                "Driver floor for the full feature set (for CUDA: the driver the toolkit ships with).",
                VERSION,
                "a driver version such as 570.124.06",
            ),
            "compat_min": text(
                "Lower floor that still works in a degraded mode (CUDA minor-version compatibility).",
                VERSION,
                "a driver version such as 525.60.13",
            ),
            "max": text("Exclusive ceiling: drivers at or above it are refused.", VERSION, "a driver version"),
            "accepted": array(
                "Driver releases known to work, as version prefixes (30.10 matches 30.10.1); others warn.",
                item(VERSION, "a version prefix such as 30.10"),
            ),
            "releases": array(
                "Ids of [drivers] releases the vendor documents as compatible: older drivers fail, others warn.",
                item(ID, "a drivers id such as amdgpu-30-20"),
            ),
            "notes": block("What the rule means for a user."),
        },
    )


def _runtime() -> Json:
    return entry(
        "A vendor runtime release and what it needs from the host.",
        {
            "family": text("Family id.", ID, "a family id"),
            "name": line("Human name, e.g. CUDA 12.8 Update 1."),
            "version": text("Full version of the runtime.", VERSION, "a version such as 12.8.1"),
            "wheel_tag": text(
                "Local version label of the framework wheels built for it (cu128, rocm6.4, cpu).",
                WHEEL_TAG,
                "a wheel tag such as cu128",
            ),
            "components": {
                "type": "object",
                "description": "Component versions shipped with the runtime (cudnn, nccl, hip, neuronx-cc, ...).",
                "propertyNames": {"pattern": r"^[a-z][a-z0-9_-]*$", "x-hint": "a lower-case component name"},
                "additionalProperties": text("Component version.", VERSION, "a version"),
            },
            "architectures": array(
                "Device architectures this runtime compiles for and supports.",
                item(ARCH, "an architecture name"),
                min_items=1,
            ),
            "driver": {"$ref": "#/$defs/driver", "description": "The host driver this runtime needs."},
            "base_images": {
                "type": "object",
                "description": "Base image per OS label (ubuntu24.04, debian12, ...).",
                "propertyNames": {"pattern": OS_LABEL, "x-hint": "an OS label such as ubuntu24.04"},
                "additionalProperties": {"$ref": "#/$defs/image"},
                "minProperties": 1,
            },
            "libraries": entry(
                "Where an image's runtime libraries come from, for the Dockerfile's header: what the base image "
                "carries and what the environment's wheels bring (cite the sources under the runtime's sources).",
                {
                    "base": array(
                        "Libraries or stacks the base image carries, each with its version or package where known.",
                        item(TEXT_LINE, "one line of text"),
                    ),
                    "wheels": array(
                        "Libraries the environment's wheels bring (the framework wheel and what it requires).",
                        item(TEXT_LINE, "one line of text"),
                    ),
                    "notes": line("What is in the image twice, and which copy a process loads."),
                },
                required=("base",),
            ),
            "hold": entry(
                "Why the runtime stays where it is although upstream has newer releases; accelenv outdated reports "
                "those as held, with this reason.",
                {
                    "reason": line("The reason, for a reader."),
                    "packages": array(
                        "Environment pins that move only with this runtime (libtpu with jax's pin).",
                        {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$", "x-hint": "a package name"},
                    ),
                },
                required=("reason",),
            ),
            "sources": sources(),
            "notes": block("Free text for readers."),
        },
        required=("family", "name", "architectures", "base_images"),
    )


def _requirements() -> Json:
    return entry(
        "Pinned Python dependencies and the package indexes they come from.",
        {
            "packages": array(
                "Requirements, each pinned exactly (name==version, local label included: torch==2.9.1+cu128).",
                {
                    "type": "string",
                    "pattern": REQUIREMENT,
                    "x-hint": "a requirement like torch==2.9.1+cu128 (no spaces, no environment markers)",
                },
            ),
            "index_url": url("Replaces PyPI as the main index."),
            "extra_index_urls": array(
                "Further indexes, e.g. the PyTorch cu128 index or the Neuron repository.",
                item(URL, "an https:// URL"),
            ),
        },
        required=("packages",),
    )


def _framework() -> Json:
    return entry(
        "The framework the device tests exercise; `accelenv check` verifies its version and build like a pin.",
        {
            "name": text("Its distribution name (torch, jax, torch-neuronx).", TOOL, "a distribution name"),
            "version": text(
                "Its exact version, with the local label when the distribution has one (2.14.1+cu126).",
                VERSION,
                "a version such as 2.13.0",
            ),
            "build": text(
                "The accelerator build it was made for, in the family's wheel-tag form (cu132, rocm10.0).",
                WHEEL_TAG,
                "a build such as cu132",
            ),
            "source": choice(
                "Where it comes from: the environment's lock, or the runtime's base image.",
                [str(s) for s in FrameworkSource],
            ),
        },
        required=("name", "version", "source"),
    )


def _env() -> Json:
    return entry(
        "An environment: runtime, OS base, Python and pinned dependencies, for a set of SKUs.",
        {
            "family": text("Family id.", ID, "a family id"),
            "runtime": text("Runtime id (under [runtimes]).", ID, "a runtime id"),
            "description": line("One line for `accelenv list` and `nox -l`."),
            "default": flag("The environment the family's nox session runs; exactly one per family."),
            "os": text("OS base label; the runtime must have a base image for it.", OS_LABEL, "e.g. ubuntu24.04"),
            "python": python("Python version, major.minor."),
            "platforms": array(
                "Container platforms the environment is built and locked for.",
                {"type": "string", "enum": sorted(PLATFORM_MACHINES)},
                min_items=1,
            ),
            "skus": ids("SKU ids this environment is meant for."),
            "requirements": {
                "$ref": "#/$defs/requirements",
                "description": "Pinned Python dependencies and their package indexes.",
            },
            "tests": array(
                "pytest arguments (paths, node ids) the environment's session runs.",
                item(TEST_PATH, "a relative path inside the repository"),
                min_items=1,
            ),
            "ci_tier": choice(
                "Which CI runs it: every pull request, nightly, or only before a release.", [str(t) for t in CiTier]
            ),
            "transports": array(
                "Ray Direct Transport transports the environment supports (tests/devices/test_conformance_rdt.py).",
                {"type": "string", "enum": ["CUDA_IPC", "GLOO", "NCCL", "NIXL"]},
            ),
            "no_transports": {
                "type": "string",
                "minLength": 1,
                "description": "Why the environment declares no Ray Direct Transport transport (docs/transports.md).",
            },
            "perf_min_fraction": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 1,
                "description": "A conformance performance figure below this fraction of the SKU's peak is a warning.",
            },
            "requires": entry(
                "What the environment's workloads need beyond devices; the checker verifies what it can read.",
                {
                    "nvlink_all_pairs": flag("NVLink between every pair of GPUs."),
                    "min_nvlinks": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "At least this many bonded NVLinks between every pair of GPUs (NV18: 18).",
                    },
                    "rdma": choice(
                        "GPUDirect RDMA: the nvidia_peermem module, or any active RDMA device.", ["peermem", "any"]
                    ),
                    "infiniband": flag("At least one active InfiniBand/RoCE port."),
                    "efa": flag("At least one active AWS EFA device."),
                    "tpu_topology": text(
                        "The TPU slice shape, as TPU_TOPOLOGY or the host bounds give it (2x2x1).",
                        r"^[0-9]+(x[0-9]+){1,2}$",
                        "a shape such as 2x2x1",
                    ),
                    "memlock_unlimited": flag("Locked memory is unlimited (RDMA registrations need it)."),
                    "scale_up": choice(
                        "Every device in one scale-up group joined by this link kind (the neutral topology).",
                        ["nvlink", "xgmi", "neuronlink", "ici"],
                    ),
                    "scale_up_devices": {
                        "type": "integer",
                        "minimum": 2,
                        "description": "At least this many devices in one scale-up group (an xGMI hive).",
                    },
                },
            ),
            "ci_runner": array(
                "runs-on labels for this environment alone (default: its family's), e.g. a SKU's runners.",
                item(TOOL, "a runner label"),
                min_items=1,
            ),
            "ci_queue": text("Buildkite queue for this environment alone (default: its family's).", TOOL, "a queue"),
            "owners": owners(
                "Who answers for this environment where it is not the family's owners (GitHub users or teams)."
            ),
            "ci_unschedulable": line(
                "Why CI cannot run this environment yet (shown by `accelenv ci`, the run summary and the page); "
                "without it, a default environment CI cannot schedule makes `accelenv ci` fail."
            ),
            "framework": _framework(),
            "sources": sources(),
        },
        required=("family", "runtime", "description", "os", "python", "platforms", "requirements", "tests", "ci_tier"),
    )


def _os() -> Json:
    return entry(
        "An OS base: what an image built on it gets from its package manager.",
        {
            "name": line("Human name."),
            "python": python("The system Python (python3) of this release (left out when not verified)."),
            "glibc": text("glibc version of the release.", VERSION, "a version such as 2.39"),
            "package_manager": choice("How OS packages are installed.", ["apt"]),
            "sources": sources(),
        },
        required=("name", "package_manager"),
    )


def _source() -> Json:
    return entry(
        "A public source that backs facts in the matrix.",
        {
            "title": line("What the source is."),
            "url": url("Where to read it."),
            "where": line(
                "Where to find it when it has no stable URL: a repository path and commit, a capture's file name."
            ),
        },
        required=("title",),
    )


@cache
def matrix_schema() -> Json:
    """The schema as a dict (cached: callers must not mutate it)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "accelenv compatibility matrix",
        "description": "Accelerator families, SKUs, runtimes with their driver rules, and environments.",
        "type": "object",
        "additionalProperties": False,
        "required": ["schema_version", "families", "skus", "runtimes", "envs"],
        "properties": {
            "schema_version": {
                "const": SCHEMA_VERSION,
                "description": "Version of this schema the file is written for.",
            },
            "plugins": array(
                "Family plugins this matrix uses (distribution names with an accelenv.families entry point): each "
                "must be installed, and its matrix fragment is joined to this file and validated with it.",
                item(
                    r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$", "a distribution name such as accelenv-ascend"
                ),
            ),
            "sources": table_of("Public sources, referenced by id from the entries.", "#/$defs/source"),
            "os": {
                "type": "object",
                "description": "OS bases, keyed by label (ubuntu24.04, debian12).",
                "propertyNames": {"pattern": OS_LABEL, "x-hint": "an OS label such as ubuntu24.04"},
                "additionalProperties": {"$ref": "#/$defs/os"},
            },
            "families": table_of("Accelerator families, keyed by id.", "#/$defs/family"),
            "skus": table_of("Accelerator models, keyed by id.", "#/$defs/sku"),
            "drivers": table_of(
                "Vendor driver releases and the versions hosts report for them, keyed by id.", "#/$defs/driver_release"
            ),
            "runtimes": table_of("Runtime releases, keyed by id.", "#/$defs/runtime"),
            "envs": table_of(
                f"Environments, keyed by id (at most {ENV_ID_MAX} characters: `accelenv.io/env.<id>` labels hold it).",
                "#/$defs/env",
                key=ENV_ID,
                hint=f"a lower-case id: letters, digits and dashes, at most {ENV_ID_MAX} characters",
            ),
        },
        "$defs": {
            "source": _source(),
            "os": _os(),
            "family": family(),
            "sku": sku(),
            "driver": _driver(),
            "driver_release": driver_release(),
            "image": _image(),
            "runtime": _runtime(),
            "requirements": _requirements(),
            "env": _env(),
        },
    }


def schema_text() -> str:
    """The schema file's exact content (stable key order, trailing newline)."""
    return json.dumps(matrix_schema(), indent=2, sort_keys=False) + "\n"
