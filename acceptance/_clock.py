"""The clock an acceptance run reads: wall time for the report's timestamps, a monotonic clock for
durations and schedules, and sleeping. The run takes it as a parameter, so a test that judges recorded
facts gets the same report every time, and a schedule can be driven without waiting for real time.

The request timings themselves (TTFT, ITL, e2e) are what the recording client measured on the wire
(``wirecheck.record``): they are facts, not readings of this clock.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock", "stamp"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch (the report's timestamps)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (durations, schedules, deadlines)."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


SYSTEM_CLOCK: Clock = SystemClock()


def stamp(t: float) -> str:
    """``t`` (seconds since the epoch) as the report writes a time: ISO 8601, UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
