"""The compatibility page: one self-contained HTML file a team bookmarks.

An overview grid per family (SKUs against environments, each cell runs / warn / no with its reason), every
environment's details (runtime, driver range, Python, framework pins, lock status, CI tier, image tags), the
runtime and driver tables, and the sources as links. Everything is rendered here, so the page reads (and
prints) without its script; the script adds search, a SKU picker, a driver check and state in the URL
fragment (`#sku=b300&q=h100`). The style and the script are package files (page.css, page.js), inlined.

Pure: the matrix and the lock status of each environment in (the caller reads the lock files), text out; the
same input gives the same bytes.
"""

from __future__ import annotations

import html
import json
from importlib.resources import files
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from accelenv.matrix.driver_need import driver_need
from accelenv.plan.codeowners import env_owners, owners_words
from accelenv.plan.compatibility import GENERATED, preference, recommended, verdict
from accelenv.plan.lock import LockState
from accelenv.plan.render import human_tag
from accelenv.plan.sessions import session_specs
from accelenv.plan.start import gate, stamp_html, start_steps
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from accelenv.matrix import DriverRule, Environment, Matrix, Sku
    from accelenv.plan.start import Stamp, Unavailable

Status = Literal["runs", "warn", "no"]
LOCK_LABELS = {LockState.CURRENT: "locked", LockState.STALE: "stale", LockState.UNLOCKED: "not locked"}
SYMBOLS: dict[Status, str] = {"runs": "\u2713", "warn": "!", "no": "\u2715"}
LEGEND: dict[Status, str] = {
    "runs": "listed for the SKU, with code for its architecture",
    "warn": "runs with a caveat (compatibility mode, no current lock)",
    "no": "does not run; the reason says what is missing",
}


@frozen
class Cell:
    """One SKU against one environment, as the grid shows it."""

    status: Status
    why: str


def cell(matrix: Matrix, sku: Sku, env: Environment, lock: LockState | None) -> Cell:
    """`verdict`, with the caveats a user meets before running: the driver floor (and the lower one of a
    runtime's compatibility mode) in the reason, and a warning when the environment has no current lock, so
    its session cannot install it."""
    ok, why = verdict(matrix, sku, env)
    if not ok:
        return Cell(status="no", why=why)
    need = driver_need(matrix, matrix.runtimes[env.runtime], sku)
    if need.runs_from is not None and need.runs_from != need.full:
        why += f" (>= {need.runs_from} through compatibility mode)"
    if lock is LockState.UNLOCKED:
        return Cell(status="warn", why=f"{why}; but {env.id} is not locked: run `accelenv lock {env.id}`")
    if lock is LockState.STALE:
        return Cell(status="warn", why=f"{why}; but the lock of {env.id} is stale: run `accelenv lock {env.id}`")
    return Cell(status="runs", why=why)


def http_url(url: str | None) -> str | None:
    """`url` when it is an absolute http(s) URL a reader can follow; anything else is shown as text."""
    if not url or any(c.isspace() or ord(c) < 32 for c in url):
        return None
    parts = urlsplit(url)
    return url if parts.scheme.lower() in ("http", "https") and parts.netloc else None


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _driver_range(matrix: Matrix, rule: DriverRule) -> str:
    parts = []
    if rule.min:
        parts.append(f"\u2265 {rule.min}")
    if rule.compat_min:
        parts.append(f"\u2265 {rule.compat_min} in compatibility mode")
    if rule.max:
        parts.append(f"< {rule.max}")
    if rule.accepted:
        parts.append("known good: " + ", ".join(rule.accepted))
    if rule.releases:
        parts.append(
            "documented: "
            + ", ".join(f"{matrix.drivers[r].release} ({matrix.drivers[r].reported_as})" for r in rule.releases)
        )
    return "; ".join(parts) or "no floor"


def _cites(ids: Iterable[str]) -> str:
    links = [f'<a href="#src-{_e(s)}">{_e(s)}</a>' for s in dict.fromkeys(ids)]
    return '<span class="cites">' + " ".join(links) + "</span>" if links else ""


def _badge(text: str, kind: str, title: str = "") -> str:
    hint = f' title="{_e(title)}"' if title else ""
    return f'<span class="badge {_e(kind)}"{hint}>{_e(text)}</span>'


def _pins(env: Environment) -> list[tuple[str, str]]:
    return list(env.requirements.pins)


def _lock_badge(lock: LockState | None, env: Environment) -> str:
    if lock is None:
        return ""
    hints = {
        LockState.CURRENT: "requirements.lock matches the matrix",
        LockState.STALE: f"the matrix changed since the lock was written: accelenv lock {env.id}",
        LockState.UNLOCKED: f"no requirements.lock: its session cannot install it (accelenv lock {env.id})",
    }
    return _badge(LOCK_LABELS[lock], f"lock-{lock.value}", hints[lock])


# ---------------------------------------------------------------------------------------------------- data


def page_data(
    matrix: Matrix, locks: Mapping[str, LockState] | None, images: Mapping[str, Unavailable | None] | None = None
) -> dict[str, Any]:
    """What the script needs: each SKU's cells (the picker), each environment's driver rule (the driver check).
    `images`: why each environment's image cannot be built now (`build.readiness.image_blockers`; absent:
    unknown)."""
    locks = locks or {}
    images = images or {}
    sessions: dict[str, str] = {}
    for spec in session_specs(matrix):  # a default environment's first session is its family's
        sessions.setdefault(spec.env, spec.name)
    envs: dict[str, Any] = {}
    for env in matrix.envs.values():
        rt = matrix.runtimes[env.runtime]
        rule = rt.driver
        lock = locks.get(env.id)
        envs[env.id] = {
            "family": env.family,
            "runtime": rt.name,
            "kind": matrix.families[env.family].runtime_kind,
            "default": env.default,
            "python": env.python,
            "tier": str(env.ci_tier),
            "lock": LOCK_LABELS[lock] if lock else None,
            "steps": [
                {"label": s.label, "text": s.text, "note": s.note}
                | ({} if s.available else {"available": False, "why": s.why, "fix": s.fix})
                for s in gate(
                    start_steps(matrix, env, lock, sessions.get(env.id, env.id)), env, lock, images.get(env.id)
                )
            ],
            "driver": {
                "min": str(rule.min) if rule.min else None,
                "compat_min": str(rule.compat_min) if rule.compat_min else None,
                "max": str(rule.max) if rule.max else None,
                "accepted": list(rule.accepted),
                "releases": [
                    {"release": matrix.drivers[r].release, "reports": matrix.drivers[r].reports}
                    for r in rule.releases
                    if r in matrix.drivers
                ],
            },
        }
    preferred = {f.id: preference(matrix, f.id) for f in matrix.families.values()}
    skus = []
    for sku in matrix.skus.values():
        rows: list[dict[str, Any]] = []
        for env in matrix.envs.values():
            if env.family != sku.family:
                continue
            c = cell(matrix, sku, env, locks.get(env.id))
            need = driver_need(matrix, matrix.runtimes[env.runtime], sku)
            floor, compat = need.full, need.runs_from
            rows.append(
                {
                    "env": env.id,
                    "status": c.status,
                    "runs": c.status != "no",
                    "why": c.why,
                    "floor": str(floor) if floor else None,
                    "compat_floor": str(compat) if compat and compat != floor else None,
                }
            )
        skus.append(
            {
                "id": sku.id,
                "name": sku.name,
                "family": sku.family,
                "arch": sku.arch,
                "pci": list(sku.pci_device_ids),
                "driver_min": str(sku.driver_min) if sku.driver_min else None,
                "ray": dict(sku.ray_accelerator_type) or None,
                "envs": rows,
                "recommended": recommended(preferred[sku.family], {r["env"]: r["status"] for r in rows}),
            }
        )
    start = {
        f.id: {"name": f.name, "session": f.session, "prefer": preferred[f.id], "driver": _ruled(matrix, f.id)}
        for f in matrix.families.values()
    }
    return {"skus": skus, "envs": envs, "families": [f.id for f in matrix.families.values()], "start": start}


def _ruled(matrix: Matrix, family: str) -> bool:
    """Whether a driver version can change a verdict in `family` (its grid then has a "Your driver" box)."""
    return any(
        (r := matrix.runtimes[e.runtime].driver).min or r.compat_min or r.max or r.accepted or r.releases
        for e in matrix.envs.values()
        if e.family == family
    )


# ---------------------------------------------------------------------------------------------------- sections


def _overview(matrix: Matrix, locks: Mapping[str, LockState], tiers: Mapping[str, str]) -> list[str]:
    out = ['<section id="overview" aria-labelledby="h-overview">', '<h2 id="h-overview">Overview</h2>']
    out.append(
        '<p class="lede">Each cell: does the environment (column) run on the accelerator (row)? Hover or focus a '
        "cell for the reason; press Enter or click to pick the SKU. Arrow keys move through a grid.</p>"
    )
    for family in matrix.families.values():
        envs = [e for e in matrix.envs.values() if e.family == family.id]
        skus = [s for s in matrix.skus.values() if s.family == family.id]
        if not envs or not skus:
            continue
        ruled = _ruled(matrix, family.id)
        fid = _e(family.id)
        out.append(f'<section class="family" id="fam-{fid}" data-family="{fid}" aria-labelledby="h-fam-{fid}">')
        out.append(
            f'<div class="family-head"><h3 id="h-fam-{fid}">{_e(family.name)}</h3>'
            + _badge(
                tiers.get(family.id, "declared"),
                "maturity-" + tiers.get(family.id, "declared"),
                f"earned from result records (docs/results.md); matrix.toml claims {family.maturity}",
            )
            + f'<span class="muted">nox -s {_e(family.session)}</span>'
        )
        if ruled:
            out.append(
                f'<label class="control driver"><span>Your driver</span><input type="text" inputmode="decimal" '
                f'autocomplete="off" spellcheck="false" data-driver="{fid}" placeholder="e.g. '
                f'{_e(_example_driver(matrix, envs))}" aria-describedby="why-{fid}"></label>'
            )
        out.append("</div>")
        out.append(f'<div class="scroll"><table class="grid" role="grid" aria-labelledby="h-fam-{fid}">')
        out.append('<thead><tr><th scope="col" class="corner">SKU</th>')
        for env in envs:
            rt = matrix.runtimes[env.runtime]
            hay = " ".join(
                [env.id, rt.id, rt.name, env.python, f"py{env.python}", rt.wheel_tag or ""]
                + [f"{n} {v} {n}=={v}" for n, v in _pins(env)]
            ).lower()
            meta = _e(f"py{env.python} \u00b7 {env.ci_tier}")
            out.append(
                f'<th scope="col" data-env="{_e(env.id)}" data-search="{_e(hay)}">'
                f'<a href="#env-{_e(env.id)}">{_e(env.id)}</a>'
                f'<span class="meta">{_e(rt.name)}<br>{meta}</span>'
                + (_badge("\u2605 default", "default", f"nox -s {family.session} runs it") if env.default else "")
                + _lock_badge(locks.get(env.id), env)
                + "</th>"
            )
        out.append("</tr></thead><tbody>")
        for sku in skus:
            hay = " ".join([sku.id, sku.name, sku.arch, family.id, *sku.pci_device_ids, *sku.product_names]).lower()
            ids = " \u00b7 " + _e(", ".join(sku.pci_device_ids)) if sku.pci_device_ids else ""
            out.append(
                f'<tr data-sku="{_e(sku.id)}" data-search="{_e(hay)}"><th scope="row" id="sku-{_e(sku.id)}">'
                f'<span class="sku-name">{_e(sku.name)}</span>'
                f'<span class="meta"><code>{_e(sku.arch)}</code>{ids}</span></th>'
            )
            for env in envs:
                c = cell(matrix, sku, env, locks.get(env.id))
                label = f"{sku.name} on {env.id}: {c.status}. {c.why}"
                out.append(
                    f'<td class="c" role="gridcell" tabindex="-1" data-env="{_e(env.id)}" '
                    f'data-status="{c.status}" data-base="{c.status}" data-why="{_e(c.why)}" '
                    f'title="{_e(c.why)}" aria-label="{_e(label)}">'
                    f'<span class="sym" aria-hidden="true">{SYMBOLS[c.status]}</span>'
                    f'<span class="word">{c.status}</span></td>'
                )
            out.append("</tr>")
        out.append("</tbody></table></div>")
        out.append(f'<p class="why" id="why-{fid}" aria-live="polite"></p>')
        out.append("</section>")
    out.append("</section>")
    return out


def _start() -> list[str]:
    """ "Get started": filled by the script for the picked SKU (and driver), hidden without it."""
    return [
        '<section id="start" class="start" aria-labelledby="h-start" hidden>',
        '<div class="start-head"><h2 id="h-start">Get started on <span id="start-sku"></span></h2>',
        (
            '<label class="control start-driver" id="start-driver-label"><span id="start-driver-name">Your driver'
            '</span><input id="start-driver" type="text" inputmode="decimal" autocomplete="off" spellcheck="false">'
            "</label>"
        ),
        "</div>",
        (
            '<p id="start-prompt" class="start-prompt" hidden>Pick your accelerator above, or search for it (a SKU '
            "name or PCI id): this section then names the environment to use and the commands that work for it now.</p>"
        ),
        '<div id="start-body" class="start-body">',
        (
            '<div class="start-choose"><p class="start-sub" id="start-envs-label">Environments that run here, best '
            "first (as <code>accelenv which</code> ranks them)</p>"
        ),
        '<div id="start-envs" class="env-choices" role="group" aria-labelledby="start-envs-label"></div></div>',
        '<div class="start-run"><h3><code id="start-env"></code></h3><p id="start-why" class="start-why"></p>',
        '<ol id="start-steps" class="steps"></ol></div>',
        "</div>",
        '<div id="start-none" class="start-none" role="status" hidden></div>',
        '<p id="copy-status" class="visually-hidden" aria-live="polite"></p>',
        "</section>",
    ]


def _example_driver(matrix: Matrix, envs: list[Environment]) -> str:
    for env in envs:
        rule = matrix.runtimes[env.runtime].driver
        if rule.min:
            return str(rule.min)
        if rule.releases and rule.releases[0] in matrix.drivers:
            return matrix.drivers[rule.releases[0]].reports
        if rule.accepted:
            return rule.accepted[0]
    return "the version your host reports"


def _environments(matrix: Matrix, locks: Mapping[str, LockState], repository: str) -> list[str]:
    out = ['<section id="environments" aria-labelledby="h-envs">', '<h2 id="h-envs">Environments</h2>']
    out.append('<div class="cards">')
    for env in matrix.envs.values():
        rt = matrix.runtimes[env.runtime]
        family = matrix.families[env.family]
        image = rt.base_images.get(env.os)
        lock = locks.get(env.id)
        runner = env.ci_runner or family.ci_runner
        rows: list[tuple[str, str]] = [
            (
                "Runtime",
                f"{_e(rt.name)} <span class='muted'>({_e(rt.id)}"
                + (f", wheels {_e(rt.wheel_tag)}" if rt.wheel_tag else "")
                + ")</span>",
            ),
            ("Driver", _e(_driver_range(matrix, rt.driver))),
            ("Python", f"{_e(env.python)} on {_e(matrix.os[env.os].name)}"),
            ("Platforms", _e(", ".join(env.platforms))),
            (
                "Packages",
                '<ul class="pins">'
                + "".join(f"<li><b>{_e(n)}</b> <code>{_e(v)}</code></li>" for n, v in _pins(env))
                + "</ul>",
            ),
            ("Lock", _lock_badge(lock, env) if lock else "<span class='muted'>not known</span>"),
            (
                "CI tier",
                _e(str(env.ci_tier)) + (f" <span class='muted'>on {_e(', '.join(runner))}</span>" if runner else ""),
            ),
            ("Image", f"<code>{_e(human_tag(repository, matrix, env))}</code>"),
            ("Owners", _e(owners_words(env_owners(matrix, env), env.family))),
        ]
        if env.ci_unschedulable:
            rows.append(("Not in CI", _e(f"not scheduled in CI: {env.ci_unschedulable}")))
        if image is not None:
            pinned = "" if image.digest else " " + _badge("unpinned", "warn-badge", "no digest yet: accelenv pin")
            rows.append(("Base image", f"<code>{_e(image.reference)}</code>{pinned}"))
        listed = [s for s in env.skus if s in matrix.skus]
        links = " ".join(f'<a href="#sku-{_e(s)}" title="{_e(matrix.skus[s].name)}">{_e(s)}</a>' for s in listed)
        rows.append(("SKUs", f'{len(listed)}: <span class="skus">{links}</span>'))
        if env.sources:
            rows.append(("Sources", _cites(env.sources)))
        out.append(
            f'<article class="card" id="env-{_e(env.id)}" data-env="{_e(env.id)}" data-family="{_e(env.family)}">'
            f"<h3><code>{_e(env.id)}</code>"
            + (_badge("\u2605 default", "default", f"nox -s {family.session} runs it") if env.default else "")
            + "</h3>"
            f'<p class="muted">{_e(family.name)} \u00b7 {_e(env.description)}</p><dl>'
            + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
            + "</dl></article>"
        )
    out.append("</div></section>")
    return out


def _runtimes(matrix: Matrix) -> list[str]:
    out = ['<section id="runtimes" aria-labelledby="h-runtimes">', '<h2 id="h-runtimes">Runtimes</h2>']
    out.append('<div class="scroll"><table class="ref"><thead><tr>')
    out += [f'<th scope="col">{h}</th>' for h in ("Runtime", "Version", "Host driver", "Architectures", "Used by")]
    out.append("</tr></thead><tbody>")
    for rt in matrix.runtimes.values():
        users = " ".join(
            f'<a href="#env-{_e(e.id)}">{_e(e.id)}</a>' for e in matrix.envs.values() if e.runtime == rt.id
        )
        archs = " ".join(f"<code>{_e(a)}</code>" for a in rt.architectures)
        hold = f'<div class="muted">held: {_e(rt.hold.reason)}</div>' if rt.hold else ""
        notes = f'<div class="muted">{_e(rt.driver.notes)}</div>' if rt.driver.notes else ""
        out.append(
            f'<tr id="rt-{_e(rt.id)}"><th scope="row">{_e(rt.name)}<div class="muted"><code>{_e(rt.id)}</code> '
            f"\u00b7 {_e(matrix.families[rt.family].name)}</div>{_cites(rt.sources)}</th>"
            f"<td><code>{_e(rt.version or '-')}</code>{hold}</td>"
            f"<td>{_e(_driver_range(matrix, rt.driver))}{notes}</td>"
            f'<td class="archs">{archs}</td><td>{users or "-"}</td></tr>'
        )
    out.append("</tbody></table></div></section>")
    return out


def _drivers(matrix: Matrix) -> list[str]:
    if not matrix.drivers:
        return []
    out = ['<section id="drivers" aria-labelledby="h-drivers">', '<h2 id="h-drivers">Driver releases</h2>']
    out.append(
        '<p class="lede">Vendor driver releases and the kernel module version a host reports for each: match '
        "what <code>amd-smi</code> or <code>/sys/module/*/version</code> shows to a release.</p>"
    )
    out.append('<div class="scroll"><table class="ref"><thead><tr>')
    out += [f'<th scope="col">{h}</th>' for h in ("Release", "Family", "Hosts report", "Documented for")]
    out.append("</tr></thead><tbody>")
    for d in matrix.drivers.values():
        users = [rt.name for rt in matrix.runtimes.values() if d.id in rt.driver.releases]
        notes = f'<div class="muted">{_e(d.notes)}</div>' if d.notes else ""
        out.append(
            f'<tr id="drv-{_e(d.id)}"><th scope="row">{_e(d.release)}{notes}{_cites(d.sources)}</th>'
            f"<td>{_e(matrix.families[d.family].name)}</td><td><code>{_e(d.reported_as)}</code></td>"
            f"<td>{_e(', '.join(users) or '-')}</td></tr>"
        )
    out.append("</tbody></table></div></section>")
    return out


def _sources(matrix: Matrix) -> list[str]:
    out = ['<section id="sources" aria-labelledby="h-sources">', '<h2 id="h-sources">Sources</h2>', "<ol>"]
    for s in matrix.sources.values():
        url = http_url(s.url)
        title = f'<a href="{_e(url)}" rel="noopener noreferrer">{_e(s.title)}</a>' if url else _e(s.title)
        where = s.where or (s.url if s.url and not url else None)
        extra = f' <span class="muted">{_e(where)}</span>' if where else ""
        out.append(f'<li id="src-{_e(s.id)}"><code>{_e(s.id)}</code> {title}{extra}</li>')
    out.append("</ol></section>")
    return out


def _asset(name: str) -> str:
    return files("accelenv.plan").joinpath(name).read_text(encoding="utf-8")


def html_page(
    matrix: Matrix,
    *,
    locks: Mapping[str, LockState] | None = None,
    repository: str = "accelenv",
    images: Mapping[str, Unavailable | None] | None = None,
    stamp: Stamp | None = None,
    evidence: list[str] | None = None,
    tiers: Mapping[str, str] | None = None,
    clusters: list[str] | None = None,
) -> str:
    """The page. `locks` maps environment ids to their lock state (absent: not shown); `images`, why an
    environment's image cannot be built now; `stamp`, what the page was made from (`plan.start`); `evidence`, the
    Evidence section from result records (plan/evidence.py), absent when no records were given; `tiers`, each
    family's maturity as the records earn it (`results.judge.maturity`): a family without one is "declared";
    `clusters`, Ray clusters drawn (cluster/view.py's `cluster_section`, from `check --ray --json`)."""
    locks = dict(locks or {})
    n_runs = sum(
        1
        for sku in matrix.skus.values()
        for env in matrix.envs.values()
        if env.family == sku.family and verdict(matrix, sku, env)[0]
    )
    options = '<option value="">Pick your accelerator\u2026</option>' + "".join(
        f'<option value="{_e(s.id)}">{_e(s.name)} ({_e(s.arch)})</option>' for s in matrix.skus.values()
    )
    legend = "".join(
        f'<li><span class="c" data-status="{k}"><span class="sym">{SYMBOLS[k]}</span>'
        f'<span class="word">{k}</span></span> {_e(v)}</li>'
        for k, v in LEGEND.items()
    )
    body = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="color-scheme" content="light dark">',
        f"<!-- {GENERATED.format(format='html')} -->",
        "<title>accelenv compatibility</title>",
        "<style>",
        _asset("page.css").rstrip(),
        "</style>",
        "</head>",
        "<body>",
        '<a class="skip" href="#overview">Skip to the grid</a>',
        '<header class="top">',
        '<div class="title"><h1>accelenv compatibility</h1>',
        (
            f'<p class="muted">{len(matrix.skus)} SKUs \u00b7 {len(matrix.envs)} environments \u00b7 '
            f"{len(matrix.families)} families{_plugged(matrix)} \u00b7 {n_runs} SKU\u2013environment pairs that run. "
            "Generated "
            "from <code>matrix.toml</code> by <code>accelenv report --format html</code>.</p>"
            + stamp_html(stamp)
            + "</div>"
        ),
        '<div class="controls" role="search">',
        (
            '<label class="control"><span>Search</span><input id="q" type="search" autocomplete="off" '
            'spellcheck="false" placeholder="SKU, PCI id, environment or package (press /)" '
            'aria-describedby="count"></label>'
        ),
        f'<label class="control"><span>Accelerator</span><select id="sku">{options}</select></label>',
        '<p id="count" class="muted" aria-live="polite"></p>',
        "</div>",
        '<nav aria-label="Sections"><a href="#start">Get started</a><a href="#overview">Overview</a>'
        '<a href="#pick">By SKU</a>'
        '<a href="#environments">Environments</a><a href="#runtimes">Runtimes</a>'
        + ('<a href="#drivers">Drivers</a>' if matrix.drivers else "")
        + '<a href="#sources">Sources</a></nav>',
        f'<ul class="legend" aria-label="Legend">{legend}</ul>',
        "</header>",
        "<main>",
        *_start(),
        *_overview(matrix, locks, tiers or {}),
        *(evidence or []),
        *(clusters or []),
        '<section id="pick" aria-labelledby="h-pick"><h2 id="h-pick">By SKU: <span id="pick-name"></span></h2>',
        '<p id="pick-meta" class="muted"></p>',
        (
            '<div class="scroll"><table id="result" class="ref"><thead><tr><th scope="col">environment</th>'
            '<th scope="col">runs?</th><th scope="col">why</th></tr></thead><tbody></tbody></table></div>'
        ),
        "</section>",
        *_environments(matrix, locks, repository),
        *_runtimes(matrix),
        *_drivers(matrix),
        *_sources(matrix),
        "</main>",
        f'<footer class="muted">{_e(GENERATED.format(format="html"))}</footer>',
        f'<script id="data" type="application/json">{script_json(page_data(matrix, locks, images))}</script>',
        "<script>",
        _asset("page.js").rstrip(),
        "</script>",
        "</body>",
        "</html>",
    ]
    return "\n".join(body) + "\n"


def script_json(data: object) -> str:
    """JSON to embed in a <script> element: `<`, `>` and `&` as \\u escapes, so no value can close the element
    or open a comment (`</script>`, `<!--<script>`), whatever the matrix says."""
    text = json.dumps(data, sort_keys=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _plugged(matrix: Matrix) -> str:
    """ " (ascend from a plugin)": the families the matrix's plugins brought, named beside the count."""
    from accelenv.plugins import plugin_families

    names = plugin_families(matrix.families)
    return f" ({', '.join(_e(n) for n in names)} from {'a plugin' if len(names) == 1 else 'plugins'})" if names else ""
