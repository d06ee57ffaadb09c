"""Family plugins (`accelenv.families`): the reference Ascend plugin joined to the shipped matrix, and hostile
plugins (a fragment redefining a core family, a plugin that raises, hangs or lies about its backend, a probe
that raises or hangs), each refused by name."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from accelenv.cluster.accelerator_types import expected_ray
from accelenv.host.discover import match_sku
from accelenv.host.plugin_probes import GuardedProbe
from accelenv.host.probes import ToolView
from accelenv.host.report import Accelerator
from accelenv.matrix.load import validate_text
from accelenv.plugins import Conformance, Plugin, load_plugins, plugin_rows

if TYPE_CHECKING:
    from collections.abc import Mapping

    from accelenv.host.probes import ProbeContext
    from accelenv.host.run import ToolResult

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "tools" / "plugins" / "accelenv-ascend"
DATA = PACKAGE / "tests" / "data"
sys.path.insert(0, str(PACKAGE))  # the reference plugin, as its source tree (CI may also install it)

from accelenv_ascend import PLUGIN, AscendPlugin  # noqa: E402
from accelenv_ascend.npu_smi import parse_npu_smi_info  # noqa: E402

MAIN = (REPO / "matrix.toml").read_text(encoding="utf-8")
# the main matrix, declaring the plugin as a project that uses the Ascend family does (top-level keys come first)
DECLARING = MAIN.replace("\n[", '\nplugins = ["accelenv-ascend"]\n\n[', 1)
RELEASE = threading.Event()  # set at the end of the module: lets the hanging stand-ins' threads end


def ascend(fragment: str | None = None, conformance: Conformance | None = None) -> Plugin:
    return Plugin(
        name="ascend",
        package="accelenv-ascend",
        version="0.1.0",
        family="ascend",
        fragment=PLUGIN.matrix_fragment() if fragment is None else fragment,
        conformance=conformance or PLUGIN.conformance,
        device_tests=PLUGIN.device_tests(),
        probe=PLUGIN.probe(),
        module="accelenv_ascend",
    )


def test_the_ascend_fragment_joins_the_main_matrix_by_the_same_rules() -> None:
    validation = validate_text(DECLARING, plugins=[ascend()])
    assert [p.render("matrix.toml") for p in validation.problems if p.is_error] == []
    assert validation.matrix is not None
    family = validation.matrix.families["ascend"]
    assert (family.ray_resource, family.ray_visible_devices_env) == ("NPU", "ASCEND_RT_VISIBLE_DEVICES")
    assert family.qualified_backend == "ascend:hccl"
    assert validation.matrix.families["gaudi"].qualified_backend == "gaudi:hccl"  # two backends, two names
    assert validation.matrix.skus["ascend-910b3"].memory_mib == 65536
    # what only a registry can fix (a digest for the CANN base) is all that is left, named with the package
    theirs = [p for p in validation.problems if "accelenv-ascend" in p.message]
    assert [(p.rule, p.path) for p in theirs] == [("unpinned", "runtimes.cann-8-5.base_images.ubuntu22.04")]
    assert theirs[0].message.startswith("plugin accelenv-ascend: quay.io/ascend/cann:8.5.0-910b-ubuntu22.04-py3.11")


@pytest.mark.parametrize(
    ("fragment", "path", "said"),
    [
        (
            '[families.nvidia]\nname = "Mine"\n',
            "families.nvidia",
            "families.nvidia is already defined by the main matrix",
        ),
        (
            '[skus.h100-sxm]\nfamily = "ascend"\nname = "x"\narch = "ascend910b"\n',
            "skus.h100-sxm",
            "already defined by the main matrix",
        ),
        (
            '[skus.my-gpu]\nfamily = "nvidia"\nname = "x"\narch = "sm_90"\n',
            "skus.my-gpu",
            "its family is 'nvidia'; a plugin's entries belong to its own family (ascend)",
        ),
        ("[os.mine]\n", "os", "'os' is not one"),
    ],
)
def test_a_fragment_never_redefines_or_reaches_into_the_main_matrix(fragment: str, path: str, said: str) -> None:
    validation = validate_text(DECLARING, plugins=[ascend(PLUGIN.matrix_fragment() + "\n" + fragment)])
    refused = [p for p in validation.problems if p.path == path and p.rule == "plugin"]
    assert refused, [p.render("m") for p in validation.problems if p.is_error]
    assert refused[0].message.startswith("plugin accelenv-ascend (matrix fragment of family ascend): ")
    assert said in refused[0].message
    assert not validation.ok
    assert validation.matrix is None or validation.matrix.families["nvidia"].name == "NVIDIA GPU"


def test_only_declared_plugins_join_and_a_declared_one_must_be_there() -> None:
    undeclared = validate_text(MAIN, plugins=[ascend()])
    assert undeclared.matrix is not None
    assert "ascend" not in undeclared.matrix.families  # installed is not enough: a matrix says what it uses
    missing = validate_text(DECLARING, plugins=[])
    problem = next(p for p in missing.problems if p.path == "plugins[0]")
    assert problem.message.startswith("plugin accelenv-ascend is not installed here: pip install it beside accelenv")
    assert not missing.ok


def test_a_broken_fragment_names_the_package_and_key_path() -> None:
    broken = PLUGIN.matrix_fragment().replace('ray_resource = "NPU"', 'ray_resource = "N P U"')
    validation = validate_text(DECLARING, plugins=[ascend(broken)])
    problem = next(p for p in validation.problems if p.path == "families.ascend.ray_resource")
    assert problem.message.startswith("plugin accelenv-ascend: ")
    assert problem.line is None


class _Entry:
    def __init__(self, name: str, target: object) -> None:
        self.name, self.value, self._target = name, f"stand_in:{name}", target

    def load(self) -> object:
        return self._target() if callable(self._target) and not hasattr(self._target, "family") else self._target


def _raises() -> object:
    raise RuntimeError("libascend_hal.so: cannot open shared object file")


def _hangs() -> object:
    RELEASE.wait(30)
    return PLUGIN


class _Core(AscendPlugin):
    family = "gaudi"


class _Liar(AscendPlugin):
    conformance = Conformance(collective_backend="nccl", device_type="npu")


class _WrongProbe(AscendPlugin):
    def probe(self) -> Any:
        class Other:
            family = "nvidia"

        return Other()


def test_hostile_plugins_are_named_never_dropped() -> None:
    plugins = load_plugins(
        [
            (_Entry("good", PLUGIN), "accelenv-ascend"),
            (_Entry("raises", lambda: _raises), "bad-raises"),
            (_Entry("hangs", lambda: _hangs), "bad-hangs"),
            (_Entry("core", _Core()), "bad-core"),
            (_Entry("liar", _Liar()), "bad-liar"),
            (_Entry("probe", _WrongProbe()), "bad-probe"),
        ],
        seconds=1.0,
    )
    assert [p.family for p in plugins.loaded] == ["ascend"]
    reasons = {f.package: f.reason for f in plugins.failures}
    assert reasons == {
        "bad-core": "it names the built-in family 'gaudi'; a plugin brings a family of its own, under a new id",
        "bad-hangs": "it did not load within 1 s (its import or one of its calls hangs)",
        "bad-liar": "its conformance adapter says the collective backend is 'nccl', its matrix fragment "
        "(families.ascend.collective_backend) says 'hccl': it must say one thing",
        "bad-probe": "its probe is for family 'nvidia', the plugin's family is 'ascend'",
        "bad-raises": "loading it raised RuntimeError: libascend_hal.so: cannot open shared object file",
    }
    rows = plugin_rows(plugins)
    assert [(r["package"], r["state"]) for r in rows][:2] == [("accelenv-ascend", "loaded"), ("bad-core", "failed")]
    assert rows[0]["backend"] == "ascend:hccl"


class _BadProbe:
    family = "ascend"

    def __init__(self, how: str) -> None:
        self.how = how

    def commands(self) -> dict[str, list[str]]:
        return {"npu-smi-info": ["npu-smi", "info"]}

    def interpret(self, ctx: ProbeContext, results: Mapping[str, ToolResult]) -> ToolView:
        if self.how == "raises":
            raise ValueError("unexpected row")
        RELEASE.wait(30)
        return ToolView()


@pytest.mark.parametrize(
    ("how", "said"), [("raises", "raised ValueError: unexpected row"), ("hangs", "did not return")]
)
def test_a_probe_that_raises_or_hangs_becomes_an_error_of_its_view(how: str, said: str) -> None:
    guarded = GuardedProbe(_BadProbe(how), "bad-probe", seconds=0.5)
    assert guarded.commands() == {"npu-smi-info": ["npu-smi", "info"]}
    view = guarded.interpret(None, {})  # type: ignore[arg-type]
    assert len(view.errors) == 1
    assert view.errors[0].startswith("the probe of plugin bad-probe (family ascend) failed: interpret() ")
    assert said in view.errors[0]


def test_npu_smi_on_eight_910b3() -> None:
    text = (DATA / "npu-smi-info__vllm-ascend-issue198__8x-910B3__23.0.7.txt").read_text()
    version, devices = parse_npu_smi_info(text)
    assert version == "23.0.7"
    assert [d.index for d in devices] == list(range(8))
    assert {(d.name, d.arch, d.memory_mib) for d in devices} == {("910B3", "ascend910b", 65536)}
    assert [d.pci_bus_id for d in devices][:2] == ["0000:c1:00.0", "0000:c2:00.0"]


def test_npu_smi_excerpt_without_title() -> None:
    version, devices = parse_npu_smi_info((DATA / "npu-smi-info-EXCERPT__pypto-guide__1x-910B4.txt").read_text())
    assert version is None
    assert [(d.index, d.name, d.memory_mib, d.pci_bus_id) for d in devices] == [(2, "910B4", 32768, "0000:c2:00.0")]


def test_a_first_generation_910_named_910b_is_no_910b_sku() -> None:
    text = (DATA / "npu-smi-info__opdev-910a-notes__8x-910-first-gen-named-910B__24.1.0.txt").read_text()
    version, devices = parse_npu_smi_info(text)
    assert version == "24.1.0"
    assert len(devices) == 8
    assert {(d.name, d.arch, d.memory_mib) for d in devices} == {("910B", None, 32768)}
    matrix = validate_text(DECLARING, plugins=[ascend()]).matrix
    assert matrix is not None
    assert match_sku(matrix, "ascend", pci_device_id="0xd802", name="910B") is None
    assert match_sku(matrix, "ascend", pci_device_id="0xd802", name="910B3") == "ascend-910b3"


def test_ray_resource_of_a_plugin_family_is_its_data() -> None:
    matrix = validate_text(DECLARING, plugins=[ascend()]).matrix
    assert matrix is not None
    acc = Accelerator(family="ascend", driver_version=None, runtime_version=None, devices=(), source="none", errors=())
    view = expected_ray(matrix, acc)
    assert view.resource == "NPU"


def _raising(failures: dict[str, BaseException]) -> Any:
    def import_module(name: str) -> object:
        if name in failures:
            raise failures[name]
        return object()

    return import_module


def _autoload_failure() -> RuntimeError:
    """What `import torch` raises with torch_npu installed and CANN absent (torch 2.13.0 + torch-npu 2.13.0)."""
    try:
        try:
            raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")
        except ImportError as cause:
            raise RuntimeError("Failed to load the backend extension: torch_npu.") from cause
    except RuntimeError as error:
        return error


@pytest.mark.parametrize(
    ("failures", "said"),
    [
        ({"torch": ModuleNotFoundError("No module named 'torch'", name="torch")}, "torch is not installed: install"),
        ({"torch_npu": ModuleNotFoundError("no", name="torch_npu")}, "torch_npu is not installed: install the"),
        ({"torch": _autoload_failure()}, "(ImportError: libhccl.so: cannot open shared object file: No such file"),
    ],
)
def test_torch_npu_failures_name_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, failures: dict[str, BaseException], said: str
) -> None:
    from accelenv_ascend import cann

    monkeypatch.setattr("accelenv_ascend.cann.importlib.import_module", _raising(failures))
    with pytest.raises(cann.TorchNpuUnavailable) as caught:
        cann.import_torch_npu()
    assert said in str(caught.value)
    assert ("CANN toolkit" in str(caught.value)) == ("libhccl" in said)


def test_the_device_tests_fail_never_skip_without_torch_npu() -> None:
    from accelenv_ascend.device_tests.test_ascend_devices import _torch_npu

    with pytest.raises(pytest.fail.Exception, match=r"not installed|CANN toolkit"):
        _torch_npu()


def teardown_module() -> None:
    RELEASE.set()


def test_entry_points_are_read_bounded_first_distribution_wins(tmp_path: Path) -> None:
    from accelenv.distmeta import declared_entry_points

    for folder, version in (("first", "0.2.0"), ("second", "0.1.0")):
        info = tmp_path / folder / f"accelenv_ascend-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.4\nName: accelenv-ascend\nVersion: {version}\n\n")
        (info / "entry_points.txt").write_text(
            "[console_scripts]\nx = y:z\n\n[accelenv.families]\nascend = accelenv_ascend:PLUGIN\n"
        )
    found = declared_entry_points("accelenv.families", [str(tmp_path / "first"), str(tmp_path / "second")])
    assert [(e.name, e.value, e.dist, e.version) for e in found] == [
        ("ascend", "accelenv_ascend:PLUGIN", "accelenv-ascend", "0.2.0")
    ]
    assert declared_entry_points("accelenv.probes", [str(tmp_path / "first")]) == []


def test_show_and_ci_name_a_plugin_that_failed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from accelenv import plugins
    from accelenv.cli import main
    from accelenv.plugins import PluginFailure, Plugins

    broken = PluginFailure(name="x", package="bad-hangs", reason="it did not load within 10 s (its import hangs)")
    monkeypatch.setenv("COLUMNS", "200")  # the table wraps to the terminal: one wide enough keeps each reason whole
    monkeypatch.setitem(plugins._cache, "installed", Plugins(loaded=(ascend(),), failures=(broken,)))
    monkeypatch.setattr(plugins, "declared", lambda paths=None: True)
    assert main(["--matrix", str(REPO / "matrix.toml"), "show", "--plugins"]) == 1
    out = capsys.readouterr().out
    assert "accelenv-ascend" in out
    assert "bad-hangs" in out
    assert "failed" in out
    assert "it did not load within 10 s" in out
    assert main(["--matrix", str(REPO / "matrix.toml"), "ci", "--tier", "pr"]) == 0
    assert (
        "accelenv ci: plugin bad-hangs (accelenv.families entry point 'x') is not used: it did not load within 10 s"
        in capsys.readouterr().err
    )
    assert main(["--matrix", str(REPO / "matrix.toml"), "validate", "--strict"]) == 1  # a broken plugin is a warning
    shown = capsys.readouterr()
    assert "plugin bad-hangs (accelenv.families entry point 'x') is not used" in shown.out + shown.err


@pytest.mark.parametrize("how", ["raises", "hangs", "fine"])
def test_discover_reads_a_plugin_family_and_survives_its_probe(tmp_path: Path, how: str) -> None:
    from hostkit import FakeRunner, make_root

    from accelenv.host.discover import discover
    from accelenv.host.root import Root

    matrix = validate_text(DECLARING, plugins=[ascend()]).matrix
    assert matrix is not None
    capture = (DATA / "npu-smi-info__vllm-ascend-issue198__8x-910B3__23.0.7.txt").read_text()
    probe = PLUGIN.probe() if how == "fine" else _BadProbe(how)
    report = discover(
        matrix,
        root=Root(make_root(tmp_path / "host")),
        runner=FakeRunner({"npu-smi info": capture}),
        environ={},
        families=["ascend"],
        registry={"ascend": GuardedProbe(probe, "accelenv-ascend", seconds=0.5)},
        topology=False,
    )
    (acc,) = report.accelerators
    if how == "fine":
        assert acc.driver_version == "23.0.7"
        assert [d.sku for d in acc.devices] == ["ascend-910b3"] * 8
        assert acc.errors == ()
    else:
        assert acc.devices == ()
        assert acc.errors[0].startswith("the probe of plugin accelenv-ascend (family ascend) failed: interpret() ")


def test_a_session_installs_the_plugin_from_where_it_came() -> None:
    from accelenv.plugins import install_spec

    assert install_spec(ascend()) == str(PACKAGE)  # the in-repository reference: its project folder
    from accelenv.records import replace

    released = replace(ascend(), package="accelenv-npu", version="1.2.0", module="not_imported_here")
    assert install_spec(released) == "accelenv-npu==1.2.0"


class _NoFamily:
    pass


@pytest.mark.parametrize(
    ("target", "said"),
    [
        (lambda: _raises, "raised RuntimeError: libascend_hal.so"),
        (lambda: _hangs, "did not return within 0.5 s"),
        (lambda: lambda: _NoFamily, "made an object with no family"),
    ],
)
def test_a_probe_entry_point_that_cannot_make_its_probe_is_named(target: Any, said: str) -> None:
    from accelenv.host.plugin_probes import probe_of

    probe = probe_of(_Entry("demo", target()), "bad-probe", seconds=0.5)
    assert probe.family == "demo"
    assert probe.commands() == {}
    (error,) = probe.interpret(None, {}).errors  # type: ignore[arg-type]
    assert error.startswith("the probe of plugin bad-probe (accelenv.probes 'demo') ")
    assert said in error


def test_the_page_names_the_families_plugins_brought() -> None:
    from accelenv.plan.page import html_page

    joined = validate_text(DECLARING, plugins=[ascend()]).matrix
    alone = validate_text(MAIN, plugins=[ascend()]).matrix
    assert joined is not None
    assert alone is not None
    assert "7 families (ascend from a plugin)" in html_page(joined)
    assert "6 families \u00b7" in html_page(alone)


def test_an_entry_point_may_name_the_plugin_class() -> None:
    plugins = load_plugins([(_Entry("ascend", AscendPlugin), "accelenv-ascend")])
    assert plugins.failures == ()
    assert [p.family for p in plugins.loaded] == ["ascend"]


def test_npu_smi_npus_of_two_chips_are_two_devices() -> None:
    # the layout of an NPU with two chips: the NPU id repeated, one pair of rows per chip (rows as the
    # 8x 910B3 capture prints them, the second chip's given its own bus id)
    rows = (DATA / "npu-smi-info__vllm-ascend-issue198__8x-910B3__23.0.7.txt").read_text().splitlines()
    first, second = rows[6], rows[7]
    chip = second.replace("| 0   ", "| 1   ", 1).replace("0000:C1:00.0", "0000:C2:00.0")
    version, devices = parse_npu_smi_info("\n".join([*rows[:6], first, second, rows[8], first, chip, rows[8]]))
    assert version == "23.0.7"
    assert [(d.index, d.extra["npu"], d.extra["chip"], d.pci_bus_id) for d in devices] == [
        (0, "0", "0", "0000:c1:00.0"),
        (1, "0", "1", "0000:c2:00.0"),
    ]


class _Redefines(AscendPlugin):
    def matrix_fragment(self) -> str:
        return PLUGIN.matrix_fragment() + '\n[families.nvidia]\nname = "Mine"\n'


def test_a_fragment_redefining_a_core_family_fails_to_load_by_name() -> None:
    plugins = load_plugins([(_Entry("ascend", _Redefines()), "bad-fragment")])
    assert plugins.loaded == ()
    (failure,) = plugins.failures
    assert failure.reason == (
        "its matrix fragment defines families.nvidia: a plugin brings its own family (ascend) and that family's "
        "entries, never another's"
    )
