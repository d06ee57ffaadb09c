"""The command line: list, show, validate, schema; exit codes; JSON contracts; help everywhere."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from reference import REFERENCE_MATRIX

from accelenv.cli import build_parser, main
from accelenv.fileio import write_atomic
from accelenv.matrix.locate import LineIndex

REPO = Path(__file__).resolve().parents[2]
MATRIX = str(REFERENCE_MATRIX)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--matrix", MATRIX, *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_shipped(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate")
    assert code == 0
    assert next(line for line in out.splitlines() if ": valid: " in line or ": invalid: " in line).endswith(
        "warning(s), 38 of them need registry access (--release)"
    )
    assert ": valid: 6 families," in out


def test_validate_strict_fails_on_what_a_change_can_fix(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--strict")
    assert code == 1  # the reference matrix keeps runtimes no environment uses
    assert "error: runtimes.rocm-6-3: no environment uses ROCm 6.3.4" in out
    # an unpinned image needs the registry to fix: still a warning, marked as such
    assert "warning (registry): runtimes.cuda-12-8.base_images.ubuntu24.04: nvidia/cuda:12.8.1" not in out
    assert "base images not pinned by digest: " in out  # one line for the kind; each with --verbose
    _, verbose, _ = run(capsys, "validate", "--strict", "--verbose")
    assert "warning (registry): runtimes.cuda-12-8.base_images.ubuntu24.04: nvidia/cuda:12.8.1" in verbose
    assert next(line for line in out.splitlines() if ": valid: " in line or ": invalid: " in line).endswith(
        "invalid: 3 error(s), 38 warning(s), 38 of them need registry access (--release)"
    )


def test_validate_release_fails_on_every_warning(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--release")
    assert code == 1
    assert "error (registry): runtimes.cuda-12-8.base_images.ubuntu24.04: nvidia/cuda:12.8.1" in out
    assert next(line for line in out.splitlines() if ": valid: " in line or ": invalid: " in line).endswith(
        "invalid: 41 error(s), 0 warning(s)"
    )


def test_validate_strict_passes_when_only_registry_warnings_are_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from minimatrix import MINI

    path = tmp_path / "matrix.toml"
    path.write_text(MINI)
    assert main(["--matrix", str(path), "validate", "--strict"]) == 0
    assert main(["--matrix", str(path), "validate", "--release"]) == 1
    capsys.readouterr()
    assert main(["--matrix", str(path), "validate", "--json"]) == 0
    problems = json.loads(capsys.readouterr().out)
    assert {(p["rule"], p["category"]) for p in problems} == {("unpinned", "registry"), ("lock", "registry")}


def test_list_json_contract(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", "--json")
    assert code == 0
    rows = json.loads(out)
    by_id = {r["id"]: r for r in rows}
    cu128 = by_id["gpu-nvidia-cu128"]
    assert cu128["family"] == "nvidia"
    assert cu128["runtime"] == {"id": "cuda-12-8", "name": "CUDA 12.8 Update 1", "version": "12.8.1"}
    assert cu128["python"] == "3.12"
    assert cu128["default"] is True
    assert cu128["tier"] == "pr"
    assert "b200" in cu128["skus"]
    assert [r["id"] for r in rows if r["default"]] == [
        "cpu-py311",
        "gpu-nvidia-cu128",
        "gpu-amd-rocm64",
        "tpu-jax-0-8",
        "neuron-2-31",
        "gaudi-1-23",
    ]


def test_list_family_filter_and_unknown_family(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list", "--family", "amd")
    assert code == 0
    assert "gpu-amd-rocm64 *" in out
    assert "gpu-nvidia" not in out
    code, _, err = run(capsys, "list", "--family", "intel")
    assert code == 2
    assert "no family 'intel'; families are: nvidia, amd, tpu, neuron, gaudi, cpu" in err


def test_show_json_is_fully_resolved(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "gpu-nvidia-cu128", "--json")
    assert code == 0
    env = json.loads(out)
    assert env["runtime"]["driver"] == {
        "min": "570.124.06",
        "compat_min": "525.60.13",
        "max": None,
        "accepted": [],
        "releases": [],
        "notes": env["runtime"]["driver"]["notes"],
    }
    assert env["base_image"] == {
        "reference": "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04",
        "repository": "nvidia/cuda",
        "tag": "12.8.1-cudnn-runtime-ubuntu24.04",
        "digest": None,
        "pinned": False,
        "python": None,
    }
    skus = {s["id"]: s for s in env["skus"]}
    assert skus["b200"]["driver_floor"] == "570.133.20"  # the SKU's own floor is above the toolkit's
    assert skus["h100-sxm"]["driver_floor"] == "570.124.06"
    assert skus["rtx-pro-6000-server"]["driver_floor"] == "575.57.08"
    assert env["install"] == (
        "python3.12 -m pip install --extra-index-url https://download.pytorch.org/whl/cu128 "
        "torch==2.9.1+cu128 ray==2.60.0 pytest==9.2.0"
    )
    assert {s["id"] for s in env["sources"]} >= {"cuda-release-notes", "pytorch-wheel-listing", "cuda-gpus"}


def test_show_session_name_picks_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", "gpu-amd")
    assert code == 0
    assert out.startswith("gpu-amd-rocm64: ")
    assert "known good: 30.10.1, 30.30.2, 30.30.3" in out
    run_line = next(line.strip() for line in out.splitlines() if line.strip().startswith("docker run"))
    assert "--device /dev/kfd --device /dev/dri --group-add video --group-add render" in run_line
    assert run_line.endswith('-v "$PWD":/workspace -w /workspace rocm/dev-ubuntu-24.04:6.4.1')


@pytest.mark.parametrize(
    "env_id", ["gpu-nvidia-cu128", "gpu-amd-rocm64", "tpu-jax-0-8", "neuron-2-31", "gaudi-1-23", "cpu-py311"]
)
def test_show_reproduces_the_container_run_gives(env_id: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Every device wiring `accelenv run` gives a family's containers is in `show`'s by-hand `docker run`: GPUs
    requested, device nodes (globs expanded by the shell), groups, container runtime, variables, /dev/shm."""
    from accelenv.matrix import load_matrix

    matrix = load_matrix(REFERENCE_MATRIX)
    family = matrix.families[matrix.envs[env_id].family]
    code, out, _ = run(capsys, "show", env_id)
    assert code == 0
    run_line = next(line.strip() for line in out.splitlines() if line.strip().startswith("docker run"))
    assert ("--gpus all" in run_line) is family.container_gpus
    assert (f"--runtime {family.container_runtime}" in run_line) is bool(family.container_runtime)
    for node in family.container_devices:
        assert (f"--device %s ' {node})" if "*" in node or "[" in node else f"--device {node}") in run_line
    assert run_line.count("--device") == len(family.container_devices)
    for group in family.container_groups:
        assert f"--group-add {group}" in run_line
    for key, value in family.container_env.items():
        assert f"-e {key}={value}" in run_line
    if family.container_ipc == "host":  # the host's IPC namespace and /dev/shm: no size to give
        assert "--ipc host" in run_line
        assert "--shm-size" not in run_line
    else:
        assert f"--shm-size {family.container_shm_size or '8g'}" in run_line
    assert "driver >= -" not in out
    # the CDI way, which accelenv run asks for first, is the line after it for a family whose vendor writes specs
    lines = [line.strip() for line in out.splitlines()]
    after = lines[lines.index(run_line) + 1]
    kind = family.container_cdi_kind
    if kind:
        assert after.startswith(f"# with CDI (Docker 28.2+, Podman 4.1+) and a {kind} spec in /etc/cdi or /var/run/cdi")
        legacy = "the --device flags"
        if family.container_gpus or family.container_runtime:
            legacy = "--gpus all" if family.container_gpus else f"--runtime {family.container_runtime}"
        assert after.endswith(
            f"--device {kind}=all (a spec without `all`: one --device {kind}=NAME per device it lists) "
            f"instead of {legacy}"
        )
    else:
        assert after == "# then, inside the container:"
        assert "CDI" not in out.split("reproduce by hand")[1]


@pytest.mark.parametrize(
    ("env_id", "flags", "absent"),
    [
        ("gpu-nvidia-cu132", "--shm-size 8g", "--ipc"),  # NVIDIA: a private /dev/shm of the default size
        ("gpu-amd-rocm100", "--ipc host", "--shm-size"),  # AMD documents --ipc=host for rocm/pytorch
        ("gaudi-1-23", "--ipc host", "--shm-size"),  # Intel: --ipc=host for HCCL
    ],
)
def test_show_starts_the_container_with_the_familys_shm_and_ipc(
    env_id: str, flags: str, absent: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--matrix", str(REPO / "matrix.toml"), "show", env_id]) == 0
    out = capsys.readouterr().out
    run_line = next(line.strip() for line in out.splitlines() if line.strip().startswith("docker run"))
    assert flags in run_line
    assert absent not in run_line


def test_show_uses_a_familys_shm_size(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "matrix.toml"
    text = (REPO / "matrix.toml").read_text()
    marker = "container_gpus = true"
    assert marker in text
    path.write_text(text.replace(marker, f'{marker}\ncontainer_shm_size = "16g"', 1))
    assert main(["--matrix", str(path), "show", "gpu-nvidia-cu132"]) == 0
    assert "--shm-size 16g " in capsys.readouterr().out
    assert main(["--matrix", str(path), "validate"]) == 0
    capsys.readouterr()
    path.write_text(text.replace(marker, f'{marker}\ncontainer_shm_size = "16 GB"', 1))
    assert main(["--matrix", str(path), "validate"]) == 1
    assert "families.nvidia.container_shm_size: '16 GB' is not valid here: expected a size such as 16g" in (
        capsys.readouterr().out
    )


def test_run_help_says_where_shm_and_ipc_come_from(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "default: the family's container_shm_size, else 8g" in out
    assert "container_ipc = host" in out


def test_validate_warns_about_a_missing_os_package_lock(capsys: pytest.CaptureFixture[str]) -> None:
    """An environment whose base lacks its Python needs envs/<env>/os-packages.lock to build: a registry warning,
    like a missing requirements lock, and none for an environment whose base ships its Python."""
    assert main(["--matrix", str(REPO / "matrix.toml"), "validate", "--json"]) == 0
    problems = json.loads(capsys.readouterr().out)
    os_locks = {p["path"]: p for p in problems if "OS-package lock" in p["message"]}
    assert "envs.gpu-nvidia-cu132" in os_locks
    assert "envs.cpu-py311" not in os_locks  # python:3.11-slim ships Python 3.11
    assert "envs.gaudi-1-23" not in os_locks  # Intel's Ubuntu 24.04 image ships Python 3.12
    found = os_locks["envs.gpu-nvidia-cu132"]
    assert (found["severity"], found["rule"], found["category"]) == ("warning", "lock", "registry")
    assert "envs/gpu-nvidia-cu132/os-packages.lock" in found["message"]
    assert "run `accelenv lock gpu-nvidia-cu132`" in found["message"]


def test_show_unknown_env_suggests(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "show", "gpu-nvidia-cu127")
    assert code == 2
    assert "no environment 'gpu-nvidia-cu127'" in err
    assert "did you mean 'gpu-nvidia-cu12" in err
    assert "Traceback" not in err


def test_commands_on_an_invalid_matrix_point_at_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "matrix.toml"
    text = (REFERENCE_MATRIX).read_text()
    path.write_text(
        text.replace('ci_tier = "pr"\nsources = ["docker-python-images"]', 'ci_tier = "often"\nsources = []', 1)
    )
    assert main(["--matrix", str(path), "list"]) == 1
    err = capsys.readouterr().err
    assert "envs.cpu-py311.ci_tier: 'often' is not one of" in err
    assert "run `accelenv validate` for details" in err


def test_matrix_found_from_env_var_and_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ACCELENV_MATRIX", MATRIX)
    assert main(["list"]) == 0
    monkeypatch.delenv("ACCELENV_MATRIX")
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    shutil.copy(MATRIX, tmp_path / "matrix.toml")
    monkeypatch.chdir(nested)
    assert main(["list", "--json"]) == 0
    capsys.readouterr()
    monkeypatch.chdir(tmp_path.parent)
    os.environ.pop("ACCELENV_MATRIX", None)
    assert main(["list"]) == 2
    assert "no matrix.toml in" in capsys.readouterr().err


def test_schema_check_and_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "schema"
    assert main(["schema", "--check", "-o", str(folder)]) == 1
    assert main(["schema", "--write", "-o", str(folder)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == [
        "check.schema.json",
        "cluster.schema.json",
        "inspect.schema.json",
        "matrix.schema.json",
        "result.schema.json",
    ]
    assert main(["schema", "--check", "-o", str(folder)]) == 0
    before = (folder / "matrix.schema.json").stat().st_mtime_ns
    assert main(["schema", "--write", "-o", str(folder)]) == 0
    assert (folder / "matrix.schema.json").stat().st_mtime_ns == before  # a no-op write leaves files untouched
    assert "up to date" in capsys.readouterr().out


@pytest.mark.parametrize(
    "command",
    [
        "validate",
        "list",
        "show",
        "inspect",
        "check",
        "snapshot",
        "which",
        "lock",
        "render",
        "build",
        "verify",
        "run",
        "schema",
    ],
)
def test_help_has_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "examples:" in capsys.readouterr().out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args(["frobnicate"])
    assert exit_info.value.code == 2
    capsys.readouterr()


def test_module_entry_point_exists() -> None:
    assert (REPO / "tools" / "accelenv" / "__main__.py").is_file()


def test_write_atomic_replaces_and_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "file.txt"
    write_atomic(target, "one\n")
    write_atomic(target, "two\n")
    assert target.read_text() == "two\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["file.txt"]


def test_line_index_handles_toml_shapes() -> None:
    text = "\n".join(
        [
            "top = 1",  # 1
            "[envs.a]",  # 2
            "skus = [",  # 3
            '  "x", # ] not the end',  # 4
            "]",  # 5
            'notes = """',  # 6
            "[not.a.table]",  # 7
            '"""',  # 8
            'base_images."ubuntu24.04" = { repository = "r", tag = "t" }',  # 9
            "[[arr]]",  # 10
            "k = 1",  # 11
            "[[arr]]",  # 12
            "k = 2",  # 13
        ]
    )
    index = LineIndex(text)
    assert index.line_of(["top"]) == 1
    assert index.line_of(["envs", "a", "skus", 1]) == 3
    assert index.line_of(["envs", "a", "notes"]) == 6
    assert index.line_of(["not", "a", "table"]) is None
    assert index.line_of(["envs", "a", "base_images", "ubuntu24.04", "tag"]) == 9
    assert index.line_of(["arr", "1", "k"]) == 13
    assert index.line_of(["envs", "b"]) is None


def test_schema_names_match_the_contracts() -> None:
    from accelenv.cli.matrix import SCHEMA_NAMES
    from accelenv.plan.schemas import SCHEMAS

    assert tuple(sorted(SCHEMAS)) == SCHEMA_NAMES


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("columns", [80, 100, 140])
def test_list_fits_the_terminal(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    out = _Terminal()
    assert main(["--matrix", MATRIX, "list"], out=out) == 0
    lines = out.getvalue().splitlines()
    assert max(len(line) for line in lines) <= columns
    listed = " ".join(lines)
    assert "rtx-pro-6000-maxq" in listed  # the SKU lists wrap, never cut
    assert "…" not in listed.split("SKUS", 1)[1].split("*", 1)[0]


def test_list_under_a_pipe_prints_whole_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    assert main(["--matrix", MATRIX, "list"], out=out) == 0
    [nvidia] = [line for line in out.getvalue().splitlines() if line.startswith("gpu-nvidia-cu128 ")]
    assert nvidia.endswith("rtx-pro-6000-maxq")  # one row a line, for grep and cut
    monkeypatch.setenv("COLUMNS", "90")  # asked for: fitted even under a pipe
    out = io.StringIO()
    assert main(["--matrix", MATRIX, "list"], out=out) == 0
    assert max(len(line) for line in out.getvalue().splitlines()) <= 90


def test_table_wraps_the_last_column_beside_or_under_the_others() -> None:
    from accelenv.cli.output import table

    out = io.StringIO()
    table([["a", "one, two, three, four, five, six"]], ["ID", "ITEMS"], out, width=30)
    assert out.getvalue().splitlines() == ["ID  ITEMS", "a   one, two, three, four,", "    five, six"]
    out = io.StringIO()
    table([["a" * 30, "one, two"]], ["ID", "ITEMS"], out, width=20)
    assert out.getvalue().splitlines() == ["ID", "    ITEMS", "a" * 30, "    one, two"]


@pytest.mark.parametrize(
    ("missing", "expected"),
    [("tomlkit", "'tomlkit' is not installed"), ("jsonschema.validators", "'jsonschema' is not installed")],
)
def test_a_missing_dependency_says_what_to_install(
    missing: str, expected: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`PYTHONPATH=tools python -m accelenv` in a Python without accelenv's dependencies: not "a bug"."""
    import accelenv.cli.matrix

    def list_envs(*_: object) -> int:
        raise ModuleNotFoundError(f"No module named {missing!r}", name=missing)

    spec = accelenv.cli.matrix.COMMANDS["list"]
    monkeypatch.setitem(accelenv.cli.matrix.COMMANDS, "list", dataclasses.replace(spec, run=list_envs))
    code, _, err = run(capsys, "list")
    assert code == 2
    assert expected in err
    assert "pip install -e ." in err
    assert "bug" not in err


def test_accelenvs_own_missing_module_is_still_a_bug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import accelenv.cli.matrix

    def list_envs(*_: object) -> int:
        raise ModuleNotFoundError("No module named 'accelenv.gone'", name="accelenv.gone")

    spec = accelenv.cli.matrix.COMMANDS["list"]
    monkeypatch.setitem(accelenv.cli.matrix.COMMANDS, "list", dataclasses.replace(spec, run=list_envs))
    code, _, err = run(capsys, "list")
    assert code == 3
    assert "internal error" in err
