"""The JSON Schema (2020-12) of `matrix.toml`, built here and written to `schema/matrix.schema.json`.

The schema is the first gate: shapes, closed vocabularies, and patterns that keep control characters,
whitespace and shell metacharacters out of every value that ends up in a Dockerfile or a shell. Each property
carries a `description` (editors show it) and, where a pattern guards it, an `x-hint` saying in words what is
expected; validation messages use the hint instead of the raw regular expression.

Why one module of ~600 lines: the schema is one JSON document whose parts reference each other (`$defs`), and
its patterns are shared by many properties; split across files, a reader checking what a key accepts would
chase one document through several.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

import jsonschema

from accelenv.matrix.model import PLATFORM_MACHINES
from accelenv.matrix.problems import suggest

if TYPE_CHECKING:
    from collections.abc import Iterator

SCHEMA_ID = "https://accelenv.dev/schema/matrix.schema.json"
SCHEMA_VERSION = 1

Json = dict[str, Any]

# Patterns shared by several properties. Each refuses whitespace, quotes and shell metacharacters.
ID = r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"
VERSION = r"^[0-9][0-9A-Za-z]*(?:[.+_-][0-9A-Za-z]+)*$"
PCI_ID = r"^0x[0-9a-f]{4}$"
RAY_ACCELERATOR_TYPE = r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$"  # a Ray/Kubernetes label value
ENV_VAR = r"^[A-Z][A-Z0-9_]*$"
TOOL = r"^[a-z0-9][a-z0-9_.-]*$"
DEVICE_NODE = r"^/dev/[A-Za-z0-9_*?/\[\]-]+$"
PRODUCT_NAME = r"^[A-Za-z0-9*?](?:[A-Za-z0-9 ._()/+*?-]*[A-Za-z0-9*?)])?$"
# No pattern admits a line break: besides the control characters (C0, DEL, C1), the Unicode line and paragraph
# separators and the bidirectional overrides (text that reads differently than it runs) are refused. Only
# TEXT_BLOCK (notes for readers, which end up in no Dockerfile or shell) allows a newline.
_NOT_TEXT = r"\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
TEXT_LINE = rf"^[^{_NOT_TEXT}]+$"
TEXT_BLOCK = r"^[^\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]*$"
OS_LABEL = r"^[a-z]+[0-9][0-9.]*$"
PYTHON = r"^3\.[0-9]{1,2}$"
URL = (
    r"^(?:https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?|http://(?:localhost|127\.0\.0\.1|\[::1\])(?::[0-9]{1,5})?)"
    r"(?:/[A-Za-z0-9._~%/+=-]*)?$"
)
IMAGE_REPOSITORY = r"^(?:[a-z0-9.-]+(?::[0-9]{1,5})?/)?[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$"
IMAGE_TAG = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
DIGEST = r"^sha256:[a-f0-9]{64}$"
SHM_SIZE = r"^[1-9][0-9]{0,5}[kmg]$"
REQUIREMENT = (
    r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9._-]+(?:,[A-Za-z0-9._-]+)*\])?"
    r"(?:(?:===?|~=|!=|>=|<=|>|<)[A-Za-z0-9.*+!_-]+(?:,(?:===?|~=|!=|>=|<=|>|<)[A-Za-z0-9.*+!_-]+)*)?$"
)
TEST_PATH = r"^(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_./:-]*$"
REGEX_TEXT = rf"^[^{_NOT_TEXT}]{{1,200}}$"
ARCH = r"^[a-z0-9][a-z0-9_.-]{0,63}$"
WHEEL_TAG = r"^[a-z][a-z0-9.]*$"
WHEEL_TAG_FORMAT = r"^[a-z0-9.]*(?:\{(?:major|minor|patch)\}[a-z0-9.]*)+$"


def _string(description: str, pattern: str, hint: str, **extra: Any) -> Json:
    return {"type": "string", "description": description, "pattern": pattern, "x-hint": hint, **extra}


def _list(description: str, items: Json, *, min_items: int = 0) -> Json:
    out: Json = {"type": "array", "description": description, "items": items, "uniqueItems": True}
    if min_items:
        out["minItems"] = min_items
    return out


def _object(description: str, properties: dict[str, Json], required: tuple[str, ...] = ()) -> Json:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": False,
        "properties": properties,
        "required": list(required),
    }


def _table_of(description: str, entry_ref: str) -> Json:
    return {
        "type": "object",
        "description": description,
        "propertyNames": {"pattern": ID, "x-hint": "a lower-case id: letters, digits and dashes"},
        "additionalProperties": {"$ref": entry_ref},
    }


def _ids(description: str) -> Json:
    return _list(description, {"type": "string", "pattern": ID, "x-hint": "an id: lower-case letters, digits, dashes"})


def _sources() -> Json:
    return _ids("Ids of entries under [sources] that back the facts of this entry.")


def _family() -> Json:
    return _object(
        "An accelerator family: how a host shows it and how software selects its devices.",
        {
            "name": _string("Human name of the family.", TEXT_LINE, "one line of text"),
            "maturity": {
                "type": "string",
                "enum": ["stable", "beta", "experimental"],
                "description": "How far accelenv's support for this family has come.",
            },
            "session": _string(
                "Name of the nox session that runs this family's default environment.", ID, "an id such as gpu-nvidia"
            ),
            "runtime_kind": _string("What the family's runtimes are (cuda, rocm, ...).", ID, "an id such as cuda"),
            "pci_vendor_ids": _list(
                "PCI vendor ids of the family's devices, as in /sys/bus/pci/devices/*/vendor.",
                {"type": "string", "pattern": PCI_ID, "x-hint": "a PCI id in lower-case hex, like 0x10de"},
            ),
            "visible_devices_env": _list(
                "Environment variables that select which devices a process sees.",
                {"type": "string", "pattern": ENV_VAR, "x-hint": "an upper-case environment variable name"},
            ),
            "host_tools": _list(
                "Host tools that report the family's devices and driver.",
                {"type": "string", "pattern": TOOL, "x-hint": "a program name such as nvidia-smi"},
            ),
            "kernel_modules": _list(
                "Kernel modules that drive the family's devices (their version is the driver version).",
                {"type": "string", "pattern": TOOL, "x-hint": "a kernel module name"},
            ),
            "device_nodes": _list(
                "Device node globs the family's containers need.",
                {"type": "string", "pattern": DEVICE_NODE, "x-hint": "a /dev path, globs allowed"},
            ),
            "arch_pattern": _string(
                "Regular expression every architecture name of this family must match (sm_90, gfx942, v6e).",
                REGEX_TEXT,
                "a regular expression on one line",
            ),
            "container_env": {
                "type": "object",
                "description": "Environment variables every image of the family sets for its container runtime.",
                "propertyNames": {"pattern": ENV_VAR, "x-hint": "an upper-case environment variable name"},
                "additionalProperties": _string("The value.", r"^[A-Za-z0-9_.,:=/-]*$", "letters, digits and .,:=/-_"),
            },
            "container_devices": _list(
                "Device nodes (globs) a container of the family gets, as found on the host (AMD: /dev/kfd, /dev/dri).",
                {"type": "string", "pattern": DEVICE_NODE, "x-hint": "a /dev path, globs allowed"},
            ),
            "container_groups": _list(
                "Groups the container user joins to use the devices (AMD: video, render).",
                {"type": "string", "pattern": TOOL, "x-hint": "a group name"},
            ),
            "container_gpus": {
                "type": "boolean",
                "description": "Request every GPU through the engine's device requests (NVIDIA container toolkit).",
            },
            "container_runtime": _string(
                "The OCI runtime the family's containers need (Gaudi: habana).", TOOL, "a runtime name"
            ),
            "container_shm_size": _string(
                "Size of the container's /dev/shm (docker --shm-size), where the vendor documents one; default 8g. "
                "Not used with container_ipc = host, where /dev/shm is the host's.",
                SHM_SIZE,
                "a size such as 16g (a number and k, m or g)",
            ),
            "container_ipc": {
                "type": "string",
                "enum": ["host", "private", "shareable"],
                "description": "The container's IPC namespace (docker --ipc), where the vendor documents one: host "
                "shares the host's, and its /dev/shm (Intel Gaudi's HCCL needs it). Default: the engine's.",
            },
            "container_cdi_kind": _string(
                "The CDI kind (vendor/class) of the spec the vendor's generator writes (nvidia.com/gpu): run and "
                "verify request its devices by CDI name where the engine supports CDI and the spec exists.",
                r"^[a-z0-9][a-z0-9.-]*/[a-z0-9][a-z0-9_.-]*$",
                "vendor/class, such as nvidia.com/gpu",
            ),
            "container_cdi_generate": _string(
                "The command that writes (or rewrites, after a driver change) the family's CDI spec.",
                TEXT_LINE,
                "one command line",
            ),
            "ci_runner": _list(
                "GitHub Actions runs-on labels of the runners with this family's devices.",
                {"type": "string", "pattern": TOOL, "x-hint": "a runner label such as self-hosted"},
                min_items=1,
            ),
            "ci_queue": _string("Buildkite agent queue of the family's machines.", TOOL, "a queue name"),
            "ci_platforms": {
                "type": "object",
                "description": "Runners of the family's machines of another platform than linux/amd64 (GB200 and "
                "GH200 are Grace, linux/arm64, hosts): `accelenv ci` gives each environment that declares the "
                "platform a job there.",
                "propertyNames": {"enum": ["linux/arm64"]},
                "additionalProperties": _object(
                    "The runners of one platform.",
                    {
                        "runner": _list(
                            "GitHub Actions runs-on labels of this platform's runners.",
                            {"type": "string", "pattern": TOOL, "x-hint": "a runner label"},
                            min_items=1,
                        ),
                        "queue": _string("Buildkite agent queue of this platform's machines.", TOOL, "a queue name"),
                    },
                    required=("runner",),
                ),
            },
            "ci_tier": {
                "type": "string",
                "enum": ["pr", "nightly", "release"],
                "description": "The earliest CI tier of the family's environments (an env may ask for a later one).",
            },
            "wheel_tag_format": _string(
                "How a runtime's version becomes its wheel tag, e.g. cu{major}{minor} -> cu128.",
                WHEEL_TAG_FORMAT,
                "a format with {major}, {minor} or {patch}, e.g. rocm{major}.{minor}",
            ),
            "newer_drivers": {
                "type": "string",
                "enum": ["run-older-runtimes", "may-need-newer-runtime"],
                "description": "The direction of driver/runtime compatibility: run-older-runtimes (default, CUDA: a "
                "newer driver runs every older runtime) or may-need-newer-runtime (Neuron: a driver can require a "
                "newer runtime, so a driver newer than the one a runtime ships is not known to work).",
            },
            "collective_backend": {
                "type": "string",
                "enum": ["nccl", "gloo", "hccl", "xla"],
                "description": "The torch.distributed backend the conformance suite forms its process group over "
                "(NCCL also names RCCL on ROCm builds; xla is the PJRT path of TPU and Neuron).",
            },
            "no_sku_driver_min": _string(
                "Why the family's SKUs carry no driver floor of their own (their runtimes' driver rules decide); "
                "a SKU's own driver_min or no_driver_min still applies.",
                TEXT_LINE,
                "one line of text",
            ),
            "sources": _sources(),
        },
        required=("name", "maturity", "session", "runtime_kind", "arch_pattern"),
    )


def _sku() -> Json:
    return _object(
        "An accelerator model, identified the way host tools report it.",
        {
            "family": _string("Family id this SKU belongs to.", ID, "a family id"),
            "name": _string("Marketing name.", TEXT_LINE, "one line of text"),
            "arch": _string(
                "Architecture as the runtimes name it: sm_90, gfx942, v6e, neuroncore-v2, gaudi3.",
                ARCH,
                "an architecture name such as sm_90 or gfx942",
            ),
            "product_names": _list(
                "Product names as host tools print them; shell-style globs (* and ?), matched ignoring case.",
                {"type": "string", "pattern": PRODUCT_NAME, "x-hint": "a product name, globs * and ? allowed"},
            ),
            "pci_device_ids": _list(
                "PCI device ids, as in /sys/bus/pci/devices/*/device.",
                {"type": "string", "pattern": PCI_ID, "x-hint": "a PCI id in lower-case hex, like 0x2330"},
            ),
            "memory_mib": {
                "type": "integer",
                "minimum": 1,
                "description": "Device memory in MiB as the host tool reports it (left out when not verified).",
            },
            "host_arch": _list(
                "CPU architectures of the hosts this SKU comes in (GH200 and GB200 are aarch64 only).",
                {"type": "string", "enum": ["x86_64", "aarch64"]},
                min_items=1,
            ),
            "driver_min": _string(
                "The SKU's own minimum host driver, when it needs a newer one than its runtimes do.",
                VERSION,
                "a version such as 570.133.20",
            ),
            "no_driver_min": _string(
                "Why the SKU has no driver_min: what the evidence says and why it does not give a floor.",
                TEXT_LINE,
                "one line of text",
            ),
            "ray_accelerator_type": _ray_accelerator_type(),
            "no_ray_accelerator_type": _string(
                "Why Ray reports no accelerator type for this SKU (or why the one it reports is not known).",
                TEXT_LINE,
                "one line of text",
            ),
            "sources": _sources(),
            "notes": _string("Free text for readers.", TEXT_BLOCK, "text without control characters"),
            "peak": _peak(),
        },
        required=("family", "name", "arch"),
    )


def _ray_accelerator_type() -> Json:
    """A Ray accelerator type: one for the whole SKU, or one per PCI device id (Ray names AMD GPUs by device id)."""
    name = {"type": "string", "pattern": RAY_ACCELERATOR_TYPE, "x-hint": "a Ray accelerator type such as H100"}
    return {
        "description": (
            "The accelerator type Ray reports for this SKU (its accelerator_type:* resource and the "
            "ray.io/accelerator-type label): one name, or a table of PCI device id -> name where Ray names types by "
            "device id; a device id left out gets none from Ray."
        ),
        "oneOf": [
            name,
            {
                "type": "object",
                "minProperties": 1,
                "propertyNames": {"pattern": PCI_ID},
                "additionalProperties": name,
            },
        ],
    }


def _peak() -> Json:
    """A SKU's documented per-device peak, which the conformance performance tests compare with."""
    figure = {"type": "number", "exclusiveMinimum": 0}
    return _object(
        "The vendor datasheet's per-device peak: dense (not sparse) matrix throughput at the main training "
        "precision, and memory bandwidth. A figure the datasheet does not give is left out.",
        {
            "precision": {"type": "string", "enum": ["bf16", "fp16", "fp32"], "description": "The matmul's dtype."},
            "matmul_tflops": {**figure, "description": "Dense matrix throughput, TFLOP/s, per device."},
            "memory_gb_s": {**figure, "description": "Device memory bandwidth, GB/s (10^9 bytes), per device."},
            "source": _string("The [sources] id of the datasheet.", ID, "a source id"),
            "notes": _string("How the figure was read (halved from a sparse one).", TEXT_LINE, "one line of text"),
        },
        required=("precision", "source"),
    )


def _image() -> Json:
    return _object(
        "A container base image; the digest pins it (accelenv pin fills it in).",
        {
            "repository": _string(
                "Image repository, with registry host when not Docker Hub.",
                IMAGE_REPOSITORY,
                "an image repository such as nvidia/cuda",
            ),
            "tag": _string("Image tag, kept for readers when a digest pins the image.", IMAGE_TAG, "an image tag"),
            "digest": _string("Digest of the image index (sha256:...).", DIGEST, "sha256: and 64 hex digits"),
            "python": _string(
                "The Python version the image ships (left out when it ships none, as nvidia/cuda images).",
                PYTHON,
                "a version such as 3.12",
            ),
        },
        required=("repository", "tag"),
    )


def _driver() -> Json:
    return _object(
        "The host driver this runtime needs.",
        {
            "min": _string(
                "Driver floor for the full feature set (for CUDA: the driver the toolkit ships with).",
                VERSION,
                "a driver version such as 570.124.06",
            ),
            "compat_min": _string(
                "Lower floor that still works in a degraded mode (CUDA minor-version compatibility).",
                VERSION,
                "a driver version such as 525.60.13",
            ),
            "max": _string("Exclusive ceiling: drivers at or above it are refused.", VERSION, "a driver version"),
            "accepted": _list(
                "Driver releases known to work, as version prefixes (30.10 matches 30.10.1); others warn.",
                {"type": "string", "pattern": VERSION, "x-hint": "a version prefix such as 30.10"},
            ),
            "releases": _list(
                "Ids of [drivers] releases the vendor documents as compatible: older drivers fail, others warn.",
                {"type": "string", "pattern": ID, "x-hint": "a drivers id such as amdgpu-30-20"},
            ),
            "notes": _string("What the rule means for a user.", TEXT_BLOCK, "text without control characters"),
        },
    )


def _driver_release() -> Json:
    return _object(
        "A vendor driver release and the version hosts report for it (AMD: release 30.20.x reports amdgpu 6.16.x).",
        {
            "family": _string("Family id.", ID, "a family id"),
            "release": _string("The vendor's name or number of the release.", TEXT_LINE, "one line of text"),
            "reports": _string(
                "The version hosts report for this release (kernel module version), as a prefix: 6.16 matches 6.16.6.",
                VERSION,
                "a version prefix such as 6.16",
            ),
            "sources": _sources(),
            "notes": _string("Free text for readers.", TEXT_BLOCK, "text without control characters"),
        },
        required=("family", "release", "reports"),
    )


def _runtime() -> Json:
    return _object(
        "A vendor runtime release and what it needs from the host.",
        {
            "family": _string("Family id.", ID, "a family id"),
            "name": _string("Human name, e.g. CUDA 12.8 Update 1.", TEXT_LINE, "one line of text"),
            "version": _string("Full version of the runtime.", VERSION, "a version such as 12.8.1"),
            "wheel_tag": _string(
                "Local version label of the framework wheels built for it (cu128, rocm6.4, cpu).",
                WHEEL_TAG,
                "a wheel tag such as cu128",
            ),
            "components": {
                "type": "object",
                "description": "Component versions shipped with the runtime (cudnn, nccl, hip, neuronx-cc, ...).",
                "propertyNames": {"pattern": r"^[a-z][a-z0-9_-]*$", "x-hint": "a lower-case component name"},
                "additionalProperties": _string("Component version.", VERSION, "a version"),
            },
            "architectures": _list(
                "Device architectures this runtime compiles for and supports.",
                {"type": "string", "pattern": ARCH, "x-hint": "an architecture name"},
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
            "libraries": _object(
                "Where an image's runtime libraries come from, for the Dockerfile's header: what the base image "
                "carries and what the environment's wheels bring (cite the sources under the runtime's sources).",
                {
                    "base": _list(
                        "Libraries or stacks the base image carries, each with its version or package where known.",
                        {"type": "string", "pattern": TEXT_LINE, "x-hint": "one line of text"},
                    ),
                    "wheels": _list(
                        "Libraries the environment's wheels bring (the framework wheel and what it requires).",
                        {"type": "string", "pattern": TEXT_LINE, "x-hint": "one line of text"},
                    ),
                    "notes": _string(
                        "What is in the image twice, and which copy a process loads.", TEXT_LINE, "one line of text"
                    ),
                },
                required=("base",),
            ),
            "hold": _object(
                "Why the runtime stays where it is although upstream has newer releases; accelenv outdated reports "
                "those as held, with this reason.",
                {
                    "reason": _string("The reason, for a reader.", TEXT_LINE, "one line of text"),
                    "packages": _list(
                        "Environment pins that move only with this runtime (libtpu with jax's pin).",
                        {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*$", "x-hint": "a package name"},
                    ),
                },
                required=("reason",),
            ),
            "sources": _sources(),
            "notes": _string("Free text for readers.", TEXT_BLOCK, "text without control characters"),
        },
        required=("family", "name", "architectures", "base_images"),
    )


def _requirements() -> Json:
    return _object(
        "Pinned Python dependencies and the package indexes they come from.",
        {
            "packages": _list(
                "Requirements, each pinned exactly (name==version, local label included: torch==2.9.1+cu128).",
                {
                    "type": "string",
                    "pattern": REQUIREMENT,
                    "x-hint": "a requirement like torch==2.9.1+cu128 (no spaces, no environment markers)",
                },
            ),
            "index_url": _string("Replaces PyPI as the main index.", URL, "an https:// URL"),
            "extra_index_urls": _list(
                "Further indexes, e.g. the PyTorch cu128 index or the Neuron repository.",
                {"type": "string", "pattern": URL, "x-hint": "an https:// URL"},
            ),
        },
        required=("packages",),
    )


def _framework() -> Json:
    return _object(
        "The framework the device tests exercise; `accelenv check` verifies its version and build like a pin.",
        {
            "name": _string("Its distribution name (torch, jax, torch-neuronx).", TOOL, "a distribution name"),
            "version": _string(
                "Its exact version, with the local label when the distribution has one (2.14.1+cu126).",
                VERSION,
                "a version such as 2.13.0",
            ),
            "build": _string(
                "The accelerator build it was made for, in the family's wheel-tag form (cu132, rocm10.0).",
                WHEEL_TAG,
                "a build such as cu132",
            ),
            "source": {
                "type": "string",
                "enum": ["lock", "base-image"],
                "description": "Where it comes from: the environment's lock, or the runtime's base image.",
            },
        },
        required=("name", "version", "source"),
    )


def _env() -> Json:
    return _object(
        "An environment: runtime, OS base, Python and pinned dependencies, for a set of SKUs.",
        {
            "family": _string("Family id.", ID, "a family id"),
            "runtime": _string("Runtime id (under [runtimes]).", ID, "a runtime id"),
            "description": _string("One line for `accelenv list` and `nox -l`.", TEXT_LINE, "one line of text"),
            "default": {
                "type": "boolean",
                "description": "The environment the family's nox session runs; exactly one per family.",
            },
            "os": _string("OS base label; the runtime must have a base image for it.", OS_LABEL, "e.g. ubuntu24.04"),
            "python": _string("Python version, major.minor.", PYTHON, "a version such as 3.12"),
            "platforms": _list(
                "Container platforms the environment is built and locked for.",
                {"type": "string", "enum": sorted(PLATFORM_MACHINES)},
                min_items=1,
            ),
            "skus": _ids("SKU ids this environment is meant for."),
            "requirements": {
                "$ref": "#/$defs/requirements",
                "description": "Pinned Python dependencies and their package indexes.",
            },
            "tests": _list(
                "pytest arguments (paths, node ids) the environment's session runs.",
                {"type": "string", "pattern": TEST_PATH, "x-hint": "a relative path inside the repository"},
                min_items=1,
            ),
            "ci_tier": {
                "type": "string",
                "enum": ["pr", "nightly", "release"],
                "description": "Which CI runs it: every pull request, nightly, or only before a release.",
            },
            "perf_min_fraction": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": 1,
                "description": "A conformance performance figure below this fraction of the SKU's peak is a warning.",
            },
            "requires": _object(
                "What the environment's workloads need beyond devices; the checker verifies what it can read.",
                {
                    "nvlink_all_pairs": {"type": "boolean", "description": "NVLink between every pair of GPUs."},
                    "min_nvlinks": {
                        "type": "integer",
                        "minimum": 1,
                        "description": "At least this many bonded NVLinks between every pair of GPUs (NV18: 18).",
                    },
                    "rdma": {
                        "type": "string",
                        "enum": ["peermem", "any"],
                        "description": "GPUDirect RDMA: the nvidia_peermem module, or any active RDMA device.",
                    },
                    "infiniband": {"type": "boolean", "description": "At least one active InfiniBand/RoCE port."},
                    "efa": {"type": "boolean", "description": "At least one active AWS EFA device."},
                    "tpu_topology": _string(
                        "The TPU slice shape, as TPU_TOPOLOGY or the host bounds give it (2x2x1).",
                        r"^[0-9]+(x[0-9]+){1,2}$",
                        "a shape such as 2x2x1",
                    ),
                    "memlock_unlimited": {
                        "type": "boolean",
                        "description": "Locked memory is unlimited (RDMA registrations need it).",
                    },
                },
            ),
            "ci_runner": _list(
                "runs-on labels for this environment alone (default: its family's), e.g. a SKU's runners.",
                {"type": "string", "pattern": TOOL, "x-hint": "a runner label"},
                min_items=1,
            ),
            "ci_queue": _string("Buildkite queue for this environment alone (default: its family's).", TOOL, "a queue"),
            "framework": _framework(),
            "sources": _sources(),
        },
        required=("family", "runtime", "description", "os", "python", "platforms", "requirements", "tests", "ci_tier"),
    )


def _os() -> Json:
    return _object(
        "An OS base: what an image built on it gets from its package manager.",
        {
            "name": _string("Human name.", TEXT_LINE, "one line of text"),
            "python": _string(
                "The system Python (python3) of this release (left out when not verified).",
                PYTHON,
                "a version such as 3.12",
            ),
            "glibc": _string("glibc version of the release.", VERSION, "a version such as 2.39"),
            "package_manager": {
                "type": "string",
                "enum": ["apt"],
                "description": "How OS packages are installed.",
            },
            "sources": _sources(),
        },
        required=("name", "package_manager"),
    )


def _source() -> Json:
    return _object(
        "A public source that backs facts in the matrix.",
        {
            "title": _string("What the source is.", TEXT_LINE, "one line of text"),
            "url": _string("Where to read it.", URL, "an https:// URL"),
            "where": _string(
                "Where to find it when it has no stable URL: a repository path and commit, a capture's file name.",
                TEXT_LINE,
                "one line of text",
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
            "sources": _table_of("Public sources, referenced by id from the entries.", "#/$defs/source"),
            "os": {
                "type": "object",
                "description": "OS bases, keyed by label (ubuntu24.04, debian12).",
                "propertyNames": {"pattern": OS_LABEL, "x-hint": "an OS label such as ubuntu24.04"},
                "additionalProperties": {"$ref": "#/$defs/os"},
            },
            "families": _table_of("Accelerator families, keyed by id.", "#/$defs/family"),
            "skus": _table_of("Accelerator models, keyed by id.", "#/$defs/sku"),
            "drivers": _table_of(
                "Vendor driver releases and the versions hosts report for them, keyed by id.", "#/$defs/driver_release"
            ),
            "runtimes": _table_of("Runtime releases, keyed by id.", "#/$defs/runtime"),
            "envs": _table_of("Environments, keyed by id.", "#/$defs/env"),
        },
        "$defs": {
            "source": _source(),
            "os": _os(),
            "family": _family(),
            "sku": _sku(),
            "driver": _driver(),
            "driver_release": _driver_release(),
            "image": _image(),
            "runtime": _runtime(),
            "requirements": _requirements(),
            "env": _env(),
        },
    }


def schema_text() -> str:
    """The schema file's exact content (stable key order, trailing newline)."""
    return json.dumps(matrix_schema(), indent=2, sort_keys=False) + "\n"


@cache
def _validator() -> jsonschema.protocols.Validator:
    # The schema itself is checked against the 2020-12 metaschema by the tests, not on every run (it costs more
    # than validating the matrix).
    return strict_validator(matrix_schema())


def strict_validator(schema: Json) -> jsonschema.protocols.Validator:
    """A validator for `schema` whose `pattern` must match the whole string, as ECMA-262 (the schema's own
    regex dialect) anchors it. jsonschema runs `re.search`, where `$` also matches before a final newline:
    `^[a-z]+$` would accept "cpu-evil\n". Every schema accelenv validates with goes through here."""
    base = jsonschema.validators.validator_for(schema)
    cls = jsonschema.validators.extend(base, validators={"pattern": _whole_pattern})  # type: ignore[no-untyped-call]
    validator: jsonschema.protocols.Validator = cls(schema)
    return validator


def _whole_pattern(
    validator: jsonschema.protocols.Validator, pattern: str, instance: object, schema: Json
) -> Iterator[jsonschema.ValidationError]:
    if isinstance(instance, str) and not _compiled(pattern).fullmatch(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _explain(error: jsonschema.ValidationError) -> tuple[tuple[str | int, ...], str]:
    """A key path and a message in words for one schema error."""
    path = tuple(error.absolute_path)
    schema: Json = error.schema if isinstance(error.schema, dict) else {}
    match error.validator:
        case "additionalProperties":
            known = sorted(schema.get("properties", {}))
            unknown = [k for k in error.instance if k not in known] if isinstance(error.instance, dict) else []
            messages = []
            for key in unknown:
                close = suggest(key, known)
                hint = f"; did you mean '{close}'?" if close else f"; known keys: {', '.join(known)}"
                messages.append(f"unknown key '{key}'{hint}")
            if len(unknown) == 1:
                return (*path, unknown[0]), messages[0]
            return path, "; ".join(messages)
        case "required":
            missing = str(error.message).split("'")[1] if "'" in str(error.message) else str(error.message)
            description = schema.get("properties", {}).get(missing, {}).get("description", "")
            suffix = f" ({description})" if description else ""
            return path, f"missing required key '{missing}'{suffix}"
        case "pattern" if "propertyNames" in error.absolute_schema_path:
            hint = schema.get("x-hint", "a lower-case id")
            return (*path, str(error.instance)), (
                f"{error.instance!r} is not a valid key: expected {hint}{_lower_case(error)}"
            )
        case "pattern":
            hint = schema.get("x-hint", f"a value matching {error.validator_value}")
            if error.instance == "":
                return path, f"must not be empty: expected {hint}"
            return path, f"{error.instance!r} is not valid here: expected {hint}{_lower_case(error)}"
        case "enum":
            options = [str(v) for v in schema.get("enum", ())]
            allowed = ", ".join(repr(v) for v in options)
            close = suggest(str(error.instance), options)
            hint = f"; did you mean {close!r}?" if close else ""
            return path, f"{error.instance!r} is not one of {allowed}{hint}"
        case "type":
            return path, f"expected {error.validator_value}, found {type(error.instance).__name__} {error.instance!r}"
        case "const":
            return path, f"must be {error.validator_value!r}, found {error.instance!r}"
        case "uniqueItems":
            return _duplicate(path, error.instance)
        case "minItems":
            return path, "must not be empty"
        case "minProperties":
            return path, "must have at least one entry"
        case _:
            return path, str(error.message)


def _duplicate(path: tuple[str | int, ...], items: object) -> tuple[tuple[str | int, ...], str]:
    """The second occurrence of the first item a list repeats, and what to do."""
    seen: dict[str, int] = {}
    for i, item in enumerate(items if isinstance(items, list) else []):
        key = json.dumps(item, sort_keys=True, default=str)
        if key in seen:
            return (*path, i), f"lists {item!r} twice (also at [{seen[key]}]): keep one"
        seen[key] = i
    return path, "lists the same item twice: keep one"


def _lower_case(error: jsonschema.ValidationError) -> str:
    """`; write '0x74a0'` when the value's lower-case form is what the pattern wants: ids and PCI ids are
    lower-case (hex), and the value differs in case only."""
    instance, pattern = error.instance, error.validator_value
    if not isinstance(instance, str) or not isinstance(pattern, str) or instance.lower() == instance:
        return ""
    if not _compiled(pattern).fullmatch(instance.lower()):
        return ""
    return f" (lower-case: write {instance.lower()!r})"


class SchemaError(NamedTuple):
    path: tuple[str | int, ...]
    message: str
    keeps_entry: bool  # the entry still reads the same (a repeated list item): the rules may still look at it


def schema_errors(document: object) -> list[SchemaError]:
    """Every schema violation of a parsed matrix as (key path, message in words), in document order."""
    found: list[SchemaError] = []
    errors = _validator().iter_errors(document)  # type: ignore[arg-type]
    for error in sorted(errors, key=lambda e: [str(p) for p in e.absolute_path]):
        for leaf in _leaves(error):
            path, message = _explain(leaf)
            # a repeated pin is the requirements rule's to report ("already required at packages[0]")
            keeps = leaf.validator == "uniqueItems" and leaf.absolute_path and leaf.absolute_path[-1] != "packages"
            # an unknown key: the model is built from the known ones, so the rules still judge the entry
            keeps = keeps or leaf.validator == "additionalProperties"
            found.append(SchemaError(path, message, bool(keeps)))
    return found


def _leaves(error: jsonschema.ValidationError) -> list[jsonschema.ValidationError]:
    # `additionalProperties` with `$ref` reports errors of the referenced schema as context-less errors already;
    # only combinators (anyOf/oneOf) carry sub-errors, and we use none. Kept for safety if one is added.
    if error.context:
        return [leaf for sub in error.context for leaf in _leaves(sub)]
    return [error]
