"""DRA device selectors: the CEL that picks exactly the devices of an environment's SKUs on a driver it accepts, in
the attribute names and types each vendor's DRA driver publishes.

Pure: the matrix in, CEL text out. The selector mirrors `check`, never judges on its own:

- **the SKU** as `accelenv.host.discover.match_sku` decides it: by PCI device id where the driver publishes one and
  the id names one SKU, else by product name, the first SKU of the family (in matrix order) whose pattern matches;
- **the driver** as `accelenv.check.driver.driver_version` fails it: the runtime's floor (or its
  minor-version-compatibility floor), its ceiling, the oldest driver release documented for it, and each SKU's
  floors by driver branch (`accelenv.matrix.driver_branches`), compared as the driver publishes its version.

What a driver does not publish (kernel modules, device nodes, CDI specs, Gaudi's driver version) the selector
cannot see: `accelenv check` in the pod's init container is the gate for those, and `DraDriver.cannot_see` says so.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING

from accelenv.errors import UsageError
from accelenv.matrix.driver_branches import branch_floors
from accelenv.matrix.model import LiteralVersion
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Sequence

    from packaging.version import Version

    from accelenv.matrix import Environment, Matrix, Sku

# Kubernetes refuses a CEL selector longer than this (resource.k8s.io/v1 CELSelectorExpressionMaxLength)
MAX_EXPRESSION = 10 * 1024


@frozen
class DraDriver:
    """One vendor's DRA driver: its name (also the domain of its attributes) and the attributes a selector uses."""

    family: str
    name: str  # the driver name, and the attribute domain: device.attributes["<name>"]
    project: str  # what a reader installs
    assumes: str  # the driver release (and source) whose attribute names and types the selectors assume
    whole_device: str  # the `type` attribute of a whole device (not a partition)
    name_attribute: str | None  # a product-name string the SKU patterns match
    id_attribute: str | None  # a PCI device id string ("0x74a1")
    model_attribute: str | None  # a model name the driver derives from the PCI id (Gaudi)
    models: dict[str, str]  # PCI device id -> model name, the driver's own table
    version_attribute: str | None  # a semver version attribute holding the driver version
    version_always: bool  # the driver always publishes the version (else a selector guards it with `in`)
    health_attribute: str | None  # a bool the driver sets false for a device it found unusable
    cannot_see: str  # what only `accelenv check` in the pod can judge


NVIDIA = DraDriver(
    family="nvidia",
    name="gpu.nvidia.com",
    project="NVIDIA k8s-dra-driver-gpu",
    assumes=(
        "NVIDIA k8s-dra-driver-gpu v25.x (cmd/gpu-kubelet-plugin/deviceinfo.go @ 03af8246: type, productName, "
        "architecture strings; cudaComputeCapability, driverVersion, cudaDriverVersion versions parsed by "
        "Masterminds semver, so 580.105.08 is published as 580.105.8 and 595.80 as 595.80.0)"
    ),
    whole_device="gpu",
    name_attribute="productName",
    id_attribute=None,
    model_attribute=None,
    models={},
    version_attribute="driverVersion",
    version_always=True,
    health_attribute=None,
    cannot_see=(
        "the nvidia kernel module and /dev/nvidia* nodes, the CDI spec, the CUDA libraries in the image, and the "
        "PCI device id (the driver publishes none for a whole GPU, so a SKU is told by its product name)"
    ),
)

AMD = DraDriver(
    family="amd",
    name="gpu.amd.com",
    project="AMD k8s-gpu-dra-driver",
    assumes=(
        "AMD k8s-gpu-dra-driver v1.x (cmd/gpu-kubeletplugin/deviceinfo.go @ 08bc729c, pkg/amdgpu/amdgpu.go "
        "@ 086e278b: type, productName (sysfs product_name, spaces as _, parentheses dropped) and deviceID "
        "strings; driverVersion the amdgpu module version cut to three parts, left out when the module has none)"
    ),
    whole_device="amdgpu",
    name_attribute="productName",
    id_attribute="deviceID",
    model_attribute=None,
    models={},
    version_attribute="driverVersion",
    version_always=False,
    health_attribute=None,
    cannot_see="the amdgpu module's device nodes (/dev/kfd, /dev/dri), the CDI spec and the ROCm user space",
)

GAUDI = DraDriver(
    family="gaudi",
    name="gaudi.intel.com",
    project="Intel resource drivers for Kubernetes (Gaudi)",
    assumes=(
        "Intel intel-resource-drivers-for-kubernetes Gaudi driver v0.6 (pkg/gaudi/device/device.go @ 3ef104c6: "
        "model from its PCI-id table; cmd/kubelet-gaudi-plugin/node_state.go: model, pciRoot, serial strings, "
        "healthy bool; no driver version)"
    ),
    whole_device="",
    name_attribute=None,
    id_attribute=None,
    model_attribute="model",
    # pkg/gaudi/device/device.go ModelNames @ 3ef104c6
    models={
        "0x1000": "Gaudi",
        "0x1001": "Gaudi",
        "0x1010": "Gaudi",
        "0x1011": "Gaudi",
        "0x1020": "Gaudi2",
        "0x1030": "Gaudi3",
        "0x1060": "Gaudi3",
        "0x1061": "Gaudi3",
        "0x1062": "Gaudi3",
        "0x1063": "Gaudi3",
    },
    version_attribute=None,
    version_always=False,
    health_attribute="healthy",
    cannot_see=(
        "the driver: Intel's Gaudi driver publishes no version, so the habanalabs release (and Gaudi 3's floor) "
        "is judged only by accelenv check in the pod; also the device nodes and the CDI spec"
    ),
)

DRIVERS: dict[str, DraDriver] = {d.family: d for d in (NVIDIA, AMD, GAUDI)}


@frozen
class Selector:
    expression: str
    says: str  # one line for the generated file


@frozen
class Selection:
    """The selectors of one environment, ANDed, and what they leave to the preflight."""

    driver: DraDriver
    selectors: tuple[Selector, ...]
    unselectable: tuple[str, ...]  # SKUs of the environment the driver's attributes cannot tell apart
    preflight_only: tuple[str, ...]  # what the selectors cannot express, in words


def driver_for(family: str) -> DraDriver | None:
    return DRIVERS.get(family)


def selection(matrix: Matrix, env: Environment) -> Selection:
    """The selectors that pick exactly the devices `check` accepts for `env`, as far as the driver's attributes
    say. Raises UsageError when the family has no DRA driver here or a selector would be refused."""
    driver = driver_for(env.family)
    if driver is None:
        families = ", ".join(sorted(DRIVERS))
        raise UsageError(f"envs.{env.id}: no DRA driver is described for family {env.family!r} (only {families})")
    attrs = f'device.attributes["{driver.name}"]'
    guard = f'device.driver == "{driver.name}"'
    if driver.whole_device:
        guard += f' && {attrs}.type == "{driver.whole_device}"'
    if driver.health_attribute:
        guard += f' && "{driver.health_attribute}" in {attrs} && {attrs}.{driver.health_attribute}'
    family = [s for s in matrix.skus.values() if s.family == env.family]
    wanted = [s for s in family if s.id in env.skus]
    unselectable = [s.id for s in wanted if _identified(driver, attrs, family, [s]) is None]
    groups: dict[str | None, list[Sku]] = {}  # SKUs with the same driver floor share one term
    for sku in wanted:
        if sku.id not in unselectable:
            groups.setdefault(_sku_floor(driver, attrs, sku), []).append(sku)
    terms = []
    for floor, skus in groups.items():
        identified = _identified(driver, attrs, family, skus)
        terms.append(f"(({identified}) && {floor})" if floor else f"({identified})")
    if not terms:
        raise UsageError(
            f"envs.{env.id}: the {driver.project}'s attributes can tell none of its SKUs apart "
            f"({', '.join(env.skus)}); give them product names or PCI ids the driver publishes"
        )
    selectors = [
        Selector(expression=guard, says=f"a whole device of {driver.name}"),
        Selector(
            expression=" || ".join(terms),
            says=f"a SKU of {env.id}" + (" on its driver floor" if _has_sku_floor(driver, wanted) else ""),
        ),
    ]
    runtime = _runtime_floor(matrix, env, driver, attrs)
    if runtime:
        selectors.append(Selector(expression=runtime, says=f"a driver that runs {matrix.runtimes[env.runtime].name}"))
    for selector in selectors:
        if len(selector.expression) > MAX_EXPRESSION:
            raise UsageError(
                f"envs.{env.id}: the selector for {selector.says} is {len(selector.expression)} characters, over "
                f"Kubernetes' {MAX_EXPRESSION}; split the environment"
            )
    preflight = [driver.cannot_see]
    if driver.version_attribute is None and _has_sku_floor(driver, wanted, ignore_attribute=True):
        floors = ", ".join(f"{s.id} {s.driver_min}" for s in wanted if s.driver_min)
        preflight.append(f"the SKU driver floors ({floors})")
    if unselectable:
        preflight.append(f"SKUs the driver's attributes cannot name: {', '.join(unselectable)}")
    if driver.models:
        unnamed = [f"{p} ({s.id})" for s in wanted for p in s.pci_device_ids if p not in driver.models]
        if unnamed:
            preflight.append(f"devices its model table does not name, which no claim selects: {', '.join(unnamed)}")
    return Selection(
        driver=driver, selectors=tuple(selectors), unselectable=tuple(unselectable), preflight_only=tuple(preflight)
    )


# ---------------------------------------------------------------------------------------------------- the SKU


def _identified(driver: DraDriver, attrs: str, family: Sequence[Sku], skus: Sequence[Sku]) -> str | None:
    """CEL true exactly when a device is one of `skus` by `match_sku`'s rule, from what the driver publishes;
    None when its attributes can name none of them."""
    if driver.model_attribute is not None:
        models = [m for s in skus if (m := _by_model(driver, family, s))]
        if not models:
            return None
        return f'"{driver.model_attribute}" in {attrs} && {attrs}.{driver.model_attribute} in {_list(sorted(models))}'
    group = {s.id for s in skus}
    names = [n for s in skus if (n := _first_by_name(driver, attrs, family, s, same=group))]
    by_name = " || ".join(f"({n})" for n in names) if len(names) > 1 else (names[0] if names else None)
    if driver.id_attribute is None:
        return by_name
    ids = f"{attrs}.{driver.id_attribute}"
    has_id = f'"{driver.id_attribute}" in {attrs}'
    owners: dict[str, list[Sku]] = {}
    for other in family:
        for pci in other.pci_device_ids:
            owners.setdefault(pci, []).append(other)
    parts = []
    unique = sorted(p for s in skus for p in s.pci_device_ids if [o.id for o in owners[p]] == [s.id])
    if unique:
        parts.append(f"({has_id} && {ids} in {_list(unique)})")
    for sku in skus:
        for pci in sorted(p for p in sku.pci_device_ids if len(owners[p]) > 1):
            shared = _first_by_name(driver, attrs, owners[pci], sku)
            if shared is not None:
                parts.append(f"({has_id} && {ids} == {_quote(pci)} && {shared})")
    if by_name is not None:
        parts.append(f"((!({has_id}) || !({ids} in {_list(sorted(owners))})) && ({by_name}))")
    return " || ".join(parts) if parts else None


def _first_by_name(
    driver: DraDriver, attrs: str, candidates: Sequence[Sku], sku: Sku, *, same: frozenset[str] | set[str] = frozenset()
) -> str | None:
    """The device's product name matches `sku` and no candidate before it that could match the same name, other
    than those in `same` (SKUs selected on the same terms: a name that is one of them is selected either way)."""
    if driver.name_attribute is None or not sku.product_names:
        return None
    name = f"{attrs}.{driver.name_attribute}"
    term = f"{name}.matches({_quote(_regex(driver, sku.product_names))})"
    before = []
    for other in candidates:
        if other.id == sku.id:
            break
        if other.id not in same and other.product_names and _may_overlap(other.product_names, sku.product_names):
            before.append(f"!{name}.matches({_quote(_regex(driver, other.product_names))})")
    return " && ".join([term, *before]) if before else term


def _by_model(driver: DraDriver, family: Sequence[Sku], sku: Sku) -> str | None:
    """The model name the driver gives the SKU's devices; None when its table knows none of their PCI ids."""
    models = sorted({driver.models[p] for p in sku.pci_device_ids if p in driver.models})
    if not models:
        return None
    for model in models:
        sharing = sorted(s.id for s in family if any(driver.models.get(p) == model for p in s.pci_device_ids))
        if sharing != [sku.id]:
            raise UsageError(
                f"skus.{sku.id}: the {driver.project} names devices of {', '.join(sharing)} all {model!r}, so a "
                "claim cannot tell them apart; keep them in the same environments"
            )
    if len(models) > 1:
        raise UsageError(f"skus.{sku.id}: the {driver.project} names its devices {' and '.join(models)}")
    return models[0]


def _regex(driver: DraDriver, patterns: Sequence[str]) -> str:
    """One anchored RE2 expression for the SKU's product-name globs, matched as `Sku.matches_name` matches them
    (any case, runs of whitespace as one space) against the name as this driver publishes it."""
    amd = driver.family == "amd"  # spaces published as _, parentheses dropped (pkg/amdgpu/amdgpu.go)
    alternatives = [_glob_regex(p, amd=amd) for p in patterns]
    body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
    space = "" if amd else r"\s*"
    return f"(?is)^{space}{body}{space}$"


def _glob_regex(pattern: str, *, amd: bool) -> str:
    out: list[str] = []
    text = " ".join(pattern.split())
    if amd:
        text = text.replace("(", "").replace(")", "")
    i = 0
    while i < len(text):
        char = text[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and (end := text.find("]", i + 2)) != -1:
            inner = text[i + 1 : end]
            negate = inner.startswith("!")
            inner = inner[1:] if negate else inner
            escaped = "".join("\\" + c if c in "\\^[]" else c for c in inner)
            out.append("[" + ("^" if negate else "") + escaped + "]")
            i = end
        elif char == " ":
            out.append("_+" if amd else r"\s+")
        elif char.isascii() and not char.isalnum():
            out.append("\\" + char)
        else:
            out.append(char)
        i += 1
    return "".join(out)


def _may_overlap(first: Sequence[str], second: Sequence[str]) -> bool:
    """Whether a name could match a pattern of both; False only when it cannot (a literal against a glob)."""
    for a in first:
        for b in second:
            plain_a = not any(c in a for c in "*?[")
            plain_b = not any(c in b for c in "*?[")
            if plain_a and _same_name(b, a):
                return True
            if plain_b and _same_name(a, b):
                return True
            if not plain_a and not plain_b:
                return True
    return False


def _same_name(pattern: str, name: str) -> bool:
    return fnmatch.fnmatchcase(" ".join(name.split()).casefold(), " ".join(pattern.split()).casefold())


# ---------------------------------------------------------------------------------------------------- the driver


def semver_text(version: Version) -> str:
    """A version as Kubernetes' semver() takes it: three numeric parts, no leading zeros (595.71.05 -> 595.71.5)."""
    release = list(version.release)
    if len(release) > 3 or version.pre or version.post or version.dev or version.local:
        raise UsageError(f"driver version {version} has no SemVer form a DRA selector can compare with")
    return ".".join(str(part) for part in [*release, 0, 0][:3])


def published_version(driver: DraDriver, reported: str) -> str | None:
    """A host's driver version as `driver` publishes it in its ResourceSlice: NVIDIA parses NVML's string with
    Masterminds semver (parts as integers, missing ones 0: 580.105.08 -> 580.105.8, 595.80 -> 595.80.0); AMD cuts
    the amdgpu module version to three parts (6.19.14.31400000 -> 6.19.14). None when it publishes none."""
    parts = reported.strip().split(".")
    if driver.version_attribute is None or not all(p.isdigit() for p in parts[:3]):
        return None
    if driver.family == "amd":
        return ".".join(parts[:3])
    return ".".join([*(str(int(p)) for p in parts[:3]), "0", "0"][:3])


def _at_least(version_attr: str, floor: Version) -> str:
    return f'{version_attr}.compareTo(semver("{semver_text(floor)}")) >= 0'


def _has_sku_floor(driver: DraDriver, skus: Sequence[Sku], *, ignore_attribute: bool = False) -> bool:
    return (ignore_attribute or driver.version_attribute is not None) and any(s.driver_min for s in skus)


def _sku_floor(driver: DraDriver, attrs: str, sku: Sku) -> str | None:
    """CEL true exactly when `below_floor(sku, version)` is None."""
    if driver.version_attribute is None:
        return None
    floors = branch_floors(sku)
    if not floors:
        return None
    version = f"{attrs}.{driver.version_attribute}"
    guard = "" if driver.version_always else f'"{driver.version_attribute}" in {attrs} && '
    if len(floors) == 1:
        return guard + _at_least(version, next(iter(floors.values())))
    branches = [f"({version}.major() == {b} && {_at_least(version, f)})" for b, f in floors.items()]
    branches.append(f"{version}.major() > {max(floors)}")
    return guard + "(" + " || ".join(branches) + ")"


def _runtime_floor(matrix: Matrix, env: Environment, driver: DraDriver, attrs: str) -> str | None:
    """CEL true exactly when the runtime's rule does not fail the driver (a warning still runs)."""
    if driver.version_attribute is None:
        return None
    rule = matrix.runtimes[env.runtime].driver
    version = f"{attrs}.{driver.version_attribute}"
    parts = []
    if rule.min is not None:
        lowest = _at_least(version, rule.min)
        if rule.compat_min is not None:
            lowest = f"({lowest} || {_at_least(version, rule.compat_min)})"
        parts.append(lowest)
    if rule.max is not None:
        parts.append(f'{version}.compareTo(semver("{semver_text(rule.max)}")) < 0')
    documented = [matrix.drivers[r] for r in rule.releases if r in matrix.drivers]
    if documented:
        oldest = min(LiteralVersion(r.reports) for r in documented)
        parts.append(_at_least(version, oldest))
    if not parts:
        return None
    guard = [] if driver.version_always else [f'"{driver.version_attribute}" in {attrs}']
    return " && ".join([*guard, *parts])


def _quote(text: str) -> str:
    """A CEL string literal (double quotes; backslash and quote escaped)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _list(items: Sequence[str]) -> str:
    return "[" + ", ".join(_quote(i) for i in items) + "]"
