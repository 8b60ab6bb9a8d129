"""The proxy's helper processes run behind forwarding for the CPU: by default on idle time
(``SCHED_IDLE``), and they still check and serve everything when the machine has time to spare.
(The rest of the suite runs them at ``normal``: see tests/conftest.py.)"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.support.proctree import chat, spawned, upstream
from tests.support.servers import port_open, running, stop
from wirecheck.proxy import HELPER_PRIORITY_ENV, helper_priority
from wirecheck.record import Store, free_port, serve

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling classes")


def _policies(pid: int) -> dict[int, int]:
    """Each thread of ``pid``: its scheduling policy."""
    out: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            out[int(task.name)] = os.sched_getscheduler(int(task.name))
    return out


#: a bound to fail by: the helpers start and demote themselves at the normal priority, so they get
#: there whatever the load
WITHIN_S = 60


def _helpers_at(pid: int, policy: int) -> list[int]:
    """Both helpers below the proxy ``pid`` (the live checker, the live view's process), once each
    runs at ``policy``; waits for them to start and to ask for it."""
    deadline = time.monotonic() + WITHIN_S
    while True:
        helpers = spawned(pid)
        if len(helpers) == 2 and all(_policies(p).get(p) == policy for p in helpers):
            return helpers
        assert time.monotonic() < deadline, f"helpers {helpers}: {[_policies(p) for p in helpers]}"
        time.sleep(0.05)


@pytest.mark.parametrize(("value", "policy"), [("idle", "SCHED_IDLE"), ("normal", "SCHED_OTHER")])
def test_the_helpers_run_at_the_priority_asked(tmp_path: Path, value: str, policy: str) -> None:
    """What the proxy decides is each thread's policy; that an idle helper then runs on spare CPU
    time is the kernel's part (a busy test machine has none to spare: see the next test for the work)."""
    db = tmp_path / "wc.db"
    with serve(upstream) as up:
        port, admin_port = free_port(), free_port()
        with running(
            *("proxy", "--upstream", up, "--listen", f"127.0.0.1:{port}", "--store", str(db)),
            *("--settle", "0.1", "--admin", f"127.0.0.1:{admin_port}"),
            ready=port_open(port, admin_port),
            env={HELPER_PRIORITY_ENV: value},
        ) as proc:
            assert chat(f"http://127.0.0.1:{port}", "hello").status_code == 200
            # a view request starts the live view's process; at idle its answer waits for spare CPU,
            # so it is not waited for here
            with ThreadPoolExecutor(1) as pool:
                pool.submit(httpx.get, f"http://127.0.0.1:{admin_port}/wirecheck/state", timeout=WITHIN_S)
                for pid in _helpers_at(proc.pid, getattr(os, policy)):
                    threads = _policies(pid)
                    if value == "idle":
                        # the lifeline (started first) keeps the normal policy: the helper still sees
                        # its parent go at once (tests/hostile/test_orphans.py)
                        assert os.SCHED_OTHER in threads.values(), threads
                assert _policies(proc.pid)[proc.pid] == os.SCHED_OTHER  # forwarding is never demoted
                stop(proc)  # the view request ends with the proxy, answered or not


def test_helpers_at_normal_priority_check_and_serve(tmp_path: Path) -> None:
    db = tmp_path / "wc.db"
    with serve(upstream) as up:
        port, admin_port = free_port(), free_port()
        with running(
            *("proxy", "--upstream", up, "--listen", f"127.0.0.1:{port}", "--store", str(db)),
            *("--settle", "0.1", "--admin", f"127.0.0.1:{admin_port}"),
            ready=port_open(port, admin_port),
            env={HELPER_PRIORITY_ENV: "normal"},
        ) as proc:
            assert chat(f"http://127.0.0.1:{port}", "hello").status_code == 200
            state = httpx.get(f"http://127.0.0.1:{admin_port}/wirecheck/state", timeout=WITHIN_S)
            assert state.status_code == 200 and state.json()["viewers"]["pid"] != proc.pid
            # the exchange is checked: the checker ran
            reader = Store(str(db))
            try:
                deadline = time.monotonic() + WITHIN_S
                while reader.unchecked(settle_s=0.0):
                    assert time.monotonic() < deadline, "the live checker never checked the exchange"
                    time.sleep(0.1)
            finally:
                reader.close()


def test_the_priority_is_idle_unless_asked_and_a_bad_value_stops_the_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(HELPER_PRIORITY_ENV, raising=False)
    assert helper_priority() == "idle"
    monkeypatch.setenv(HELPER_PRIORITY_ENV, " Normal ")
    assert helper_priority() == "normal"
    env = {**os.environ, HELPER_PRIORITY_ENV: "realtime"}
    r = subprocess.run(
        [sys.executable, "-m", "wirecheck", "proxy", "--upstream", "http://127.0.0.1:9", "--no-store"],
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0
    assert "WIRECHECK_HELPER_PRIORITY must be one of idle, normal, not 'realtime'" in r.stderr
