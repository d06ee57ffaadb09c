"""The package's shape, kept: no import cycle among accelenv's modules, and no module over MAX_LINES lines.

Imports are read with `ast`, not by importing. Counted: imports at module level and inside functions. An import
inside a function only delays a dependency; a cycle through one still means neither module can be read, tested or
moved without the other, and a function-level import is how such a cycle hides (plan/page.py and plan/report.py
imported each other that way). Not counted: imports under `if TYPE_CHECKING:`, which never run (annotations
only). An import names the module it reaches (`from accelenv.matrix import rules` is an edge to
accelenv.matrix.rules; `from accelenv.matrix import Matrix` one to the package accelenv.matrix), not the packages
above it, whose `__init__` every submodule import runs anyway. Imports by name at run time
(`importlib.import_module`: the command table, the probes) are not seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tools" / "accelenv"
MAX_LINES = 600


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


def imports(name: str) -> dict[str, int]:
    """The accelenv modules `name` imports (at run time), each with the line of its first import."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges: dict[str, int] = {}
    for node in _run_time(ast.parse(path.read_text(encoding="utf-8")).body):
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
