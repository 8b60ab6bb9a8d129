"""Dual taps around a gateway for one acceptance run (``accept --via-proxy``): the caller tap in front
of the gateway and the engine tap behind it, recording into a store in this event loop; the interface
phase reads both sides of its requests back from them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from wirecheck.contracts import DEFAULT_REDACTION, Exchange, Redaction
from wirecheck.generators import engine_tap_line
from wirecheck.proxy import ProxyApp, TapConfig
from wirecheck.record import Store, free_port

from ._serving import serving
from .phases import TapSource

__all__ = ["via_taps"]


#: how long a read waits for the caller tap's side of each request (it records a moment after the
#: client has the answer), and then for engine sides (a gateway that answers by itself sends none)
CALLER_WAIT_S = 10.0
ENGINE_WAIT_S = 2.0
#: after every ISO time a tap writes
_END_OF_TIME = "9999-12-31T23:59:59+00:00"


async def _read_both(store: Store, correlations: list[str]) -> list[Exchange]:
    """Both taps' exchanges for these correlation ids.

    A gateway that drops ``x-wirecheck-id`` (LiteLLM does) leaves the engine sides without one: then
    the engine exchanges recorded without an id since the first of these requests started are theirs
    too (the interface phase sends one request at a time), and the contracts pair them by their
    fingerprint, as ``wirecheck check`` pairs the store."""
    want = set(correlations)
    caller_by, engine_by = time.monotonic() + CALLER_WAIT_S, None
    while True:
        await asyncio.to_thread(store.flush)
        found = await asyncio.to_thread(store.exchanges_for, [], sorted(want))
        callers = [ex for ex in found if ex.tap != "engine"]
        missing = len(want - {ex.correlation for ex in found if ex.tap == "engine"})
        loose = await _uncorrelated_engine_sides(store, callers) if missing else []
        now = time.monotonic()
        if len({ex.correlation for ex in callers} & want) == len(want):
            engine_by = engine_by or now + ENGINE_WAIT_S
            if len(loose) >= missing or now > engine_by:
                return found + loose
        elif now > caller_by:
            return found + loose
        await asyncio.sleep(0.05)


async def _uncorrelated_engine_sides(store: Store, callers: list[Exchange]) -> list[Exchange]:
    starts = [ex.started_at for ex in callers if ex.started_at]
    if not starts:
        return []
    rows = await asyncio.to_thread(store.rows_between, min(starts), _END_OF_TIME)
    since = await asyncio.to_thread(store.exchanges_for, [ex_id for ex_id, _ in rows], [])
    return [ex for ex in since if ex.tap == "engine" and not ex.correlation]


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

    async def read(correlations: list[str]) -> list[Exchange]:
        return await _read_both(store, correlations)

    source = TapSource(
        read=read,
        # as the report shows URLs: without userinfo, the query redacted
        gateway=redaction.url(gateway),
        engine_tap=engine_tap_line(redaction.url(engine), f"127.0.0.1:{engine_port}"),
    )
    apps = [(engine_app, engine_port), (caller, caller_port)]
    async with serving(apps, f"a tap could not listen (engine tap port {engine_port} in use?)"):
        yield f"http://127.0.0.1:{caller_port}", source
