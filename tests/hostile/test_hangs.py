"""Hangs and unbounded use: FIFOs and devices where files are expected, tools that print without end or leave
children behind, a pattern that backtracks, a registry that answers without end, a Ray address that never
answers. Each must end in bounded time and memory, with a clean answer."""

from __future__ import annotations

import contextlib
import http.server
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import pytest
from hostilekit import REPO, accelenv, assert_clean_error, char_device, tool
from hostkit import make_root
from netkit import serving

from accelenv.host.run import MAX_OUTPUT, ToolRunner
from accelenv.matrix.regexes import backtracking_risk

if TYPE_CHECKING:
    from collections.abc import Iterator


# ---------------------------------------------------------------------------------------------------- files


def test_check_snapshot_from_a_fifo(matrix: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "snapshot.json"
    os.mkfifo(fifo)
    result = accelenv("--matrix", str(matrix), "check", "cpu-py311", "--snapshot", str(fifo), timeout=30)
    assert_clean_error(result, code=2, says="the snapshot is a FIFO (named pipe), not a regular file")


def test_check_snapshot_from_an_endless_device(matrix: Path, tmp_path: Path) -> None:
    zero = char_device(tmp_path / "zero", 1, 5)
    result = accelenv("--matrix", str(matrix), "check", "cpu-py311", "--snapshot", str(zero), timeout=30)
    assert_clean_error(result, code=2, says="the snapshot is a character device, not a regular file")


def test_a_lock_file_that_is_a_fifo(matrix: Path) -> None:
    lock = matrix.parent / "envs" / "cpu-py311" / "requirements.lock"
    lock.parent.mkdir(parents=True)
    os.mkfifo(lock)
    result = accelenv("--matrix", str(matrix), "lock", "--check", timeout=30)
    assert_clean_error(result, code=2, says="the lock file is a FIFO (named pipe), not a regular file")


@pytest.mark.parametrize("how", ["--matrix", "ACCELENV_MATRIX"])
def test_a_matrix_that_is_a_fifo(tmp_path: Path, how: str) -> None:
    fifo = tmp_path / "matrix.toml"
    os.mkfifo(fifo)
    given = ["--matrix", str(fifo)] if how == "--matrix" else []
    result = accelenv(*given, "validate", env={"ACCELENV_MATRIX": str(fifo)}, timeout=30)
    assert_clean_error(result, code=2, says=": a FIFO (named pipe), not a file; pass the path of a matrix.toml")


@pytest.mark.parametrize("cache", ["1", ""])
def test_a_matrix_too_large_to_read_whole(tmp_path: Path, cache: str) -> None:
    """Read through the same bounded reader with the parsed-matrix cache on (check) or off (validate)."""
    from accelenv.fileio import MAX_TEXT

    huge = tmp_path / "matrix.toml"
    with huge.open("wb") as handle:
        handle.truncate(MAX_TEXT + 1)  # sparse: no disk used
    for command in (["validate"], ["check", "cpu-py311"]):
        result = accelenv("--matrix", str(huge), *command, env={"ACCELENV_NO_CACHE": cache}, timeout=60)
        assert_clean_error(result, code=2, says="the matrix is larger than")


def test_a_snapshot_nested_past_the_parser(matrix: Path, tmp_path: Path) -> None:
    deep = tmp_path / "snapshot.json"
    deep.write_text("[" * 100_000, encoding="utf-8")
    result = accelenv("--matrix", str(matrix), "check", "cpu-py311", "--snapshot", str(deep), timeout=30)
    assert_clean_error(result, code=2, says="not a snapshot (not JSON: maximum recursion depth")


# ---------------------------------------------------------------------------------------------------- tools


def _state(pid: int) -> str | None:
    """The process state letter from /proc (Z: a zombie, already dead), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def test_a_tool_that_prints_without_end_is_stopped(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    tool(bin_dir, "nvidia-smi", "exec yes 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'")
    tracemalloc.start()
    start = time.monotonic()
    result = ToolRunner(timeout=30, path=f"{bin_dir}:/usr/bin:/bin").run(["nvidia-smi", "-L"])
    seconds = time.monotonic() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result.fault == f"nvidia-smi printed more than {MAX_OUTPUT // 2**20} MiB; stopped it"
    assert len(result.stdout) <= MAX_OUTPUT + 65536
    assert seconds < 10
    assert peak < 8 * MAX_OUTPUT


def test_inspect_with_an_endless_tool_stays_small(tmp_path: Path, matrix: Path) -> None:
    """The whole command under a 1.5 GiB address-space limit (it once took 5.4 GB), finishing well inside its
    timeout."""
    bin_dir = tmp_path / "bin"
    for name in ("nvidia-smi", "amd-smi", "rocm-smi", "neuron-ls", "hl-smi", "tpu-info"):
        tool(bin_dir, name, "exec yes 'endless output'")
    root = make_root(tmp_path / "root")
    limit = 1536 * 2**20
    result = accelenv(
        "--matrix", str(matrix), "inspect", "--json", "--root", str(root), "--timeout", "60",
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
        timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "printed more than 8 MiB; stopped it" in result.stdout


def test_a_timeout_ends_the_tool_and_its_children(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    marker = tmp_path / "child.pid"
    tool(bin_dir, "hl-smi", f"sleep 300 & echo $! > {marker}; sleep 300")
    result = ToolRunner(timeout=1, path=f"{bin_dir}:/usr/bin:/bin").run(["hl-smi"])
    assert result.fault == "hl-smi did not finish within 1 s"
    child = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _state(child) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state(child) in (None, "Z")


def test_a_child_holding_the_pipes_does_not_hold_accelenv(tmp_path: Path) -> None:
    """The tool exits at once, but a background child keeps its stdout open: the answer comes in about a second,
    and the child is ended."""
    bin_dir = tmp_path / "bin"
    marker = tmp_path / "child.pid"
    tool(bin_dir, "neuron-ls", f"sleep 300 & echo $! > {marker}; echo '[]'")
    start = time.monotonic()
    result = ToolRunner(timeout=30, path=f"{bin_dir}:/usr/bin:/bin").run(["neuron-ls"])
    assert time.monotonic() - start < 5
    assert result.ok, result.fault
    assert result.stdout == "[]\n"
    child = int(marker.read_text())
    deadline = time.monotonic() + 5
    while _state(child) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state(child) in (None, "Z")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e400", "ten"])
def test_timeouts_must_be_real_numbers_of_seconds(matrix: Path, value: str) -> None:
    result = accelenv("--matrix", str(matrix), "inspect", "--timeout", value)
    assert_clean_error(result, code=2, says="--timeout")


# ---------------------------------------------------------------------------------------------------- patterns


@pytest.mark.parametrize(
    ("pattern", "risky"),
    [
        ("x86_64|aarch64|(a+)+", True),
        ("(a|aa)*", True),
        ("(\\w+\\s?)*x", True),
        ("(?:[a-z]+)*", True),
        ("(a)\\1", True),
        ("a*" * 5 + "b", True),
        ("sm_[0-9]{2,3}", False),
        ("gfx[0-9a-f]{3,4}", False),
        ("v[0-9]+[a-z]*|tpu[0-9]+x", False),
        ("neuroncore-v[0-9]+", False),
        ("x86_64|aarch64", False),
        ("(ab)+", False),
        ("a{" + "9" * 5000 + "}", False),  # a 5000-digit count is text to re, and no int() to choke on
    ],
)
def test_backtracking_patterns_are_recognised(pattern: str, risky: bool) -> None:
    assert bool(backtracking_risk(pattern)) is risky


def test_a_backtracking_arch_pattern_does_not_hang_validation(matrix: Path) -> None:
    text = matrix.read_text()
    text = text.replace('arch_pattern = "x86_64|aarch64"', 'arch_pattern = "x86_64|aarch64|(a+)+"', 1)
    assert "(a+)+" in text
    text = text.replace('arch = "x86_64"', 'arch = "' + "a" * 60 + '"', 1)
    matrix.write_text(text)
    start = time.monotonic()
    result = accelenv("--matrix", str(matrix), "validate", timeout=60)
    assert time.monotonic() - start < 30
    assert_clean_error(result, code=1, says="")
    assert "families.cpu.arch_pattern: 'x86_64|aarch64|(a+)+' could take exponential time" in result.stdout


# ---------------------------------------------------------------------------------------------------- registry


class _EndlessRegistry:
    """A registry whose manifest GET never ends (no digest header), and whose token service answers `token`."""

    def __init__(self, token_answer: bytes = b'{"token": "t"}') -> None:
        registry = self
        self.token_answer = token_answer

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)  # no Docker-Content-Digest: the client must GET and hash
                self.end_headers()

            def do_GET(self) -> None:
                if self.path.startswith("/token"):
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(registry.token_answer)))
                    self.end_headers()
                    self.wfile.write(registry.token_answer)
                    return
                self.send_response(200)
                self.end_headers()
                chunk = b"x" * 65536
                try:
                    for _ in range(200 * 16):  # 200 MiB
                        self.wfile.write(chunk)
                except OSError:
                    pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def endless() -> Iterator[_EndlessRegistry]:
    server = _EndlessRegistry()
    thread = serving(server.httpd)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def test_a_200_mb_registry_answer_is_not_read_whole(endless: _EndlessRegistry) -> None:
    import requests

    from accelenv.upstream.pin import ImageName, resolve_digest

    tracemalloc.start()
    with requests.Session() as session:
        digest, problem = resolve_digest(session, ImageName(registry=endless.host, repository="a/b", tag="1"))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert digest is None
    assert problem == (
        f"GET http://{endless.host}/v2/a/b/manifests/1 answered more than 4 MiB, the most accelenv reads for a "
        "manifest; it stopped reading there: check that the address serves what it should"
    )
    assert peak < 32 * 2**20


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (b"[1,2,3]", "returned no token (expected a JSON object with a 'token' string)"),
        (b'{"token": 5}', "returned no token (expected a JSON object with a 'token' string)"),
        (b"<html>", "answered something that is not JSON"),
    ],
)
def test_a_token_service_that_answers_nonsense(answer: bytes, says: str) -> None:
    from accelenv import netio
    from accelenv.upstream.pin import MAX_TOKEN_ANSWER, ImageName, _token

    class Session:
        def request(self, method: str, url: str, **kwargs: object) -> _Answer:
            return _Answer(answer)

    image = ImageName(registry="r.example", repository="a/b", tag="1")
    bounds = netio.limits("a token answer", max_bytes=MAX_TOKEN_ANSWER, timeout=5.0)
    token, problem = _token(Session(), 'Bearer realm="http://127.0.0.1:1/token"', image, bounds)
    assert token is None
    assert problem == f"the token service of r.example {says}"


class _Answer:
    status_code = 200
    headers: ClassVar[dict[str, str]] = {}

    def __init__(self, body: bytes) -> None:
        self.body = body

    def iter_content(self, chunk_size: int) -> Iterator[bytes]:
        yield self.body

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------------- ray


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """A TCP port on loopback that accepts connections and never says a word (a Ray address that hangs)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    yield listener
    listener.close()


@pytest.fixture
def silent_port(silent: socket.socket) -> int:
    port: int = silent.getsockname()[1]
    return port


def _ray_installed() -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed (accelenv[ray])")


def test_ray_connect_is_bounded_by_the_timeout(matrix: Path, silent_port: int) -> None:
    _ray_installed()
    start = time.monotonic()
    result = accelenv("--matrix", str(matrix), "check", "cpu-py311", "--ray", f"127.0.0.1:{silent_port}",
                      "--ray-timeout", "2", timeout=60)  # fmt: skip
    assert time.monotonic() - start < 30
    assert_clean_error(result, code=2, says=f"cannot connect to the Ray cluster at 127.0.0.1:{silent_port} within 2 s")


def test_ray_address_nobody_listens_on(matrix: Path) -> None:
    _ray_installed()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = accelenv("--matrix", str(matrix), "check", "cpu-py311", "--ray", f"127.0.0.1:{port}", timeout=60)
    assert_clean_error(result, code=2, says=f"cannot reach the Ray cluster at 127.0.0.1:{port}")


@contextlib.contextmanager
def _ctrl_c_as_at_a_terminal() -> Iterator[None]:
    """Python's own Ctrl-C handler for the duration, whatever this test process inherited. A job started in the
    background by a non-interactive shell (a CI runner's, nohup) has SIGINT ignored, and Python keeps it ignored,
    in itself and in the children it starts (an ignored signal stays ignored across exec; a handled one is reset to
    its default); the user at a terminal, whom these tests stand for, has it handled."""
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, inherited)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, -signal.SIGTERM)])
def test_ray_connect_gives_way_to_signals(matrix: Path, silent: socket.socket, sig: int, code: int) -> None:
    _ray_installed()
    with _ctrl_c_as_at_a_terminal():
        process = subprocess.Popen(
            [sys.executable, "-m", "accelenv", "--matrix", str(matrix), "check", "cpu-py311", "--ray",
             f"127.0.0.1:{silent.getsockname()[1]}", "--ray-timeout", "300"],
            env={**os.environ, "PYTHONPATH": str(REPO / "tools")},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
    silent.settimeout(60)
    try:  # Ray imported, accelenv's reachability probe: ray.init starts in its thread as the probe ends
        connection, _ = silent.accept()
    except TimeoutError:  # pragma: no cover - a failure of the test's own set-up
        process.kill()
        _, err = process.communicate()
        pytest.fail(f"accelenv never reached the silent port: {err}")
    time.sleep(0.5)  # ray.init under way, the main thread in the wait the signal must end
    process.send_signal(sig)
    try:
        _, err = process.communicate(timeout=15)
    except subprocess.TimeoutExpired:  # pragma: no cover - the failure this test looks for
        process.kill()
        process.communicate()  # reaped here, so a failure here is reported here alone
        pytest.fail(f"accelenv ignored signal {sig} while connecting to Ray")
    finally:
        connection.close()
    assert process.returncode == code, err


def test_the_ray_connect_wait_gives_way_to_a_signal_another_thread_took() -> None:
    """A process signal goes to any thread that does not block it, Ray's own threads among them; the handler then
    runs only when the main thread is back in the interpreter. The wait for Ray's connect must come back to it
    (short waits), or Ctrl-C waits for the whole --ray-timeout. Delivered here to a bystander thread on purpose."""

    from accelenv.cluster.ray import _wait

    never = threading.Event()
    ready, release = threading.Event(), threading.Event()

    def bystander() -> None:
        ready.set()
        release.wait(30)

    thread = threading.Thread(target=bystander, daemon=True)
    thread.start()
    ready.wait(5)
    assert thread.ident is not None
    timer = threading.Timer(0.3, signal.pthread_kill, args=(thread.ident, signal.SIGINT))
    start = time.monotonic()
    try:
        with _ctrl_c_as_at_a_terminal():
            timer.start()
            with pytest.raises(KeyboardInterrupt):
                _wait(never, 60.0)
    finally:
        release.set()
        timer.join()
        thread.join(5)
    assert time.monotonic() - start < 5
    assert _wait(never, 0.3) is False
    done = threading.Event()
    threading.Timer(0.2, done.set).start()
    assert _wait(done, 30.0) is True
