"""Taps in process: an httpx transport that tees what passes through it, and a recording forwarder
(an ASGI app) for the scenarios' dual taps. Both record with the recording client's one map of error
kinds (``_client.error_of``) and the correlation rules of the proxy's taps (``_correlation``)."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from datetime import UTC, datetime
from typing import Any

import httpx

from wirecheck.contracts import DEFAULT_REDACTION, Chunk, Exchange, HttpRequest, HttpResponse

from ._client import HOP_HEADERS, error_of, record_async
from ._correlation import CORRELATION_HEADER, Correlator, correlation_secret
from ._serve import read_body, serve
from ._sink import MemorySink, Sink

__all__ = ["RecordingTransport", "TapApp", "dual_taps"]

Message = MutableMapping[str, Any]


def _now() -> str:
    return datetime.now(UTC).isoformat()


class _TeeStream(httpx.AsyncByteStream):
    def __init__(
        self, inner: httpx.AsyncByteStream, ex: Exchange, t0: float, clock: Callable[[], float]
    ) -> None:
        self.inner, self.ex, self.t0, self.clock = inner, ex, t0, clock

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert self.ex.response is not None and self.ex.response.chunks is not None
        try:
            async for piece in self.inner:
                self.ex.response.chunks.append(Chunk((self.clock() - self.t0) * 1000, piece))
                yield piece
        except Exception as exc:
            self.ex.error = error_of(exc, responded=True, t_ms=(self.clock() - self.t0) * 1000)
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """Wraps a transport and appends every exchange that passes, with chunk times, to ``sink`` (as
    soon as it starts: the list is read after the traffic). ``clock`` gives the times, in seconds: a
    test injects one to record what arrived before what, whatever the machine's load."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        tap: str,
        sink: list[Exchange],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.inner, self.tap, self.sink, self.clock = inner, tap, sink, clock

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        t0 = self.clock()
        body = await request.aread()
        ex = Exchange(
            id=f"{self.tap}-{len(self.sink) + 1}",
            tap=self.tap,
            correlation=request.headers.get(CORRELATION_HEADER),
            started_at=_now(),
            request=HttpRequest(
                request.method, request.url.raw_path.decode(), list(request.headers.items()), body
            ),
        )
        self.sink.append(ex)
        try:
            resp = await self.inner.handle_async_request(request)
        except Exception as exc:
            ex.error = error_of(exc, responded=False, t_ms=(self.clock() - t0) * 1000)
            raise
        ex.response = HttpResponse(resp.status_code, list(resp.headers.items()), b"", [])
        assert isinstance(resp.stream, httpx.AsyncByteStream)
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=_TeeStream(resp.stream, ex, t0, self.clock),
            extensions=resp.extensions,
        )


class TapApp:
    """One tap as an ASGI app: forwards each request to ``upstream``, streams the answer back chunk by
    chunk, and hands the recorded exchange to ``sink`` when it ends.

    The caller tap (``caller=True``) keeps a caller's ``x-wirecheck-id`` only when it verifies and is
    new, else mints one; the engine tap records only ids that verify, as the
    proxy's taps do."""

    def __init__(
        self, upstream: str, tap: str, sink: Sink, *, caller: bool, timeout_s: float = 120.0
    ) -> None:
        self.upstream, self.tap, self.sink, self.caller = upstream.rstrip("/"), tap, sink, caller
        self.timeout_s = timeout_s
        self._corr = Correlator(correlation_secret())

    async def __call__(
        self,
        scope: Message,
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in HOP_HEADERS
        ]
        headers, corr = self._corr.stamp(headers, caller=self.caller)
        target = scope["raw_path"].decode("latin-1") if scope.get("raw_path") else scope["path"]
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        ex = Exchange(
            id=f"{self.tap}-{uuid.uuid4().hex[:12]}",
            tap=self.tap,
            correlation=corr,
            started_at=_now(),
            request=HttpRequest(scope["method"], target, DEFAULT_REDACTION.header_list(headers), body),
        )

        async def head(r: httpx.Response) -> None:
            down = [
                (k.encode("latin-1"), v.encode("latin-1"))
                for k, v in r.headers.items()
                if k.lower() not in HOP_HEADERS
            ]
            await send({"type": "http.response.start", "status": r.status_code, "headers": down})

        async def chunk(piece: bytes) -> None:
            await send({"type": "http.response.body", "body": piece, "more_body": True})

        try:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                await record_async(
                    client,
                    ex,
                    self.upstream + target,
                    headers=headers,
                    record_headers=DEFAULT_REDACTION.header_list,
                    on_head=head,
                    on_chunk=chunk,
                )
            if ex.response is None:
                err = {
                    "error": {"message": f"tap {self.tap}: {ex.error.message if ex.error else 'no answer'}"}
                }
                await send(
                    {
                        "type": "http.response.start",
                        "status": 502,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": json.dumps(err).encode()})
            elif ex.error is not None:
                # make the caller see the break, as it would without the tap
                raise ConnectionResetError(ex.error.message)
            else:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.sink.put(ex)


@contextlib.contextmanager
def dual_taps(gateway: str, engine: str, engine_port: int) -> Iterator[tuple[str, MemorySink]]:
    """Caller tap -> ``gateway``; engine tap on ``engine_port`` -> ``engine``, each on loopback. Yields
    the caller tap's URL and the sink both record into."""
    sink = MemorySink()
    engine_app = TapApp(engine, "engine", sink, caller=False)
    caller_app = TapApp(gateway, "caller", sink, caller=True)
    with (
        serve(engine_app, engine_port, log_level="error"),
        serve(caller_app, log_level="error") as url,
    ):
        yield url, sink
