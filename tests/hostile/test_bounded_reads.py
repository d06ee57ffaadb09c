"""Issue 28, hangs and internal errors: every read of a host file is bounded and never blocks. A FIFO where
installed-package metadata is expected (`*.dist-info/METADATA`, `*.egg-info/PKG-INFO`, `entry_points.txt`) or
where pip's configuration is, and metadata in Latin-1 or endless, leave that file out; nothing waits or crashes.

The first test enumerates the reads: outside `fileio` and the host `Root`, no module reads a file by path."""

from __future__ import annotations

import ast
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hostilekit import accelenv

import accelenv as package
from accelenv.host.discover import plugins_installed
from accelenv.host.probes.python import installed_distributions
from accelenv.upstream.settings import read_index_settings

if TYPE_CHECKING:
    from collections.abc import Iterator

PACKAGE = Path(package.__file__).parent
# Reads that are not of a host file: accelenv's own packaged resources.
ALLOWED = {
    ("plan/page.py", "read_text"),
    ("build/context.py", "open"),  # writes a download into the build's private temporary folder
}
_RECEIVERS_THAT_BOUND = {"root", "self"}  # host.root.Root reads with O_NONBLOCK and a size limit


def _reads(tree: ast.AST) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name = node.func.attr
            receiver = node.func.value
            base = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
            if name in {"read_text", "read_bytes", "open"} and base not in _RECEIVERS_THAT_BOUND | {"os", "tarfile"}:
                found.append((name, node.lineno))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "open":
            found.append(("open", node.lineno))
    return found


def test_every_file_read_goes_through_a_bounded_reader() -> None:
    offenders = []
    for source in sorted(PACKAGE.rglob("*.py")):
        rel = source.relative_to(PACKAGE).as_posix()
        if rel in {"fileio.py", "host/root.py"}:
            continue
        offenders += [
            f"{rel}:{line}: {name}"
            for name, line in _reads(ast.parse(source.read_text(encoding="utf-8")))
            if (rel, name) not in ALLOWED
        ]
    assert offenders == [], "read through accelenv.fileio.read_bytes (or the host Root) instead:\n" + "\n".join(
        offenders
    )


def test_the_read_enumeration_sees_a_read() -> None:
    tree = ast.parse("Path('x').read_text()\nopen('y')\nroot.read_text('/proc/mounts')\n")
    assert [name for name, _ in _reads(tree)] == ["read_text", "open"]


@pytest.fixture
def alarm() -> Iterator[None]:
    """A read that blocks fails the test after 10 s instead of hanging the suite."""

    def hung(signum: int, frame: object) -> None:
        raise AssertionError("a read blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A Python path folder with a FIFO for each metadata file, one Latin-1 egg-info, one endless one."""
    folder = tmp_path / "site"
    for name, member in (("odd.dist-info", "METADATA"), ("fifo.egg-info", "PKG-INFO"), ("ep.dist-info", None)):
        (folder / name).mkdir(parents=True)
        if member:
            os.mkfifo(folder / name / member)
    os.mkfifo(folder / "ep.dist-info" / "entry_points.txt")
    (folder / "latin.egg-info").mkdir()
    (folder / "latin.egg-info" / "PKG-INFO").write_bytes(b"Name: caf\xe9-lib\nVersion: 1.0\n\nd\xe9scription\n")
    (folder / "endless.egg-info").mkdir()
    (folder / "endless.egg-info" / "PKG-INFO").write_bytes(b"Name: big\nVersion: 1\n\n" + b"x" * (3 * 1024 * 1024))
    (folder / "good-1.2.dist-info").mkdir()
    return folder


@pytest.mark.usefixtures("alarm")
def test_metadata_fifos_and_odd_encodings_are_left_out(site: Path) -> None:
    found = installed_distributions([str(site)])
    assert found == {"caf\xe9-lib": ["1.0"], "good": ["1.2"]}  # the endless one (over 1 MiB) is left out
    assert plugins_installed([str(site)]) is False


@pytest.mark.usefixtures("alarm")
def test_a_fifo_for_pip_configuration_is_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "pip.conf"
    os.mkfifo(fifo)
    settings = read_index_settings({"PIP_CONFIG_FILE": str(fifo)}, config_files=[fifo])
    assert settings.main is None


@pytest.mark.parametrize("argv", [["inspect", "--json"], ["snapshot", "-o", "-"], ["check", "gpu-nvidia-cu128"]])
def test_commands_do_not_block_on_metadata_fifos(site: Path, matrix: Path, tmp_path: Path, argv: list[str]) -> None:
    if argv[0] == "snapshot":
        argv = ["snapshot", "-o", str(tmp_path / "s.json")]
    tools = Path(package.__file__).parent.parent
    result = accelenv(
        "--matrix", str(matrix), *argv, env={"PYTHONPATH": f"{tools}:{site}", "PATH": "/usr/bin:/bin"}, timeout=60
    )
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
