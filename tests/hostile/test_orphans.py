"""After SIGKILL of the proxy its helper processes exit too."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx

from tests.support.proctree import alive, chat, descendants, proxy_process, spawned, wait_guarded

#: a bound to fail by, not a speed under test: a helper leaves on SIGTERM from the kernel or at its
#: lifeline's end-of-file, both at once, but a loaded machine may take seconds to schedule it
GONE_WITHIN_S = 60


def test_helpers_exit_when_the_proxy_is_killed(tmp_path: Path) -> None:
    with proxy_process(tmp_path / "wc.db") as (proc, base, admin):
        assert chat(base, "hello").status_code == 200
        # a view request starts the live view's process (proxy/_viewproc.py): it must die with the proxy too
        assert httpx.get(f"{admin}/wirecheck/state", timeout=30).status_code == 200
        helpers = descendants(proc.pid)
        assert helpers, "the proxy runs its live-check worker (and multiprocessing's helper) below it"
        # the worker guards itself once its imports are done (proxy/_lifeline.py): killed before that, it
        # exits when they end, which on a loaded CI machine took over 5 s. The guarantee under test is
        # the running worker's, so wait for its lifeline thread (a second thread) first.
        workers = spawned(proc.pid)
        assert len(workers) == 2, "not both the live-check worker and the view process among the helpers"
        wait_guarded(workers)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + GONE_WITHIN_S
        while any(alive(p) for p in helpers) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in helpers if alive(p)]
        for p in left:  # do not leave them behind for the next test either
            os.kill(p, signal.SIGKILL)
        assert not left, f"{len(left)} of {len(helpers)} helper process(es) outlived the proxy"
