"""The schema/ files, generated: the matrix's JSON Schema and those of accelenv's machine-readable outputs
(`inspect --json`, `check --json`, `check --ray --json`).

The output schemas are contracts for CI and tooling: fields are only added, never renamed or retyped, without a
version bump. `accelenv schema --write` writes them all to schema/, as `render` writes Dockerfiles.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from accelenv.matrix.schema import matrix_schema
from accelenv.results.schema import result_schema

if TYPE_CHECKING:
    from collections.abc import Callable

Json = dict[str, Any]
BASE = "https://accelenv.dev/schema/"


def _nullable(kind: str, description: str) -> Json:
    return {"type": [kind, "null"], "description": description}


def _obj(description: str, properties: dict[str, Json], *, required: tuple[str, ...] | None = None) -> Json:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": False,
        "required": list(properties if required is None else required),
        "properties": properties,
    }


_CDI_SPEC: Json = {
    "type": "object",
    "description": "One CDI spec file, summarised (host/cdi.py).",
    "additionalProperties": False,
    "required": ["path", "error", "cdi_version", "kind", "devices", "driver_version", "paths", "missing"],
    "properties": {
        "path": {"type": "string", "description": "Host path of the file."},
        "error": {"type": "string", "description": "Why it is not a usable spec; empty when it is."},
        "cdi_version": {"type": "string", "description": "Its cdiVersion."},
        "kind": {"type": "string", "description": "Its kind (vendor/class), e.g. nvidia.com/gpu."},
        "devices": {"type": "array", "description": "Its device names.", "items": {"type": "string"}},
        "driver_version": {"type": "string", "description": "The driver it was generated for, where it says."},
        "paths": {"type": "integer", "minimum": 0, "description": "Host paths its containerEdits name."},
        "missing": {
            "type": "array",
            "description": "Those that do not exist (the first 64).",
            "items": {"type": "string"},
        },
        "missing_count": {"type": "integer", "minimum": 0, "description": "How many do not exist."},
        "sensitive": {
            "type": "array",
            "description": "Host paths no device needs that it gives every container (an engine socket, a secret, "
            "a whole system folder), each with how: `/ (read-write)`.",
            "items": {"type": "string"},
        },
    },
}


_PLATFORM: Json = {
    "type": "object",
    "additionalProperties": False,
    "description": (
        "What only the platform knows (labels, inspect and snapshot read it): the cloud the DMI fields name, the "
        "facts (operator first, then Kubernetes, then the cloud's metadata server), where each came from, and "
        "what every source said."
    ),
    "properties": {
        "cloud": {"type": ["string", "null"], "enum": ["gce", "aws", "azure", None], "description": "From DMI."},
        "evidence": {"type": "string", "description": "The DMI fields that named the cloud, or why none did."},
        "facts": {"type": "object", "additionalProperties": {"type": "string"}, "description": "name -> value."},
        "origin": {"type": "object", "additionalProperties": {"type": "string"}, "description": "name -> source."},
        "sources": {
            "type": "array",
            "description": "Every source, answered or not.",
            "items": {
                "type": "object",
                "description": "One source's answer.",
                "additionalProperties": False,
                "required": ["source", "status", "why", "facts"],
                "properties": {
                    "source": {"type": "string", "description": "operator, kubernetes, gce, aws, azure."},
                    "status": {
                        "type": "string",
                        "enum": ["answered", "not-asked", "no-answer", "refused", "bad-answer", "absent"],
                        "description": "What happened.",
                    },
                    "why": {"type": "string", "description": "Why it gave nothing (or a partial answer)."},
                    "facts": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Given."},
                    "rejected": {"type": "array", "items": {"type": "string"}, "description": "Facts refused."},
                },
            },
        },
    },
}


def _strings(description: str) -> Json:
    return {"type": "array", "description": description, "items": {"type": "string"}}


def _str_map(description: str, value: Json) -> Json:
    return {"type": "object", "description": description, "additionalProperties": value}


def inspect_schema() -> Json:
    device = _obj(
        "One accelerator device.",
        {
            "index": {"type": "integer", "description": "Index as the vendor tool numbers it (PCI order otherwise)."},
            "name": _nullable("string", "Product name as the tool prints it."),
            "arch": _nullable("string", "Architecture, named like the matrix: sm_90, gfx942, v6e, neuroncore-v2."),
            "memory_mib": _nullable("integer", "Device memory in MiB as the tool reports it."),
            "pci_bus_id": _nullable("string", "PCI address, domain:bus:device.function, lower case."),
            "pci_device_id": _nullable("string", "PCI device id, e.g. 0x2330."),
            "uuid": _nullable("string", "Device UUID where the tool reports one."),
            "sku": _nullable("string", "The matrix SKU id this device matched (by PCI id, then name), or null."),
        },
    )
    pci = _obj(
        "A PCI function of the family's vendor, from sysfs.",
        {
            "address": {"type": "string", "description": "PCI address."},
            "vendor_id": {"type": "string", "description": "PCI vendor id."},
            "device_id": {"type": "string", "description": "PCI device id."},
            "class_code": _nullable("string", "PCI class code."),
            "driver": _nullable("string", "Kernel driver bound to the function."),
            "sku": _nullable("string", "Matrix SKU matched by PCI device id."),
            "physfn": _nullable("string", "An SR-IOV virtual function's physical function; null for others."),
        },
        required=("address", "vendor_id", "device_id", "class_code", "driver", "sku"),
    )
    accelerator = _obj(
        "One accelerator family as seen on this host.",
        {
            "family": {"type": "string", "description": "Family id from the matrix."},
            "driver_version": _nullable("string", "Host driver version (NVIDIA: KMD/driver version)."),
            "runtime_version": _nullable(
                "string", "NVIDIA: the CUDA version the driver supports; AMD: ROCm; TPU: libtpu; Gaudi: software."
            ),
            "devices": {"type": "array", "description": "Devices, from the vendor tool or PCI.", "items": device},
            "source": {"type": "string", "description": "Where the devices come from: a tool name, pci, or none."},
            "errors": _strings("Faults: tools that were missing, timed out, failed, or printed unreadable output."),
            "pci_devices": {"type": "array", "description": "The hardware layer.", "items": pci},
            "modules": _str_map("Loaded kernel modules and their versions.", {"type": ["string", "null"]}),
            "device_nodes": _strings("Device nodes present (/dev/nvidia0, /dev/kfd, ...)."),
            "shadowed_by": _nullable("string", "A driver holding the devices instead of the vendor's (nouveau)."),
            "pci_bus_readable": _nullable("boolean", "Whether the PCI bus listed any function (of any vendor)."),
            "extra": _str_map("Family-specific facts (TPU accelerator type, tools that answered).", {"type": "string"}),
            "sources": _str_map(
                "Facts more than one source gives (driver_version), each source's value: source -> value.",
                {"type": "object", "additionalProperties": {"type": "string"}},
            ),
            "ray": _obj(
                "What Ray should report for this family on this host, from the matrix (inspect --json only).",
                {
                    "resource": _nullable("string", "The resource Ray counts: GPU, TPU, neuron_cores, HPU."),
                    "accelerator_type": _nullable(
                        "string", "The accelerator type Ray reports for the first device's SKU; null: none."
                    ),
                    "known": {"type": "boolean", "description": "False when the matrix does not know Ray's name."},
                    "sku": _nullable("string", "The SKU of the first device (Ray names a node after it)."),
                    "why": {"type": "string", "description": "Why the type is none or not known."},
                },
            ),
        },
        required=(
            "family",
            "driver_version",
            "runtime_version",
            "devices",
            "source",
            "errors",
            "pci_devices",
            "modules",
            "device_nodes",
            "shadowed_by",
            "extra",
        ),
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": BASE + "inspect.schema.json",
        "title": "accelenv inspect --json",
        "description": "What discovery saw on one host (a snapshot's `report` adds `raw` tool outputs).",
        "type": "object",
        "additionalProperties": False,
        "required": ["version", "root", "os", "python", "accelerators", "environment", "limits", "container"],
        "properties": {
            "version": {"const": 1, "description": "Version of this report format."},
            "root": {"type": "string", "description": "The folder all host files were read under (/ when live)."},
            "os": _obj(
                "Operating system.",
                {
                    "id": _nullable("string", "os-release ID."),
                    "version_id": _nullable("string", "os-release VERSION_ID."),
                    "pretty_name": _nullable("string", "os-release PRETTY_NAME."),
                    "kernel": _nullable("string", "Kernel release."),
                    "glibc": _nullable("string", "glibc version."),
                    "arch": _nullable("string", "CPU architecture (x86_64, aarch64)."),
                },
            ),
            "python": _obj(
                "The Python interpreter accelenv ran in.",
                {
                    "version": {"type": "string", "description": "Python version."},
                    "implementation": {"type": "string", "description": "CPython, PyPy, ..."},
                    "executable": {"type": "string", "description": "Interpreter path."},
                    "distributions": _str_map(
                        "Installed distributions (normalised names) and their versions; two versions = a duplicate.",
                        {"type": "array", "items": {"type": "string"}},
                    ),
                    "builds": _str_map(
                        "Accelerator builds installed frameworks declare in their files (torch: cu132, rocm10.0).",
                        {"type": "string"},
                    ),
                },
                required=("version", "implementation", "executable", "distributions"),
            ),
            "accelerators": {"type": "array", "description": "One entry per family seen.", "items": accelerator},
            "environment": _str_map(
                "Accelerator-related environment variables (secrets redacted).", {"type": "string"}
            ),
            "limits": _obj(
                "Resource limits that matter to accelerator workloads.",
                {
                    "shm_bytes": _nullable("integer", "Size of /dev/shm."),
                    "memlock_bytes": _nullable("integer", "Soft memlock limit; null when unlimited or unknown."),
                    "memlock_unlimited": {"type": "boolean", "description": "memlock is unlimited."},
                },
            ),
            "container": _obj(
                "Container runtime facts.",
                {
                    "inside_container": {"type": "boolean", "description": "This process runs inside a container."},
                    "docker_socket": {"type": "boolean", "description": "A Docker socket is present."},
                    "nvidia_container_toolkit": {"type": "boolean", "description": "nvidia-ctk is installed."},
                    "cdi_specs": _strings("CDI spec files found (/etc/cdi, /var/run/cdi)."),
                    "cdi": {"type": "array", "description": "What each CDI spec file holds.", "items": _CDI_SPEC},
                },
                required=("inside_container", "docker_socket", "nvidia_container_toolkit", "cdi_specs"),
            ),
            "topology": {
                "type": "object",
                "description": (
                    "What the host shows of its interconnect: gpu (from nvidia-smi topo -m: gpus, all_pairs_nvlink, "
                    "min_nvlinks, links, numa_affinity) or gpu_error, infiniband devices (name, active, efa, "
                    "link_layer, rate), peermem, tpu_topology, and devices: family -> the neutral topology "
                    "(host/links.py: devices with numa, cpu_affinity, bus, nearest nics; links with kind nvlink, "
                    "xgmi, neuronlink or pcie and count, weight, hops, bandwidth or path where the tool says; groups; "
                    "scale_up; links_known; shape) or {error}."
                ),
            },
            "platform": _PLATFORM,
            "unreadable": _str_map(
                "Host paths that exist but could not be read (permission denied, a FIFO, too large), and why.",
                {"type": "string"},
            ),
            "raw": _str_map(
                "Snapshots only: raw tool outputs by key (argv, returncode, stdout, stderr, fault).",
                _obj(
                    "One run of one tool.",
                    {
                        "argv": _strings("The command line."),
                        "returncode": _nullable("integer", "Exit status; null when the tool did not finish."),
                        "stdout": {"type": "string", "description": "What the tool printed."},
                        "stderr": {"type": "string", "description": "What the tool printed on stderr."},
                        "seconds": {"type": "number", "description": "How long it ran."},
                        "fault": _nullable("string", "What went wrong; null when it ran and exited 0."),
                    },
                ),
            ),
        },
    }


def check_schema() -> Json:
    statuses = ["pass", "warn", "fail", "skip"]
    status: Json = {"type": "string", "enum": statuses, "description": "Outcome."}
    finding = _obj(
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
            "judged": _obj(
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
            "counts": _obj(
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
            "labels": _str_map(
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
            "cluster": _obj(
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
                    "differences": _str_map(
                        "Node id -> what differs from the majority: `requirements.pytest: fail (majority: pass)`.",
                        {"type": "array", "items": {"type": "string"}},
                    ),
                    "disagreements": _str_map(
                        "With no majority (a signature more nodes share than any other, and at least two): each "
                        "fact or check the nodes do not agree on -> node id -> its value.",
                        {"type": "object", "additionalProperties": {"type": "string"}},
                    ),
                    "domains": {
                        "type": "array",
                        "description": "The domains the nodes form (NVLink domain, rack, block, slice, zone, "
                        "placement group), each judged whole.",
                        "items": _obj(
                            "One domain.",
                            {
                                "kind": {"type": "string", "description": "nvlink, rack, block, slice, zone, ..."},
                                "name": {"type": "string", "description": "The label value that names it."},
                                "nodes": {"type": "array", "items": {"type": "string"}, "description": "Node ids."},
                                "verdicts": _str_map("Node id -> verdict.", {"type": "string"}),
                                "expected": {"type": ["integer", "null"], "description": "Nodes it should hold."},
                                "expected_from": {"type": "string", "description": "Where that figure comes from."},
                                "complete": {"type": "boolean", "description": "Every node it should hold answers."},
                                "problems": _strings("incomplete: ...; divided: drivers/verdicts ..."),
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
