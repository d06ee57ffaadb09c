"""Test support: real captures from ../shared/fixtures, fake hosts (a sysfs tree under a folder), and a fake
tool runner that answers from captured outputs. Importable from every test (pytest pythonpath)."""

from __future__ import annotations

import http.server
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from accelenv.host.facts import ParseError
from accelenv.host.run import ToolResult

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence


REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("ACCELENV_FIXTURES", REPO.parent / "shared" / "fixtures"))


def capture(name: str) -> str:
    """A real tool capture from ../shared/fixtures; skips without it, fails under CI."""
    path = FIXTURES / name
    if not path.is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared capture {path} is missing (CI needs ../shared/fixtures or ACCELENV_FIXTURES)")
        pytest.skip(f"shared capture {name} not available")
    return path.read_text(encoding="utf-8")


@dataclass
class FakeRunner:
    """Answers tools from canned outputs keyed by the tool name (or the full argv joined by spaces)."""

    outputs: Mapping[str, str | ToolResult] = field(default_factory=dict)
    timeout: float = 10.0
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def which(self, tool: str) -> str | None:
        return f"/fake/bin/{tool}" if any(k.split()[0] == tool for k in self.outputs) else None

    def run(self, argv: Sequence[str]) -> ToolResult:
        argv = tuple(argv)
        self.calls.append(argv)
        answer = self.outputs.get(" ".join(argv[:2])) or self.outputs.get(argv[0])
        if answer is None:
            return ToolResult(
                argv=argv, returncode=None, stdout="", stderr="", seconds=0.0, fault=f"{argv[0]} not found on PATH"
            )
        if isinstance(answer, ToolResult):
            return answer
        return ToolResult(argv=argv, returncode=0, stdout=answer, stderr="", seconds=0.0, fault=None)

    def run_all(self, commands: Sequence[Sequence[str]]) -> list[ToolResult]:
        return [self.run(c) for c in commands]


@dataclass(frozen=True)
class Pci:
    address: str
    vendor: str
    device: str
    klass: str = "0x030200"
    driver: str | None = None


def make_root(
    base: Path,
    *,
    pci: Sequence[Pci] = (),
    modules: Mapping[str, str | None] | None = None,
    dev: Sequence[str] = (),
    files: Mapping[str, str] | None = None,
) -> Path:
    """A host tree: /sys/bus/pci/devices/*, /sys/module/*, /dev nodes and any other files."""
    for device in pci:
        folder = base / "sys/bus/pci/devices" / device.address
        folder.mkdir(parents=True)
        (folder / "vendor").write_text(device.vendor + "\n")
        (folder / "device").write_text(device.device + "\n")
        (folder / "class").write_text(device.klass + "\n")
        if device.driver:
            (base / "sys/bus/pci/drivers" / device.driver).mkdir(parents=True, exist_ok=True)
            (folder / "driver").symlink_to(f"../../../../bus/pci/drivers/{device.driver}")
    for name, version in (modules or {}).items():
        (base / "sys/module" / name).mkdir(parents=True)
        if version:
            (base / "sys/module" / name / "version").write_text(version + "\n")
    for node in dev:
        (base / node.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (base / node.lstrip("/")).write_text("")
    for path, text in (files or {}).items():
        (base / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (base / path.lstrip("/")).write_text(text)
    base.mkdir(parents=True, exist_ok=True)
    return base


def reorder_query(capture_text: str, fields: Sequence[str]) -> str:
    """Re-emit a captured `nvidia-smi --query-gpu ... --format=csv` (with its header) in `fields` order, without
    header and units: what accelenv's own query would print on that machine. Missing fields become [N/A]."""
    lines = [line for line in capture_text.splitlines() if line.strip()]
    header = [h.strip().split(" [")[0] for h in lines[0].split(",")]
    out = []
    for line in lines[1:]:
        cells = dict(zip(header, (c.strip() for c in line.split(",")), strict=False))
        values = [cells.get(f, "[N/A]").removesuffix(" MiB") for f in fields]
        out.append(", ".join(values))
    return "\n".join(out) + "\n"


def outcome(parser: Callable[[str], object], text: str) -> str:
    """ "ok", or the ParseError's message; any other exception escapes and fails the test."""
    try:
        parser(text)
    except ParseError as error:
        return str(error)
    return "ok"


# ---- a package index on loopback, with tiny wheels built on the spot ------------------------------------------


def build_wheel(folder: Path, name: str, version: str, requires: Sequence[str] = ()) -> Path:
    """A minimal valid pure-Python wheel (METADATA, WHEEL, RECORD) for `name` `version`."""
    import base64
    import hashlib
    import zipfile

    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{dist}/__init__.py": f"__version__ = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: accelenv-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
            digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
            record.append(f"{member},sha256={digest},{len(text)}")
        record.append(f"{info}/RECORD,,")
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


def write_simple_index(root: Path) -> None:
    """PEP 503 pages for every project folder under `root` (root/<project>/*.whl)."""
    for project in sorted(p for p in root.iterdir() if p.is_dir()):
        links = "".join(f'<a href="{w.name}">{w.name}</a>' for w in sorted(project.glob("*.whl")))
        (project / "index.html").write_text(f"<!DOCTYPE html><html><body>{links}</body></html>\n")


class LoopbackServer:
    """Serves a folder over HTTP on 127.0.0.1 (a free port) from a thread; use as a context manager."""

    def __init__(self, folder: Path) -> None:
        import functools

        from netkit import serving

        handler = functools.partial(_QuietHandler, directory=str(folder))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = serving(self.httpd)

    def __enter__(self) -> LoopbackServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def gaudi2_hl_smi_csv() -> str:
    """`hl-smi -Q ... -f csv,noheader` for two of the Ray docs capture's HL-225s (driver 1.22.1-97ec1a4), in the
    field order accelenv asks for."""
    return "".join(
        f"{i}, HL-225, 0000:{bus}:00.0, 1.22.1-97ec1a4, 98304 MiB, 01P0-HL2080A0-15-TF8A81-09-07-0{i}\n"
        for i, bus in enumerate(["33", "9a"])
    )
