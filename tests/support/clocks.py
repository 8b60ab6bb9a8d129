"""Clocks a test injects where the product takes one (``RecordingTransport(clock=...)``), so that what
it asserts on are recorded facts, never how fast the machine was."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx


class EngineChunkClock:
    """A clock for both taps that moves only when the engine sends a chunk, ``step_s`` each time: the
    chunk times it records say what reached each tap before what, however busy the machine is."""

    def __init__(self, step_s: float = 0.01) -> None:
        self.step_s, self.now = step_s, 0.0

    def __call__(self) -> float:
        return self.now

    def ticking(self, inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport:
        """``inner`` with every response chunk moving the clock on before anyone records it."""
        clock = self

        class Ticking(httpx.AsyncBaseTransport):
            async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
                resp = await inner.handle_async_request(request)
                assert isinstance(resp.stream, httpx.AsyncByteStream)
                return httpx.Response(
                    resp.status_code, headers=resp.headers, stream=_Ticks(resp.stream, clock)
                )

        return Ticking()


class _Ticks(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, clock: EngineChunkClock) -> None:
        self.inner, self.clock = inner, clock

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self.inner:
            self.clock.now += self.clock.step_s
            yield piece

    async def aclose(self) -> None:
        await self.inner.aclose()
