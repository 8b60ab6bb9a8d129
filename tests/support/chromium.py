"""Headless Chromium (Debian's package) for the HTML report and live view tests: the DOM as the
browser built it, a screenshot to read pixels from, and a page kept open and read as it changes."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from PIL import Image

from tests.support.servers import process

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _flags(profile: str, size: str) -> list[str]:
    assert Path(CHROMIUM).exists(), "chromium is missing: apt-get install -y chromium (./dev test does)"
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={size}",
    ]


def render(page: Path, size: str = "1200,800") -> tuple[str, Image.Image]:
    """Open ``page`` offline; returns the DOM after parsing and a screenshot of the window."""
    with tempfile.TemporaryDirectory(prefix="wc-chromium-") as tmp:
        flags = _flags(f"{tmp}/profile", size)
        dom = subprocess.run(
            [CHROMIUM, *flags, "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        ).stdout
        shot = Path(tmp) / "shot.png"
        subprocess.run(
            [CHROMIUM, *flags, f"--screenshot={shot}", page.as_uri()],
            capture_output=True,
            timeout=120,
            check=False,
        )
        img = Image.open(shot).convert("RGB")
        img.load()
    return dom, img


def count_color(img: Image.Image, rgb: tuple[int, int, int], *, top_fraction: float = 0.5) -> int:
    """Pixels of exactly ``rgb`` in the top part of the image (every second row and column)."""
    w, h = img.size
    return sum(
        1 for x in range(0, w, 2) for y in range(0, int(h * top_fraction), 2) if img.getpixel((x, y)) == rgb
    )


class LivePage:
    """A page kept open in headless Chromium and read while it runs, over the DevTools protocol on
    a pipe (``--remote-debugging-pipe``: commands on fd 3, replies on fd 4, each message ended by a
    NUL byte), so no websocket client is needed. For pages that change as events arrive."""

    def __init__(self, url: str, size: str = "1400,1000") -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="wc-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # move Chromium's ends above 4 first, so that placing one on 3 cannot clobber the other
        for_child = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome_r, from_chrome_w)]
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        to_chrome_r, from_chrome_w = for_child
        # Chromium wants the pipe on fds 3 and 4 exactly: bash puts them there before exec (dash's
        # redirections take single-digit fds only)
        script = f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}'
        argv = ["/bin/bash", "-c", script, CHROMIUM, *_flags(f"{self._tmp.name}/profile", size)]
        self._stack = contextlib.ExitStack()
        # a group of its own: the browser's renderer and zygote processes stop with it
        self.proc = self._stack.enter_context(
            process(
                [*argv, "--remote-debugging-pipe", url],
                quiet=True,
                group=True,
                pass_fds=(to_chrome_r, from_chrome_w),
            )
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._replies: dict[int, dict[str, object]] = {}
        self._cv = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._session = self._attach()

    def _read(self) -> None:

        buf = b""
        while True:
            data = os.read(self._from_chrome, 65536)
            if not data:
                break
            buf += data
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                obj = json.loads(msg)
                if "id" in obj:
                    with self._cv:
                        self._replies[obj["id"]] = obj
                        self._cv.notify_all()

    def call(
        self, method: str, params: dict[str, object] | None = None, *, session: str | None = None
    ) -> dict[str, object]:
        self._next += 1
        mid = self._next
        msg: dict[str, object] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + 30
        with self._cv:
            while mid not in self._replies:
                left = deadline - time.monotonic()
                assert left > 0, f"no DevTools reply to {method}"
                self._cv.wait(left)
            reply = self._replies.pop(mid)
        assert "error" not in reply, f"DevTools {method}: {reply['error']}"
        result = reply.get("result")
        assert isinstance(result, dict)
        return result

    def _attach(self) -> str:

        deadline = time.monotonic() + 30
        while True:
            targets = self.call("Target.getTargets")["targetInfos"]
            pages = [t for t in targets if isinstance(t, dict) and t.get("type") == "page"]  # type: ignore[union-attr]
            if pages:
                break
            assert time.monotonic() < deadline, "Chromium opened no page"
            time.sleep(0.05)
        got = self.call("Target.attachToTarget", {"targetId": pages[0]["targetId"], "flatten": True})
        return str(got["sessionId"])

    def js(self, expression: str) -> object:
        """The value of a JavaScript expression in the page (JSON-able values only)."""
        got = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=self._session,
        )
        assert "exceptionDetails" not in got, f"page script failed: {got['exceptionDetails']}"
        res = got["result"]
        assert isinstance(res, dict)
        return res.get("value")

    def wait_for(self, expression: str, timeout: float = 30.0, interval: float = 0.02) -> float:
        """Poll until ``expression`` is truthy (``timeout``: a bound to fail by); returns the seconds it took."""

        t0 = time.monotonic()
        # false, not an error, while the page is still loading
        guarded = f"(() => {{ try {{ return !!({expression}); }} catch (e) {{ return false; }} }})()"
        while not self.js(guarded):
            assert time.monotonic() - t0 < timeout, f"not true within {timeout} s: {expression}"
            time.sleep(interval)
        return time.monotonic() - t0

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call("Browser.close")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._stack.close()  # SIGTERM to what is left, then SIGKILL
        for fd in (self._to_chrome, self._from_chrome):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._tmp.cleanup()

    def __enter__(self) -> LivePage:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
