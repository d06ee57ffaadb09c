"""Accelerator families from outside accelenv: packages that declare an `accelenv.families` entry point.

A plugin is a peer of the built-in families. Its entry point names an object (or a callable returning one) that
satisfies `FamilyPlugin`: the family id, its matrix fragment (TOML text, validated with the main matrix by the
same schema and rules, `accelenv.matrix.fragments`), its probe, its conformance adapter and the folder of its
device tests. Ray's resource and visible-devices variable are matrix data (`families.<id>.ray_resource`,
`ray_visible_devices_env`), so they come with the fragment.

Loading is bounded: each plugin is loaded in a thread of its own and given `LOAD_SECONDS`; one that raises,
hangs, names a built-in family, or says two different things about itself (its probe's family, its adapter's
backend against its fragment's) is not used, and `Plugins.failures` says why. Nothing is dropped silently:
`accelenv show`, `ci` and the page list both lists (`plugin_rows`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from accelenv.records import frozen

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from accelenv.host.probes import FamilyProbe

ENTRY_POINTS = "accelenv.families"
LOAD_SECONDS = 10.0  # what one plugin may take to import and answer; a plugin that hangs is named after it
PLUGINS_ENV_VAR = "ACCELENV_PLUGINS"  # "0": use no plugin (a run of the built-in families alone)
BUILTIN_FAMILIES = frozenset({"nvidia", "amd", "tpu", "neuron", "gaudi", "cpu"})


@frozen
class Conformance:
    """What the conformance suite needs to run a family's devices: the torch.distributed backend (as the family's
    framework registers it: `hccl`), the torch device type (`npu`), the modules to import first (they register
    the device and the backend: `torch_npu`), the call that waits for the device (`torch.npu.synchronize`), what
    to name when those modules are missing, and Ray's tensor transport (RDT) where the family has one."""

    collective_backend: str
    device_type: str
    modules: tuple[str, ...] = ()
    synchronize: str = ""  # dotted name of a no-argument call; "" when the device needs no wait
    missing: str = ""  # what a missing module means on this host (Ascend: Huawei's CANN toolkit)
    rdt_transport: str | None = None  # the name Ray's @ray.method(tensor_transport=...) takes
    rdt_register: str | None = None  # "module:function" that registers it, called in every process


class FamilyPlugin(Protocol):
    family: str
    conformance: Conformance

    def matrix_fragment(self) -> str:
        """The family's matrix entries (families, skus, sources, runtimes, envs), as TOML text."""
        ...

    def probe(self) -> FamilyProbe:
        """The family's probe (`accelenv.host.probes.FamilyProbe`)."""
        ...

    def device_tests(self) -> str | None:
        """The folder of the family's device tests (pytest files), or None."""
        ...


@frozen
class Plugin:
    """A plugin that loaded and agrees with itself."""

    name: str  # the entry point's name
    package: str  # the distribution that declares it
    version: str
    family: str
    fragment: str
    conformance: Conformance
    device_tests: str | None
    probe: FamilyProbe  # made once, when the plugin loaded (within its time)
    module: str = ""  # the module its entry point names (accelenv_ascend)


@frozen
class PluginFailure:
    """A plugin that could not be used, and why."""

    name: str
    package: str
    reason: str

    def message(self) -> str:
        return f"plugin {self.package} ({ENTRY_POINTS} entry point {self.name!r}) is not used: {self.reason}"


@frozen
class Plugins:
    loaded: tuple[Plugin, ...] = ()
    failures: tuple[PluginFailure, ...] = ()

    def of(self, family: str) -> Plugin | None:
        return next((p for p in self.loaded if p.family == family), None)


class EntryPoint(Protocol):
    """What `importlib.metadata.EntryPoint` offers that is used here (tests pass stand-ins)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> object: ...


def enabled(environ: dict[str, str] | None = None) -> bool:
    return (os.environ if environ is None else environ).get(PLUGINS_ENV_VAR, "1") != "0"


def declared(paths: Iterable[str] | None = None) -> bool:
    """Whether a distribution on `paths` declares `accelenv.families` entry points (a quick look at the
    `entry_points.txt` files, which spares importing `importlib.metadata` when none does)."""
    import sys

    from accelenv.distmeta import declares_entry_points

    return declares_entry_points(ENTRY_POINTS, sys.path if paths is None else paths)


_cache: dict[str, Plugins] = {}


def installed() -> Plugins:
    """The installed plugins, loaded once per process (none when $ACCELENV_PLUGINS is 0)."""
    if not enabled() or not declared():
        return Plugins()
    if "installed" not in _cache:
        import sys

        from accelenv.distmeta import declared_entry_points

        entries = [(entry, entry.dist) for entry in declared_entry_points(ENTRY_POINTS, sys.path)]
        _cache["installed"] = load_plugins(entries)
    return _cache["installed"]


def load_plugins(entries: Sequence[tuple[EntryPoint, str]], *, seconds: float = LOAD_SECONDS) -> Plugins:
    """Each (entry point, distribution name) loaded and checked, within `seconds` each."""
    loaded: list[Plugin] = []
    failures: list[PluginFailure] = []
    for entry, package in sorted(entries, key=lambda e: (e[1], e[0].name)):
        outcome = _bounded(lambda entry=entry, package=package: _load(entry, package), seconds)  # type: ignore[misc]
        if isinstance(outcome, Plugin):
            clash = next((p for p in loaded if p.family == outcome.family), None)
            if clash is not None:
                reason = f"family {outcome.family!r} is already brought by plugin {clash.package}"
                failures.append(PluginFailure(name=entry.name, package=package, reason=reason))
            else:
                loaded.append(outcome)
        else:
            failures.append(PluginFailure(name=entry.name, package=package, reason=outcome))
    return Plugins(loaded=tuple(loaded), failures=tuple(failures))


def _bounded(work: Callable[[], Plugin | str], seconds: float) -> Plugin | str:
    """`work()` in a daemon thread; its reason when it raised or did not finish within `seconds`."""
    outcome = bounded_call(work, seconds)
    if isinstance(outcome, Fault):
        return (
            f"loading it {outcome.what}"
            if "raised" in outcome.what
            else f"it did not load within {seconds:g} s (its import or one of its calls hangs)"
        )
    return outcome  # type: ignore[return-value]


def _load(entry: EntryPoint, package: str) -> Plugin | str:
    import re

    from accelenv.schema_values import COLLECTIVE_BACKEND, ID

    target = entry.load()
    # the entry point may name the plugin object, its class, or a function that returns it
    plugin: Any = (
        target() if isinstance(target, type) or (callable(target) and not hasattr(target, "family")) else target
    )
    family = getattr(plugin, "family", None)
    if not isinstance(family, str) or not re.fullmatch(ID, family):
        return f"its family id {family!r} is not an id (lower-case letters, digits and -)"
    if family in BUILTIN_FAMILIES:
        return f"it names the built-in family {family!r}; a plugin brings a family of its own, under a new id"
    conformance = getattr(plugin, "conformance", None)
    if not isinstance(conformance, Conformance):
        return "its `conformance` is not an accelenv.plugins.Conformance"
    if not re.fullmatch(COLLECTIVE_BACKEND, conformance.collective_backend):
        return f"its collective backend {conformance.collective_backend!r} is not a backend name"
    fragment = plugin.matrix_fragment()
    if not isinstance(fragment, str):
        return "matrix_fragment() did not return TOML text"
    foreign = _foreign_entries(fragment, family)
    if foreign:
        return (
            f"its matrix fragment defines {', '.join(foreign)}: a plugin brings its own family ({family}) and "
            "that family's entries, never another's"
        )
    stated = _fragment_backend(fragment, family)
    if stated is not None and stated != conformance.collective_backend:
        return (
            f"its conformance adapter says the collective backend is {conformance.collective_backend!r}, its "
            f"matrix fragment (families.{family}.collective_backend) says {stated!r}: it must say one thing"
        )
    probe = plugin.probe()
    if getattr(probe, "family", None) != family:
        return f"its probe is for family {getattr(probe, 'family', None)!r}, the plugin's family is {family!r}"
    tests = plugin.device_tests()
    if tests is not None and not Path(tests).is_dir():
        return f"its device tests folder {tests} does not exist"
    return Plugin(
        name=entry.name,
        package=package,
        version=str(getattr(entry, "version", "?")),
        family=family,
        fragment=fragment,
        conformance=conformance,
        device_tests=tests,
        probe=probe,
        module=entry.value.partition(":")[0].strip(),
    )


def _foreign_entries(fragment: str, family: str) -> list[str]:
    """The fragment's entries that are not the plugin's to define: another family, or an entry of one."""
    import tomllib

    try:
        document = tomllib.loads(fragment)
    except (tomllib.TOMLDecodeError, RecursionError):
        return []  # the matrix's validation says what is wrong with it, naming the package
    foreign = [f"families.{key}" for key in document.get("families", {}) if key != family]
    for section in ("skus", "drivers", "runtimes", "envs"):
        table = document.get(section, {})
        if isinstance(table, dict):
            foreign += [
                f"{section}.{key}"
                for key, entry in table.items()
                if isinstance(entry, dict) and entry.get("family") not in (None, family)
            ]
    return foreign


def _fragment_backend(fragment: str, family: str) -> str | None:
    """The collective backend the fragment gives its family (None when it does not parse: the matrix's
    validation reports that, naming the package)."""
    import tomllib

    try:
        value = tomllib.loads(fragment).get("families", {}).get(family, {}).get("collective_backend")
    except (tomllib.TOMLDecodeError, AttributeError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def plugin_families(family_ids: Iterable[str]) -> list[str]:
    """The families among `family_ids` that a plugin brought (the page says so beside its count)."""
    return [f for f in family_ids if f not in BUILTIN_FAMILIES]


def install_spec(plugin: Plugin) -> str:
    """What installs `plugin` into another Python (a session's virtualenv): the source folder it was installed
    from when that is a project beside its module (an editable or in-repository plugin), else the release this
    one is (`package==version`)."""
    import sys

    module = sys.modules.get(plugin.module)
    where = getattr(module, "__file__", None)
    if where:
        project = Path(where).resolve().parents[1]
        if (project / "pyproject.toml").is_file():
            return str(project)
    return f"{plugin.package}=={plugin.version}"


def plugin_rows(plugins: Plugins | None = None) -> list[dict[str, str]]:
    """One row per plugin, loaded or not, for `show`, `ci` and the page: package, version, family, state, and
    the reason a failed one is not used."""
    plugins = installed() if plugins is None else plugins
    rows = [
        {
            "package": p.package,
            "version": p.version,
            "family": p.family,
            "state": "loaded",
            "backend": f"{p.family}:{p.conformance.collective_backend}",
            "why": "",
        }
        for p in plugins.loaded
    ]
    rows += [
        {"package": f.package, "version": "", "family": "", "state": "failed", "backend": "", "why": f.reason}
        for f in plugins.failures
    ]
    return rows


@frozen
class Fault:
    """What went wrong with a call to a plugin: it raised (the first line of its error), or did not return."""

    what: str


def bounded_call(work: Callable[[], object], seconds: float) -> object:
    """`work()` in a daemon thread, within `seconds`: what it returned, or a `Fault` saying how it failed (a
    plugin's fault is reported, never raised; the probes' guard, `accelenv.host.plugin_probes`, uses it too)."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as error:  # a plugin's fault is reported, never raised
            first = (str(error).splitlines() or [""])[0][:300]
            box.append(Fault(what=f"raised {type(error).__name__}: {first}"))

    thread = threading.Thread(target=run, name="accelenv-plugin-probe", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive() or not box:
        return Fault(what=f"did not return within {seconds:g} s")
    return box[0]
