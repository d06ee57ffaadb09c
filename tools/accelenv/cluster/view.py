"""The cluster, drawn: `check --ray --format html`, and a section another page can include.

Pure: `check --ray`'s summary and node results (as JSON) in, HTML out. The nodes are grouped in boxes by the first
domain kind any node has (NVLink domain, then rack, block, slice, zone, placement group; cluster/domains.py); each
node is a box with its devices as squares and their links (host/links.py) as lines, a scale-up link solid and
a PCIe path dashed; every box, square and line takes its verdict's colour (pass, warn, fail, unreachable/dead),
and a domain's box its own (red when incomplete or divided, with the reason under its name). One file: the style
is inline, nothing is fetched, no script runs. Everything a node said is escaped and bounded: a node's answer is
untrusted.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

COLOURS = {
    "pass": "#2e7d32",
    "warn": "#f9a825",
    "fail": "#c62828",
    "unreachable": "#757575",
    "dead": "#424242",
    "drained": "#bdbdbd",
}
LINK_KINDS = ("nvlink", "xgmi", "neuronlink", "ici")  # drawn solid; pcie dashed
MAX_DEVICES = 256  # drawn per node
MAX_LINKS = 4096
MAX_NODES = 4096
CELL = 26  # a device square's pitch in the node's drawing

STYLE = """
.accelenv-cluster{font:14px/1.4 system-ui,sans-serif;color:#212121}
.accelenv-cluster .domains{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
.accelenv-cluster .domain{border:3px solid;border-radius:8px;padding:8px;background:#fafafa}
.accelenv-cluster .domain h3{margin:0 0 4px 0;font-size:15px}
.accelenv-cluster .problem{color:#c62828;font-size:12px;margin:0 0 6px 0}
.accelenv-cluster .nodes{display:flex;flex-wrap:wrap;gap:8px}
.accelenv-cluster .node{border:3px solid;border-radius:6px;padding:6px;background:#fff;min-width:120px}
.accelenv-cluster .node .name{font-weight:600;font-size:12px}
.accelenv-cluster .node .facts{font-size:11px;color:#555}
.accelenv-cluster .legend{margin:8px 0;font-size:12px}
.accelenv-cluster .legend span{display:inline-block;padding:0 6px;margin-right:6px;color:#fff;border-radius:3px}
"""


def cluster_section(env_id: str, cluster: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> str:
    """The cluster as an HTML fragment (a `<section>` with its own `<style>`), for a page to include."""
    by_id = {str(n.get("node_id")): n for n in list(nodes)[:MAX_NODES]}
    kind, groups = _grouping(cluster, by_id)
    domains = {
        (str(d.get("kind")), str(d.get("name"))): d for d in _list(cluster.get("domains")) if isinstance(d, dict)
    }
    boxes = []
    for name, members in groups:
        domain = domains.get((str(kind), name)) if name is not None else None
        boxes.append(_domain_box(kind, name, members, domain, by_id))
    legend = "".join(f'<span style="background:{c}">{v}</span>' for v, c in COLOURS.items())
    unreachable = cluster.get("unreachable")
    counts = (  # numbers only: the answer is untrusted, and a count is never markup
        f"{_int(cluster.get('conforming', 0))} of {_int(cluster.get('nodes', len(by_id)))} nodes conform to "
        f"{_e(env_id)}; {len(unreachable) if isinstance(unreachable, list) else 0} unreachable"
    )
    return (
        f'<section class="accelenv-cluster" data-env="{_e(env_id)}"><style>{STYLE}</style>'
        f"<h2>Cluster: {_e(env_id)}</h2><p>{counts}</p>"
        f'<div class="legend">{legend} links: solid = scale-up (NVLink, xGMI, NeuronLink), dashed = PCIe</div>'
        f'<div class="domains">{"".join(boxes)}</div></section>'
    )


def render_page(env_id: str, cluster: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> str:
    """A whole offline HTML page of the cluster."""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>accelenv cluster: {_e(env_id)}</title></head><body>"
        f"{cluster_section(env_id, cluster, nodes)}</body></html>\n"
    )


def _grouping(
    cluster: Mapping[str, Any], by_id: Mapping[str, Mapping[str, Any]]
) -> tuple[str | None, list[tuple[str | None, list[str]]]]:
    """The first domain kind any node has, and its domains' nodes; the nodes in none of them last (name None)."""
    from accelenv.cluster.domains import DOMAIN_KEYS

    found = [d for d in _list(cluster.get("domains")) if isinstance(d, dict)]
    kind = next((k for k in DOMAIN_KEYS if any(d.get("kind") == k for d in found)), None)
    groups: list[tuple[str | None, list[str]]] = []
    placed: set[str] = set()
    for domain in found:
        if domain.get("kind") == kind:
            members = [str(n) for n in _list(domain.get("nodes")) if str(n) in by_id]
            groups.append((str(domain.get("name")), members))
            placed.update(members)
    rest = [n for n in by_id if n not in placed]
    if rest or not groups:
        groups.append((None, rest))
    return kind, groups


def _domain_box(
    kind: str | None,
    name: str | None,
    members: list[str],
    domain: Mapping[str, Any] | None,
    by_id: Mapping[str, Mapping[str, Any]],
) -> str:
    problems = [str(p) for p in _list((domain or {}).get("problems"))][:8]
    colour = COLOURS["fail"] if problems else COLOURS["pass"] if domain else "#9e9e9e"
    title = f"{kind} {name}" if kind and name else (f"no {kind}" if kind else "nodes")
    said = "".join(f'<p class="problem">{_e(p)}</p>' for p in problems)
    inner = "".join(_node_box(by_id[n]) for n in members)
    state = "problem" if problems else "ok"
    return (
        f'<div class="domain" data-state="{state}" style="border-color:{colour}">'
        f"<h3>{_e(title)}</h3>{said}"
        f'<div class="nodes">{inner}</div></div>'
    )


def _node_box(node: Mapping[str, Any]) -> str:
    verdict = str(node.get("verdict"))
    colour = COLOURS.get(verdict, "#9e9e9e")
    facts = f"{_e(verdict)} · {_e(str(node.get('driver') or '-'))} · {_int(node.get('devices'))} device(s)"
    return (
        f'<div class="node" data-verdict="{_e(verdict)}" style="border-color:{colour}">'
        f'<div class="name">{_e(str(node.get("node_id", "?"))[:12])} {_e(str(node.get("address", "")))}</div>'
        f'<div class="facts">{facts}</div>{_drawing(node, colour)}</div>'
    )


def _drawing(node: Mapping[str, Any], colour: str) -> str:
    """The node's devices on a circle (or a row of squares when it says nothing of links), links as lines."""
    said = node.get("topology")
    topology: Mapping[str, Any] = said if isinstance(said, dict) else {}
    listed = [d for d in _list(topology.get("devices")) if isinstance(d, dict)][:MAX_DEVICES]
    ids = [str(d.get("id"))[:64] for d in listed]
    if not ids:
        ids = [f"d{i}" for i in range(min(_int(node.get("devices")), MAX_DEVICES))]
    if not ids:
        return ""
    count = len(ids)
    radius = max(CELL, CELL * count / (2 * math.pi)) if count > 1 else 0
    size = int(2 * radius + 2 * CELL)
    centre = size / 2
    where = {
        device: (
            centre + radius * math.cos(2 * math.pi * i / count - math.pi / 2),
            centre + radius * math.sin(2 * math.pi * i / count - math.pi / 2),
        )
        for i, device in enumerate(ids)
    }
    lines = []
    for link in [x for x in _list(topology.get("links")) if isinstance(x, dict)][:MAX_LINKS]:
        a, b = where.get(str(link.get("a"))), where.get(str(link.get("b")))
        if a is None or b is None:
            continue
        kind = str(link.get("kind"))
        dash = "" if kind in LINK_KINDS else ' stroke-dasharray="3 3"'
        width = 2 if kind in LINK_KINDS else 1
        lines.append(
            f'<line class="link" data-kind="{_e(kind)}" x1="{a[0]:.1f}" y1="{a[1]:.1f}" x2="{b[0]:.1f}" '
            f'y2="{b[1]:.1f}" stroke="{colour}" stroke-width="{width}"{dash}/>'
        )
    half = CELL * 0.35
    squares = "".join(
        f'<rect class="device" x="{x - half:.1f}" y="{y - half:.1f}" width="{2 * half:.1f}" height="{2 * half:.1f}" '
        f'fill="{colour}"><title>{_e(device)}</title></rect>'
        for device, (x, y) in where.items()
    )
    return (
        f'<svg width="{size}" height="{size}" viewBox="0 0 {size} {size}" role="img" '
        f'aria-label="{count} devices">{"".join(lines)}{squares}</svg>'
    )


def _list(value: object) -> list[Any]:
    """`value` when it is a list, else empty: a field of an untrusted answer that is not a list draws nothing."""
    return value if isinstance(value, list) else []


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 100000 else 0


def _e(text: str) -> str:
    return html.escape(text, quote=True)
