"""The support window (docs/matrix.md, "Support window"): one release per runtime line (major.minor), and no
runtime kept that no environment uses unless it is its family's newest. Registered with the other rule families by
`rules.py`."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from accelenv.matrix.model import release_line
from accelenv.matrix.problems import Severity
from accelenv.matrix.rulebook import Finding, complete, rule

if TYPE_CHECKING:
    from collections.abc import Iterator

    from packaging.version import Version

    from accelenv.matrix.model import Matrix, Runtime


@rule
def support_window(m: Matrix, skipped: frozenset[tuple[str, str]]) -> Iterator[Finding]:
    """The support policy (docs/matrix.md, "Support window"): one release per runtime line (major.minor), and no
    runtime kept that no environment uses unless it is its family's newest."""
    used = {env.runtime for env in m.envs.values()}
    by_family: dict[str, list[tuple[Version, Runtime]]] = defaultdict(list)
    for rt in m.runtimes.values():
        if rt.version is not None:
            by_family[rt.family].append((rt.version, rt))
    for family_id, runtimes in by_family.items():
        newest = max(runtimes, key=lambda pair: pair[0])[1]
        lines: dict[tuple[int, ...], Runtime] = {}
        for version, rt in runtimes:
            line = release_line(version)
            if line in lines:
                yield Finding(
                    path=("runtimes", rt.id, "version"),
                    message=(
                        f"{version} is in the same release line ({'.'.join(map(str, line))}) as runtime "
                        f"'{lines[line].id}' ({lines[line].version}): keep only the newest release of a line"
                    ),
                    rule="support-window",
                )
            lines.setdefault(line, rt)
            if rt.id not in used and rt is not newest and complete(skipped, "envs"):
                yield Finding(
                    path=("runtimes", rt.id),
                    message=(
                        f"no environment uses {rt.name}, and {newest.name} is newer in family '{family_id}': "
                        "retire it, or add the environment that needs it"
                    ),
                    rule="support-window",
                    severity=Severity.WARNING,
                )
