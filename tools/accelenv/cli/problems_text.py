"""How `accelenv validate` prints its problems: what matters first. Errors, then the summary, then the warnings:
those a matrix change can fix one per line, and those that need a registry or an index (an unpinned base, a
missing lock) one line per kind with a count, unless asked for each (`--verbose`; `--release` makes them errors,
and every error gets its own line). The file is named relative to the working folder where it is inside it."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import TYPE_CHECKING

from accelenv.matrix.problems import Category

if TYPE_CHECKING:
    from accelenv.matrix.problems import Problem

SHOWN_SUBJECTS = 4  # per grouped line, the first few subjects by name; the rest as a count


def shown_source(source: str) -> str:
    """`source` relative to the working folder when it lies inside it (no absolute path to read past)."""
    try:
        relative = os.path.relpath(source)
    except ValueError:  # another drive (Windows)
        return source
    return source if relative.startswith("..") else relative


def _kind(problem: Problem) -> tuple[str, str]:
    """(what the kind of registry warning is, the step that fixes it)."""
    if problem.rule == "unpinned":
        return "base images not pinned by digest", "accelenv pin (needs the registries)"
    phrase = problem.message.split(" (", 1)[0].split(";", 1)[0]
    if "OS-package lock" in phrase:
        fix = "accelenv lock ENV where the base can be pulled, or on a local stand-in: accelenv base make ENV"
        return f"environment(s) {phrase.replace('has ', 'with ', 1)}", fix
    if problem.rule == "lock" and phrase.startswith(("has no recorded provenance", "has no checked hashes")):
        return f"environment(s) {phrase.replace('has ', 'with ', 1)}", "accelenv lock ENV --force"
    if problem.rule == "lock":
        return (
            f"environment(s) {phrase.replace('has ', 'with ', 1)}",
            "accelenv lock ENV where its indexes are reachable",
        )
    return f"{problem.rule} warnings", "see accelenv validate --verbose"


def _groups(problem: Problem) -> bool:
    """Whether a registry warning says only what is missing (so many of its kind read as one line)."""
    return problem.rule == "unpinned" or problem.message.startswith(("has no ", "has a stale "))


def _subject(path: str) -> str:
    parts = path.split(".")
    if len(parts) >= 4 and parts[2] == "base_images":
        return f"{parts[1]}/{'.'.join(parts[3:])}"
    return ".".join(parts[1:]) or path


def grouped(problems: list[Problem]) -> list[str]:
    """One line per kind of registry warning: how many, of what, the first subjects, the fix."""
    kinds: dict[tuple[str, str], list[str]] = defaultdict(list)
    for problem in problems:
        subject = _subject(problem.path)
        group = kinds[_kind(problem)]
        if subject not in group:
            group.append(subject)
    lines = []
    for (what, fix), subjects in kinds.items():
        names = ", ".join(subjects[:SHOWN_SUBJECTS])
        more = f" and {len(subjects) - SHOWN_SUBJECTS} more" if len(subjects) > SHOWN_SUBJECTS else ""
        lines.append(f"warning (registry): {len(subjects)} {what}: {names}{more}; fix: {fix}")
    return lines


def problem_lines(problems: list[Problem], source: str, summary: str, *, verbose: bool) -> list[str]:
    """The lines `validate` prints, in order: errors, the summary, then the warnings."""
    shown = shown_source(source)
    errors = [p.render(shown) for p in problems if p.is_error]
    change = [p for p in problems if not p.is_error and p.category is not Category.REGISTRY]
    registry = [p for p in problems if not p.is_error and p.category is Category.REGISTRY and _groups(p)]
    # a registry warning with its own detail (an OS lock whose line does not read) keeps its line
    change += [p for p in problems if not p.is_error and p.category is Category.REGISTRY and not _groups(p)]
    lines = [*errors, summary.replace(source, shown, 1), *(p.render(shown) for p in change)]
    if verbose:
        lines += [p.render(shown) for p in registry]
    elif registry:
        lines += [*grouped(registry), "(each warning with its line: accelenv validate --verbose; all of them: --json)"]
    return lines
