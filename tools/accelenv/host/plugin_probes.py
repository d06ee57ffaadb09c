"""The probe of a plugin's family, held to the `FamilyProbe` promise (`accelenv.host.probes`).

A plugin's probe is code from outside accelenv that host discovery runs beside the built-in probes: what it names
and what it answers are checked, and each call is bounded in time by the plugin interface's `bounded_call`, so a
probe that raises, hangs or answers nonsense is an error of its family's view, never a traceback or a discovery
that does not end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from accelenv.plugins import Fault, bounded_call

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.probes import FamilyProbe, ProbeContext, ToolView
    from accelenv.host.run import ToolResult
    from accelenv.plugins import EntryPoint

PROBE_SECONDS = 10.0  # what a plugin's probe may take to name its commands or read their results


class GuardedProbe:
    """A plugin's probe held to the `FamilyProbe` promise: `commands()` and `interpret()` run within
    `PROBE_SECONDS`, and a probe that raises or hangs becomes an error of its family's view (named with its
    package), never a traceback or a check that does not end. Tools' own timeouts are the runner's business."""

    def __init__(self, probe: FamilyProbe, package: str, seconds: float = PROBE_SECONDS) -> None:
        self.family: str = str(probe.family)
        self._probe = probe
        self._package = package
        self._seconds = seconds
        self._fault: str | None = None

    def commands(self) -> dict[str, list[str]]:
        result = bounded_call(self._probe.commands, self._seconds)
        if isinstance(result, Fault):
            self._fault = f"commands() {result.what}"
            return {}
        if not isinstance(result, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(a, str) for a in v) for k, v in result.items()
        ):
            self._fault = "commands() did not return {key: [argv, ...]}"
            return {}
        return result

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        from accelenv.host.probes import ToolView

        if self._fault is not None:
            return ToolView(errors=(self._said(self._fault),))
        view = bounded_call(lambda: self._probe.interpret(ctx, results), self._seconds)
        if isinstance(view, Fault):
            return ToolView(errors=(self._said(f"interpret() {view.what}"),))
        if not isinstance(view, ToolView):
            return ToolView(errors=(self._said("interpret() did not return a ToolView"),))
        return view

    def _said(self, what: str) -> str:
        return f"the probe of plugin {self._package} (family {self.family}) failed: {what}"


class FailedProbe:
    """The stand-in for a probe that could not be made (its `accelenv.probes` entry point raised or hung): its
    family's view carries why, so `inspect` and `check` say it."""

    def __init__(self, family: str, why: str) -> None:
        self.family = family
        self._why = why

    def commands(self) -> dict[str, list[str]]:
        return {}

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        from accelenv.host.probes import ToolView

        return ToolView(errors=(self._why,))


def probe_of(entry: EntryPoint, package: str, seconds: float = PROBE_SECONDS) -> FamilyProbe:
    """The probe an `accelenv.probes` entry point names (`family = "module:Class"`), made within `seconds` and
    guarded; a failed one stands in as `FailedProbe` for the family the entry point is named after."""

    def make() -> object:  # the import and the constructor, both within the time
        factory: Any = entry.load()
        return factory()

    made = bounded_call(make, seconds)
    if isinstance(made, Fault) or not isinstance(getattr(made, "family", None), str):
        what = made.what if isinstance(made, Fault) else "made an object with no family"
        return FailedProbe(entry.name, f"the probe of plugin {package} (accelenv.probes {entry.name!r}) {what}")
    return GuardedProbe(made, package, seconds)  # type: ignore[arg-type]
