"""The published schema of a host report: what `inspect --json` prints and a snapshot holds
(schema/inspect.schema.json), with the small builders the other output schemas share (`accelenv.plan.schemas`).

A contract for CI and tooling, and the shape a snapshot is read against (`host/snapshot.py`): fields are only
added, never renamed or retyped, without a version bump.
"""

from __future__ import annotations

from typing import Any

Json = dict[str, Any]
BASE = "https://accelenv.dev/schema/"  # the $id of every schema accelenv publishes


def nullable(kind: str, description: str) -> Json:
    return {"type": [kind, "null"], "description": description}


def obj(description: str, properties: dict[str, Json], *, required: tuple[str, ...] | None = None) -> Json:
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


def strings(description: str) -> Json:
    return {"type": "array", "description": description, "items": {"type": "string"}}


def str_map(description: str, value: Json) -> Json:
    return {"type": "object", "description": description, "additionalProperties": value}


def inspect_schema() -> Json:
    device = obj(
        "One accelerator device.",
        {
            "index": {"type": "integer", "description": "Index as the vendor tool numbers it (PCI order otherwise)."},
            "name": nullable("string", "Product name as the tool prints it."),
            "arch": nullable("string", "Architecture, named like the matrix: sm_90, gfx942, v6e, neuroncore-v2."),
            "memory_mib": nullable("integer", "Device memory in MiB as the tool reports it."),
            "pci_bus_id": nullable("string", "PCI address, domain:bus:device.function, lower case."),
            "pci_device_id": nullable("string", "PCI device id, e.g. 0x2330."),
            "uuid": nullable("string", "Device UUID where the tool reports one."),
            "sku": nullable("string", "The matrix SKU id this device matched (by PCI id, then name), or null."),
        },
    )
    pci = obj(
        "A PCI function of the family's vendor, from sysfs.",
        {
            "address": {"type": "string", "description": "PCI address."},
            "vendor_id": {"type": "string", "description": "PCI vendor id."},
            "device_id": {"type": "string", "description": "PCI device id."},
            "class_code": nullable("string", "PCI class code."),
            "driver": nullable("string", "Kernel driver bound to the function."),
            "sku": nullable("string", "Matrix SKU matched by PCI device id."),
            "physfn": nullable("string", "An SR-IOV virtual function's physical function; null for others."),
        },
        required=("address", "vendor_id", "device_id", "class_code", "driver", "sku"),
    )
    accelerator = obj(
        "One accelerator family as seen on this host.",
        {
            "family": {"type": "string", "description": "Family id from the matrix."},
            "driver_version": nullable("string", "Host driver version (NVIDIA: KMD/driver version)."),
            "runtime_version": nullable(
                "string", "NVIDIA: the CUDA version the driver supports; AMD: ROCm; TPU: libtpu; Gaudi: software."
            ),
            "devices": {"type": "array", "description": "Devices, from the vendor tool or PCI.", "items": device},
            "source": {"type": "string", "description": "Where the devices come from: a tool name, pci, or none."},
            "errors": strings("Faults: tools that were missing, timed out, failed, or printed unreadable output."),
            "pci_devices": {"type": "array", "description": "The hardware layer.", "items": pci},
            "modules": str_map("Loaded kernel modules and their versions.", {"type": ["string", "null"]}),
            "device_nodes": strings("Device nodes present (/dev/nvidia0, /dev/kfd, ...)."),
            "shadowed_by": nullable("string", "A driver holding the devices instead of the vendor's (nouveau)."),
            "pci_bus_readable": nullable("boolean", "Whether the PCI bus listed any function (of any vendor)."),
            "extra": str_map("Family-specific facts (TPU accelerator type, tools that answered).", {"type": "string"}),
            "sources": str_map(
                "Facts more than one source gives (driver_version), each source's value: source -> value.",
                {"type": "object", "additionalProperties": {"type": "string"}},
            ),
            "ray": obj(
                "What Ray should report for this family on this host, from the matrix (inspect --json only).",
                {
                    "resource": nullable("string", "The resource Ray counts: GPU, TPU, neuron_cores, HPU."),
                    "accelerator_type": nullable(
                        "string", "The accelerator type Ray reports for the first device's SKU; null: none."
                    ),
                    "known": {"type": "boolean", "description": "False when the matrix does not know Ray's name."},
                    "sku": nullable("string", "The SKU of the first device (Ray names a node after it)."),
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
            "os": obj(
                "Operating system.",
                {
                    "id": nullable("string", "os-release ID."),
                    "version_id": nullable("string", "os-release VERSION_ID."),
                    "pretty_name": nullable("string", "os-release PRETTY_NAME."),
                    "kernel": nullable("string", "Kernel release."),
                    "glibc": nullable("string", "glibc version."),
                    "arch": nullable("string", "CPU architecture (x86_64, aarch64)."),
                },
            ),
            "python": obj(
                "The Python interpreter accelenv ran in.",
                {
                    "version": {"type": "string", "description": "Python version."},
                    "implementation": {"type": "string", "description": "CPython, PyPy, ..."},
                    "executable": {"type": "string", "description": "Interpreter path."},
                    "distributions": str_map(
                        "Installed distributions (normalised names) and their versions; two versions = a duplicate.",
                        {"type": "array", "items": {"type": "string"}},
                    ),
                    "builds": str_map(
                        "Accelerator builds installed frameworks declare in their files (torch: cu132, rocm10.0).",
                        {"type": "string"},
                    ),
                },
                required=("version", "implementation", "executable", "distributions"),
            ),
            "accelerators": {"type": "array", "description": "One entry per family seen.", "items": accelerator},
            "environment": str_map("Accelerator-related environment variables (secrets redacted).", {"type": "string"}),
            "limits": obj(
                "Resource limits that matter to accelerator workloads.",
                {
                    "shm_bytes": nullable("integer", "Size of /dev/shm."),
                    "memlock_bytes": nullable("integer", "Soft memlock limit; null when unlimited or unknown."),
                    "memlock_unlimited": {"type": "boolean", "description": "memlock is unlimited."},
                },
            ),
            "container": obj(
                "Container runtime facts.",
                {
                    "inside_container": {"type": "boolean", "description": "This process runs inside a container."},
                    "docker_socket": {"type": "boolean", "description": "A Docker socket is present."},
                    "nvidia_container_toolkit": {"type": "boolean", "description": "nvidia-ctk is installed."},
                    "cdi_specs": strings("CDI spec files found (/etc/cdi, /var/run/cdi)."),
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
            "unreadable": str_map(
                "Host paths that exist but could not be read (permission denied, a FIFO, too large), and why.",
                {"type": "string"},
            ),
            "raw": str_map(
                "Snapshots only: raw tool outputs by key (argv, returncode, stdout, stderr, fault).",
                obj(
                    "One run of one tool.",
                    {
                        "argv": strings("The command line."),
                        "returncode": nullable("integer", "Exit status; null when the tool did not finish."),
                        "stdout": {"type": "string", "description": "What the tool printed."},
                        "stderr": {"type": "string", "description": "What the tool printed on stderr."},
                        "seconds": {"type": "number", "description": "How long it ran."},
                        "fault": nullable("string", "What went wrong; null when it ran and exited 0."),
                    },
                ),
            ),
        },
    }
