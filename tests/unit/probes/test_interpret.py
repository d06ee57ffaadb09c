"""Every probe, fed output that is not what its tools print: each input that fails to parse is one error in the
view (with the input named), nothing is raised, and no device or version is made up."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hostkit import make_root

from accelenv.host.discover import BUILTIN_PROBES, builtin_probe
from accelenv.host.probes import ProbeContext
from accelenv.host.root import Root
from accelenv.host.run import ToolResult

if TYPE_CHECKING:
    from pathlib import Path

GARBAGE = "Segmentation fault (core dumped)\n"
# the version files a probe reads besides its tools, garbled the same way
FILES = {"/sys/module/neuron/version": GARBAGE, "/opt/rocm/.info/version": GARBAGE}
# inputs each probe parses: its tools' outputs (nvidia-smi topo -m belongs to the topology checks) and files
PARSED = {"nvidia": 2, "amd": 4, "gaudi": 2, "neuron": 2, "tpu": 1}


@pytest.mark.parametrize("family", sorted(BUILTIN_PROBES))
def test_unparsable_output_is_an_error_per_input(family: str, tmp_path: Path) -> None:
    probe = builtin_probe(family)
    results = {
        key: ToolResult(argv=tuple(argv), returncode=0, stdout=GARBAGE, stderr="", seconds=0.0, fault=None)
        for key, argv in probe.commands().items()
    }
    ctx = ProbeContext(root=Root(make_root(tmp_path, files=FILES)), environ={}, distributions={})
    view = probe.interpret(ctx, results)
    assert len(view.errors) == PARSED[family], view.errors
    assert all(": expected " in e and "found" in e and "'Segmentation fault (core dumped)'" in e for e in view.errors)
    assert (view.devices, view.driver_version, view.runtime_version, view.source) == ((), None, None, None)
