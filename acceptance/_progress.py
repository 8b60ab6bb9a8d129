"""Progress lines on stderr: phase lines always; on a terminal, the running count on one rewritten
line; in a CI log, a running count at most every few seconds."""

from __future__ import annotations

import re
import sys
from typing import TextIO

from ._clock import SYSTEM_CLOCK, Clock

__all__ = ["Progress"]


class Progress:
    """Phase lines always; on a terminal, the running count on one rewritten line.

    ``every_s``: long runs (``scenarios``, ``replay``) also show their running count in a
    CI log with no terminal, as one plain line at most every ``every_s`` seconds (:meth:`tick`)."""

    def __init__(
        self,
        stream: TextIO | None = None,
        quiet: bool = False,
        every_s: float | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._dirty = False
        self.every_s = every_s
        self._last_tick: float | None = None
        self.clock = clock

    @staticmethod
    def eta(elapsed_s: float, done: int, total: int) -> str:
        """Time left at the pace so far: ``ETA 1m05s`` (``ETA ?`` before the first is done)."""
        if done <= 0:
            return "ETA ?"
        left = max(0.0, elapsed_s / done * max(0, total - done))
        return f"ETA {int(left // 60)}m{int(left % 60):02d}s" if left >= 60 else f"ETA {left:.0f}s"

    def tick(self, msg: str) -> None:
        """A running count: rewritten in place on a terminal; without one, printed when ``every_s``
        has passed since the previous line (the run's own summary line ends it)."""
        if self.quiet:
            return
        if self.tty:
            self.stream.write("\r\x1b[K" + msg)
            self._dirty = True
            self.stream.flush()
            return
        now = self.clock.monotonic()
        if self._last_tick is None:
            self._last_tick = now  # the first line waits one period: a short run stays silent
        if self.every_s is None or now - self._last_tick < self.every_s:
            return
        self._last_tick = now
        self.stream.write(msg + "\n")
        self.stream.flush()

    def __call__(self, msg: str) -> None:
        if self.quiet:
            return
        tick = bool(re.search(r"\d+/\d+$|: \w+$", msg)) and "TTFT" not in msg
        if tick and not self.tty:
            return
        if self.tty:
            self.stream.write("\r\x1b[K" + msg + ("" if tick else "\n"))
            self._dirty = tick
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self._dirty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
