"""Helper processes die with the proxy (issue 11, point 10).

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

__all__ = ["guard"]

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
