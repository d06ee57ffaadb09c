"""Plain data that probes produce: what a vendor tool said about the driver, the runtime and each device.

Parsers are pure functions from a tool's text output to these records. They raise `ParseError` (and nothing
else) on output they cannot read, so a probe can report the fault instead of crashing the checker.
"""

from __future__ import annotations

from accelenv.records import field, frozen


class ParseError(ValueError):
    """A tool's output could not be read. The message says what was expected and what was found."""


@frozen
class DeviceFacts:
    """One accelerator device as a host tool reports it. Unknown values are None, never guessed."""

    index: int
    name: str | None = None
    arch: str | None = None  # normalised the way the matrix names it: sm_90, gfx942, v6e, neuroncore-v2, gaudi3
    memory_mib: int | None = None
    pci_bus_id: str | None = None  # domain:bus:device.function, lower case: 0000:17:00.0
    pci_device_id: str | None = None  # 0x2330
    uuid: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


@frozen
class ToolFacts:
    """What one run of one vendor tool told us."""

    family: str
    tool: str
    driver_version: str | None = None
    runtime_version: str | None = None  # NVIDIA: the driver's CUDA version; AMD: ROCm; Neuron: runtime
    driver_kernel: str | None = None  # the kernel release a tool printed in place of the driver version (in-tree)
    devices: tuple[DeviceFacts, ...] = ()
    warnings: tuple[str, ...] = ()
