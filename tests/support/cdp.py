"""Drive a real headless Chromium through the Chrome DevTools Protocol over a pipe, with no new dependency.

`chromium --remote-debugging-pipe` reads commands from its fd 3 and writes responses and events to its fd 4,
each a JSON message ended by a NUL byte. The browser is started in a process group of its own (posix_spawn with
setsid), so `close()` kills exactly the processes it started, whatever they spawned; every wait has a deadline.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",  # CI containers run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--mute-audio",
    "--remote-debugging-pipe",
]


class BrowserError(RuntimeError):
    pass


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Browser:
    """One Chromium, one page (tab), commands sent to that page's session."""

    def __init__(self, executable: str, profile: Path, *, timeout: float = 30.0) -> None:
        self.timeout = timeout
        commands_r, self._commands = os.pipe()
        self._responses, responses_w = os.pipe()
        actions = [
            (os.POSIX_SPAWN_DUP2, commands_r, 3),
            (os.POSIX_SPAWN_DUP2, responses_w, 4),
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
            (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
        ]
        argv = [executable, *FLAGS, f"--user-data-dir={profile}", "about:blank"]
        try:
            self.pid = os.posix_spawn(executable, argv, dict(os.environ), file_actions=actions, setsid=True)
        finally:
            os.close(commands_r)
            os.close(responses_w)
        self._buffer = b""
        self._next = 0
        self.session: str | None = None
        self.events: list[dict[str, Any]] = []
        try:
            targets = self.send("Target.getTargets", session=False)["targetInfos"]
            page = next(t["targetId"] for t in targets if t["type"] == "page")
            self.session = self.send("Target.attachToTarget", {"targetId": page, "flatten": True}, session=False)[
                "sessionId"
            ]
            self.send("Page.enable")
            self.send("Runtime.enable")
        except BaseException:
            self.close()
            raise

    # -------------------------------------------------------------------------------------------- protocol

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = True) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self.events.append(reply)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"no answer from Chromium within {self.timeout:g} s")
            ready, _, _ = select.select([self._responses], [], [], left)
            if ready:
                chunk = os.read(self._responses, 1 << 20)
                if not chunk:
                    raise BrowserError("Chromium closed its pipe (it exited)")
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def wait_event(self, method: str) -> dict[str, Any]:
        for i, event in enumerate(self.events):
            if event["method"] == method:
                return self.events.pop(i)
        while True:
            message = self._read()
            if message.get("method") == method:
                return message
            if "method" in message:
                self.events.append(message)

    # -------------------------------------------------------------------------------------------- page

    def open(self, url: str, *, width: int = 1280, height: int = 900) -> None:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str, *, wait: bool = False) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values only); with `wait`, the
        value a promise it returns settles to."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": wait}
        reply = self.send("Runtime.evaluate", params)
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression!r} threw: {reply['exceptionDetails'].get('exception', {})}")
        return reply["result"].get("value")

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", {"text": text})

    def press(self, key: str, code: str, keycode: int, text: str = "") -> None:
        for kind in ("keyDown", "keyUp"):
            params: dict[str, Any] = {"type": kind, "key": key, "code": code, "windowsVirtualKeyCode": keycode}
            if text and kind == "keyDown":
                params["text"] = text
            self.send("Input.dispatchKeyEvent", params)

    def click(self, x: float, y: float) -> None:
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})

    def grant(self, *permissions: str) -> None:
        """Grant the browser permissions (for every origin, file:// pages included), as a user would."""
        self.send("Browser.grantPermissions", {"permissions": list(permissions)}, session=False)

    def screenshot(self) -> bytes:
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])

    # -------------------------------------------------------------------------------------------- end

    def close(self) -> None:
        """Kill the browser's process group (only the processes this object started) and reap it."""
        for fd in (self._commands, self._responses):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return
            time.sleep(0.05)
