"""The compatibility report: families, runtimes, environments, and which environments run on each SKU and why the
others do not. Markdown for docs/compatibility.md (committed, checked for drift) and a self-contained HTML page
a team bookmarks (`page.py`), both from the verdicts of `compatibility.py`. Pure: the matrix in, text out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelenv.plan.compatibility import GENERATED, preference, recommended, verdict

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.matrix import Matrix
    from accelenv.plan.lock import LockState

HEADER = GENERATED.format(format="md")


def report_data(matrix: Matrix) -> dict[str, Any]:
    preferred = {family: preference(matrix, family) for family in matrix.families}
    skus = []
    for sku in matrix.skus.values():
        rows: list[dict[str, Any]] = [
            {"env": env.id, "runs": ok, "why": why}
            for env in matrix.envs.values()
            if env.family == sku.family
            for ok, why in [verdict(matrix, sku, env)]
        ]
        statuses = {row["env"]: "runs" if row["runs"] else "no" for row in rows}
        skus.append(
            {
                "id": sku.id,
                "name": sku.name,
                "family": sku.family,
                "arch": sku.arch,
                "envs": rows,
                "recommended": recommended(preferred.get(sku.family, []), statuses),
            }
        )
    return {"skus": skus}


def _md(text: str) -> str:
    """Matrix text as Markdown that renders as that text: no raw HTML (`<`, `&` become entities), no cell break,
    no link or image (`[`, `]` escaped), and a backslash is escaped first, so `\\|` cannot become `\\\\|` (an
    escaped backslash, then a cell break)."""
    text = text.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;")
    return text.replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(_md(h) for h in headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    out += ["| " + " | ".join(_md(cell) for cell in row) + " |" for row in rows]
    return out


def markdown(matrix: Matrix) -> str:
    lines = [f"<!-- {HEADER} -->", "", "# accelenv compatibility", ""]
    lines += ["## Families", ""]
    lines += _table(
        ["family", "name", "claimed maturity", "PCI vendor", "host tools", "earliest CI tier"],
        [
            [
                f.id,
                f.name,
                str(f.maturity),
                ", ".join(f.pci_vendor_ids) or "-",
                ", ".join(f.host_tools) or "-",
                str(f.ci_tier),
            ]
            for f in matrix.families.values()
        ],
    )
    lines += ["", "## Runtimes", ""]
    rows = []
    for rt in matrix.runtimes.values():
        d = rt.driver
        driver = " ".join(
            part
            for part in (
                f">= {d.min}" if d.min else "",
                f"(compat >= {d.compat_min})" if d.compat_min else "",
                f"< {d.max}" if d.max else "",
                f"known good {', '.join(d.accepted)}" if d.accepted else "",
                "documented "
                + ", ".join(f"{matrix.drivers[r].release} ({matrix.drivers[r].reported_as})" for r in d.releases)
                if d.releases
                else "",
            )
            if part
        )
        images = ", ".join(
            f"{os}: {i.reference}" + ("" if i.digest else " (unpinned)") for os, i in rt.base_images.items()
        )
        rows.append([rt.id, rt.name, str(rt.version or "-"), driver or "-", " ".join(rt.architectures), images])
    lines += _table(["runtime", "name", "version", "host driver", "architectures", "base images"], rows)
    lines += ["", "## Environments", ""]
    lines += _table(
        ["environment", "family", "runtime", "Python", "OS", "tier", "SKUs"],
        [
            [
                e.id + (" (default)" if e.default else ""),
                e.family,
                matrix.runtimes[e.runtime].name,
                e.python,
                e.os,
                str(e.ci_tier),
                ", ".join(e.skus),
            ]
            for e in matrix.envs.values()
        ],
    )
    lines += ["", "## Which environments run on each SKU", ""]
    for family in matrix.families.values():
        envs = [e for e in matrix.envs.values() if e.family == family.id]
        skus = [s for s in matrix.skus.values() if s.family == family.id]
        if not envs or not skus:
            continue
        lines += [f"### {_md(family.name)}", ""]
        rows = []
        for sku in skus:
            cells = []
            for env in envs:
                ok, why = verdict(matrix, sku, env)
                cells.append("yes" if ok else f"no: {why}")
            rows.append([f"{sku.name} ({sku.arch})", *cells])
        lines += _table(["SKU", *[e.id for e in envs]], rows)
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def html_page(matrix: Matrix, *, locks: Mapping[str, LockState] | None = None, repository: str = "accelenv") -> str:
    """The self-contained compatibility page (see `accelenv.plan.page`)."""
    from accelenv.plan.page import html_page as page

    return page(matrix, locks=locks, repository=repository)
