"""How long a tap's own event loop was held up while a response arrived.

A response's pieces are stamped when the loop reads them. A loop held up (a long callback, the
process descheduled on a loaded host, a thread holding the GIL) reads what arrived meanwhile in one
go, all with one stamp: a stream the gateway paced then reads as one the gateway buffered
(``gateway-stream-buffered``). A timer every ``TICK_S`` notes how late it ran; each exchange
records the longest hold-up that ended while it was under way (``stall_ms``, docs/exchange-format.md)
when it is ``NOTE_S`` or more, and the rules do not read such a compression as the gateway's.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

__all__ = ["NOTE_S", "TICK_S", "LoopStalls"]

#: how often the timer runs: a hold-up reads at most this much shorter than it was
TICK_S = 0.005
#: hold-ups shorter than this are not kept (nor written on an exchange)
NOTE_S = 0.02
#: hold-ups kept at the most (the oldest go first)
KEEP = 1024


class LoopStalls:
    """The hold-ups of the running loop, watched from a :meth:`watch` until ``idle()`` says nothing
    is under way (an idle proxy is not woken 200 times a second)."""

    def __init__(self, idle: Callable[[], bool] = lambda: False) -> None:
        self._idle = idle
        self._held: deque[tuple[float, float]] = deque(maxlen=KEEP)  # (when it ended, how long)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def watch(self) -> None:
        """Keep watching the running loop (once per loop; cheap to call on every request)."""
        loop = asyncio.get_running_loop()
        if loop is self._loop and self._handle is not None:
            return
        self.close()
        self._loop = loop
        self._due = time.monotonic() + TICK_S
        self._handle = loop.call_later(TICK_S, self._tick)

    def _tick(self) -> None:
        now = time.monotonic()
        late = now - self._due
        if late >= NOTE_S:
            self._held.append((now, late))
        if self._idle():
            self._handle = None  # the next watch() starts again
            return
        self._due = now + TICK_S
        assert self._loop is not None
        self._handle = self._loop.call_later(TICK_S, self._tick)

    def longest(self, since: float) -> float:
        """The longest hold-up (seconds) that ended at or after ``since`` (monotonic), 0 if none."""
        best = 0.0
        for ended, late in reversed(self._held):
            if ended < since:
                break
            best = max(best, late)
        return best

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = self._loop = None
