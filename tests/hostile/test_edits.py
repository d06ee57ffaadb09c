"""Lost updates and clean errors of `add` and `pin`: the matrix is locked for read-modify-write, never written
over a change made meanwhile, keeps its line endings and its symlink, and every broken input is a clean error."""

from __future__ import annotations

import hashlib
import http.server
import os
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest
import tomlkit
from hostilekit import REPO, accelenv_here, assert_clean_error
from netkit import serving

from accelenv.cli import main
from accelenv.errors import WriteFailedError
from accelenv.fileio import update_text

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def sku(name: str) -> list[str]:
    return ["add", "sku", name, "family=amd", f'name="AMD {name}"', "arch=gfx942", f'product_names=["*{name}*"]',
            'sources=["rocm-gpu-specs"]']  # fmt: skip


def _add(matrix: Path, name: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "accelenv", "--matrix", str(matrix), *sku(name)],
        env={**os.environ, "PYTHONPATH": str(REPO / "tools")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_adds_both_land(matrix: Path) -> None:
    names = [f"mi-race-{i}" for i in range(4)]
    processes = [_add(matrix, name) for name in names]
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    text = matrix.read_text()
    assert all(f"[skus.{name}]" in text for name in names)
    assert main(["--matrix", str(matrix), "validate"]) == 0


class _SlowRegistry:
    """Answers every manifest HEAD with a digest, after `delay` seconds (no authentication)."""

    def __init__(self, delay: float) -> None:
        self.digest = "sha256:" + hashlib.sha256(b"index").hexdigest()
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                time.sleep(delay)
                self.send_response(200)
                self.send_header("Docker-Content-Digest", registry.digest)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def slow_registry() -> Iterator[_SlowRegistry]:
    server = _SlowRegistry(delay=4.0)
    thread = serving(server.httpd)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def test_pin_on_a_slow_registry_does_not_lose_a_concurrent_add(matrix: Path, slow_registry: _SlowRegistry) -> None:
    document = tomlkit.parse(matrix.read_text())
    document["runtimes"]["cpu"]["base_images"]["debian12"]["repository"] = f"{slow_registry.host}/library/python"
    matrix.write_text(tomlkit.dumps(document))
    pin = subprocess.Popen(
        [sys.executable, "-m", "accelenv", "--matrix", str(matrix), "pin", "cpu"],
        env={**os.environ, "PYTHONPATH": str(REPO / "tools")},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(2)  # pin has read the matrix and waits for the registry
    add = _add(matrix, "mi-during-pin")
    _, add_err = add.communicate(timeout=120)
    pin_out, pin_err = pin.communicate(timeout=120)
    assert add.returncode == 0, add_err
    assert pin.returncode == 0, pin_out + pin_err
    text = matrix.read_text()
    assert "[skus.mi-during-pin]" in text
    assert f'digest = "{slow_registry.digest}"' in text


def test_a_file_changed_underneath_is_not_written_over(tmp_path: Path) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text("a = 1\n")

    def change(text: str) -> str:
        path.write_text("a = 2  # an editor saved meanwhile\n")  # a writer that takes no lock
        return text + "b = 1\n"

    with pytest.raises(WriteFailedError, match="changed while accelenv was editing it; nothing was written"):
        update_text(path, change)
    assert path.read_text() == "a = 2  # an editor saved meanwhile\n"


def test_add_keeps_crlf_line_endings(matrix: Path) -> None:
    matrix.write_bytes(matrix.read_bytes().replace(b"\n", b"\r\n"))
    assert main(["--matrix", str(matrix), *sku("mi-crlf")]) == 0
    data = matrix.read_bytes()
    assert b"[skus.mi-crlf]\r\n" in data
    assert data.count(b"\n") == data.count(b"\r\n")
    assert main(["--matrix", str(matrix), "validate"]) == 0


def test_add_writes_through_a_symlinked_matrix(matrix: Path, tmp_path: Path) -> None:
    link = tmp_path / "matrix-link.toml"
    link.symlink_to(matrix)
    assert main(["--matrix", str(link), *sku("mi-link")]) == 0
    assert link.is_symlink()
    assert "[skus.mi-link]" in matrix.read_text()


@pytest.mark.parametrize(
    ("content", "argv", "code", "says"),
    [
        (b"\xef\xbb\xbf", ["add", "sku", "x", "family=amd"], 2, "starts with a byte-order mark (BOM)"),
        (b"x = \xff\n", ["add", "sku", "x"], 2, "the matrix is not UTF-8 text (invalid start byte at byte 4)"),
        (b"x = [\n", ["add", "sku", "x"], 1, "error: not valid TOML"),
        (b"a = " + b"[" * 500 + b"]" * 500 + b"\n", ["add", "sku", "x"], 1, "not valid TOML"),
        (b"a = " + b"[" * 500 + b"]" * 500 + b"\n", ["validate"], 1, "not valid TOML: values nested too deeply"),
        (b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n", ["validate"], 1, "not valid TOML: values nested too deeply"),
        (
            b"",
            ["add", "sku", "l4x", "--from", "l4", "name=L4X", "name.x=1"],
            2,
            "name.x: name is a string, not a table",
        ),
        (b"", ["add", "sku", "evil\n[skus.x]", "family=amd"], 2, "is not a valid sku id"),
        (b"", ["add", "os", "ubuntu 24.04"], 2, "is not a valid os id: expected an OS label"),
    ],
    ids=[
        "bom",
        "not-utf8",
        "syntax",
        "deep-add",
        "deep-validate",
        "deeper-validate",
        "dotted-into-string",
        "id-with-newline",
        "os-id",
    ],
)
def test_broken_matrices_and_arguments_are_clean_errors(
    matrix: Path, content: bytes, argv: list[str], code: int, says: str
) -> None:
    if content:
        original = matrix.read_bytes()
        matrix.write_bytes(content + (original if content.startswith(b"\xef\xbb\xbf") else b""))
    before = matrix.read_bytes()
    result = accelenv_here("--matrix", str(matrix), *argv)
    if argv == ["validate"]:  # validate reports on standard output
        result.stderr, result.stdout = result.stdout, result.stderr
    assert_clean_error(result, code=code, says=says)
    assert matrix.read_bytes() == before
