"""The page's validated transport recipes: per environment and SKU, what its newest Ray Direct Transport record
proves, as data a cloud can publish: the transports the environment declares, the host requirements its
workloads ask for, the figures the record reached (beside the object store's, and the interconnect's peak where the
matrix has one), and the RDT tests that failed, each known upstream defect named.

A view, not a judge: the recipe is `results.transports.recipes`' reading of the records; ratios and fractions are
recomputed from the figures and the matrix's peaks there, never read from a record. Every value from a record is
escaped. Pure: the matrix and read records in, HTML lines out.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from accelenv.results.transports import interconnect_peaks, recipes

if TYPE_CHECKING:
    from collections.abc import Iterable

    from accelenv.matrix.model import Environment, Matrix
    from accelenv.results.record import Record
    from accelenv.results.transports import Recipe

_E = html.escape
MIB = 2**20


def host_requirements(env: Environment) -> list[str]:
    """The environment's `requires` that are set, as `name = value` (what a host must give its transports)."""
    from dataclasses import fields

    out = []
    for f in fields(env.requires):
        value = getattr(env.requires, f.name)
        if value != f.default:
            out.append(f"{f.name} = {str(value).lower() if isinstance(value, bool) else value}")
    return out


def _issue(reference: str) -> str:
    repo, hash_, number = reference.partition("#")
    if hash_ and "/" in repo and number.isdigit():
        url = f"https://github.com/{repo}/issues/{number}"
        return f'<a href="{_E(url, quote=True)}" rel="nofollow noopener">{_E(reference)}</a>'
    return _E(reference)


def _figures(recipe: Recipe) -> list[str]:
    rows = []
    for t in recipe.transfers:
        versus = f"{t.vs_object_store:.1f}x" if t.vs_object_store is not None else "-"
        peak = f"{t.fraction_of_peak:.0%} of {t.peak_gb_s:g} GB/s" if t.fraction_of_peak is not None else "-"
        rows.append(
            f"<tr><td>{_E(t.transport)}</td><td>{_E(t.scope)}</td><td>{t.size_bytes // MIB} MiB</td>"
            f"<td>{t.gb_s:.3g} GB/s</td><td>{versus}</td><td>{_E(peak)}</td></tr>"
        )
    if not rows:
        return ['<p class="muted">No transfer figures in this record.</p>']
    return [
        (
            '<div class="scroll"><table class="ref"><thead><tr><th scope="col">transport</th><th scope="col">scope</th>'
            '<th scope="col">size</th><th scope="col">throughput</th><th scope="col">vs object store</th>'
            '<th scope="col">of peak</th></tr></thead><tbody>'
        ),
        *rows,
        "</tbody></table></div>",
    ]


def html_section(matrix: Matrix, records: Iterable[Record]) -> list[str]:
    """The Transports section, or nothing when no record ran the RDT tests."""
    found = recipes(records, interconnect_peaks(matrix))
    if not found:
        return []
    out = [
        (
            '<section id="transports" aria-labelledby="h-transports"><h2 id="h-transports">Transports: validated '
            "recipes</h2>"
        ),
        (
            '<p class="muted">Per environment and SKU, the newest record that ran the Ray Direct Transport tests '
            "(tests/devices/test_conformance_rdt.py): what the environment declares, what the host must give it, and "
            "what the run reached. A test that failed on a known upstream defect is a failure, its cause named. "
            "docs/transports.md has the tests.</p>"
        ),
    ]
    for r in found:
        env = matrix.envs.get(r.env)
        declared = ", ".join(env.transports) if env and env.transports else (env.no_transports if env else None)
        needs = host_requirements(env) if env else []
        known = matrix.skus.get(r.sku) if r.sku else None
        sku = known.name if known else (r.sku or "no SKU identified")
        out += [
            f"<h3><code>{_E(r.env)}</code> on {_E(sku)}</h3><ul>",
            f"<li>transports declared: {_E(declared or 'none')}</li>",
            f"<li>host requirements: {_E(', '.join(needs) or 'none beyond the devices')}</li>",
            (
                f"<li>record <code>{_E(r.record)}</code>, {r.nodes} node(s); RDT tests passed: {len(r.passed)}, "
                f"failed: {len(r.failed) + len(r.defects)}</li>"
            ),
        ]
        out += [f"<li>failed: <code>{_E(name)}</code></li>" for name in r.failed]
        out += [
            f"<li>failed on a known upstream defect: <code>{_E(d.test)}</code>: {_issue(d.reference)}: "
            f"{_E(d.description)}</li>"
            for d in r.defects
        ]
        out.append("</ul>")
        out += _figures(r)
    out.append("</section>")
    return out
