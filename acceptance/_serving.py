"""ASGI apps served in this event loop for the acceptance run: the demo's simulator and gateway, and
the dual taps."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import uvicorn

from wirecheck.contracts import ConfigError
from wirecheck.proxy import ListenerServer

__all__ = ["serving"]


@contextlib.asynccontextmanager
async def serving(apps: list[tuple[Any, int]], failure: str, *, http: Any = "auto") -> AsyncIterator[None]:
    """Serve each ``(app, port)`` on loopback until the block ends; ``failure`` is the error when one
    cannot start. ``http``: uvicorn's protocol (the taps pass the proxy's own, ``tap_protocol()``)."""
    servers = [
        ListenerServer(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="auto", http=http)
        )
        for app, port in apps
    ]
    tasks = [asyncio.ensure_future(s.serve()) for s in servers]
    try:
        while not all(s.started for s in servers):
            if any(t.done() for t in tasks):
                raise ConfigError(failure)
            await asyncio.sleep(0.01)
        yield
    finally:
        for s in servers:
            s.should_exit = True
        await asyncio.gather(*tasks, return_exceptions=True)
