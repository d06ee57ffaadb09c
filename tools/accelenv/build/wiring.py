"""How a container of a family gets its devices, chosen before anything starts: CDI first, else the family's
older wiring, else a refusal that says what to install. Pure: the engine's capabilities and the host's CDI
specs and device nodes come in as data.

- **CDI** where the engine gives devices by CDI name and a usable spec of the family's kind
  (`container_cdi_kind`) exists: `nvidia.com/gpu=all`, or the devices the visible-device variable names
  (`CUDA_VISIBLE_DEVICES=0` -> `nvidia.com/gpu=0`); a spec without an `all` device (Intel's names its devices by
  PCI address) is asked for device by device. Docker reports CDI through the spec folders in `/info`
  (`CDISpecDirs`, filled when CDI is on: by default from Docker 28.2); it takes CDI names as device requests with
  the `cdi` driver. Podman has read CDI since 4.1 and takes the names as devices (`--device nvidia.com/gpu=all`);
  its Docker-compatible API takes no `cdi` device requests.
- **Older wiring** otherwise: the `--gpus` device request the NVIDIA container toolkit serves (it registers the
  `nvidia` runtime), the OCI runtime the family names (Gaudi: `habana`), or the device nodes found on the host
  (AMD `/dev/kfd` and `/dev/dri`, TPU `/dev/vfio/*` or `/dev/accel*`, Neuron `/dev/neuron*`). Families without a
  CDI kind (TPU, Neuron) always use device nodes, and the reason says so.
- **Refusal** when none of these can give the family its devices: the message names what is missing and the fix,
  instead of the engine's own error once the container is created (`could not select device driver "" with
  capabilities: [[gpu]]`, `Unknown runtime specified habana`), or a TPU container that starts with no device.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from packaging.version import InvalidVersion, Version

from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.cdi import CdiSpec
    from accelenv.host.root import Root
    from accelenv.matrix import Family

DOCKER_CDI_DEFAULT = Version("28.2")  # the first Docker release with CDI on by default
PODMAN_CDI = Version("4.1")  # Podman's --device takes CDI names from 4.1.0 (its release notes)
NVIDIA_HOOKS = ("/usr/bin/nvidia-container-runtime-hook", "/usr/local/bin/nvidia-container-runtime-hook")
Way = Literal["cdi", "gpus", "runtime", "nodes", "none"]
_GLOB = frozenset("*?[")


@frozen
class EngineCaps:
    """What an engine says it can do (`DockerEngine.capabilities`)."""

    host: str
    product: str  # Docker or Podman
    version: str
    cdi_spec_dirs: tuple[str, ...]  # Docker: /info's CDISpecDirs (empty: CDI off); Podman: its default folders
    runtimes: tuple[str, ...]

    @property
    def cdi(self) -> bool:
        if self.product == "Podman":
            return _at_least(self.version, PODMAN_CDI)
        return bool(self.cdi_spec_dirs)

    def describe(self) -> str:
        cdi = f"CDI on ({', '.join(self.cdi_spec_dirs)})" if self.cdi else "CDI off"
        return f"{self.product} {self.version} at {self.host}: {cdi}; runtimes {', '.join(self.runtimes) or 'none'}"


@frozen
class Wiring:
    way: Way
    reason: str
    cdi_devices: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()  # device nodes on the host
    gpus: bool = False
    runtime: str | None = None
    refusal: str = ""  # not empty: no way to give the family its devices; what to do

    def line(self) -> str:
        """The one line `run` prints before it starts (or refuses)."""
        if self.refusal:
            return f"devices: none can be given: {self.refusal}"
        return f"devices: {self.reason}"


def choose(
    family: Family,
    caps: EngineCaps,
    specs: tuple[CdiSpec, ...],
    root: Root,
    environ: Mapping[str, str],
    *,
    driver: str | None,
) -> Wiring:
    """The wiring of `family`'s containers on this engine and host (see the module's docstring). `driver` is the
    family's loaded driver as `check` reads it (the host report's `driver_version`: the kernel module, or the
    vendor tool where the module cannot be read, as inside a container), so `run` never uses a spec `check` calls
    stale."""
    if not family.pci_vendor_ids:
        return Wiring(way="none", reason=f"{family.name} needs no devices")
    kind = family.container_cdi_kind
    stale = ""
    if kind:
        cdi = _cdi(family, kind, caps, specs, environ=environ, driver=driver)
        if isinstance(cdi, Wiring):
            return cdi
        stale = cdi
    else:
        stale = f"{family.name} has no CDI spec kind (no vendor generator writes one): device nodes as found"
    older = _older(family, caps, root)
    if older.refusal:
        return Wiring(
            way=older.way, reason=older.reason, refusal=f"{stale}; and {older.refusal}" if kind else older.refusal
        )
    return Wiring(
        way=older.way,
        reason=f"{older.reason} ({stale})",
        devices=older.devices,
        gpus=older.gpus,
        runtime=older.runtime,
    )


def _cdi(
    family: Family,
    kind: str,
    caps: EngineCaps,
    specs: tuple[CdiSpec, ...],
    *,
    environ: Mapping[str, str],
    driver: str | None,
) -> Wiring | str:
    """The CDI wiring, or why not (a phrase)."""
    usable = [s for s in specs if s.kind == kind and not s.error]
    if not caps.cdi:
        if caps.product == "Podman":
            return f"no CDI: Podman {caps.version} takes no CDI names (Podman {PODMAN_CDI} and newer do)"
        since = f"CDI is on by default from Docker {DOCKER_CDI_DEFAULT}"
        return f"no CDI: {caps.product} {caps.version} does not report it ({since})"
    if not usable:
        broken = [s.path for s in specs if s.kind == kind or not s.kind]
        what = f"the {kind} spec does not parse ({', '.join(broken)})" if broken else f"no {kind} CDI spec"
        return f"no CDI: {what}; {family.container_cdi_generate or 'the vendor generator'} writes one"
    spec = usable[-1]  # the registry's precedence: /var/run/cdi over /etc/cdi, the later file
    if spec.missing_count:
        return (
            f"no CDI: the {kind} spec {spec.path} is stale ({spec.missing_count} host path(s) it mounts are gone); "
            f"`accelenv check` says which; fix: {family.container_cdi_generate or 'regenerate it'}"
        )
    loaded = driver if spec.driver_version else None
    if loaded and loaded != spec.driver_version:
        return (
            f"no CDI: the {kind} spec {spec.path} was generated for driver {spec.driver_version}, and driver "
            f"{loaded} is loaded (its libraries would be the old driver's); fix: "
            f"{family.container_cdi_generate or 'regenerate it'}"
        )
    names = _visible(family, spec, environ)
    if isinstance(names, str):
        return names
    how = "as devices (Podman's syntax)" if caps.product == "Podman" else "as cdi device requests"
    return Wiring(
        way="cdi",
        reason=f"CDI {', '.join(names)} from {spec.path}, {how}",
        cdi_devices=tuple(names),
        runtime=None,
    )


def _visible(family: Family, spec: CdiSpec, environ: Mapping[str, str]) -> list[str] | str:
    """The CDI names to ask for: those the family's first set visible-device variable names, else every device."""
    for var in family.visible_devices_env:
        value = environ.get(var, "").strip()
        if not value or value.lower() == "all":
            continue
        wanted = [entry.strip() for entry in value.split(",") if entry.strip()]
        unknown = [entry for entry in wanted if entry not in spec.devices]
        if unknown:
            return f"no CDI: {var}={value} names {', '.join(unknown)}, which {spec.path} does not list"
        return [spec.device(entry) for entry in wanted]
    if "all" in spec.devices:
        return [spec.device("all")]
    return [spec.device(name) for name in spec.devices]


def _older(family: Family, caps: EngineCaps, root: Root) -> Wiring:
    if family.container_gpus:
        toolkit = "nvidia" in caps.runtimes or any(root.exists(hook) for hook in NVIDIA_HOOKS)
        if caps.product == "Podman":
            return Wiring(
                way="gpus",
                reason="the --gpus device request",
                refusal=f"Podman's Docker-compatible API takes no --gpus device request: give {family.name}s "
                f"through CDI ({family.container_cdi_generate or 'generate the spec'})",
            )
        if not toolkit:
            return Wiring(
                way="gpus",
                reason="the --gpus device request",
                refusal="the NVIDIA container toolkit is not set up on the engine (no nvidia runtime, no "
                "nvidia-container-runtime-hook): install nvidia-container-toolkit and run `nvidia-ctk runtime "
                "configure --runtime=docker`, then restart the engine",
            )
        return Wiring(way="gpus", reason="the --gpus all device request (NVIDIA container toolkit)", gpus=True)
    nodes: tuple[str, ...] = tuple(sorted({n for pattern in family.container_devices for n in root.glob(pattern)}))
    required = [p for p in family.device_nodes if _GLOB.isdisjoint(p) and not root.exists(p)]
    if family.container_runtime:
        if family.container_runtime not in caps.runtimes:
            return Wiring(
                way="runtime",
                reason=f"the {family.container_runtime} runtime",
                refusal=f"the engine has no {family.container_runtime} runtime (it has "
                f"{', '.join(caps.runtimes) or 'none'}): install {family.name}'s container runtime and register it "
                f"as `{family.container_runtime}` in the engine's configuration (/etc/docker/daemon.json "
                '"runtimes"), then restart the engine',
            )
        return Wiring(
            way="runtime",
            reason=f"the {family.container_runtime} runtime",
            runtime=family.container_runtime,
            devices=nodes,
        )
    if not family.container_devices:
        return Wiring(
            way="none",
            reason="no device wiring in the matrix",
            refusal=f"the matrix gives {family.name} no container wiring",
        )
    if required or not nodes:
        missing = ", ".join(required) if required else " or ".join(family.container_devices)
        return Wiring(
            way="nodes",
            reason="device nodes",
            refusal=f"this host has no {missing}: its {family.name} devices are absent or their driver is not "
            "loaded (`accelenv check` says which)",
        )
    return Wiring(way="nodes", reason=f"device nodes {', '.join(nodes)}", devices=nodes)


def _at_least(text: str, floor: Version) -> bool:
    try:
        return Version(text.split("-", maxsplit=1)[0]) >= floor
    except InvalidVersion:
        return False
