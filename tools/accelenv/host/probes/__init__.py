"""One module per accelerator family: pure parsers of vendor tool output, and the probe that runs the tools.

Each family's probe satisfies `FamilyProbe`: it names the commands to run (all families' commands run at once,
each with a timeout) and then interprets their results into a `ToolView`. Probes never raise: a tool that is
missing, fails or prints garbage becomes an entry in `ToolView.errors`. A probe whose tool refuses a command on
older releases may also have a `followups(results)` method: the commands to run once the first round is in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

from accelenv.records import field, frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from accelenv.host.facts import DeviceFacts
    from accelenv.host.root import Root
    from accelenv.host.run import ToolResult


# DeviceFacts.extra key: the matrix SKU a tool's own words name (neuron-ls's instance type), used when the PCI id alone
# does not identify the device
STATED_SKU = "stated_sku"


@frozen
class ProbeContext:
    """What a probe may look at besides its tools' output."""

    root: Root
    environ: Mapping[str, str]
    distributions: Mapping[str, list[str]]
    fetch_metadata: Callable[[str], str | None] | None = None  # only set when the user allows network lookups


@frozen
class ToolView:
    """A family as its vendor tools (and files they maintain) describe it."""

    driver_version: str | None = None
    runtime_version: str | None = None
    devices: tuple[DeviceFacts, ...] = ()
    source: str | None = None  # the tool the devices come from
    errors: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)
    # fact -> source -> value as that source gave it, for facts read from more than one place (driver_version)
    sources: dict[str, dict[str, str]] = field(default_factory=dict)


class FamilyProbe(Protocol):
    family: str

    def commands(self) -> dict[str, list[str]]:
        """Commands to run, by a stable key (the key names the raw output in a snapshot)."""
        ...

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        """Facts from the commands' results; never raises."""
        ...


def followups(probe: FamilyProbe, results: Mapping[str, ToolResult]) -> dict[str, list[str]]:
    """The commands `probe` asks for after seeing the first round's `results` (none unless the probe has a
    `followups` method: a fallback for a tool that refused the first command). Keys must not repeat the first
    round's."""
    ask = getattr(probe, "followups", None)
    if ask is None:
        return {}
    commands: dict[str, list[str]] = ask(results)
    return {key: argv for key, argv in commands.items() if key not in results}


def tool_errors(results: Mapping[str, ToolResult], *, quiet_missing: bool = True) -> list[str]:
    """Faults worth reporting. A tool that is simply not installed is not an error in itself (the checks say
    whether the family needed it)."""
    return [
        r.fault for r in results.values() if r.fault and not (quiet_missing and r.fault.endswith("not found on PATH"))
    ]


T = TypeVar("T")


def output(result: ToolResult | None) -> str | None:
    """What a tool printed, when it ran and succeeded (its faults are `tool_errors`' business)."""
    return result.stdout if result is not None and result.ok else None


def parsed(text: str | None, parse: Callable[[str], T], errors: list[str]) -> T | None:
    """`parse(text)`; None when there is no text or it does not parse, the ParseError then added to `errors`."""
    if text is None:
        return None
    from accelenv.host.facts import ParseError  # the probes that parse import it; the system facts need not

    try:
        return parse(text)
    except ParseError as error:
        errors.append(str(error))
        return None


def first_installed(distributions: Mapping[str, list[str]], name: str) -> str | None:
    versions = distributions.get(name)
    return versions[0] if versions else None
