"""The package's shape, kept: no import cycle among accelenv's modules, and no module over MAX_LINES lines.

Imports are read with `ast`, not by importing. Counted: imports at module level and inside functions. An import
inside a function only delays a dependency; a cycle through one still means neither module can be read, tested or
moved without the other, and a function-level import is how such a cycle hides (plan/page.py and plan/report.py
imported each other that way). Not counted: imports under `if TYPE_CHECKING:`, which never run (annotations
only). An import names the module it reaches (`from accelenv.matrix import rules` is an edge to
accelenv.matrix.rules; `from accelenv.matrix import Matrix` one to the package accelenv.matrix), not the packages
above it, whose `__init__` every submodule import runs anyway. Imports by name at run time
(`importlib.import_module`: the command table, the probes) are not seen.

The packages are layered too (`LAYERS`, lowest first; docs/architecture.md shows the same table, and a test keeps
the two equal): a package or top-level module imports only those of layers below its own (the base modules, which
import no package, also import each other), so no cycle between packages can form and a reader can take each
layer with only the ones below it. The layer rule counts every import, those under `if TYPE_CHECKING:` too (an
annotation is a dependency a reader follows), except the few in `ANNOTATION_ONLY`, each with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tools" / "accelenv"
ARCHITECTURE = REPO / "docs" / "architecture.md"
MAX_LINES = 600

# The layers, lowest first: (name, the packages and top-level modules in it). docs/architecture.md: "Layers".
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "base",
        (
            "accelenv",
            "errors",
            "records",
            "fileio",
            "lazyre",
            "excerpts",
            "redact",
            "distmeta",
            "schema_values",
            "timestamps",
            "netio",
            "changeset",
        ),
    ),
    ("plugin interface", ("plugins",)),
    ("matrix core", ("matrix",)),
    ("facts", ("host", "upstream")),
    ("judge", ("check",)),
    ("records", ("results",)),
    ("views", ("k8s", "cluster")),
    ("plans", ("plan",)),
    ("engine", ("build",)),
    ("command line", ("cli",)),
    ("entry point", ("__main__",)),
)
# Imports against the layers that are annotations only (under `if TYPE_CHECKING:`, never run), each with why.
ANNOTATION_ONLY = {
    ("accelenv.errors", "accelenv.matrix.problems"): "MatrixInvalidError carries the matrix's Problems, and every "
    "error class stays in the one hierarchy of errors.py",
    ("accelenv.plugins", "accelenv.host.probes"): "a plugin hands host discovery its probe, typed by host's own "
    "FamilyProbe protocol (host/plugin_probes.py holds it to that protocol)",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time(body: list[ast.stmt]) -> list[ast.stmt]:
    """Every statement of `body` and of the blocks in it that can run: `if TYPE_CHECKING:` blocks left out."""
    found: list[ast.stmt] = []
    for node in body:
        if isinstance(node, ast.If) and _type_checking(node):
            found += _run_time(node.orelse)
            continue
        found.append(node)
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(node, field, []):
                found += _run_time(child.body if isinstance(child, ast.ExceptHandler | ast.match_case) else [child])
    return found


def _owner(dotted: str) -> str | None:
    """The accelenv module `dotted` is, or is inside (a name imported from it)."""
    while dotted and dotted not in MODULES:
        dotted = dotted.rpartition(".")[0]
    return dotted or None


def imports(name: str, *, annotations: bool = False) -> dict[str, int]:
    """The accelenv modules `name` imports (at run time; with `annotations`, under `if TYPE_CHECKING:` too), each
    with the line of its first import."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: dict[str, int] = {}
    tree = ast.parse(path.read_text(encoding="utf-8"))
    every = sorted((n for n in ast.walk(tree) if isinstance(n, ast.stmt)), key=lambda n: n.lineno)
    for node in every if annotations else _run_time(tree.body):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
        for target in targets:
            owner = _owner(target)
            if owner is not None and owner != name:
                edges.setdefault(owner, node.lineno)
    return edges


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def _describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    members = set(component)
    edges = [
        f"  {MODULES[a].relative_to(PACKAGE.parent)}:{line} imports {b}"
        for a in component
        for b, line in sorted(graph[a].items())
        if b in members
    ]
    return "\n".join([" <-> ".join(component), *edges])


def test_the_reader_finds_imports_of_every_kind() -> None:
    graph = {name: imports(name) for name in MODULES}
    assert "accelenv.matrix.rulebook" in graph["accelenv.matrix.ray_rules"]  # names from a module
    assert "accelenv.matrix.reference_rules" in graph["accelenv.matrix.rules"]  # a submodule from its package
    assert "accelenv.matrix" in graph["accelenv.cli.common"] or "accelenv.matrix.load" in graph["accelenv.cli.common"]
    assert "accelenv.plan.page" in graph["accelenv.plan.report"]  # inside a function
    assert "accelenv.host.report" not in graph["accelenv.check.checks"]  # under TYPE_CHECKING only


def test_no_import_cycle() -> None:
    graph = {name: imports(name) for name in MODULES}
    found = cycles(graph)
    assert not found, "import cycles (break each by moving what both need into a third module):\n" + "\n".join(
        _describe(component, graph) for component in found
    )


def test_cycles_are_found() -> None:
    """The finder itself, on a graph with one cycle through three modules and one module outside it."""
    graph = {"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1, "d": 1}, "d": {}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_no_module_is_over_the_size_a_reader_holds() -> None:
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()}
    over = {name: lines for name, lines in sizes.items() if lines > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them by meaning): {over}"


def unit(module: str) -> str:
    """The package or top-level module `module` belongs to, as LAYERS names it (`accelenv` is the package's
    own `__init__`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


LEVEL = {member: level for level, (_, members) in enumerate(LAYERS) for member in members}


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(REPO)}:{line}"


def test_every_package_and_top_level_module_has_a_layer() -> None:
    units = {unit(name) for name in MODULES}
    assert units == set(LEVEL), (
        f"not in LAYERS: {sorted(units - set(LEVEL))}; in LAYERS but gone: {sorted(set(LEVEL) - units)}"
    )
    assert len(LEVEL) == sum(len(members) for _, members in LAYERS), "a unit is in two layers"


def layer_breaks(graph: dict[str, dict[str, int]]) -> list[str]:
    """Each import of `graph` that reaches a layer above its module's own, or a peer of its layer (other than in
    the base), with where it is and the rule it breaks."""
    found = []
    for module, edges in graph.items():
        here = unit(module)
        for target, line in sorted(edges.items()):
            there = unit(target)
            if there == here or (module, target) in ANNOTATION_ONLY:
                continue
            mine, theirs = LEVEL[here], LEVEL[there]
            if theirs > mine:
                rule = f"{here} ({LAYERS[mine][0]}) may not import {there}, of a layer above ({LAYERS[theirs][0]})"
            elif theirs == mine and mine != 0:
                rule = (
                    f"{here} may not import {there}: both are of the layer {LAYERS[mine][0]}, whose members are peers"
                )
            else:
                continue
            found.append(f"  {_where(module, line)} imports {target}: {rule}")
    return found


def test_each_package_imports_only_the_layers_below_it() -> None:
    graph = {name: imports(name, annotations=True) for name in MODULES}
    found = layer_breaks(graph)
    assert not found, (
        "imports against the layers (tests/unit/test_module_graph.py: LAYERS; move the code to the layer where it "
        "belongs, or the name it needs below):\n" + "\n".join(found)
    )


def test_annotation_only_imports_stay_annotations() -> None:
    """Each import ANNOTATION_ONLY lets past the layers exists, and never runs."""
    for (module, target), why in ANNOTATION_ONLY.items():
        assert why
        assert target in imports(module, annotations=True), f"{module} no longer imports {target}: drop the entry"
        assert target not in imports(module), f"{module} imports {target} at run time, against the layers"


def test_no_import_cycle_between_packages() -> None:
    graph: dict[str, dict[str, int]] = {u: {} for u in LEVEL}
    where: dict[tuple[str, str], str] = {}
    for module in MODULES:
        for target, line in imports(module).items():
            a, b = unit(module), unit(target)
            if a != b:
                graph[a].setdefault(b, line)
                where.setdefault((a, b), _where(module, line) + f" imports {target}")
    found = cycles(graph)
    lines = [
        " <-> ".join(c) + "\n" + "\n".join(f"  {where[a, b]}" for a in c for b in graph[a] if b in c) for c in found
    ]
    assert not found, "import cycles between packages:\n" + "\n".join(lines)


def test_the_layer_rule_names_the_import_and_the_rule() -> None:
    graph = {"accelenv.check.checks": {"accelenv.results.record": 7}, "accelenv.k8s.dra": {"accelenv.cluster.ray": 9}}
    assert layer_breaks(graph) == [
        (
            "  tools/accelenv/check/checks.py:7 imports accelenv.results.record: check (judge) may not import "
            "results, of a layer above (records)"
        ),
        (
            "  tools/accelenv/k8s/dra.py:9 imports accelenv.cluster.ray: k8s may not import cluster: both are of the "
            "layer views, whose members are peers"
        ),
    ]


def documented_layers() -> list[tuple[str, tuple[str, ...]]]:
    """The rows of the table under "## Layers" in docs/architecture.md: (layer, the units named in `code`), top
    row first as the page shows them (highest layer first)."""
    import re

    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 2 or set(cells[0]) <= set("-: ") or cells[0] == "Layer":
            continue
        rows.append((cells[0], tuple(re.findall(r"`([a-z0-9_]+)(?:/__init__\.py|/|\.py)?`", cells[1]))))
    return rows


def test_the_docs_show_the_same_layers() -> None:
    shown = documented_layers()
    kept = [(name, members) for name, members in reversed(LAYERS)]
    assert [name for name, _ in shown] == [name for name, _ in kept], "docs/architecture.md: the layers' names"
    for (name, members), (_, listed) in zip(kept, shown, strict=True):
        assert sorted(listed) == sorted(members), f"docs/architecture.md, layer {name}"
