"""After SIGKILL of the proxy its helper processes exit too (issue 11, point 10)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.hostile._proxyproc import alive, chat, descendants, proxy_process


def test_helpers_exit_when_the_proxy_is_killed(tmp_path: Path) -> None:
    with proxy_process(tmp_path / "wc.db") as (proc, base, _admin):
        assert chat(base, "hello").status_code == 200
        helpers = descendants(proc.pid)
        assert helpers, "the proxy runs its live-check worker (and multiprocessing's helper) below it"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while any(alive(p) for p in helpers) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in helpers if alive(p)]
        for p in left:  # do not leave them behind for the next test either
            os.kill(p, signal.SIGKILL)
        assert not left, f"{len(left)} of {len(helpers)} helper process(es) outlived the proxy"
