"""The forwarding processes' event loop: uvloop's where it is installed, asyncio's own otherwise.

Forwarding is mostly event-loop work: for each upstream read a readiness callback, a transport read
and a transport write. uvloop (libuv, in C) does that part in a quarter of the instructions of
asyncio's loop (a bare relay of the benchmark's streams: 8 800 against 38 900 per event, callgrind),
and the whole forwarding process took 28 % fewer (85 000 against 115 000 per event). It is a
dependency of wirecheck where it builds (CPython on Linux and macOS); anywhere else, or with
``WIRECHECK_EVENT_LOOP=asyncio`` (an A/B, or a platform where uvloop misbehaves), asyncio's loop
runs the same code.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["EVENT_LOOP_ENV", "event_loop_name", "run_loop"]

#: ``asyncio``: asyncio's own event loop even where uvloop is installed; ``uvloop``: uvloop or an error
EVENT_LOOP_ENV = "WIRECHECK_EVENT_LOOP"


def _factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    choice = os.environ.get(EVENT_LOOP_ENV, "").strip().lower() or "auto"
    if choice not in ("auto", "uvloop", "asyncio"):
        raise ValueError(f"{EVENT_LOOP_ENV}={choice!r}: use uvloop, asyncio or leave it unset")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ValueError(f"{EVENT_LOOP_ENV}=uvloop, but uvloop is not installed") from None
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def event_loop_name() -> str:
    """The event loop ``run_loop`` runs here: ``uvloop`` or ``asyncio``."""
    return "asyncio" if _factory() is None else "uvloop"


def run_loop[T](main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the forwarding processes' event loop (see the module docstring)."""
    return asyncio.run(main, loop_factory=_factory())
