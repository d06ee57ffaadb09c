"""`accelenv lock` with the real resolver (uv) against package indexes served on loopback by the test.

The main index carries a +cpu build of a torch stand-in and a package that depends on it; the extra index (as
download.pytorch.org/whl/cu128 would) carries the +cu128 build. The lock must hold the +cu128 build with its
hash, checked against the file, and name the index each package came from; an index that advertises a sha256
its file does not have is refused; a package from an index the environment does not declare is refused by
`lock --check`; an index that cannot be reached leaves the environment unlocked with a message that says so.

Nothing leaves 127.0.0.1: every test starts from the repository's envs/accelenv-image.lock (current: its inputs
do not depend on the matrix), so nothing is resolved from PyPI; uv may not download a Python (it would fetch
one from GitHub when the environment's is not installed), and no container engine answers (the environment's
OS package lock would pull its base from a registry).
"""

from __future__ import annotations

import hashlib
import json
import socket
from pathlib import Path

import pytest
import tomlkit
from hostkit import LoopbackServer, build_wheel, write_simple_index
from reference import REFERENCE_MATRIX

from accelenv.cli import main

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[2]
WRONG = "0" * 64  # what a lying index advertises


@pytest.fixture(autouse=True)
def _loopback_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Python download, no engine; the digests a test checks are remembered in its own cache."""
    monkeypatch.setenv("UV_PYTHON_DOWNLOADS", "never")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def indexes(tmp_path: Path) -> tuple[Path, Path, Path]:
    main_index, cu_index = tmp_path / "index" / "main", tmp_path / "index" / "cu128"
    build_wheel(main_index / "demo-torch", "demo-torch", "2.9.1+cpu")
    build_wheel(main_index / "demo-vision", "demo-vision", "0.1", ["demo-torch==2.9.1"])
    build_wheel(main_index / "pytest", "pytest", "9.2.0")
    wheel = build_wheel(cu_index / "demo-torch", "demo-torch", "2.9.1+cu128")
    write_simple_index(main_index)
    write_simple_index(cu_index)
    return main_index, cu_index, wheel


def matrix_with_env(tmp_path: Path, index_url: str, extra_url: str, packages: list[str]) -> Path:
    doc = tomlkit.parse(REFERENCE_MATRIX.read_text(encoding="utf-8"))
    env = tomlkit.table()
    env.update(
        {
            "family": "nvidia",
            "runtime": "cuda-12-8",
            "description": "loopback index test",
            "os": "ubuntu24.04",
            "python": "3.12",
            "platforms": ["linux/amd64"],
            "skus": ["h100-sxm"],
            "requirements": {"packages": packages, "index_url": index_url, "extra_index_urls": [extra_url]},
            "tests": ["tests/devices/test_nvidia_devices.py"],
            "ci_tier": "nightly",
        }
    )
    doc["envs"]["demo-cu128"] = env
    folder = tmp_path / "repo"
    (folder / "envs").mkdir(parents=True)
    (folder / "matrix.toml").write_text(tomlkit.dumps(doc), encoding="utf-8")
    (folder / "envs" / "accelenv-image.lock").write_text(image_lock(), encoding="utf-8")
    return folder / "matrix.toml"


def image_lock() -> str:
    """The repository's envs/accelenv-image.lock (current: not resolved again from PyPI), its files checked and
    each pin from PyPI, as accelenv lock writes it."""
    text = (REPO / "envs" / "accelenv-image.lock").read_text(encoding="utf-8")
    assert "\n# hashes: verified: " in text
    assert "    # from https://pypi.org/simple\n" in text
    return text


def page(project: Path, advertised: dict[str, str]) -> None:
    """The project's PEP 503 page, each file's link with the sha256 the index advertises for it."""
    links = "".join(f'<a href="{name}#sha256={digest}">{name}</a>' for name, digest in advertised.items())
    (project / "index.html").write_text(f"<!DOCTYPE html><html><body>{links}</body></html>\n")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_lock_keeps_the_cu128_build_with_its_hash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The +cu128 build, its hash checked against the file; a build for another system (win_amd64, whose hash
    the index advertises too) is not pinned, and so not downloaded; each pin names its index."""
    _, _, cu_wheel = indexes(tmp_path)
    windows = cu_wheel.with_name("demo_torch-2.9.1+cu128-cp312-cp312-win_amd64.whl")
    windows.write_bytes(b"a build no linux/amd64 image installs")
    page(cu_wheel.parent, {cu_wheel.name: sha256(cu_wheel), windows.name: sha256(windows)})
    with LoopbackServer(tmp_path / "index") as server:
        matrix = matrix_with_env(
            tmp_path,
            f"{server.url}/main",
            f"{server.url}/cu128",
            ["demo-torch==2.9.1+cu128", "demo-vision==0.1", "pytest==9.2.0"],
        )
        assert main(["--matrix", str(matrix), "lock", "demo-cu128"]) == 0
    out, err = capsys.readouterr()
    assert (
        "demo-cu128               locked: 3 distributions, 3 files checked -> envs/demo-cu128/requirements.lock" in out
    )
    assert f"checking 1/3 demo-torch==2.9.1+cu128: {cu_wheel.name}" in err  # progress: stderr
    lock = (matrix.parent / "envs" / "demo-cu128" / "requirements.lock").read_text()
    assert "demo-torch==2.9.1+cu128 \\" in lock
    assert "+cpu" not in lock
    assert f"--hash=sha256:{sha256(cu_wheel)}\n" in lock
    assert sha256(windows) not in lock
    assert f"--extra-index-url {server.url}/cu128" in lock
    assert lock.startswith("# Generated by `accelenv lock` from matrix.toml")
    assert "\n# hashes: verified: accelenv lock downloaded every file named here and checked its sha256\n" in lock
    assert f"    # from {server.url}/cu128\ndemo-vision==0.1" in lock
    assert main(["--matrix", str(matrix), "lock", "--check", "demo-cu128", "--verbose", "--strict"]) == 0
    out = capsys.readouterr().out
    assert "demo-cu128               current\n" in out
    assert f"  demo-torch==2.9.1+cu128  from {server.url}/cu128\n" in out
    assert f"  pytest==9.2.0  from {server.url}/main\n" in out
    assert "provenance not recorded" not in out
    assert "hashes not checked" not in out
    assert main(["--matrix", str(matrix), "lock", "--check", "demo-cu128", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["provenance"], row["hashes"], row["errors"], row["warning"]) == ("declared", "verified", [], None)
    assert {(p["name"], p["index"]) for p in row["packages"]} == {
        ("demo-torch", f"{server.url}/cu128"),
        ("demo-vision", f"{server.url}/main"),
        ("pytest", f"{server.url}/main"),
    }


def test_a_file_unlike_its_advertised_sha256_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """uv pins the sha256 the index advertises; lock downloads the file, and refuses the lock when they differ,
    naming the package, the file, both digests. With --no-verify the lock is written and says so everywhere."""
    _, _, cu_wheel = indexes(tmp_path)
    page(cu_wheel.parent, {cu_wheel.name: WRONG})
    lock = tmp_path / "repo" / "envs" / "demo-cu128" / "requirements.lock"
    with LoopbackServer(tmp_path / "index") as server:
        matrix = matrix_with_env(
            tmp_path, f"{server.url}/main", f"{server.url}/cu128", ["demo-torch==2.9.1+cu128", "pytest==9.2.0"]
        )
        assert main(["--matrix", str(matrix), "lock", "demo-cu128"]) == 1
        out = capsys.readouterr().out
        assert not lock.exists()
        assert (
            f"demo-cu128               not locked: demo-torch==2.9.1+cu128: {cu_wheel.name}: the index advertises "
            f"sha256 {WRONG}, but the file it serves ({cu_wheel.stat().st_size} bytes from {server.url}/cu128/"
            f"demo-torch/{cu_wheel.name}) has sha256 {sha256(cu_wheel)}; the index describes another file than it "
            "serves (a broken mirror, or tampering): nothing was written;"
        ) in out
        assert main(["--matrix", str(matrix), "lock", "demo-cu128", "--no-verify"]) == 0
    assert "locked: 2 distributions, hashes UNVERIFIED (--no-verify)" in capsys.readouterr().out
    text = lock.read_text()
    assert f"--hash=sha256:{WRONG}" in text  # what the index said, and the header says it was not checked:
    assert "\n# hashes: UNVERIFIED: taken from the indexes' answers, the files not downloaded" in text
    assert main(["--matrix", str(matrix), "lock", "--check", "demo-cu128"]) == 0
    assert (
        "warning: hashes not checked: its hashes were taken from the indexes' answers without downloading the "
        "files, as it was locked with --no-verify; check them: accelenv lock demo-cu128 --force"
    ) in capsys.readouterr().out
    assert main(["--matrix", str(matrix), "lock", "--check", "demo-cu128", "--strict"]) == 1


def test_a_package_from_an_undeclared_index_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock whose pytest came from an index the environment does not declare (as one made while the machine's
    UV_EXTRA_INDEX_URL reached uv would be): lock --check and validate refuse it, naming package and index, and
    lock (without --force) makes it again from the declared indexes."""
    from accelenv.matrix.resolve import index_options

    indexes(tmp_path)
    build_wheel(tmp_path / "index" / "rogue" / "pytest", "pytest", "9.2.0", ["demo-vision==0.1"])
    write_simple_index(tmp_path / "index" / "rogue")
    with LoopbackServer(tmp_path / "index") as server:
        rogue = f"{server.url}/rogue"
        matrix = matrix_with_env(
            tmp_path, f"{server.url}/main", f"{server.url}/cu128", ["demo-torch==2.9.1+cu128", "pytest==9.2.0"]
        )
        with monkeypatch.context() as leak:
            leak.setattr(
                "accelenv.plan.resolver.index_options",
                lambda env: [*index_options(env), "--extra-index-url", rogue],
            )
            assert main(["--matrix", str(matrix), "lock", "demo-cu128"]) == 0
        capsys.readouterr()
        assert main(["--matrix", str(matrix), "lock", "--check", "demo-cu128", "--verbose"]) == 1
        out = capsys.readouterr().out
        lock = matrix.parent / "envs" / "demo-cu128" / "requirements.lock"
        line = lock.read_text().splitlines().index("pytest==9.2.0 \\") + 1
        refusal = (
            f"envs/demo-cu128/requirements.lock:{line}: pytest==9.2.0 came from {rogue}, an index demo-cu128 does not "
            f"declare (it declares {server.url}/cu128, {server.url}/main); declare that index in matrix.toml if it "
            "is meant, or make the lock again from the declared ones: accelenv lock demo-cu128 --force"
        )
        assert f"\n                         error: {refusal}\n" in out
        assert f"  pytest==9.2.0  from {rogue}\n" in out
        assert "demo-vision==0.1  from" in out  # pulled in by the rogue pytest
        assert "1 refused (a pin from an undeclared index, or provenance unclear)" in out
        assert main(["--matrix", str(matrix), "validate"]) == 1
        assert f"error (registry): envs.demo-cu128: {refusal}" in capsys.readouterr().out
        assert main(["--matrix", str(matrix), "lock", "demo-cu128"]) == 0  # no --force needed
        assert "its lock names an index the matrix does not declare" in capsys.readouterr().out
    assert rogue not in lock.read_text()
    assert main(["--matrix", str(matrix), "lock", "--check", "demo-cu128"]) == 0


def test_a_changed_pin_makes_the_lock_stale(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    indexes(tmp_path)
    with LoopbackServer(tmp_path / "index") as server:
        matrix = matrix_with_env(
            tmp_path, f"{server.url}/main", f"{server.url}/cu128", ["demo-torch==2.9.1+cu128", "pytest==9.2.0"]
        )
        assert main(["--matrix", str(matrix), "lock", "demo-cu128"]) == 0
    matrix.write_text(matrix.read_text().replace('"pytest==9.2.0"]', '"pytest==9.2.0", "demo-vision==0.1"]'))
    capsys.readouterr()
    assert main(["--matrix", str(matrix), "lock", "--check", "demo-cu128"]) == 1
    assert "stale" in capsys.readouterr().out


def test_an_unreachable_index_leaves_the_env_unlocked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    matrix = matrix_with_env(
        tmp_path, f"http://127.0.0.1:{port}/main", f"http://127.0.0.1:{port}/cu128", ["demo-torch==2.9.1+cu128"]
    )
    assert main(["--matrix", str(matrix), "lock", "demo-cu128", "--timeout", "120"]) == 1
    out = capsys.readouterr().out
    assert "demo-cu128               not locked: an index could not be reached" in out
    assert not (matrix.parent / "envs" / "demo-cu128").exists()
