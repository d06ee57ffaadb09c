"""Huawei Ascend NPUs for accelenv, as an out-of-tree family plugin (the `accelenv.families` entry point).

What accelenv needs of a family, all from this package: the matrix fragment (`matrix.toml` beside this file),
the `npu-smi info` probe, the conformance adapter (torch_npu's `hccl` backend on `npu` devices, ray-ascend's HCCL
tensor transport) and the device tests (`device_tests/`).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from accelenv.plugins import Conformance
from accelenv_ascend.cann import CANN
from accelenv_ascend.npu_smi import FAMILY, NpuSmiProbe

__all__ = ["CANN", "PLUGIN", "AscendPlugin"]


class AscendPlugin:
    family = FAMILY
    conformance = Conformance(
        collective_backend="hccl",
        device_type="npu",
        modules=("torch_npu",),
        synchronize="torch.npu.synchronize",
        missing=CANN,
        rdt_transport="HCCL",
        rdt_register="ray_ascend:register_hccl_tensor_transport",
    )

    def matrix_fragment(self) -> str:
        return resources.files(__package__).joinpath("matrix.toml").read_text(encoding="utf-8")

    def probe(self) -> NpuSmiProbe:
        return NpuSmiProbe()

    def device_tests(self) -> str:
        return str(Path(__file__).parent / "device_tests")


PLUGIN = AscendPlugin()
