"""Evidence: what conformance result records prove, per SKU x environment, beside the rules' verdict; each family's
maturity as the records earn it; and each node's last job.

A view, not a judge: the words are `results.judge`'s, the same `accelenv results` prints. A pair is *proven* only
when its newest record passed every conformance kind the environment declares, on today's lock, not regressed,
within 30 days; otherwise it says what it is (smoke only, other lock, stale, regressed, failed with the upstream
defect named, incomplete); *declared only* when the rules say it runs and no record says anything. Refused records
are listed with their file and reason. Every value from a record is escaped: a record cannot change the page's
markup. Pure: the matrix, read records, today's lock digests and the clock in; HTML or Markdown lines out.
"""

from __future__ import annotations

import html
import time
from typing import TYPE_CHECKING

from accelenv.plan.codeowners import owners_words, run_owners
from accelenv.plan.compatibility import verdict
from accelenv.records import frozen
from accelenv.results.judge import PROVEN, Node, Proof, Tier, maturity, nodes, proof, state

if TYPE_CHECKING:
    from accelenv.matrix.model import Matrix
    from accelenv.results.record import Record, Refused

__all__ = ["DECLARED", "FAILED", "PROVEN", "Evidence", "View", "html_section", "markdown_section", "view"]
DECLARED = "declared only"
FAILED, INCOMPLETE, NOT_PROVEN, REGRESSED = "failed", "incomplete", "not proven", "regressed"


@frozen
class Evidence:
    sku: str
    env: str
    status: str  # proven, smoke only, other lock, stale, regressed, failed, incomplete, declared only
    detail: str
    rule: str  # the rules' verdict in words: "runs: CUDA 13.2, driver >= 580" or "no: ..."
    record: Record | None  # the record behind the status (its newest)
    owners: str = ""  # who answers for it, beside a failure: the matrix's owners (or where it would name them)
    ci_unschedulable: str | None = (
        None  # the matrix's reason CI cannot run the environment (envs.<env>.ci_unschedulable)
    )


@frozen
class View:
    """Everything the section shows, judged once."""

    pairs: tuple[Evidence, ...]
    tiers: tuple[Tier, ...]
    nodes: tuple[Node, ...]
    unplaced: tuple[Record, ...]  # records with no SKU (no device identified): not proven, failed, incomplete
    regressed: frozenset[str]


def view(
    matrix: Matrix,
    records: list[Record],
    *,
    locks: dict[str, str | None],
    now: float,
    regressed: frozenset[str] = frozenset(),
) -> View:
    proofs: dict[tuple[str, str], Proof] = proof(matrix, records, locks=locks, regressed=regressed, now=now)
    out = []
    for sku in matrix.skus.values():
        for env in matrix.envs.values():
            if env.family != sku.family:
                continue
            ok, why = verdict(matrix, sku, env)
            found = proofs.get((sku.id, env.id))
            if not ok and found is None:
                continue
            rule = ("runs: " if ok else "no: ") + why
            owners = owners_words(run_owners(matrix, env.id, sku.id), env.family)
            ci = env.ci_unschedulable
            if found is None:
                out.append(
                    Evidence(
                        sku=sku.id, env=env.id, status=DECLARED, detail="", rule=rule, record=None, ci_unschedulable=ci
                    )
                )
            else:
                failing = found.word in (FAILED, REGRESSED, INCOMPLETE)
                out.append(
                    Evidence(
                        sku=sku.id,
                        env=env.id,
                        status=found.word,
                        detail=found.detail,
                        rule=rule,
                        record=found.record,
                        owners=owners if failing else "",
                        ci_unschedulable=ci,
                    )
                )
    return View(
        pairs=tuple(out),
        tiers=tuple(maturity(matrix, records, locks=locks, regressed=regressed, now=now)),
        nodes=tuple(nodes(records, now=now, silent_after=None)),
        unplaced=tuple(r for r in records if r.sku is None),
        regressed=regressed,
    )


def _day(epoch: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(epoch))


def _perf(record: Record | None) -> str:
    if record is None:
        return ""
    parts = []
    for f in record.perf:  # fraction: the matrix's peak, computed when the record was read
        share = f" ({f.fraction:.0%} of peak)" if f.fraction is not None else " (no peak documented)"
        spread = f" \u00b1{f.spread / 2:.0%}" if f.spread else ""
        parts.append(f"{f.name} {f.value:.3g} {f.unit}{spread}" + (share if f.name != "allreduce_busbw" else ""))
    return "; ".join(parts)


def _detail(e: Evidence) -> str:
    r = e.record
    ci = f"not scheduled in CI: {e.ci_unschedulable}" if e.ci_unschedulable else ""
    if r is None:
        return "no record" + (f"; {ci}" if ci else "")
    bits = [_day(r.finished), f"{r.device_count} device(s) x {r.nodes} node(s)"]
    bits += [f"driver {r.driver}" if r.driver else "no driver", f"on {r.runner or 'an unnamed runner'}"]
    bits.append(f"record {r.id}")
    if e.detail:
        bits.append(e.detail)
    if r.note and e.status != PROVEN:
        bits.append(r.note)
    if r.frameworks_differ:
        bits.append("framework differs from the pins: " + "; ".join(r.frameworks_differ))
    if e.owners:
        bits.append(f"owners: {e.owners}")
    if ci:
        bits.append(ci)
    return ", ".join(bits)


def unplaced_owners(matrix: Matrix, record: Record, regressed: frozenset[str]) -> str:
    """Who answers for a record without a SKU, when it failed: its environment's owners."""
    if state(record, regressed) not in (FAILED, REGRESSED, INCOMPLETE):
        return ""
    return "; owners: " + owners_words(run_owners(matrix, record.env, None), record.family)


_E = html.escape
STYLE = (
    ".ev{display:inline-block;padding:0 .4em;border-radius:.3em;white-space:nowrap}"
    ".ev-proven{background:#1a7f37;color:#fff;font-weight:600}"
    ".ev-failed{background:#cf222e;color:#fff;font-weight:600}"
    ".ev-declared{border:1px dashed currentColor;opacity:.75}"
    ".ev-unproven{border:1px solid #9a6700;color:#9a6700}"
)
_CLASS = {PROVEN: "ev-proven", FAILED: "ev-failed", REGRESSED: "ev-failed", INCOMPLETE: "ev-failed"}
_SYMBOL = {PROVEN: "\u2714", FAILED: "\u2718", REGRESSED: "\u2718", INCOMPLETE: "\u2718", DECLARED: "\u25cb"}


def _css(status: str) -> str:
    return _CLASS.get(status, "ev-declared" if status == DECLARED else "ev-unproven")


def _link(record: Record | None) -> str:
    if record is None or record.run_url is None:
        return ""
    return f' <a href="{_E(record.run_url, quote=True)}" rel="nofollow noopener">run</a>'


def _badge(status: str) -> str:
    return f'<span class="ev {_css(status)}">{_SYMBOL.get(status, "?")} {_E(status)}</span>'


def html_section(
    matrix: Matrix,
    records: list[Record],
    refused: list[Refused],
    *,
    locks: dict[str, str | None] | None = None,
    now: float | None = None,
    regressed: frozenset[str] = frozenset(),
) -> list[str]:
    """The page's Evidence section: pairs, maturity, nodes, records without a SKU, refused records."""
    v = view(matrix, records, locks=locks or {}, now=time.time() if now is None else now, regressed=regressed)
    rows = [
        f'<tr><th scope="row">{_E(matrix.skus[e.sku].name)}</th><td><code>{_E(e.env)}</code></td>'
        f"<td>{_badge(e.status)}</td><td>{_E(e.rule)}</td><td>{_E(_detail(e))}{_link(e.record)}</td>"
        f"<td>{_E(_perf(e.record))}</td></tr>"
        for e in v.pairs
    ]
    proven = sum(1 for e in v.pairs if e.status == PROVEN)
    out = [
        '<section id="evidence" aria-labelledby="h-evidence"><h2 id="h-evidence">Evidence</h2>',
        f"<style>{STYLE}</style>",
        (
            f'<p class="muted">{len(records)} result record(s); {proven} SKU\u2013environment pair(s) proven: '
            "the newest record passed the distributed, recovery and performance tests the environment declares, "
            "on today's lock, not regressed, within 30 days. <em>Smoke only</em>: passed, without them. "
            "<em>Declared only</em>: the rules say it runs, no run has shown it. docs/results.md has the rules.</p>"
        ),
        (
            '<div class="scroll"><table class="ref"><thead><tr><th scope="col">SKU</th><th scope="col">environment'
            '</th><th scope="col">evidence</th><th scope="col">rules</th><th scope="col">run</th>'
            '<th scope="col">performance</th></tr></thead><tbody>'
        ),
        *rows,
        "</tbody></table></div>",
        '<h3 id="h-maturity">Maturity, as the records earn it</h3><ul>',
    ]
    for t in v.tiers:
        behind = ", ".join(t.records[:5]) + (" \u2026" if len(t.records) > 5 else "")
        out.append(
            f"<li><b>{_E(matrix.families[t.family].name)}</b>: {_E(t.tier)} "
            f'<span class="muted">(claimed {_E(t.claimed)}; {_E(t.why)}{"; records " + _E(behind) if behind else ""})'
            "</span></li>"
        )
    out.append("</ul>")
    if v.nodes:
        out.append(
            '<h3 id="h-nodes">Nodes</h3><div class="scroll"><table class="ref"><thead><tr><th scope="col">node</th>'
            '<th scope="col">last job</th><th scope="col">last passing record</th><th scope="col">verdicts</th>'
            "</tr></thead><tbody>"
        )
        for n in v.nodes:
            last = f"{_E(_day(n.last.finished))} {_badge(state(n.last, v.regressed))} {_E(n.last.id)}{_link(n.last)}"
            good = f"{_E(_day(n.last_pass.finished))} {_E(n.last_pass.id)}" if n.last_pass else "never"
            checks = ", ".join(f"{env}: {word}" for env, word in n.verdicts)
            out.append(f'<tr><th scope="row">{_E(n.name)}</th><td>{last}</td><td>{good}</td><td>{_E(checks)}</td></tr>')
        out.append("</tbody></table></div>")
    if v.unplaced:
        out.append("<h3>Records without a SKU</h3><ul>")
        out += [
            f"<li>{_badge(state(r, v.regressed))} <code>{_E(r.id)}</code>: "
            f"{_E((r.note or '') + unplaced_owners(matrix, r, v.regressed))}{_link(r)}</li>"
            for r in v.unplaced
        ]
        out.append("</ul>")
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


def markdown_section(
    matrix: Matrix,
    records: list[Record],
    refused: list[Refused],
    *,
    locks: dict[str, str | None] | None = None,
    now: float | None = None,
    regressed: frozenset[str] = frozenset(),
) -> str:
    v = view(matrix, records, locks=locks or {}, now=time.time() if now is None else now, regressed=regressed)
    lines = ["", "## Evidence", "", "| SKU | environment | evidence | rules | run | performance |", "|---" * 6 + "|"]
    for e in v.pairs:
        mark = f"**{e.status}**" if e.status in (PROVEN, FAILED, REGRESSED, INCOMPLETE) else f"_{e.status}_"
        run = _md(_detail(e)) + (f" ([run](<{_md(e.record.run_url)}>))" if e.record and e.record.run_url else "")
        lines.append(
            f"| {_md(matrix.skus[e.sku].name)} | {_md(e.env)} | {mark} | {_md(e.rule)} | {run} | "
            f"{_md(_perf(e.record))} |"
        )
    lines += ["", "Maturity, as the records earn it:", ""]
    lines += [f"- {_md(t.family)}: **{t.tier}** (claimed {_md(t.claimed)}; {_md(t.why)})" for t in v.tiers]
    if v.nodes:
        lines += ["", "Nodes:", ""]
        for n in v.nodes:
            good = n.last_pass.id if n.last_pass else "never"
            lines.append(
                f"- {_md(n.name)}: last job {_md(n.last.id)} ({state(n.last, v.regressed)}), last passing {_md(good)}"
            )
    if v.unplaced:
        lines += ["", "Records without a SKU:", ""]
        lines += [
            f"- {_md(r.id)}: {state(r, v.regressed)}: {_md((r.note or '') + unplaced_owners(matrix, r, v.regressed))}"
            for r in v.unplaced
        ]
    if refused:
        lines += ["", "Refused records:", ""]
        lines += [f"- {_md(r.path)}: {_md(r.reason)}" for r in refused]
    return "\n".join(lines) + "\n"
