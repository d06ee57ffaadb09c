"""Inside a pod: what the scheduler allocated, compared with the environment (`dra.allocation`).

Kubernetes' DRA device metadata (KEP-5304; the kubelet plugin library writes it when a driver enables it) puts one
file per claim, request and driver into the container, read-only:

    /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/<request>/<driver>-metadata.json
    /var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/<pod claim>/<request>/<driver>-metadata.json

Each file is a stream of `DeviceMetadata` objects, the same metadata once per API version the driver writes
(`metadata.resource.k8s.io/v1beta1`, `v1alpha1`); a reader takes the first version it knows, skips others, and
treats a malformed object of a known version as an error. Each device carries its driver, pool, name and its
ResourceSlice attributes (`{"string": ...}`, `{"int": ...}`, `{"bool": ...}`, `{"version": ...}`).

Where such files exist, `check` reads them (through the Root, bounded: untrusted input) and compares what was
allocated with the environment: each allocated device of the environment's DRA driver must be one of its SKUs,
and the driver version it was allocated by must be the one this node runs, so a claim and a node that disagree
(a stale ResourceSlice, a hand-written claim, a selector edited out of date) fail in the pod.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from accelenv.check.verdict import Finding, Status
from accelenv.host.discover import match_sku
from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.host.report import HostReport
    from accelenv.host.root import Root
    from accelenv.matrix import Environment, Matrix

METADATA_ROOT = "/var/run/kubernetes.io/dra-device-attributes"
PATTERNS = tuple(f"{METADATA_ROOT}/{kind}/*/*/*-metadata.json" for kind in ("resourceclaims", "resourceclaimtemplates"))
API_VERSIONS = ("metadata.resource.k8s.io/v1beta1", "metadata.resource.k8s.io/v1alpha1")
MAX_FILES = 64
MAX_OBJECTS = 8  # versions of the same metadata in one file
MAX_DEVICES = 256
MAX_ATTRIBUTES = 64
MAX_TEXT = 256
_KINDS = ("string", "int", "bool", "version")


@frozen
class AllocatedDevice:
    file: str  # the metadata file it was read from (a host path)
    driver: str
    name: str
    attributes: dict[str, str | int | bool]  # version values as their text


@frozen
class Allocation:
    devices: tuple[AllocatedDevice, ...]
    problems: tuple[str, ...]  # files that could not be read as DRA device metadata
    files: int


def read_allocation(root: Root) -> Allocation:
    """Every allocated device the pod's DRA metadata files name; empty when there are none."""
    paths = sorted({p for pattern in PATTERNS for p in root.glob(pattern)})
    problems = []
    if len(paths) > MAX_FILES:
        problems.append(f"{METADATA_ROOT}: {len(paths)} metadata files, more than {MAX_FILES}; read the first")
        paths = paths[:MAX_FILES]
    devices: list[AllocatedDevice] = []
    for path in paths:
        text = root.read_text(path)  # a regular file inside the root, at most 4 MiB
        if text is None:
            problems.append(f"{path}: unreadable or not a regular file")
            continue
        try:
            devices += parse_metadata(text, path)
        except ValueError as error:
            problems.append(f"{path}: {error}")
    return Allocation(devices=tuple(devices), problems=tuple(problems), files=len(paths))


def parse_metadata(text: str, path: str) -> list[AllocatedDevice]:
    """The devices of the first DeviceMetadata object of a known API version in the stream; ValueError when there
    is none or it is malformed."""
    decoder = json.JSONDecoder()
    position, objects = 0, 0
    while True:
        while position < len(text) and text[position] in " \t\r\n":
            position += 1
        if position >= len(text):
            raise ValueError(f"no DeviceMetadata object of {' or '.join(API_VERSIONS)}")
        objects += 1
        if objects > MAX_OBJECTS:
            raise ValueError(f"more than {MAX_OBJECTS} objects")
        try:
            data, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise ValueError(f"not a JSON stream: {error.msg} at character {error.pos}") from None
        if isinstance(data, dict) and data.get("apiVersion") in API_VERSIONS and data.get("kind") == "DeviceMetadata":
            return _devices(data, path)


def _devices(data: dict[str, Any], path: str) -> list[AllocatedDevice]:
    requests = data.get("requests", [])
    if not isinstance(requests, list):
        raise ValueError("requests is not a list")
    out: list[AllocatedDevice] = []
    for request in requests:
        devices = request.get("devices", []) if isinstance(request, dict) else None
        if not isinstance(devices, list):
            raise ValueError("a request without a list of devices")
        for device in devices:
            if len(out) >= MAX_DEVICES:
                raise ValueError(f"more than {MAX_DEVICES} devices")
            if not isinstance(device, dict):
                raise ValueError("a device that is not an object")
            driver, name = _text(device.get("driver")), _text(device.get("name"))
            if driver is None or name is None:
                raise ValueError("a device without a driver or a name")
            out.append(AllocatedDevice(file=path, driver=driver, name=name, attributes=_attributes(device)))
    return out


def _attributes(device: dict[str, Any]) -> dict[str, str | int | bool]:
    raw = device.get("attributes", {})
    if not isinstance(raw, dict) or len(raw) > MAX_ATTRIBUTES:
        raise ValueError(f"attributes are not an object of at most {MAX_ATTRIBUTES}")
    out: dict[str, str | int | bool] = {}
    for key, value in raw.items():
        if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in _KINDS:
            continue  # a list value or a newer kind: not one the comparison reads
        kind, item = next(iter(value.items()))
        if kind in ("string", "version") and (text := _text(item)) is not None:
            out[str(key)[:MAX_TEXT]] = text
        elif (kind == "int" and isinstance(item, int) and not isinstance(item, bool)) or (
            kind == "bool" and isinstance(item, bool)
        ):
            out[str(key)[:MAX_TEXT]] = item
    return out


def _text(value: object) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) and value.isprintable() else None


# ---------------------------------------------------------------------------------------------------- judging


def allocated_findings(matrix: Matrix, env: Environment, report: HostReport, allocation: Allocation) -> list[Finding]:
    """`dra.allocation`: nothing when the pod has no DRA metadata; else whether what was allocated is what the
    environment needs, on the driver this node runs."""
    if not allocation.files:
        return []
    from accelenv.k8s.dra import driver_for, published_version  # only in a pod: `check` elsewhere never loads it

    driver = driver_for(env.family)
    expected = f"devices of {', '.join(env.skus)}" + (f" from {driver.name}" if driver else "")
    if allocation.problems:
        return [
            Finding(
                id="dra.allocation",
                status=Status.FAIL,
                expected=expected,
                found="; ".join(allocation.problems[:3]),
                message="the pod's DRA device metadata could not be read",
                fix="check the DRA driver's device-metadata setting and the files under " + METADATA_ROOT,
            )
        ]
    if driver is None:
        return []
    ours = [d for d in allocation.devices if d.driver == driver.name]
    if not ours:
        drivers = sorted({d.driver for d in allocation.devices}) or ["none"]
        return [_fail(expected, f"devices of {', '.join(drivers)}", f"the claim allocated no {driver.name} device")]
    acc = report.accelerator(env.family)
    node_version = published_version(driver, acc.driver_version) if acc and acc.driver_version else None
    wrong, versions = [], set()
    for device in ours:
        sku = _sku(matrix, env, device)
        if sku not in env.skus:
            wrong.append(f"{device.name} is {sku or 'no SKU of the matrix'}")
        if driver.version_attribute and isinstance(version := device.attributes.get(driver.version_attribute), str):
            versions.add(version)
    found = f"{len(ours)} device(s): " + ", ".join(sorted({_sku(matrix, env, d) or "unknown" for d in ours}))
    if wrong:
        return [
            _fail(
                expected, found, "the scheduler allocated devices that are not the environment's: " + "; ".join(wrong)
            )
        ]
    seen = {d.sku for d in acc.devices if d.sku} if acc else set()
    allocated = {_sku(matrix, env, d) for d in ours}
    if seen and not allocated <= seen:
        message = (
            f"the claim allocated {', '.join(sorted(s or 'unknown' for s in allocated))}, but this pod sees "
            f"{', '.join(sorted(seen))}: the node's ResourceSlice and its devices disagree"
        )
        return [_fail(expected, found, message)]
    if versions and node_version is not None and versions != {node_version}:
        message = (
            f"the devices were allocated by driver {', '.join(sorted(versions))} (the ResourceSlice), but this node "
            f"runs {acc.driver_version if acc else '?'} ({node_version} as the DRA driver publishes it)"
        )
        return [_fail(expected, found + f", driver {', '.join(sorted(versions))}", message)]
    return [
        Finding(
            id="dra.allocation",
            status=Status.PASS,
            expected=expected,
            found=found,
            message=f"the claim allocated {len(ours)} device(s) of {env.id}'s SKUs on this node's driver",
        )
    ]


def _fail(expected: str, found: str, message: str) -> Finding:
    return Finding(
        id="dra.allocation",
        status=Status.FAIL,
        expected=expected,
        found=found,
        message=message,
        fix="regenerate the claim (accelenv render; kubectl apply -f envs/<env>/k8s/) and restart the DRA driver",
    )


def _sku(matrix: Matrix, env: Environment, device: AllocatedDevice) -> str | None:
    from accelenv.k8s.dra import driver_for

    driver = driver_for(env.family)
    if driver is None:
        return None
    attrs = device.attributes
    if driver.model_attribute:
        model = attrs.get(driver.model_attribute)
        ids = [p for p, m in driver.models.items() if m == model]
        skus = sorted(
            {s.id for s in matrix.skus.values() if s.family == env.family for p in ids if p in s.pci_device_ids}
        )
        return skus[0] if len(skus) == 1 else None
    name = attrs.get(driver.name_attribute or "")
    pci = attrs.get(driver.id_attribute or "")
    if isinstance(name, str) and driver.family == "amd":
        name = name.replace("_", " ")  # AMD publishes spaces as _
    return match_sku(
        matrix,
        env.family,
        pci_device_id=pci if isinstance(pci, str) else None,
        name=name if isinstance(name, str) else None,
    )
