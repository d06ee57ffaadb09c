"""`accelenv build` says everything that stops each environment, pulls what it can, and its --json is one document
in every outcome; local stand-in bases (overrides) keep their OS lock beside them and never pass for the real base."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from reference import REFERENCE_MATRIX

from accelenv.build import overrides
from accelenv.build.engine import EngineError, EngineInfo, ImageInfo, RunSpec, pull_target
from accelenv.build.standin import plan_standin
from accelenv.cli import main
from accelenv.errors import UsageError
from accelenv.matrix import load_matrix

if TYPE_CHECKING:
    from collections.abc import Callable

REPO = Path(__file__).resolve().parents[2]
CPU_BASE = "python:3.11-slim-bookworm"
CUDA_BASE = "nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04"


class FakeEngine:
    """Images by reference; content tags of `built` environments exist (so build reports them up to date); a
    pull succeeds for the references in `pullable` (with progress), else fails as an unreachable registry does."""

    def __init__(
        self,
        *,
        images: frozenset[str] | set[str] = frozenset(),
        built: frozenset[str] | set[str] = frozenset(),
        pullable: frozenset[str] | set[str] = frozenset(),
    ) -> None:
        self.images = {ref: self._info(ref) for ref in images}
        self.built = set(built)
        self.pullable = set(pullable)
        self.calls: list[tuple[str, str]] = []

    @staticmethod
    def _info(reference: str) -> ImageInfo:
        return ImageInfo(
            id="sha256:" + "b" * 64, tags=(reference,), labels={}, size=2**20, layers=(), created="2025-06-01T00:00:00Z"
        )

    def __enter__(self) -> FakeEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def close(self) -> None:
        pass

    def info(self) -> EngineInfo:
        return EngineInfo(host="fake", api_version="1.41", server_version="20.10", os="linux", arch="amd64")

    def image(self, reference: str) -> ImageInfo | None:
        env = reference.partition(":")[2].rpartition("-")[0].removesuffix("-amd64")  # <env>-<arch>-<hash>
        if reference.startswith("accelenv:") and env in self.built:
            return self._info(reference)
        return self.images.get(reference)

    def pull(self, reference: str, on_line: Callable[[str], None]) -> None:
        self.calls.append(("pull", reference))
        if reference not in self.pullable:
            raise EngineError(f'pull of {reference} failed: Get "https://registry-1.docker.io/v2/": no such host')
        on_line("a1b2c3: Pulling fs layer")
        on_line("a1b2c3: Pull complete (28.2 MiB)")
        on_line(f"Status: Downloaded newer image for {reference}")
        self.images[reference] = self._info(reference)

    def tag(self, image_id: str, reference: str) -> None:
        self.calls.append(("tag", reference))

    def registry_has(self, reference: str) -> bool:
        return False

    def run(self, spec: RunSpec, on_line: Callable[[str], None], on_error: Callable[[str], None] | None = None) -> int:
        raise AssertionError("nothing runs a container here")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The reference matrix with the repository's locks: cpu-py311 is locked, gpu-nvidia-cu126 is not."""
    shutil.copy(REFERENCE_MATRIX, tmp_path / "matrix.toml")
    (tmp_path / "envs" / "cpu-py311").mkdir(parents=True)
    shutil.copy(REPO / "envs" / "cpu-py311" / "requirements.lock", tmp_path / "envs" / "cpu-py311")
    shutil.copy(REPO / "envs" / "accelenv-image.lock", tmp_path / "envs")
    return tmp_path


def run_build(
    repo: Path,
    engine: FakeEngine | Exception,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
) -> tuple[int, str, str]:
    def connect(timeout: float = 10.0) -> FakeEngine:
        if isinstance(engine, Exception):
            raise engine
        return engine

    monkeypatch.setattr("accelenv.build.engine.connect", connect)
    code = main(["--matrix", str(repo / "matrix.toml"), "build", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_blocker_is_named_at_once_each_with_its_fix(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_build(repo, FakeEngine(), monkeypatch, capsys, "gpu-nvidia-cu126")
    assert code == 1
    assert "gpu-nvidia-cu126: not built (3 blockers):" in out
    assert "  - envs/gpu-nvidia-cu126/requirements.lock is missing\n    fix: accelenv lock gpu-nvidia-cu126\n" in out
    assert (
        f"  - its base image {CUDA_BASE} is not on the engine and could not be pulled: "
        'Get "https://registry-1.docker.io/v2/": no such host\n'
        f"    fix: docker pull {CUDA_BASE} where its registry can be reached (or docker load a saved copy); if none "
        "can be, build on a local stand-in: accelenv base make gpu-nvidia-cu126 "
        "(docs/images.md: Images without a registry)\n"
    ) in out
    assert (
        "  - envs/gpu-nvidia-cu126/os-packages.lock is missing: the base "
        f"{CUDA_BASE} lacks Python 3.12, so its OS packages (python3.12, python3.12-venv, ca-certificates) must "
        "be locked first\n    fix: accelenv lock gpu-nvidia-cu126, once the base is on the engine\n"
    ) in out
    assert out.endswith(
        "0 built, 0 up to date, 0 failed; 0 MiB in all; 1 not built (gpu-nvidia-cu126): see the blockers above\n"
    )


def test_without_names_every_environment_is_asked_and_one_not_built_fails_the_command(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = FakeEngine(images={CPU_BASE}, built={"cpu-py311"})
    code, out, _ = run_build(repo, engine, monkeypatch, capsys)
    assert code == 1
    assert "cpu-py311: up to date" in out
    assert "0 built, 1 up to date, 0 failed" in out
    assert "not built (" in out.splitlines()[-1]


@pytest.mark.parametrize(
    ("case", "args", "engine", "code", "ok"),
    [
        ("success", ["cpu-py311"], FakeEngine(images={CPU_BASE}, built={"cpu-py311"}), 0, True),
        ("refusal", ["gpu-nvidia-cu126"], FakeEngine(), 1, False),
        ("partial", ["cpu-py311", "gpu-nvidia-cu126"], FakeEngine(images={CPU_BASE}, built={"cpu-py311"}), 1, False),
        ("engine unreachable", ["cpu-py311"], EngineError("no container engine answers at unix:///x.sock"), 1, False),
        ("bad option", ["--bogus"], FakeEngine(), 2, False),
        ("unknown env", ["nosuch"], FakeEngine(), 2, False),
        ("dry run, base missing", ["cpu-py311", "--dry-run"], FakeEngine(), 1, False),
    ],
)
def test_json_is_one_document_on_stdout_in_every_outcome(  # noqa: PLR0917 - the table's columns
    repo: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    case: str,
    args: list[str],
    engine: FakeEngine | Exception,
    code: int,
    ok: bool,
) -> None:
    got, out, err = run_build(repo, engine, monkeypatch, capsys, *args, "--json")
    document = json.loads(out)  # the whole of stdout: one document, nothing before or after it
    assert got == code, err
    assert document["ok"] is ok
    assert {"ok", "error", "results", "not_built", "pulled"} <= set(document)
    if case == "success":
        assert [r["status"] for r in document["results"]] == ["skipped"]
        assert "engine: fake" in err
    if case in ("refusal", "partial"):
        [blocked] = document["not_built"]
        assert blocked["env"] == "gpu-nvidia-cu126"
        assert blocked["blockers"][0]["fix"] == "accelenv lock gpu-nvidia-cu126"
        assert len(blocked["blockers"]) == 3
        assert "gpu-nvidia-cu126: not built (3 blockers):" in err  # refusals go to stderr
    if case == "partial":
        assert [r["env"] for r in document["results"]] == ["cpu-py311"]
    if case == "engine unreachable":
        assert document["error"] == "no container engine answers at unix:///x.sock"
        assert document["exit_code"] == 1
    if case == "bad option":
        assert "unrecognized arguments: --bogus" in document["error"]
    if case == "unknown env":
        assert "no environment 'nosuch'" in document["error"]
    if case.startswith("dry run"):
        assert "accelenv build cpu-py311 pulls it" in document["not_built"][0]["reason"]
        assert isinstance(engine, FakeEngine)
        assert engine.calls == []  # a dry run pulls nothing


def test_a_missing_base_is_pulled_once_with_progress_on_stderr(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = FakeEngine(built={"cpu-py311"}, pullable={CPU_BASE})
    code, out, err = run_build(repo, engine, monkeypatch, capsys, "cpu-py311", "--json")
    assert code == 0, err
    assert json.loads(out)["pulled"] == [CPU_BASE]
    assert f"pulling {CPU_BASE} (the base is not on the engine)\n  {CPU_BASE}: a1b2c3: Pulling fs layer\n" in err
    assert engine.calls.count(("pull", CPU_BASE)) == 1


@pytest.mark.parametrize(
    ("reference", "target"),
    [
        ("python:3.11-slim-bookworm", ("python", "3.11-slim-bookworm")),
        ("localhost:5000/team/base", ("localhost:5000/team/base", "latest")),
        ("localhost:5000/team/base:1.0", ("localhost:5000/team/base", "1.0")),
        ("python:3.11@sha256:" + "a" * 64, ("python", "sha256:" + "a" * 64)),  # pinned: by the digest alone
        ("rocm/pytorch@sha256:" + "c" * 64, ("rocm/pytorch", "sha256:" + "c" * 64)),
    ],
)
def test_pull_target(reference: str, target: tuple[str, str]) -> None:
    assert pull_target(reference) == target


# ---------------------------------------------------------------------------------------------------- overrides

STANDIN = "accelenv-standin/debian12:bookworm-minbase"


def test_an_override_builds_on_the_stand_in_with_its_os_lock_beside_it(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = load_matrix(repo / "matrix.toml")
    overrides.save(repo, {"cpu-py311": overrides.Override(env="cpu-py311", base=STANDIN, python=None)})
    assert overrides.load(repo, matrix)["cpu-py311"].base == STANDIN
    code, out, _ = run_build(
        repo, FakeEngine(images={STANDIN}), monkeypatch, capsys, "cpu-py311", "--push", "reg.example/x"
    )
    assert code == 1
    assert (
        "  - .accelenv/overrides/cpu-py311/os-packages.lock is missing: the base "
        f"{STANDIN} lacks Python 3.11, so its OS packages (python3.11, python3.11-venv, ca-certificates) must be "
        "locked first\n    fix: accelenv lock cpu-py311\n"
    ) in out
    assert f"--push: it would be built on the local stand-in {STANDIN}, not its real base" in out
    # the stand-in gone from the engine: the fix is to make it again, not to pull the real base
    code, out, _ = run_build(repo, FakeEngine(images={CPU_BASE}), monkeypatch, capsys, "cpu-py311")
    assert f"its stand-in base {STANDIN} (.accelenv/overrides.toml) is not on the engine\n" in out
    assert "fix: accelenv base make cpu-py311 (or accelenv base drop cpu-py311 to use the real base)" in out


def test_apply_replaces_the_base_of_that_environment_only(repo: Path) -> None:
    matrix = load_matrix(repo / "matrix.toml")
    env = matrix.envs["cpu-py311"]
    view = overrides.apply(matrix, env, overrides.Override(env=env.id, base=STANDIN, python="3.11"))
    image = view.runtimes[env.runtime].base_images[env.os]
    assert (image.reference, image.python) == (STANDIN, "3.11")
    assert matrix.runtimes[env.runtime].base_images[env.os].reference == CPU_BASE  # the matrix is untouched
    assert overrides.apply(matrix, env, None) is matrix


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[envs.cpu-py311]\nbase = "python:3.11-slim-bookworm"\n', "is the repository of a real base in the matrix"),
        ('[envs.cpu-py311]\nbase = "python"\n', "is the repository of a real base in the matrix"),
        ('[envs.nosuch]\nbase = "accelenv-standin/x:y"\n', "envs.nosuch: not an environment of the matrix"),
        ('[envs.cpu-py311]\nbase = "accelenv-standin/x:y"\npython = "three"\n', "envs.cpu-py311.python: expected"),
        ('[envs.cpu-py311]\nbase = "accelenv-standin/x:y"\ndigest = "z"\n', "unknown key(s) digest"),
        ('[envs.cpu-py311]\nbase = "Bad Name"\n', "is not an image reference"),
        ("[envs.cpu-py311\n", "not TOML"),
    ],
)
def test_bad_overrides_are_refused_naming_the_key(repo: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=r"overrides\.toml") as error:
        overrides.parse(text, load_matrix(repo / "matrix.toml"))
    assert message in str(error.value)


def standin_lock(repo: Path) -> Path:
    path = repo / "envs" / "cpu-py311" / "os-packages.lock"
    path.write_text(f"# Generated by `accelenv lock`\n# base: {STANDIN} pinned sha256:{'e' * 64}\n")
    return path


def test_a_stand_in_lock_in_the_committed_place_is_refused_everywhere(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    standin_lock(repo)
    matrix = str(repo / "matrix.toml")
    assert main(["--matrix", matrix, "lock", "--check", "cpu-py311"]) == 1
    assert "error: envs/cpu-py311/os-packages.lock was made against the local stand-in" in capsys.readouterr().out
    assert main(["--matrix", matrix, "validate"]) == 1
    assert "it must never be committed" in capsys.readouterr().out
    code, out, _ = run_build(repo, FakeEngine(images={CPU_BASE}, built={"cpu-py311"}), monkeypatch, capsys, "cpu-py311")
    assert code == 1
    assert "    fix: git rm envs/cpu-py311/os-packages.lock\n" in out


def test_the_real_bases_lock_is_not_flagged(repo: Path) -> None:
    path = repo / "envs" / "cpu-py311" / "os-packages.lock"
    path.write_text(f"# base: {CPU_BASE} pinned sha256:{'e' * 64}\n")
    assert overrides.committed_standin_lock(repo, "cpu-py311") is None


def test_a_stand_in_is_made_only_where_the_os_provides_the_python(repo: Path) -> None:
    matrix = load_matrix(repo / "matrix.toml")
    made = plan_standin(matrix, matrix.envs["cpu-py311"])
    assert (made.suite, made.mirror, made.tag) == ("bookworm", "http://deb.debian.org/debian", STANDIN)
    cpu = matrix.envs["cpu-py311"]
    with pytest.raises(UsageError, match=r"needs Python 3\.13, but debian12's packages provide 3\.11 "):
        plan_standin(matrix, dataclasses.replace(cpu, python="3.13"))
    with pytest.raises(UsageError, match=r"no stand-in recipe for OS rhel9"):
        plan_standin(matrix, dataclasses.replace(cpu, os="rhel9"))
