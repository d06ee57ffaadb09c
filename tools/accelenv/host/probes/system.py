"""Facts every check needs whatever the family: OS, CPU architecture, limits, container runtime, environment."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from accelenv.host.cdi import read_specs
from accelenv.host.report import Container, Limits, OsInfo

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.root import Root
    from accelenv.host.run import Runner

# Variables that say which devices a process sees or what a node is; anything else stays out of reports.
REPORTED_ENV = re.compile(
    r"\A(CUDA_VISIBLE_DEVICES|NVIDIA_VISIBLE_DEVICES|NVIDIA_DRIVER_CAPABILITIES|HIP_VISIBLE_DEVICES|"
    r"ROCR_VISIBLE_DEVICES|GPU_DEVICE_ORDINAL|TPU_.*|NEURON_RT_VISIBLE_CORES|NEURON_RT_NUM_CORES|"
    r"HABANA_VISIBLE_DEVICES|HABANA_VISIBLE_MODULES|ACCELERATOR_TYPE|RAY_ADDRESS|CI)\Z"
)
SHM = "/dev/shm"
SECRET = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL|AUTH)", re.IGNORECASE)


def parse_os_release(text: str | None) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip():
            values[key.strip()] = value.strip().strip('"').strip("'")
    return values


def _glibc() -> str | None:
    """The running C library's glibc version (`glibc 2.36` from confstr), None for another C library."""
    try:
        name, _, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    except (ValueError, OSError):
        return None
    return version if name == "glibc" and version else None


def os_info(root: Root) -> OsInfo:
    release = parse_os_release(root.read_text("/etc/os-release") or root.read_text("/usr/lib/os-release"))
    glibc: str | None = None
    arch = root.read_value("/proc/sys/kernel/arch")
    kernel = root.read_value("/proc/sys/kernel/osrelease")
    if root.is_live:
        uname = os.uname()
        kernel = kernel or uname.release or None
        glibc = _glibc()
        arch = arch or uname.machine or None
    return OsInfo(
        id=release.get("ID"),
        version_id=release.get("VERSION_ID"),
        pretty_name=release.get("PRETTY_NAME"),
        kernel=kernel,
        glibc=glibc,
        arch=arch,
    )


def parse_memlock(limits_text: str | None) -> tuple[int | None, bool]:
    """(soft limit in bytes, unlimited) from /proc/<pid>/limits."""
    for line in (limits_text or "").splitlines():
        if line.startswith("Max locked memory"):
            fields = line.split()
            soft = fields[3] if len(fields) > 3 else ""
            if soft == "unlimited":
                return None, True
            if soft.isdigit():
                return int(soft), False
    return None, False


def parse_shm_size(mounts_text: str | None) -> int | None:
    """The size= option of the /dev/shm mount, in bytes (tmpfs sizes are k, m or g suffixed)."""
    for line in (mounts_text or "").splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == SHM:
            for option in fields[3].split(","):
                if option.startswith("size="):
                    value = option[5:]
                    scale = {"k": 2**10, "m": 2**20, "g": 2**30}.get(value[-1:].lower(), 1)
                    digits = value[:-1] if scale != 1 else value
                    return int(digits) * scale if digits.isdigit() else None
    return None


def limits(root: Root) -> Limits:
    memlock, unlimited = parse_memlock(root.read_text("/proc/self/limits"))
    shm = parse_shm_size(root.read_text("/proc/mounts"))
    if shm is None and root.is_live:
        try:
            stat = os.statvfs(SHM)
            shm = stat.f_frsize * stat.f_blocks
        except OSError:
            shm = None
    return Limits(shm_bytes=shm, memlock_bytes=memlock, memlock_unlimited=unlimited)


def container(root: Root, runner: Runner) -> Container:
    cgroup = root.read_text("/proc/1/cgroup") or ""
    inside = (
        root.exists("/.dockerenv")
        or root.exists("/run/.containerenv")
        or any(marker in cgroup for marker in ("docker", "kubepods", "containerd", "libpod"))
    )
    cdi = read_specs(root)
    return Container(
        inside_container=inside,
        docker_socket=root.exists("/var/run/docker.sock") or root.exists("/run/docker.sock"),
        nvidia_container_toolkit=runner.which("nvidia-ctk") is not None
        or runner.which("nvidia-container-runtime") is not None,
        cdi_specs=tuple(spec.path for spec in cdi),
        cdi=cdi,
    )


def reported_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The accelerator-related variables, with anything that looks like a secret redacted."""
    return {
        key: ("<redacted>" if SECRET.search(key) else value)
        for key, value in sorted(environ.items())
        if REPORTED_ENV.match(key)
    }
