"""The hardware half of the matrix schema (`schema.py` assembles the document): accelerator families, as a host
shows them and as software selects their devices; SKUs, identified the way host tools report them; and the
vendor driver releases with the versions hosts report for them.
"""

from __future__ import annotations

from accelenv.matrix.model import CiTier, Maturity
from accelenv.schema_values import (
    ARCH,
    COLLECTIVE_BACKEND,
    DEVICE_NODE,
    ENV_VAR,
    ID,
    PCI_ID,
    PRODUCT_NAME,
    RAY_ACCELERATOR_TYPE,
    RAY_RESOURCE,
    REGEX_TEXT,
    SHM_SIZE,
    TEXT_LINE,
    TOOL,
    VERSION,
    WHEEL_TAG_FORMAT,
    Json,
    array,
    block,
    choice,
    entry,
    flag,
    item,
    line,
    owners,
    sources,
    text,
)


def family() -> Json:
    return entry(
        "An accelerator family: how a host shows it and how software selects its devices.",
        {
            "name": line("Human name of the family."),
            "maturity": choice(
                "The tier the family's maintainers claim. The tier shown (`accelenv results`, the page) is earned from "
                "result records by written criteria (docs/results.md); a family without records is declared.",
                [str(m) for m in Maturity],
            ),
            "session": text(
                "Name of the nox session that runs this family's default environment.", ID, "an id such as gpu-nvidia"
            ),
            "runtime_kind": text("What the family's runtimes are (cuda, rocm, ...).", ID, "an id such as cuda"),
            "pci_vendor_ids": array(
                "PCI vendor ids of the family's devices, as in /sys/bus/pci/devices/*/vendor.",
                item(PCI_ID, "a PCI id in lower-case hex, like 0x10de"),
            ),
            "visible_devices_env": array(
                "Environment variables that select which devices a process sees.",
                item(ENV_VAR, "an upper-case environment variable name"),
            ),
            "host_tools": array(
                "Host tools that report the family's devices and driver.",
                item(TOOL, "a program name such as nvidia-smi"),
            ),
            "kernel_modules": array(
                "Kernel modules that drive the family's devices (their version is the driver version).",
                item(TOOL, "a kernel module name"),
            ),
            "device_nodes": array(
                "Device node globs the family's containers need.",
                item(DEVICE_NODE, "a /dev path, globs allowed"),
            ),
            "arch_pattern": text(
                "Regular expression every architecture name of this family must match (sm_90, gfx942, v6e).",
                REGEX_TEXT,
                "a regular expression on one line",
            ),
            "container_env": {
                "type": "object",
                "description": "Environment variables every image of the family sets for its container runtime.",
                "propertyNames": {"pattern": ENV_VAR, "x-hint": "an upper-case environment variable name"},
                "additionalProperties": text("The value.", r"^[A-Za-z0-9_.,:=/-]*$", "letters, digits and .,:=/-_"),
            },
            "container_devices": array(
                "Device nodes (globs) a container of the family gets, as found on the host (AMD: /dev/kfd, /dev/dri).",
                item(DEVICE_NODE, "a /dev path, globs allowed"),
            ),
            "container_groups": array(
                "Groups the container user joins to use the devices (AMD: video, render).",
                item(TOOL, "a group name"),
            ),
            "container_gpus": flag(
                "Request every GPU through the engine's device requests (NVIDIA container toolkit)."
            ),
            "container_runtime": text(
                "The OCI runtime the family's containers need (Gaudi: habana).", TOOL, "a runtime name"
            ),
            "container_shm_size": text(
                "Size of the container's /dev/shm (docker --shm-size), where the vendor documents one; default 8g. "
                "Not used with container_ipc = host, where /dev/shm is the host's.",
                SHM_SIZE,
                "a size such as 16g (a number and k, m or g)",
            ),
            "container_ipc": choice(
                "The container's IPC namespace (docker --ipc), where the vendor documents one: host "
                "shares the host's, and its /dev/shm (Intel Gaudi's HCCL needs it). Default: the engine's.",
                ["host", "private", "shareable"],
            ),
            "container_cdi_kind": text(
                "The CDI kind (vendor/class) of the spec the vendor's generator writes (nvidia.com/gpu): run and "
                "verify request its devices by CDI name where the engine supports CDI and the spec exists.",
                r"^[a-z0-9][a-z0-9.-]*/[a-z0-9][a-z0-9_.-]*$",
                "vendor/class, such as nvidia.com/gpu",
            ),
            "container_cdi_generate": text(
                "The command that writes (or rewrites, after a driver change) the family's CDI spec.",
                TEXT_LINE,
                "one command line",
            ),
            "ci_runner": array(
                "GitHub Actions runs-on labels of the runners with this family's devices.",
                item(TOOL, "a runner label such as self-hosted"),
                min_items=1,
            ),
            "ci_queue": text("Buildkite agent queue of the family's machines.", TOOL, "a queue name"),
            "ci_platforms": {
                "type": "object",
                "description": "Runners of the family's machines of another platform than linux/amd64 (GB200 and "
                "GH200 are Grace, linux/arm64, hosts): `accelenv ci` gives each environment that declares the "
                "platform a job there.",
                "propertyNames": {"enum": ["linux/arm64"]},
                "additionalProperties": entry(
                    "The runners of one platform.",
                    {
                        "runner": array(
                            "GitHub Actions runs-on labels of this platform's runners.",
                            item(TOOL, "a runner label"),
                            min_items=1,
                        ),
                        "queue": text("Buildkite agent queue of this platform's machines.", TOOL, "a queue name"),
                    },
                    required=("runner",),
                ),
            },
            "ci_tier": choice(
                "The earliest CI tier of the family's environments (an env may ask for a later one).",
                [str(t) for t in CiTier],
            ),
            "wheel_tag_format": text(
                "How a runtime's version becomes its wheel tag, e.g. cu{major}{minor} -> cu128.",
                WHEEL_TAG_FORMAT,
                "a format with {major}, {minor} or {patch}, e.g. rocm{major}.{minor}",
            ),
            "newer_drivers": choice(
                "The direction of driver/runtime compatibility: run-older-runtimes (default, CUDA: a "
                "newer driver runs every older runtime) or may-need-newer-runtime (Neuron: a driver can require a "
                "newer runtime, so a driver newer than the one a runtime ships is not known to work).",
                ["run-older-runtimes", "may-need-newer-runtime"],
            ),
            "collective_backend": text(
                "The torch.distributed backend the conformance suite forms its process group over, as the family's "
                "framework registers it (NCCL also names RCCL on ROCm builds; xla is the PJRT path of TPU and "
                "Neuron). A name means that family's backend: Gaudi's hccl and Ascend's hccl are two backends, "
                "shown qualified (gaudi:hccl, ascend:hccl).",
                COLLECTIVE_BACKEND,
                "a backend name as torch.distributed knows it: lower-case letters, digits, _ (nccl, gloo, hccl)",
            ),
            "ray_resource": text(
                "The resource Ray counts for the family's devices (its accelerator manager's get_resource_name: "
                "GPU, TPU, neuron_cores, HPU, NPU); absent when Ray has no accelerator manager for it.",
                RAY_RESOURCE,
                "a Ray resource name: a letter, then letters, digits or _",
            ),
            "ray_visible_devices_env": text(
                "The variable Ray sets to give a worker its devices (get_visible_accelerator_ids_env_var).",
                ENV_VAR,
                "an upper-case environment variable name",
            ),
            "no_sku_driver_min": line(
                "Why the family's SKUs carry no driver floor of their own (their runtimes' driver rules decide); "
                "a SKU's own driver_min or no_driver_min still applies."
            ),
            "owners": owners(
                "Who answers for the family's CI jobs and its part of the tree: GitHub users or teams (the generated "
                "CODEOWNERS section routes to them; GitHub refuses an unknown one)."
            ),
            "sources": sources(),
        },
        required=("name", "maturity", "session", "runtime_kind", "arch_pattern"),
    )


def sku() -> Json:
    return entry(
        "An accelerator model, identified the way host tools report it.",
        {
            "family": text("Family id this SKU belongs to.", ID, "a family id"),
            "name": line("Marketing name."),
            "arch": text(
                "Architecture as the runtimes name it: sm_90, gfx942, v6e, neuroncore-v2, gaudi3.",
                ARCH,
                "an architecture name such as sm_90 or gfx942",
            ),
            "product_names": array(
                "Product names as host tools print them; shell-style globs (* and ?), matched ignoring case.",
                item(PRODUCT_NAME, "a product name, globs * and ? allowed"),
            ),
            "pci_device_ids": array(
                "PCI device ids, as in /sys/bus/pci/devices/*/device.",
                item(PCI_ID, "a PCI id in lower-case hex, like 0x2330"),
            ),
            "memory_mib": {
                "type": "integer",
                "minimum": 1,
                "description": "Device memory in MiB as the host tool reports it (left out when not verified).",
            },
            "host_arch": array(
                "CPU architectures of the hosts this SKU comes in (GH200 and GB200 are aarch64 only).",
                {"type": "string", "enum": ["x86_64", "aarch64"]},
                min_items=1,
            ),
            "driver_min": text(
                "The SKU's own minimum host driver, when it needs a newer one than its runtimes do.",
                VERSION,
                "a version such as 570.133.20",
            ),
            "no_driver_min": line(
                "Why the SKU has no driver_min: what the evidence says and why it does not give a floor."
            ),
            "ray_accelerator_type": _ray_accelerator_type(),
            "no_ray_accelerator_type": line(
                "Why Ray reports no accelerator type for this SKU (or why the one it reports is not known)."
            ),
            "owners": owners("Who answers for this SKU where it is not the family's owners (GitHub users or teams)."),
            "sources": sources(),
            "notes": block("Free text for readers."),
            "peak": _peak(),
        },
        required=("family", "name", "arch"),
    )


def _ray_accelerator_type() -> Json:
    """A Ray accelerator type: one for the whole SKU, or one per PCI device id (Ray names AMD GPUs by device id)."""
    name = item(RAY_ACCELERATOR_TYPE, "a Ray accelerator type such as H100")
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
    return entry(
        "The vendor datasheet's per-device peak: dense (not sparse) matrix throughput at the main training "
        "precision, and memory bandwidth. A figure the datasheet does not give is left out.",
        {
            "precision": choice("The matmul's dtype.", ["bf16", "fp16", "fp32"]),
            "matmul_tflops": {**figure, "description": "Dense matrix throughput, TFLOP/s, per device."},
            "memory_gb_s": {**figure, "description": "Device memory bandwidth, GB/s (10^9 bytes), per device."},
            "interconnect_gb_s": {
                **figure,
                "description": "Device-to-device interconnect within a node (NVLink), GB/s per device, both "
                "directions together as datasheets give it (RDT transfer figures are judged against half).",
            },
            "source": text("The [sources] id of the datasheet.", ID, "a source id"),
            "notes": line("How the figure was read (halved from a sparse one)."),
        },
        required=("precision", "source"),
    )


def driver_release() -> Json:
    return entry(
        "A vendor driver release and the version hosts report for it (AMD: release 30.20.x reports amdgpu 6.16.x).",
        {
            "family": text("Family id.", ID, "a family id"),
            "release": line("The vendor's name or number of the release."),
            "reports": text(
                "The version hosts report for this release (kernel module version), as a prefix: 6.16 matches 6.16.6.",
                VERSION,
                "a version prefix such as 6.16",
            ),
            "sources": sources(),
            "notes": block("Free text for readers."),
        },
        required=("family", "release", "reports"),
    )
