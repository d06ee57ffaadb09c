"""torch_npu, imported the way the device tests and the conformance adapter need it, or the reason it cannot be.

torch_npu is torch's device backend for Ascend: once it is installed, `import torch` loads it too (torch's
backend autoload), and torch_npu loads CANN's libraries (libhccl.so, libascendcl.so), which no PyPI package
brings. So a host without CANN fails at `import torch` with "Failed to load the backend extension: torch_npu",
caused by "libhccl.so: cannot open shared object file". Each way it can fail gets its own words: torch or
torch_npu not installed (install the environment's lock), or CANN missing (install CANN on an Ascend host).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

CANN = (
    "torch_npu needs Huawei's CANN toolkit (not on PyPI): install CANN and source its set_env.sh "
    "(/usr/local/Ascend/ascend-toolkit/set_env.sh) on an Ascend host"
)
LOCK = "install the environment's lock (npu-ascend-cann85: torch 2.8.0, torch-npu 2.8.0)"


class TorchNpuUnavailable(Exception):
    """Why torch_npu cannot be used here; the message says what to install."""


def _root_cause(error: BaseException) -> BaseException:
    seen = {id(error)}
    while error.__cause__ is not None and id(error.__cause__) not in seen:
        error = error.__cause__
        seen.add(id(error))
    return error


def _first_line(error: BaseException) -> str:
    return f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:300]}"


def import_torch_npu() -> ModuleType:
    """torch_npu, imported; raises TorchNpuUnavailable naming what is missing."""
    for name in ("torch", "torch_npu"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name in ("torch", "torch_npu"):
                raise TorchNpuUnavailable(f"{error.name} is not installed: {LOCK}") from error
            raise TorchNpuUnavailable(f"could not import {name} ({_first_line(error)}): {CANN}") from error
        except (ImportError, OSError, RuntimeError) as error:  # a CANN library missing, maybe behind torch's autoload
            cause = _root_cause(error)
            raise TorchNpuUnavailable(f"could not import {name} ({_first_line(cause)}): {CANN}") from error
    return module
