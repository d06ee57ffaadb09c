"""The matrix as frozen data: what `matrix.toml` says, parsed once, never passed around as dicts.

Every value here has been through the schema and the rules (see `load.py`, `rules.py`), so code downstream
can trust the types and the cross references.
"""

from __future__ import annotations

import contextlib
import fnmatch
import re
from enum import StrEnum
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from packaging.version import Version

from accelenv.records import field, frozen

if TYPE_CHECKING:
    from collections.abc import Mapping

    from packaging.requirements import Requirement


PLATFORM_MACHINES = {"linux/amd64": "x86_64", "linux/arm64": "aarch64"}
"""Container platforms an environment may be built for, and the machine (`uname -m`) each runs on."""


def release_line(version: Version) -> tuple[int, ...]:
    """The release line a version belongs to: major.minor, or for 0.x versions everything up to the first
    non-zero component (CUDA 13.2.2 -> 13.2, ROCm 7.14.1 -> 7.14, jax 0.8.3 -> 0.8, libtpu 0.0.52 -> 0.0.52)."""
    release = (*version.release, 0)
    first = next((i for i, part in enumerate(release) if part), len(release) - 1)
    return release[:2] if first == 0 else release[: first + 1]


class LiteralVersion(Version):
    """A `Version` that prints as written: driver 570.124.06 stays 570.124.06, not 570.124.6."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._text = text

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<LiteralVersion({self._text!r})>"


class Maturity(StrEnum):
    """How far a family's support has come: what a user may rely on."""

    STABLE = "stable"
    BETA = "beta"
    EXPERIMENTAL = "experimental"


class CiTier(StrEnum):
    """When CI runs an environment: on every pull request, nightly, or only before a release."""

    PR = "pr"
    NIGHTLY = "nightly"
    RELEASE = "release"


@frozen
class Source:
    """Where a fact in the matrix comes from, so a reader can check it."""

    id: str
    title: str
    url: str | None
    where: str | None


@frozen
class OsBase:
    """An OS release images are built on, and the Python its package manager provides."""

    id: str
    name: str
    python: str | None
    glibc: str | None
    package_manager: str
    sources: tuple[str, ...]


@frozen
class Family:
    """One accelerator vendor line (or `cpu`): how a host shows it and how software selects its devices."""

    id: str
    name: str
    maturity: Maturity
    session: str
    runtime_kind: str
    pci_vendor_ids: tuple[str, ...]
    visible_devices_env: tuple[str, ...]
    host_tools: tuple[str, ...]
    kernel_modules: tuple[str, ...]
    device_nodes: tuple[str, ...]
    arch_pattern: str
    wheel_tag_format: str | None
    container_env: Mapping[str, str]
    container_devices: tuple[str, ...]
    container_groups: tuple[str, ...]
    container_gpus: bool
    container_runtime: str | None
    container_shm_size: str | None = None
    container_ipc: str | None = None
    container_cdi_kind: str | None = None  # the CDI kind its vendor's spec generator writes (nvidia.com/gpu)
    container_cdi_generate: str | None = None  # the command that (re)writes that spec
    ci_runner: tuple[str, ...]
    ci_queue: str | None
    ci_tier: CiTier
    no_sku_driver_min: str = ""
    # the direction of driver/runtime compatibility: does a newer driver run an older runtime?
    newer_drivers: Literal["run-older-runtimes", "may-need-newer-runtime"] = "run-older-runtimes"
    # platform (other than linux/amd64) -> (runs-on labels, Buildkite queue or None)
    ci_platforms: Mapping[str, tuple[tuple[str, ...], str | None]] = field(default_factory=lambda: MappingProxyType({}))
    collective_backend: str | None = None  # torch.distributed backend of the conformance suite: nccl, gloo ...
    owners: tuple[str, ...] = ()  # GitHub handles or teams who answer for the family (CODEOWNERS, ci)
    ray_resource: str | None = None  # what Ray counts for its devices (GPU, NPU); None: Ray has no manager for it
    ray_visible_devices_env: str | None = None  # the variable Ray sets to give a worker its devices

    @property
    def qualified_backend(self) -> str | None:
        """The collective backend as one unambiguous name: `family:backend` (Gaudi's and Ascend's are both
        `hccl` to torch.distributed, and are two backends)."""
        return f"{self.id}:{self.collective_backend}" if self.collective_backend else None

    sources: tuple[str, ...]


@frozen
class Peak:
    """A SKU's documented peak, per device, from the vendor's datasheet (`source`): dense matrix throughput at
    its main training precision and device memory bandwidth. A figure the datasheet does not give is None."""

    precision: str  # bf16, fp16, fp32: what the conformance matmul runs at
    matmul_tflops: float | None
    memory_gb_s: float | None
    source: str
    notes: str = ""
    interconnect_gb_s: float | None = None  # device-to-device link within a node (NVLink), both directions together


@frozen
class Sku:
    """One accelerator model, identified the way host tools report it."""

    id: str
    family: str
    name: str
    arch: str
    product_names: tuple[str, ...]
    pci_device_ids: tuple[str, ...]
    memory_mib: int | None
    host_arch: tuple[str, ...]
    driver_min: Version | None
    no_driver_min: str = ""
    # the accelerator type Ray reports for this SKU (its `accelerator_type:*` resource and `ray.io/accelerator-type`
    # label), by PCI device id where Ray names types by id (AMD); "*" for every device of the SKU
    ray_accelerator_type: Mapping[str, str] = field(default_factory=dict)
    no_ray_accelerator_type: str = ""  # why Ray reports none (or why it is not known)
    owners: tuple[str, ...] = ()  # who answers for this SKU where it is not its family's owners
    sources: tuple[str, ...]
    notes: str
    peak: Peak | None = None

    def ray_type(self, pci_device_id: str | None) -> str | None:
        """The accelerator type Ray reports for a device of this SKU with `pci_device_id`; None when it reports none
        (or the matrix does not know)."""
        if pci_device_id is not None and pci_device_id.lower() in self.ray_accelerator_type:
            return self.ray_accelerator_type[pci_device_id.lower()]
        return self.ray_accelerator_type.get("*")

    def matches_name(self, reported: str) -> bool:
        """True when a tool's product name matches one of this SKU's patterns (shell globs, any case)."""
        name = " ".join(reported.split()).casefold()
        return any(fnmatch.fnmatchcase(name, pattern.casefold()) for pattern in self.product_names)


@frozen
class DriverRule:
    """The host driver a runtime needs.

    `min` is the floor for the full feature set (for CUDA: the driver the toolkit ships with). `compat_min`,
    when set, is a lower floor that still works in a degraded mode (CUDA minor-version compatibility).
    `max` is an exclusive ceiling. `accepted`, when set, lists the only driver releases known to work, as
    version prefixes (`30.10`, `1.22`); a driver outside the list is not known to work. `releases`, when set,
    names the `[drivers.*]` releases the vendor documents as compatible: a host's driver older than all of them
    fails, one between or above them is not documented and warns.
    """

    min: Version | None = None
    compat_min: Version | None = None
    max: Version | None = None
    accepted: tuple[str, ...] = ()
    releases: tuple[str, ...] = ()
    notes: str = ""


@frozen
class DriverRelease:
    """A vendor driver release and the version hosts report for it.

    AMD numbers its GPU driver releases (30.20.1) apart from the amdgpu kernel module version that `amd-smi` and
    `/sys/module/amdgpu/version` report (6.16.6); `reports` is that module version, as a prefix (`6.16` matches
    6.16.6 and 6.16.13), so a host's driver can be matched to the release it belongs to.
    """

    id: str
    family: str
    release: str
    reports: str
    sources: tuple[str, ...]
    notes: str

    @property
    def reported_as(self) -> str:
        """How hosts show it: 6.16.6 as is, a prefix such as 6.14 as 6.14.x."""
        return self.reports if self.reports.count(".") >= 2 else f"{self.reports}.x"

    def matches(self, reported: str) -> bool:
        return reported == self.reports or reported.startswith((self.reports + ".", self.reports + "-"))


@frozen
class ImageRef:
    """A container image: repository and tag, and the digest once it has been pinned."""

    repository: str
    tag: str
    digest: str | None
    python: str | None = None

    @property
    def reference(self) -> str:
        """The exact string a Dockerfile's FROM uses: by digest when pinned, tag kept for readers."""
        ref = f"{self.repository}:{self.tag}"
        return f"{ref}@{self.digest}" if self.digest else ref


@frozen
class Hold:
    """Why a runtime stays where it is although upstream has newer releases (the support window's reason):
    `accelenv outdated` reports those releases as held, with this reason, instead of as lagging. `packages`
    are the environment pins that move only with the runtime (libtpu, held by jax's pin)."""

    reason: str
    packages: tuple[str, ...] = ()


@frozen
class Libraries:
    """Where an image's runtime libraries come from: what its base image carries and what the environment's wheels
    bring, as one line each for a reader (the Dockerfile's header shows them). Each item names a library or stack
    and its version where known; `notes` says what is there twice and which copy a process loads."""

    base: tuple[str, ...]
    wheels: tuple[str, ...] = ()
    notes: str = ""


@frozen
class Runtime:
    """A vendor runtime release (CUDA, ROCm, Neuron SDK, libtpu, Gaudi software, or plain CPU)."""

    id: str
    family: str
    name: str
    version: Version | None
    wheel_tag: str | None
    components: Mapping[str, str]
    architectures: tuple[str, ...]
    driver: DriverRule
    base_images: Mapping[str, ImageRef]
    hold: Hold | None = None
    libraries: Libraries | None = None
    sources: tuple[str, ...]
    notes: str


@frozen
class Requirements:
    """The pinned Python dependencies of an environment and the indexes they come from.

    `specs` are the requirement strings as the matrix writes them. `packages` parses them with `packaging` on
    first use; `pins` reads exact pins (`name==version`, all a valid matrix has) without it, which is what
    `accelenv check` needs: it runs before every test session, and parsing requirements costs more than the
    rest of its start-up."""

    specs: tuple[str, ...]
    index_url: str | None
    extra_index_urls: tuple[str, ...]

    @cached_property
    def packages(self) -> tuple[Requirement, ...]:
        """Every spec as a `Requirement`; one that does not parse is left out (`validate` reports it)."""
        from packaging.requirements import InvalidRequirement, Requirement

        parsed = []
        for spec in self.specs:
            with contextlib.suppress(InvalidRequirement):
                parsed.append(Requirement(spec))
        return tuple(parsed)

    @property
    def pins(self) -> tuple[tuple[str, str], ...]:
        """(name as written, pinned version) of each exact pin, in order."""
        out = []
        for spec in self.specs:
            match = _EXACT_PIN.fullmatch(spec)
            if match:
                out.append((match.group(1), match.group(2)))
            else:  # not a plain exact pin: let packaging read it
                from packaging.requirements import InvalidRequirement, Requirement

                with contextlib.suppress(InvalidRequirement, StopIteration):
                    req = Requirement(spec)
                    out.append((req.name, next(iter(req.specifier)).version))
        return tuple(out)


_EXACT_PIN = re.compile(r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*===?\s*([A-Za-z0-9.+!_-]+)")


def canonical_name(name: str) -> str:
    """A distribution name as PEP 503 compares it (the rule of `packaging.utils.canonicalize_name`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@frozen
class Requires:
    """What an environment's workloads need beyond devices (interconnect, RDMA, slice shape, limits)."""

    nvlink_all_pairs: bool = False
    min_nvlinks: int | None = None
    rdma: str | None = None
    infiniband: bool = False
    efa: bool = False
    tpu_topology: str | None = None
    memlock_unlimited: bool = False
    scale_up: str | None = None  # every device in one scale-up group of this link kind (nvlink, xgmi, neuronlink, ici)
    scale_up_devices: int | None = None  # at least this many devices in one scale-up group


class FrameworkSource(StrEnum):
    """Where an environment's framework comes from: its own lock, or the vendor's base image."""

    LOCK = "lock"
    BASE_IMAGE = "base-image"


@frozen
class Framework:
    """The framework the environment's device tests exercise, as `accelenv check` verifies it: the distribution
    `name`, its exact `version` (a local label included when the distribution carries one), the accelerator
    `build` it was made for (cu132, rocm10.0; None where the family has no such builds) and its `source`."""

    name: str
    version: str
    build: str | None = None
    source: FrameworkSource


@frozen
class Environment:
    """A runtime, OS base, Python and pinned dependencies, meant for a set of SKUs and tested in CI."""

    id: str
    family: str
    runtime: str
    description: str
    default: bool
    os: str
    python: str
    platforms: tuple[str, ...]
    skus: tuple[str, ...]
    requirements: Requirements
    tests: tuple[str, ...]
    ci_tier: CiTier
    ci_runner: tuple[str, ...]
    ci_queue: str | None
    requires: Requires
    sources: tuple[str, ...]
    framework: Framework | None = None
    perf_min_fraction: float | None = None  # a conformance figure below this fraction of the SKU's peak warns
    owners: tuple[str, ...] = ()  # who answers for this environment where it is not its family's owners
    ci_unschedulable: str | None = None  # why CI cannot run it (a default env without one that cannot run: error)
    transports: tuple[str, ...] = ()  # Ray Direct Transport transports the environment supports (GLOO, NCCL)
    no_transports: str | None = None  # why it declares none


@frozen
class Matrix:
    """The whole compatibility matrix. Lookups by id; iteration in file order."""

    schema_version: int
    sources: Mapping[str, Source]
    os: Mapping[str, OsBase]
    families: Mapping[str, Family]
    skus: Mapping[str, Sku]
    runtimes: Mapping[str, Runtime]
    envs: Mapping[str, Environment]
    drivers: Mapping[str, DriverRelease] = field(default_factory=dict)
    path: str = field(default="matrix.toml", compare=False)

    def default_env(self, family: str) -> Environment | None:
        """The environment `nox -s <family session>` runs, if the family has one."""
        return next((e for e in self.envs.values() if e.family == family and e.default), None)

    def env_skus(self, env: Environment) -> tuple[Sku, ...]:
        return tuple(self.skus[s] for s in env.skus)

    def driver_release(self, family: str, reported: str) -> DriverRelease | None:
        """The `[drivers.*]` release of `family` whose reported version matches, longest prefix first."""
        found = [d for d in self.drivers.values() if d.family == family and d.matches(reported)]
        return max(found, key=lambda d: len(d.reports), default=None)
