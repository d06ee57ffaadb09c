"""The process limits workloads run into: `/dev/shm` large enough for NCCL and DataLoader workers (`limits.shm`),
and, for a family with devices, locked memory unlimited for RDMA registrations (`limits.memlock`: a warning, a
failure where the environment requires it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelenv.check.verdict import Finding, Status

if TYPE_CHECKING:
    from collections.abc import Iterator

    from accelenv.host.report import HostReport
    from accelenv.matrix import Family

SHM_RECOMMENDED = 1 << 30  # 1 GiB: NCCL and DataLoader workers exhaust docker's 64 MiB default


def limits(family: Family, report: HostReport, *, required_unlimited: bool = False) -> Iterator[Finding]:
    shm = report.limits.shm_bytes
    if shm is not None:
        ok = shm >= SHM_RECOMMENDED
        yield Finding(
            id="limits.shm",
            status=Status.PASS if ok else Status.WARN,
            expected=">= 1 GiB",
            found=f"{shm / 2**20:.0f} MiB",
            message="/dev/shm is large enough" if ok else "/dev/shm is small: NCCL and DataLoader workers run out",
            fix="" if ok else "give containers --shm-size=16g (or --ipc=host)",
        )
    if not family.pci_vendor_ids:
        return
    memlock = report.limits
    if memlock.memlock_unlimited:
        yield Finding(id="limits.memlock", status=Status.PASS, expected="unlimited", found="unlimited", message="")
    elif memlock.memlock_bytes is not None:
        yield Finding(
            id="limits.memlock",
            status=Status.FAIL if required_unlimited else Status.WARN,
            expected="unlimited",
            found=f"{memlock.memlock_bytes // 1024} KiB",
            message="locked memory is limited: RDMA (GPUDirect, EFA) registrations fail",
            fix="ulimit -l unlimited, or docker run --ulimit memlock=-1",
        )
