"""`HostReport`: everything discovery saw on one host, as plain data that round-trips through JSON.

`accelenv inspect --json` prints it (contract: schema/inspect.schema.json); a snapshot is a report plus the raw
tool outputs behind it, and `check` judges a report without knowing whether it is live or replayed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelenv.records import field, frozen

if TYPE_CHECKING:
    from accelenv.host.cdi import CdiSpec
    from accelenv.host.run import ToolResult

REPORT_VERSION = 1
Json = dict[str, Any]
# Drivers that hold a device for a virtual machine, not for this host: passthrough (VMs, and TPUs on Cloud TPU VMs).
PASSTHROUGH_DRIVERS = frozenset({"vfio-pci", "pci-stub"})


@frozen
class PciDevice:
    """One PCI function of an accelerator vendor, from sysfs."""

    address: str  # 0000:17:00.0
    vendor_id: str  # 0x10de
    device_id: str  # 0x2330
    class_code: str | None  # 0x030200
    driver: str | None  # kernel module bound to it (nvidia, nouveau, amdgpu, vfio-pci ...)
    sku: str | None  # matrix SKU id matched by PCI device id
    physfn: str | None = None  # an SR-IOV virtual function's physical function (its `physfn` link), else None


@frozen
class Device:
    """One accelerator device as reported (vendor tool first, PCI as fallback)."""

    index: int
    name: str | None
    arch: str | None
    memory_mib: int | None
    pci_bus_id: str | None
    pci_device_id: str | None
    uuid: str | None
    sku: str | None


@frozen
class Accelerator:
    """One family's view: hardware layer (PCI, modules, device nodes) and vendor tool layer."""

    family: str
    driver_version: str | None
    runtime_version: str | None  # NVIDIA: the driver's CUDA version; AMD: ROCm; TPU: libtpu; Gaudi: software
    devices: tuple[Device, ...]
    source: str  # which layer the devices come from: a tool name, or "pci"
    errors: tuple[str, ...]
    pci_devices: tuple[PciDevice, ...] = ()
    modules: dict[str, str | None] = field(default_factory=dict)  # loaded module -> version (None: no version)
    device_nodes: tuple[str, ...] = ()
    shadowed_by: str | None = None  # a driver that holds the devices instead of the vendor's (nouveau)
    extra: dict[str, str] = field(default_factory=dict)
    # fact -> source -> value, for facts more than one source gives: {"driver_version": {"nvidia-smi --version":
    # "590.48.01", "nvidia-smi --query-gpu": "590.48.01", "kernel module nvidia": "590.48.01"}}
    sources: dict[str, dict[str, str]] = field(default_factory=dict)
    # whether /sys/bus/pci/devices listed any function (of any vendor): then a device the tool lists must be one
    # of `pci_devices`; None (an empty or unreadable bus, an older snapshot): nothing to judge it by
    pci_bus_readable: bool | None = None


@frozen
class OsInfo:
    id: str | None
    version_id: str | None
    pretty_name: str | None
    kernel: str | None
    glibc: str | None
    arch: str | None


@frozen
class PythonInfo:
    version: str
    implementation: str
    executable: str
    distributions: dict[str, list[str]]  # normalised name -> installed versions (two means a duplicate install)
    builds: dict[str, str] = field(default_factory=dict)  # framework -> the accelerator build it declares (cu132)


@frozen
class Limits:
    shm_bytes: int | None
    memlock_bytes: int | None  # None: unlimited or unknown; see memlock_unlimited
    memlock_unlimited: bool


@frozen
class Container:
    inside_container: bool
    docker_socket: bool
    nvidia_container_toolkit: bool
    cdi_specs: tuple[str, ...]
    cdi: tuple[CdiSpec, ...] = ()  # what each spec file holds, summarised (host/cdi.py); check judges it


@frozen
class HostReport:
    root: str
    os: OsInfo
    python: PythonInfo
    accelerators: tuple[Accelerator, ...]
    environment: dict[str, str]
    limits: Limits
    container: Container
    topology: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, ToolResult] = field(default_factory=dict)
    # host paths that exist but could not be read (permission denied, a FIFO, over 4 MiB ...) -> why: what they hold
    # is unknown, which the checker says rather than judging the host as if they were absent
    unreadable: dict[str, str] = field(default_factory=dict)
    # what only the platform knows (host/platform.py): cloud, facts, and what every source said; empty when not read
    platform: dict[str, Any] = field(default_factory=dict)

    def accelerator(self, family: str) -> Accelerator | None:
        return next((a for a in self.accelerators if a.family == family), None)

    # -- JSON ----------------------------------------------------------------------------------------

    def as_json(self, *, raw: bool = False) -> Json:
        data: Json = {
            "version": REPORT_VERSION,
            "root": self.root,
            "os": vars(self.os),
            "python": {**vars(self.python), "distributions": dict(sorted(self.python.distributions.items()))},
            "accelerators": [_accelerator_json(a) for a in self.accelerators],
            "environment": dict(sorted(self.environment.items())),
            "limits": vars(self.limits),
            "container": {
                **vars(self.container),
                "cdi_specs": list(self.container.cdi_specs),
                "cdi": [spec.as_json() for spec in self.container.cdi],
            },
            "topology": self.topology,
            "unreadable": dict(sorted(self.unreadable.items())),
        }
        if self.platform:
            data["platform"] = self.platform
        if raw:
            data["raw"] = {key: result.as_json() for key, result in sorted(self.raw.items())}
        return data

    @classmethod
    def from_json(cls, data: Json) -> HostReport:
        """Rebuild a report from `as_json` output (a snapshot). Raises KeyError/TypeError on a bad shape;
        the snapshot loader turns those into a clear error."""
        from accelenv.host.cdi import CdiSpec  # a live report never reads these back: `check` does not import them
        from accelenv.host.run import ToolResult

        python = data["python"]
        return cls(
            root=str(data["root"]),
            os=OsInfo(**data["os"]),
            python=PythonInfo(
                version=python["version"],
                implementation=python["implementation"],
                executable=python["executable"],
                distributions={str(k): [str(v) for v in vs] for k, vs in python["distributions"].items()},
                builds={str(k): str(v) for k, v in python.get("builds", {}).items()},
            ),
            accelerators=tuple(_accelerator_from(a) for a in data["accelerators"]),
            environment={str(k): str(v) for k, v in data["environment"].items()},
            limits=Limits(**data["limits"]),
            container=Container(
                inside_container=bool(data["container"]["inside_container"]),
                docker_socket=bool(data["container"]["docker_socket"]),
                nvidia_container_toolkit=bool(data["container"]["nvidia_container_toolkit"]),
                cdi_specs=tuple(data["container"]["cdi_specs"]),
                cdi=tuple(CdiSpec.from_json(spec) for spec in data["container"].get("cdi", ())),
            ),
            topology=dict(data.get("topology", {})),
            raw={k: ToolResult.from_json(v) for k, v in data.get("raw", {}).items()},
            unreadable={str(k): str(v) for k, v in data.get("unreadable", {}).items()},
            platform=dict(data.get("platform") or {}),
        )


def _accelerator_json(a: Accelerator) -> Json:
    return {
        "family": a.family,
        "driver_version": a.driver_version,
        "runtime_version": a.runtime_version,
        "devices": [vars(d) for d in a.devices],
        "source": a.source,
        "errors": list(a.errors),
        "pci_devices": [vars(p) for p in a.pci_devices],
        "modules": dict(sorted(a.modules.items())),
        "device_nodes": list(a.device_nodes),
        "shadowed_by": a.shadowed_by,
        "extra": dict(sorted(a.extra.items())),
        "sources": {fact: dict(sorted(said.items())) for fact, said in sorted(a.sources.items())},
        "pci_bus_readable": a.pci_bus_readable,
    }


def _accelerator_from(data: Json) -> Accelerator:
    return Accelerator(
        family=data["family"],
        driver_version=data["driver_version"],
        runtime_version=data["runtime_version"],
        devices=tuple(Device(**d) for d in data["devices"]),
        source=data["source"],
        errors=tuple(data["errors"]),
        pci_devices=tuple(PciDevice(**p) for p in data.get("pci_devices", [])),
        modules=dict(data.get("modules", {})),
        device_nodes=tuple(data.get("device_nodes", [])),
        shadowed_by=data.get("shadowed_by"),
        extra=dict(data.get("extra", {})),
        sources={
            str(fact): {str(k): str(v) for k, v in said.items()} for fact, said in data.get("sources", {}).items()
        },
        pci_bus_readable=data.get("pci_bus_readable") if isinstance(data.get("pci_bus_readable"), bool) else None,
    )
