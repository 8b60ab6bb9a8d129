"""Helper processes die with the proxy, and run behind its forwarding.

After a SIGKILL of ``wirecheck proxy`` its live-check worker kept running, and with it the
multiprocessing resource tracker whose pipe the worker held open. A helper now dies with its parent
two ways: on Linux the kernel sends it SIGTERM when the parent goes (``prctl(PR_SET_PDEATHSIG)``,
set through ctypes, no dependency); everywhere, a thread blocks on a pipe whose only write end the
parent holds, and leaves when it reaches end-of-file, the one thing a dead parent still says. The
parent pid is compared too, for the race where the parent died before ``prctl`` ran.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection

__all__ = ["HELPER_PRIORITY_ENV", "become_helper", "guard", "helper_priority", "yield_cpu"]

_PR_SET_PDEATHSIG = 1


def _pdeathsig(sig: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def guard(lifeline: Connection, parent_pid: int, on_message: Callable[[object], None]) -> None:
    """Make this process exit when ``parent_pid`` dies. Messages the parent sends on ``lifeline``
    (a stop request) go to ``on_message``; end-of-file on it means the parent is gone."""
    _pdeathsig(signal.SIGTERM)
    if os.getppid() != parent_pid:
        os._exit(0)  # the parent died before prctl was set

    def watch() -> None:
        while True:
            try:
                msg = lifeline.recv()
            except (EOFError, OSError):
                os._exit(0)  # the parent is gone: nobody is left to stop us
            on_message(msg)

    threading.Thread(target=watch, name="wirecheck-lifeline", daemon=True).start()


#: how the proxy's helper processes (the live checker, the live view) share the CPU with forwarding
HELPER_PRIORITY_ENV = "WIRECHECK_HELPER_PRIORITY"
HELPER_PRIORITIES = ("idle", "normal")


def helper_priority() -> str:
    """``WIRECHECK_HELPER_PRIORITY``: ``idle`` (the default) or ``normal``; anything else is an error
    that ``wirecheck proxy`` reports when it starts."""
    value = os.environ.get(HELPER_PRIORITY_ENV, "idle").strip().lower() or "idle"
    if value not in HELPER_PRIORITIES:
        raise ValueError(
            f"{HELPER_PRIORITY_ENV} must be one of {', '.join(HELPER_PRIORITIES)}, not {value[:40]!r}"
        )
    return value


def yield_cpu(nice: int = 0) -> None:
    """Put the calling thread, and the threads it starts from now on, behind forwarding for the CPU:
    ``become_helper`` does, in each helper process.

    ``idle`` (``SCHED_IDLE``): the helper runs on the CPU time the proxy's forwarding, and everything
    else on the machine, leave. On a machine with cores to spare that is all it needs. On a saturated
    one the live checks fall behind (``/wirecheck/health`` says so past ``LAG_S``) and catch up when the
    load eases, losing nothing: everything is in the store. At 256 streams on two shared cores, in
    alternating runs, the proxy's added TTFT p99 went from a median of 22.6 ms (15.4-44.7) to 15.3 ms
    (14.6-17.8) (docs/proxy.md). ``normal``: a fair share, for a machine where prompt findings matter
    more than the tail of forwarding. ``nice`` (0 to 19) lowers
    a normal helper's share. Threads started before the call (the lifeline's) keep the normal policy.
    Where the platform lacks a setting, nothing changes."""
    try:
        priority = helper_priority()
    except ValueError:
        priority = "idle"  # wirecheck proxy refused the value at start; a helper never fails on it
    if priority == "idle":
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    with contextlib.suppress(OSError, ValueError):
        if nice > 0:
            os.nice(min(nice, 19))


def become_helper(
    lifeline: Connection, parent_pid: int, on_message: Callable[[object], None], *, nice: int = 0
) -> None:
    """What a helper process of the proxy (the live checker, the live view) does first: die with the
    proxy (``guard``), leave Ctrl-C to it (the signal reaches the whole process group; the proxy
    decides), and run behind forwarding (``yield_cpu``). In that order: the lifeline's thread is
    started before the demotion, so it keeps the normal policy and sees the proxy go at once."""
    guard(lifeline, parent_pid, on_message)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield_cpu(nice)
