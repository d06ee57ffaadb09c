"""A plugin family's conformance adapter, as the conformance suite drives it (`accelenv.plugins.Conformance`):
the modules that register its device and backend, its device, and the call that waits for it.

Nothing here is skipped: a missing module fails naming what should have brought it (the adapter's `missing`:
Ascend's torch_npu needs Huawei's CANN toolkit), and a plugin whose modules do not register the backend it
claims fails naming the plugin.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from accelenv.plugins import Conformance, Plugin


def plugin_of(family: str) -> Plugin:
    from accelenv.plugins import installed

    plugins = installed()
    plugin = plugins.of(family)
    if plugin is None:
        failed = [f.message() for f in plugins.failures]
        pytest.fail(
            f"family {family} is neither built in nor brought by an installed accelenv.families plugin"
            + (f" ({'; '.join(failed)})" if failed else ""),
            pytrace=False,
        )
    return plugin


def load_modules(plugin: Plugin) -> None:
    """Import the adapter's modules, or fail naming what is missing."""
    conformance: Conformance = plugin.conformance
    for module in conformance.modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name is not None and module.split(".")[0].startswith(error.name.split(".")[0]):
                pytest.fail(
                    f"{error.name} is not installed, which plugin {plugin.package} needs for family {plugin.family}: "
                    "install the environment's lock",
                    pytrace=False,
                )
            _missing(plugin, module, error)
        except Exception as error:  # torch_npu: a RuntimeError from torch's backend autoload, over a missing library
            _missing(plugin, module, error)


def _missing(plugin: Plugin, module: str, error: BaseException) -> None:
    cause = error
    while cause.__cause__ is not None:
        cause = cause.__cause__
    first = (str(cause).splitlines() or [""])[0][:300]
    pytest.fail(
        f"could not import {module!r} ({type(cause).__name__}: {first}), which plugin {plugin.package} needs for "
        f"family {plugin.family}: {plugin.conformance.missing or 'install it beside the lock'}",
        pytrace=False,
    )


def adapter_device(family: str, name: str) -> Any:
    """The device of a plugin family's member, its backend registered: the adapter must say the backend the
    matrix says, and its modules must register it."""
    import torch
    import torch.distributed as dist

    plugin = plugin_of(family)
    conformance = plugin.conformance
    if conformance.collective_backend != name:
        pytest.fail(
            f"plugin {plugin.package}: its adapter's collective backend is {family}:{conformance.collective_backend}, "
            f"the matrix says {family}:{name}",
            pytrace=False,
        )
    load_modules(plugin)
    if not dist.is_backend_available(name):
        pytest.fail(
            f"plugin {plugin.package} says family {family}'s collective backend is {name!r}, but importing "
            f"{', '.join(conformance.modules) or 'its modules'} registered no such torch.distributed backend",
            pytrace=False,
        )
    return torch.device(conformance.device_type, 0)  # Ray leaves each member its one device


def adapter_sync(device_type: str) -> Callable[[], None]:
    """The adapter's wait for a device of `device_type` (`torch.npu.synchronize`)."""
    from accelenv.plugins import installed

    plugin = next((p for p in installed().loaded if p.conformance.device_type == device_type), None)
    if plugin is None:
        pytest.fail(f"no installed plugin drives torch device type {device_type!r}", pytrace=False)
    dotted = plugin.conformance.synchronize
    if not dotted:
        return lambda: None
    module, _, attribute = dotted.rpartition(".")
    call: Callable[[], None] = getattr(importlib.import_module(module), attribute)
    return call
