"""Evidence: what conformance result records prove, per SKU x environment, beside the rules' verdict.

A view, not a judge: a pair is *proven* only by a passing record of that environment on that SKU, *failed* when
its newest record failed, *declared only* when the rules say it runs and no record says anything. Refused
records are listed with their file and reason. Every value from a record is escaped: a record cannot change the
page's markup. Pure: the matrix and read records in, HTML or Markdown lines out.
"""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING

from accelenv.plan.compatibility import verdict
from accelenv.records import frozen

if TYPE_CHECKING:
    from accelenv.matrix.model import Matrix
    from accelenv.results.record import Record, Refused

PROVEN, FAILED, DECLARED, INCONCLUSIVE = "proven", "failed", "declared only", "not proven"


@frozen
class Evidence:
    sku: str
    env: str
    status: str
    rule: str  # the rules' verdict in words: "runs: CUDA 13.2, driver >= 580" or "no: ..."
    record: Record | None  # the record behind the status (the newest passing one when proven)


def evidence(matrix: Matrix, records: list[Record]) -> list[Evidence]:
    """One entry per SKU x environment of a family that the rules allow or a record speaks of."""
    by_pair: dict[tuple[str, str], list[Record]] = {}
    for record in sorted(records, key=lambda r: (r.finished, r.id)):
        if record.sku is not None:
            by_pair.setdefault((record.sku, record.env), []).append(record)
    out = []
    for sku in matrix.skus.values():
        for env in matrix.envs.values():
            if env.family != sku.family:
                continue
            ok, why = verdict(matrix, sku, env)
            runs = by_pair.get((sku.id, env.id), [])
            if not ok and not runs:
                continue
            rule = ("runs: " if ok else "no: ") + why
            passing = [r for r in runs if r.outcome == "passed"]
            if runs and runs[-1].outcome == "failed":
                out.append(Evidence(sku=sku.id, env=env.id, status=FAILED, rule=rule, record=runs[-1]))
            elif passing:
                out.append(Evidence(sku=sku.id, env=env.id, status=PROVEN, rule=rule, record=passing[-1]))
            elif runs:
                out.append(Evidence(sku=sku.id, env=env.id, status=INCONCLUSIVE, rule=rule, record=runs[-1]))
            else:
                out.append(Evidence(sku=sku.id, env=env.id, status=DECLARED, rule=rule, record=None))
    return out


def _day(epoch: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def _perf(record: Record | None) -> str:
    if record is None:
        return ""
    parts = []
    for f in record.perf:
        share = f" ({f.fraction:.0%} of peak)" if f.fraction is not None else " (no peak documented)"
        parts.append(f"{f.name} {f.value:.3g} {f.unit}" + (share if f.name != "allreduce_busbw" else ""))
    return "; ".join(parts)


def _detail(e: Evidence) -> str:
    r = e.record
    if r is None:
        return "no record"
    bits = [_day(r.finished), f"driver {r.driver}" if r.driver else "no driver", f"record {r.id}"]
    if r.frameworks_differ:
        bits.append("framework differs from the pins: " + "; ".join(r.frameworks_differ))
    return ", ".join(bits)


_E = html.escape
STYLE = (
    ".ev{display:inline-block;padding:0 .4em;border-radius:.3em;white-space:nowrap}"
    ".ev-proven{background:#1a7f37;color:#fff;font-weight:600}"
    ".ev-failed{background:#cf222e;color:#fff;font-weight:600}"
    ".ev-declared{border:1px dashed currentColor;opacity:.75}"
    ".ev-unproven{border:1px solid #9a6700;color:#9a6700}"
)
_CLASS = {PROVEN: "ev-proven", FAILED: "ev-failed", DECLARED: "ev-declared", INCONCLUSIVE: "ev-unproven"}
_SYMBOL = {PROVEN: "\u2714", FAILED: "\u2718", DECLARED: "\u25cb", INCONCLUSIVE: "?"}


def _link(record: Record | None) -> str:
    if record is None or record.run_url is None:
        return ""
    return f' <a href="{_E(record.run_url, quote=True)}" rel="nofollow noopener">run</a>'


def html_section(matrix: Matrix, records: list[Record], refused: list[Refused]) -> list[str]:
    """The page's Evidence section."""
    rows = []
    for e in evidence(matrix, records):
        badge = f'<span class="ev {_CLASS[e.status]}">{_SYMBOL[e.status]} {_E(e.status)}</span>'
        rows.append(
            f'<tr><th scope="row">{_E(matrix.skus[e.sku].name)}</th><td><code>{_E(e.env)}</code></td>'
            f"<td>{badge}</td><td>{_E(e.rule)}</td><td>{_E(_detail(e))}{_link(e.record)}</td>"
            f"<td>{_E(_perf(e.record))}</td></tr>"
        )
    proven = sum(1 for e in evidence(matrix, records) if e.status == PROVEN)
    out = [
        '<section id="evidence" aria-labelledby="h-evidence"><h2 id="h-evidence">Evidence</h2>',
        f"<style>{STYLE}</style>",
        (
            f'<p class="muted">{len(records)} result record(s); {proven} SKU\u2013environment pair(s) proven by a '
            "passing conformance run. <em>Declared only</em>: the rules say it runs, no run has shown it.</p>"
        ),
        (
            '<div class="scroll"><table class="ref"><thead><tr><th scope="col">SKU</th><th scope="col">environment'
            '</th><th scope="col">evidence</th><th scope="col">rules</th><th scope="col">run</th>'
            '<th scope="col">performance</th></tr></thead><tbody>'
        ),
        *rows,
        "</tbody></table></div>",
    ]
    if refused:
        out.append("<h3>Refused records</h3><ul>")
        out += [f"<li><code>{_E(r.path)}</code>: {_E(r.reason)}</li>" for r in refused]
        out.append("</ul>")
    out.append("</section>")
    return out


def _md(text: str) -> str:
    """Markdown-safe text: no markup, links or table breaks from a record."""
    out = html.escape(text, quote=True).replace("|", "\\|")
    for ch in "`*_[]()!#~":
        out = out.replace(ch, "\\" + ch)
    return out


def markdown_section(matrix: Matrix, records: list[Record], refused: list[Refused]) -> str:
    lines = ["", "## Evidence", "", "| SKU | environment | evidence | rules | run | performance |", "|---" * 6 + "|"]
    for e in evidence(matrix, records):
        mark = {PROVEN: "**proven**", FAILED: "**FAILED**", DECLARED: "_declared only_", INCONCLUSIVE: "not proven"}
        run = _md(_detail(e)) + (f" ([run](<{_md(e.record.run_url)}>))" if e.record and e.record.run_url else "")
        lines.append(
            f"| {_md(matrix.skus[e.sku].name)} | {_md(e.env)} | {mark[e.status]} | {_md(e.rule)} | {run} | "
            f"{_md(_perf(e.record))} |"
        )
    if refused:
        lines += ["", "Refused records:", ""]
        lines += [f"- {_md(r.path)}: {_md(r.reason)}" for r in refused]
    return "\n".join(lines) + "\n"
