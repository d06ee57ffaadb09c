"""A plugin's matrix fragment joined to the main matrix: pure, on the parsed documents.

A fragment adds entries; it never changes one. An entry whose id the main matrix (or an earlier plugin) already
has is refused, as is a family other than the plugin's own and an entry of another family: so a fragment cannot
redefine `nvidia`, add a SKU to it, or rewire an environment. What is joined is then validated with the main
matrix by the same schema and rules (`accelenv.matrix.load`), and a problem found in an entry a plugin brought
names the package (`origin`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelenv.matrix.problems import Problem
from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Sequence

    from accelenv.plugins import Plugin

SECTIONS = ("sources", "families", "skus", "drivers", "runtimes", "envs")  # what a fragment may add to
_OWNED = ("skus", "drivers", "runtimes", "envs")  # entries that name their family: it must be the plugin's


@frozen
class Joined:
    document: dict[str, Any]
    problems: tuple[Problem, ...]
    origin: dict[tuple[str, str], str]  # (section, entry id) -> the package that brought it


def join(document: dict[str, Any], plugins: Sequence[Plugin]) -> Joined:
    """`document` with every plugin's entries added, and the problems of those that could not be."""
    import tomllib

    merged = {key: (dict(value) if isinstance(value, dict) else value) for key, value in document.items()}
    problems: list[Problem] = []
    origin: dict[tuple[str, str], str] = {}
    for plugin in plugins:
        where = f"plugin {plugin.package} (matrix fragment of family {plugin.family})"
        try:
            fragment = tomllib.loads(plugin.fragment)
        except (tomllib.TOMLDecodeError, RecursionError) as error:
            problems.append(Problem(path="", message=f"{where}: not valid TOML: {error}", rule="plugin"))
            continue
        if plugin.family not in fragment.get("families", {}):
            problems.append(
                Problem(
                    path=f"families.{plugin.family}",
                    message=f"{where}: the fragment does not define its own family; add [families.{plugin.family}]",
                    rule="plugin",
                )
            )
        for section, table in fragment.items():
            if section not in SECTIONS or not isinstance(table, dict):
                problems.append(
                    Problem(
                        path=section,
                        message=f"{where}: a fragment adds tables of {', '.join(SECTIONS)}; {section!r} is not one",
                        rule="plugin",
                    )
                )
                continue
            target = merged.setdefault(section, {})
            for key, entry in table.items():
                path = f"{section}.{key}"
                refusal = _refusal(section, key, entry, plugin.family, target=target, origin=origin)
                if refusal is not None:
                    problems.append(Problem(path=path, message=f"{where}: {refusal}", rule="plugin"))
                    continue
                target[key] = entry
                origin[(section, key)] = plugin.package
    return Joined(document=merged, problems=tuple(problems), origin=origin)


def _refusal(
    section: str, key: str, entry: object, family: str, *, target: dict[str, Any], origin: dict[tuple[str, str], str]
) -> str | None:
    if key in target:
        owner = origin.get((section, key))
        by = f"plugin {owner}" if owner else "the main matrix"
        return (
            f"{section}.{key} is already defined by {by}; a plugin adds entries and never redefines one "
            "(give yours an id of its own)"
        )
    if section == "families" and key != family:
        return f"a plugin brings one family, its own ({family}); {key!r} is another"
    if section in _OWNED and isinstance(entry, dict) and entry.get("family") != family:
        return f"its family is {entry.get('family')!r}; a plugin's entries belong to its own family ({family})"
    return None


def _normal(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def joined_with_declared(document: dict[str, Any], available: Sequence[Plugin] | None) -> Joined:
    """`document` joined with the plugins its `plugins` list declares, found among `available` (default: those
    installed here); a declared plugin that is not installed, or failed to load, is an error naming it."""
    from accelenv.matrix.problems import dotted

    failures: dict[str, str] = {}
    if available is None:
        from accelenv.plugins import installed

        found = installed()
        available = found.loaded
        failures = {_normal(f.package): f.reason for f in found.failures}
    by_name = {_normal(p.package): p for p in available}
    declared = document.get("plugins")
    chosen: list[Plugin] = []
    problems: list[Problem] = []
    for index, name in enumerate(declared if isinstance(declared, list) else []):
        if not isinstance(name, str):
            continue  # the schema says what is wrong with it
        plugin = by_name.get(_normal(name))
        if plugin is not None:
            chosen.append(plugin)
            continue
        reason = failures.get(_normal(name))
        message = (
            f"plugin {name} is installed but not used: {reason}"
            if reason
            else f"plugin {name} is not installed here: pip install it beside accelenv (its accelenv.families entry "
            "point brings the family), or take it out of plugins"
        )
        problems.append(Problem(path=dotted(("plugins", index)), message=message, rule="plugin"))
    joined = join(document, chosen)
    return Joined(document=joined.document, problems=(*problems, *joined.problems), origin=joined.origin)


def unused_failures(problems: Sequence[Problem]) -> list[Problem]:
    """A warning for each installed plugin that failed to load and that the matrix does not declare (a declared
    one is already an error at its `plugins[i]`): a broken plugin is named, never dropped silently."""
    from accelenv.matrix.problems import Severity
    from accelenv.plugins import installed

    declared = {p.message.split(" ", 2)[1] for p in problems if p.rule == "plugin" and p.path.startswith("plugins[")}
    return [
        Problem(path="", message=failure.message(), severity=Severity.WARNING, rule="plugin")
        for failure in installed().failures
        if failure.package not in declared
    ]


def attribute(problems: Sequence[Problem], origin: dict[tuple[str, str], str]) -> list[Problem]:
    """Problems found by the schema and rules, those in an entry a plugin brought naming its package (and no line
    of the main matrix, which does not hold it)."""
    from accelenv.records import replace

    named = []
    for problem in problems:
        parts = problem.path.split(".")
        package = origin.get((parts[0], parts[1])) if len(parts) >= 2 else None
        if package is None:
            named.append(problem)
        else:
            named.append(replace(problem, message=f"plugin {package}: {problem.message}", line=None))
    return named
