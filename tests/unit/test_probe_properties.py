"""Every probe turns any tool output into a ToolView: a parser error is a reported fault, never an exception."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from accelenv.host.discover import BUILTIN_PROBES, builtin_probe
from accelenv.host.probes import ProbeContext, ToolView
from accelenv.host.root import Root
from accelenv.host.run import ToolResult

outputs = st.one_of(
    st.text(max_size=400),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", errors="replace")),
    st.sampled_from(["", "[]", "{}", "null", '{"gpu_data": 1}', "0, x, y", "DRIVER version : ", "\x00"]),
)
faults = st.one_of(st.none(), st.sampled_from(["x did not finish within 10 s", "x exited with status 1: boom"]))


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_probes_never_raise(data: st.DataObject) -> None:
    root = Root(Path("/nonexistent-accelenv-root"))
    ctx = ProbeContext(
        root=root,
        environ=data.draw(st.dictionaries(st.sampled_from(["TPU_ACCELERATOR_TYPE"]), st.text(max_size=20))),
        distributions={},
    )
    for probe in map(builtin_probe, BUILTIN_PROBES):
        results = {
            key: ToolResult(
                argv=tuple(argv),
                returncode=0,
                stdout=data.draw(outputs),
                stderr="",
                seconds=0.0,
                fault=data.draw(faults),
            )
            for key, argv in probe.commands().items()
        }
        view = probe.interpret(ctx, results)
        assert isinstance(view, ToolView)
        assert all(isinstance(e, str) for e in view.errors)
