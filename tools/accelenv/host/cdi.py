"""CDI spec files (`/etc/cdi`, `/var/run/cdi`): read, parsed and summarised into plain data a snapshot carries,
so `check` can judge them on another machine (`check/container.py`) and `run` can name their devices
(`build/wiring.py`).

A summary keeps what the judgement needs: whether the file parses, its `cdiVersion` and `kind`, its device
names, the driver version an NVIDIA spec was generated for (its libraries carry it: `libcuda.so.580.95.05`),
and which host paths its `containerEdits` name that do not exist (read through the `Root`, so `--root` works).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from accelenv.lazyre import lazy
from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.host.root import Root

SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")  # the CDI spec's default folders, in the order of precedence they rise
# Released spec versions (cncf-tags/container-device-interface specs-go/version.go: v0.1.0 ... v0.8.0)
KNOWN_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0")
MAX_PATHS = 4096  # host paths looked at per spec: a real nvidia.yaml names ~60
MAX_LISTED = 64  # missing paths a summary keeps (the count is kept whole)
_KIND = lazy(r"\A[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?\Z")
_NAME = lazy(r"\A[a-zA-Z0-9]([a-zA-Z0-9_.:-]*[a-zA-Z0-9])?\Z")
_DRIVER_LIB = lazy(r"\Alib(?:cuda|nvidia-ml)\.so\.(\d+\.\d+(?:\.\d+)?)\Z")
_DRIVER_ARG = lazy(r"\A--host-driver-version=(\d+\.\d+(?:\.\d+)?)\Z")


@frozen
class CdiSpec:
    path: str  # host path of the file
    error: str = ""  # why it is not a usable spec ("" when it is)
    cdi_version: str = ""
    kind: str = ""  # vendor/class, e.g. nvidia.com/gpu
    devices: tuple[str, ...] = ()  # device names: "0", "all", GPU-<uuid> ...
    driver_version: str = ""  # the driver it was generated for, where its files say (NVIDIA)
    paths: int = 0  # host paths its containerEdits name (mounts, device nodes, hooks)
    missing: tuple[str, ...] = ()  # those that do not exist (at most MAX_LISTED)
    missing_count: int = 0
    sensitive: tuple[str, ...] = ()  # host paths no device needs, given to containers: "/ (read-write)"

    def as_json(self) -> dict[str, Any]:
        data = {**vars(self), "devices": list(self.devices), "missing": list(self.missing)}
        data["sensitive"] = list(self.sensitive)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CdiSpec:
        return cls(
            path=str(data["path"]),
            error=str(data.get("error", "")),
            cdi_version=str(data.get("cdi_version", "")),
            kind=str(data.get("kind", "")),
            devices=tuple(str(d) for d in data.get("devices", ())),
            driver_version=str(data.get("driver_version", "")),
            paths=int(data.get("paths", 0)),
            missing=tuple(str(p) for p in data.get("missing", ())),
            missing_count=int(data.get("missing_count", 0)),
            sensitive=tuple(str(p) for p in data.get("sensitive", ())),
        )

    def device(self, name: str) -> str:
        """The fully qualified CDI name of device `name` of this spec: nvidia.com/gpu=0."""
        return f"{self.kind}={name}"


def spec_files(root: Root) -> list[str]:
    """Every spec file in the default folders (*.json, *.yaml), as the CDI registry reads them."""
    return sorted(path for folder in SPEC_DIRS for ext in ("json", "yaml") for path in root.glob(f"{folder}/*.{ext}"))


def read_specs(root: Root) -> tuple[CdiSpec, ...]:
    """A summary of every spec file under `root`; an unreadable file is a spec with its error."""
    found = []
    for path in spec_files(root):
        text = root.read_text(path)
        if text is None:
            found.append(CdiSpec(path=path, error="cannot be read (see unreadable paths)"))
            continue
        found.append(summarise(path, text, root))
    return tuple(found)


def parse(path: str, text: str) -> Any:
    """The document of a spec file: JSON for *.json, the YAML subset of `cdi_yaml` otherwise (a YAML spec may
    be written as JSON, which is YAML too)."""
    if path.endswith(".json") or text.lstrip().startswith("{"):
        return json.loads(text)
    from accelenv.host.cdi_yaml import loads  # only a host with YAML specs needs the YAML reader

    return loads(text)


def summarise(path: str, text: str, root: Root) -> CdiSpec:
    from accelenv.host.cdi_yaml import YamlError

    try:
        data = parse(path, text)
    except (YamlError, json.JSONDecodeError, RecursionError) as error:
        return CdiSpec(path=path, error=f"does not parse: {error}")
    if not isinstance(data, dict):
        return CdiSpec(path=path, error="is not a CDI spec (its document is not a mapping)")
    version, kind, devices = data.get("cdiVersion"), data.get("kind"), data.get("devices")
    if not isinstance(version, str) or not version:
        return CdiSpec(path=path, error="has no cdiVersion")
    if not isinstance(kind, str) or not _KIND.match(kind):
        return CdiSpec(path=path, cdi_version=version, error=f"has no valid kind (vendor/class): {kind!r}")
    if not isinstance(devices, list) or not devices:
        return CdiSpec(path=path, cdi_version=version, kind=kind, error="lists no devices")
    names, edits = [], [data.get("containerEdits")]
    for entry in devices:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not _NAME.match(name):
            problem = f"has a device without a valid name: {name!r}"
            return CdiSpec(path=path, cdi_version=version, kind=kind, error=problem)
        names.append(name)
        edits.append(entry.get("containerEdits"))
    host_paths, driver = _edits(edits)
    missing = [p for p in host_paths if not root.exists(p)]
    from accelenv.host.cdi_mounts import sensitive_edits

    sensitive = sensitive_edits(edits)
    return CdiSpec(
        path=path,
        cdi_version=version,
        kind=kind,
        devices=tuple(names),
        driver_version=driver,
        paths=len(host_paths),
        missing=tuple(missing[:MAX_LISTED]),
        missing_count=len(missing),
        sensitive=tuple(sensitive[:MAX_LISTED]),
    )


def _edits(edits: list[Any]) -> tuple[list[str], str]:
    """The host paths named by these containerEdits (mount sources, device nodes, hook programs), in order and
    once each, and the driver version their NVIDIA library names or hook arguments give ("" if none)."""
    paths: dict[str, None] = {}
    driver_libs, driver_args = [], []
    for edit in edits:
        if not isinstance(edit, dict):
            continue
        for mount in _list(edit.get("mounts")):
            host = mount.get("hostPath") if isinstance(mount, dict) else None
            if isinstance(host, str) and host.startswith("/"):
                paths[host] = None
                match = _DRIVER_LIB.match(host.rpartition("/")[2])
                if match:
                    driver_libs.append(match[1])
        for node in _list(edit.get("deviceNodes")):
            host = (node.get("hostPath") or node.get("path")) if isinstance(node, dict) else None
            if isinstance(host, str) and host.startswith("/"):
                paths[host] = None
        for hook in _list(edit.get("hooks")):
            program = hook.get("path") if isinstance(hook, dict) else None
            if isinstance(program, str) and program.startswith("/"):
                paths[program] = None
            for arg in _list(hook.get("args") if isinstance(hook, dict) else None):
                match = _DRIVER_ARG.match(arg) if isinstance(arg, str) else None
                if match:
                    driver_args.append(match[1])
    found = driver_libs or driver_args
    return list(paths)[:MAX_PATHS], (found[0] if found else "")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def for_kind(specs: tuple[CdiSpec, ...], kind: str) -> list[CdiSpec]:
    """The usable specs of `kind`, in the order the engine's registry gives precedence (later folders win)."""
    return [s for s in specs if s.kind == kind and not s.error]
