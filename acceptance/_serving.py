"""ASGI apps served in this event loop for the acceptance run: the demo's simulator and gateway, and
the dual taps, each on a listener of the proxy's (``wirecheck.proxy.Listener``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from wirecheck.contracts import ConfigError
from wirecheck.proxy import Listener

__all__ = ["serving"]


@contextlib.asynccontextmanager
async def serving(apps: list[tuple[Any, int]], failure: str) -> AsyncIterator[None]:
    """Serve each ``(app, port)`` on loopback until the block ends; ``failure`` is the error when one
    cannot start."""
    started: list[Listener] = []
    try:
        for app, port in apps:
            listener = Listener(app)
            try:
                await listener.start("127.0.0.1", port)
            except OSError as exc:
                raise ConfigError(failure) from exc
            started.append(listener)
        yield
    finally:
        await asyncio.gather(*(listener.stop(grace_s=10) for listener in reversed(started)))
