"""The driver: is the kernel module the family's, loaded, of a version the runtime and every SKU accept, and read
the same from every place that says it?

`driver.module`, `driver.version` (the runtime's rule, each SKU's floor by driver branch, the releases the vendor
documents) and `driver.sources`, in the order `check` asks them.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion

from accelenv.check.verdict import Finding, Status
from accelenv.matrix.driver_branches import below_floor
from accelenv.matrix.driver_need import driver_need
from accelenv.matrix.model import LiteralVersion

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from packaging.version import Version

    from accelenv.host.report import Accelerator, HostReport
    from accelenv.matrix import Family, Matrix, Runtime
    from accelenv.matrix.driver_need import DriverNeed

_NUMERIC = re.compile(r"\d+(?:\.\d+)*")


def numeric_version(text: str | None) -> Version | None:
    """The leading dotted number of a tool's version string (`1.22.1-97ec1a4` -> 1.22.1), printed as written."""
    if not text:
        return None
    match = _NUMERIC.match(text.strip())
    if not match:
        return None
    try:
        return LiteralVersion(match.group(0))
    except InvalidVersion:
        return None


def driver_module(family: Family, acc: Accelerator) -> Iterator[Finding]:
    if not family.kernel_modules:
        return
    if acc.shadowed_by:
        yield Finding(
            id="driver.module",
            status=Status.FAIL,
            expected=f"devices bound to {', '.join(family.kernel_modules)}",
            found=f"bound to {acc.shadowed_by}",
            message=f"the {acc.shadowed_by} driver holds the {family.name} devices",
            fix=f"blacklist {acc.shadowed_by} and load {family.kernel_modules[0]} (then reboot)",
        )
        return
    loaded = [m for m in family.kernel_modules if m in acc.modules]
    if loaded:
        versions = ", ".join(f"{m} {acc.modules[m] or '(no version)'}" for m in loaded)
        yield Finding(
            id="driver.module",
            status=Status.PASS,
            expected=f"{family.kernel_modules[0]} loaded",
            found=versions,
            message=f"kernel module {versions}",
        )
    elif acc.driver_version:
        yield Finding(
            id="driver.module",
            status=Status.PASS,
            expected=f"{family.kernel_modules[0]} loaded",
            found=f"driver {acc.driver_version} reported by {acc.source}",
            message="driver answers (its module is not visible here, as in most containers)",
        )
    else:
        yield Finding(
            id="driver.module",
            status=Status.FAIL,
            expected=f"{family.kernel_modules[0]} loaded",
            found="not loaded",
            message=f"devices are present but the {family.kernel_modules[0]} driver is not loaded",
            fix=f"install and load the {family.kernel_modules[0]} driver",
        )


def driver_version(
    matrix: Matrix, family: Family, runtime: Runtime, acc: Accelerator, report: HostReport
) -> Iterator[Finding]:
    rule = runtime.driver
    floors = [(matrix.skus[d.sku], matrix.skus[d.sku].driver_min) for d in acc.devices if d.sku]
    sku_floors = {sku.id: (sku, floor) for sku, floor in floors if floor is not None}
    needs = {sku_id: driver_need(matrix, runtime, sku) for sku_id, (sku, _) in sku_floors.items()}
    if not (rule.min or rule.compat_min or rule.max or rule.accepted or rule.releases or sku_floors):
        return
    expected = _describe_rule(matrix, runtime, needs)
    found = numeric_version(acc.driver_version)
    if found is None:
        module = family.kernel_modules[0] if family.kernel_modules else None
        in_tree = acc.extra.get("driver_kernel") or (
            report.os.kernel if module and module in acc.modules and acc.modules[module] is None else None
        )
        if acc.driver_version is None and module and in_tree:
            yield Finding(
                id="driver.version",
                status=Status.FAIL,
                expected=expected,
                found=f"the kernel's in-tree {module} (kernel {in_tree})",
                message=(
                    f"the {module} driver is the one built into kernel {in_tree}: it has no driver release of its "
                    f"own, so nothing says {runtime.name} supports it"
                ),
                fix=f"install the vendor's packaged {module} driver of a release documented for {runtime.name}",
            )
            return
        yield Finding(
            id="driver.version",
            status=Status.FAIL,
            expected=expected,
            found=acc.driver_version or "unknown",
            message=f"the {family.name} driver version could not be read",
            fix=f"check that {', '.join(family.host_tools) or 'the vendor tool'} runs and reports the driver",
        )
        return
    fail, warn = [], []
    if rule.max is not None and found >= rule.max:
        fail.append(f"driver {found} is at or above {rule.max}, which {runtime.name} does not support")
    if rule.min is not None and found < rule.min:
        if rule.compat_min is not None and found >= rule.compat_min and family.runtime_kind == "cuda":
            warn.append(
                f"driver {found} is below {rule.min}: {runtime.name} runs only through minor-version compatibility "
                "(no JIT of newer PTX, no APIs newer than the driver)"
            )
        elif rule.compat_min is not None and found >= rule.compat_min:
            warn.append(
                f"driver {found} is below {rule.min}, the one {runtime.name} ships with: it is expected to work, "
                "with reduced support (see the fix)"
            )
        else:
            floor = rule.compat_min or rule.min
            fail.append(f"driver {found} is below {floor}, the oldest that {runtime.name} runs on")
    for sku, _floor in sku_floors.values():
        if (reason := below_floor(sku, found)) is not None:  # floors by driver branch (driver_branches.py)
            fail.append(reason)
    if family.newer_drivers == "may-need-newer-runtime" and rule.min is not None and _newer_line(found, rule.min):
        warn.append(
            f"driver {found} is a newer release than {rule.min}, the one {runtime.name} ships: {family.name} "
            "drivers can require a newer runtime, so this pairing is not known to work"
        )
    if rule.accepted and not any(_has_prefix(acc.driver_version or "", p) for p in rule.accepted):
        warn.append(f"driver {acc.driver_version} is not one known to work with {runtime.name}")
    documented = sorted(
        (matrix.drivers[r] for r in rule.releases if r in matrix.drivers), key=lambda r: LiteralVersion(r.reports)
    )
    reported = acc.driver_version or str(found)
    release = matrix.driver_release(family.id, reported)
    named = f"driver {reported}" + (f" ({release.release})" if release else "")
    oldest_release = documented[0] if documented else None
    if documented and not any(r.matches(reported) for r in documented):
        span = f"{documented[0].release} to {documented[-1].release}" if len(documented) > 1 else documented[0].release
        if oldest_release is not None and found < LiteralVersion(oldest_release.reports):
            fail.append(
                f"{named} is older than every driver documented for {runtime.name} ({span}; the oldest reports "
                f"{oldest_release.reported_as})"
            )
        else:
            warn.append(f"{named} is not among the drivers documented for {runtime.name} ({span})")
    status = Status.FAIL if fail else Status.WARN if warn else Status.PASS
    needed = max([v for v in (rule.min, *(n.full for n in needs.values() if n.raised)) if v is not None], default=None)
    if fail and oldest_release is not None and (needed is None or LiteralVersion(oldest_release.reports) > needed):
        fix = f"install {oldest_release.release} or newer, or use an older runtime's environment"
    elif fail:
        fix = f"install driver {needed} or newer, or use an older runtime's environment" if needed else ""
    else:
        fix = rule.notes if warn else ""
    yield Finding(
        id="driver.version",
        status=status,
        expected=expected,
        found=acc.driver_version or str(found),
        message="; ".join(fail + warn) or f"{named} satisfies {runtime.name}",
        fix=fix,
    )


def _newer_line(found: Version, shipped: Version) -> bool:
    """A driver of a later release line (major.minor) than the one a runtime ships: 2.31.7 against 2.29.0."""
    return found.release[:2] > shipped.release[:2]


def _has_prefix(version: str, prefix: str) -> bool:
    return version == prefix or version.startswith(prefix + ".") or version.startswith(prefix + "-")


def _describe_rule(matrix: Matrix, runtime: Runtime, needs: Mapping[str, DriverNeed]) -> str:
    rule = runtime.driver
    parts = []
    documented = [matrix.drivers[r] for r in rule.releases if r in matrix.drivers]
    if documented:
        parts.append("documented: " + ", ".join(f"{r.release} ({r.reported_as})" for r in documented))
    if rule.min:
        parts.append(f">= {rule.min}")
    if rule.compat_min:
        parts.append(f"(>= {rule.compat_min} in compatibility mode)")
    if rule.max:
        parts.append(f"< {rule.max}")
    if rule.accepted:
        parts.append(f"known good: {', '.join(rule.accepted)}")
    # only a SKU whose own floor is above the runtime's (driver_need: what show prints for it too)
    parts += [f"{sku} >= {need.runs_from}" for sku, need in sorted(needs.items()) if need.raised]
    return " ".join(parts)


def driver_sources(family: Family, acc: Accelerator) -> Iterator[Finding]:
    """One fact read from several places (the tool's version output, its device query, the loaded kernel module)
    must read the same everywhere; if not, no verdict on it can be trusted."""
    said = dict(sorted(acc.sources.get("driver_version", {}).items()))
    if len(said) < 2:
        return
    by_value: dict[object, tuple[str, list[str]]] = {}  # the version (as a number) -> (as written, sources)
    for where, value in said.items():
        by_value.setdefault(numeric_version(value) or value, (value, []))[1].append(where)
    found = "; ".join(f"{where}: {value}" for where, value in said.items())
    module = family.kernel_modules[0] if family.kernel_modules else "the driver"
    tool = family.host_tools[0] if family.host_tools else "tool"
    if len(by_value) == 1:
        value = next(iter(said.values()))
        yield Finding(
            id="driver.sources",
            status=Status.PASS,
            expected="one driver version from every source",
            found=found,
            message=f"{len(said)} sources agree on driver {value}",
        )
        return
    yield Finding(
        id="driver.sources",
        status=Status.FAIL,
        expected="one driver version from every source",
        found=found,
        message="the driver version is "
        + ", ".join(f"{value} by {' and '.join(where)}" for value, where in by_value.values())
        + ": the sources disagree, so the driver checks judge a version that may not be the one running",
        fix=(
            f"a driver upgraded without a reboot leaves the old kernel module loaded (reboot, or reload {module}); "
            f"a tool from another install on PATH reports its own version (use the driver's own {tool})"
        ),
    )
