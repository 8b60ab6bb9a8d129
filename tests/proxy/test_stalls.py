"""A tap notes how long its own loop was held up while a response arrived (proxy/_stalls.py)."""

from __future__ import annotations

import asyncio
import time

from wirecheck.proxy._stalls import NOTE_S, TICK_S, LoopStalls


def test_a_hold_up_of_the_loop_is_noted_at_least_as_long_as_it_was_less_a_tick() -> None:
    async def run() -> tuple[float, float]:
        stalls = LoopStalls()
        stalls.watch()
        await asyncio.sleep(3 * TICK_S)
        since = time.monotonic()
        time.sleep(0.08)  # the loop held up: no timer can run
        await asyncio.sleep(3 * TICK_S)
        after = time.monotonic()
        try:
            return stalls.longest(since), stalls.longest(after + 1.0)
        finally:
            stalls.close()

    during, later = asyncio.run(run())
    # a busier machine only holds the loop up longer: the bound below holds whatever the load
    assert during >= 0.08 - TICK_S and during >= NOTE_S
    assert later == 0.0  # nothing ended after that
