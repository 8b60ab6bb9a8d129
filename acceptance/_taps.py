"""Dual taps around a gateway for one acceptance run (``accept --via-proxy``): the caller tap in front
of the gateway and the engine tap behind it, recording into a store in this event loop; the interface
phase reads both sides of its requests back from them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import AsyncIterator

from wirecheck.contracts import DEFAULT_REDACTION, Exchange, Redaction
from wirecheck.proxy import ProxyApp, TapConfig
from wirecheck.record import Store, free_port

from ._serving import serving
from .phases import TapSource

__all__ = ["via_taps"]


@contextlib.asynccontextmanager
async def via_taps(
    gateway: str,
    engine: str,
    engine_port: int,
    store: Store,
    *,
    redaction: Redaction = DEFAULT_REDACTION,
) -> AsyncIterator[tuple[str, TapSource]]:
    """Caller tap -> ``gateway`` and engine tap on ``engine_port`` -> ``engine``, in this event loop,
    recording into ``store`` with ``redaction``. Yields the caller tap's URL and the interface phase's
    tap source."""
    caller_port = free_port()
    caller = ProxyApp(TapConfig(upstream=gateway, tap="caller", redact=redaction), store)
    engine_app = ProxyApp(
        TapConfig(upstream=engine, tap="engine", inject_correlation=False, redact=redaction), store
    )

    async def source(correlations: list[str]) -> list[Exchange]:
        # the caller tap records a response a moment after the client has it: wait for both taps
        deadline = time.monotonic() + 10
        want = set(correlations)
        while True:
            await asyncio.to_thread(store.flush)
            found = await asyncio.to_thread(store.exchanges_for, [], sorted(want))
            per = Counter(ex.correlation or "" for ex in found)
            if all(per[c] >= 2 for c in want) or time.monotonic() > deadline:
                return found
            await asyncio.sleep(0.1)

    apps = [(engine_app, engine_port), (caller, caller_port)]
    async with serving(apps, f"a tap could not listen (engine tap port {engine_port} in use?)"):
        yield f"http://127.0.0.1:{caller_port}", source
