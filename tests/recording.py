"""Test helpers: record exchanges at a point of an in-process request path (an httpx transport that
tees what passes through it), and drive the simulator and gateway without sockets."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx

from wirecheck.contracts import Chunk, Exchange, ExchangeError, HttpRequest, HttpResponse


class _TeeStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, ex: Exchange, t0: float) -> None:
        self.inner, self.ex, self.t0 = inner, ex, t0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert self.ex.response is not None and self.ex.response.chunks is not None
        try:
            async for piece in self.inner:
                self.ex.response.chunks.append(Chunk((time.monotonic() - self.t0) * 1000, piece))
                yield piece
        except Exception as exc:
            self.ex.error = ExchangeError(
                "upstream_reset", f"{type(exc).__name__}: {exc}", (time.monotonic() - self.t0) * 1000
            )
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


class RecordingTransport(httpx.AsyncBaseTransport):
    """Wraps a transport and appends every exchange that passes, with chunk times, to ``sink``."""

    def __init__(self, inner: httpx.AsyncBaseTransport, tap: str, sink: list[Exchange]) -> None:
        self.inner, self.tap, self.sink = inner, tap, sink

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        t0 = time.monotonic()
        body = await request.aread()
        ex = Exchange(
            id=f"{self.tap}-{len(self.sink) + 1}",
            tap=self.tap,
            correlation=request.headers.get("x-wirecheck-id"),
            started_at=datetime.now(UTC).isoformat(),
            request=HttpRequest(
                request.method, request.url.raw_path.decode(), list(request.headers.items()), body
            ),
        )
        self.sink.append(ex)
        try:
            resp = await self.inner.handle_async_request(request)
        except Exception as exc:
            ex.error = ExchangeError(
                "upstream_reset", f"{type(exc).__name__}: {exc}", (time.monotonic() - t0) * 1000
            )
            raise
        ex.response = HttpResponse(resp.status_code, list(resp.headers.items()), b"", [])
        assert isinstance(resp.stream, httpx.AsyncByteStream)
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=_TeeStream(resp.stream, ex, t0),
            extensions=resp.extensions,
        )


async def post(client: httpx.AsyncClient, body: dict[str, Any], corr: str | None = None) -> httpx.Response:
    """POST a chat completion and read it to the end (streams too); a reset leaves the exchange's error."""
    headers = {"x-wirecheck-id": corr} if corr else {}
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body, headers=headers) as r:
            await r.aread()
            return r
    except httpx.HTTPError:
        return httpx.Response(599)


def dumps(o: Any) -> bytes:
    return json.dumps(o).encode()


class _QueueStream(httpx.AsyncByteStream):
    def __init__(self, queue: asyncio.Queue[bytes | BaseException | None], task: asyncio.Task[None]) -> None:
        self.queue, self.task = queue, task

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            item = await self.queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise httpx.RemoteProtocolError(f"peer closed the connection: {item}") from item
            yield item

    async def aclose(self) -> None:
        if not self.task.done():
            self.task.cancel()


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """Like httpx.ASGITransport, but hands each body chunk on as the app sends it (httpx's own
    buffers the whole response), so per-chunk timing and cancellation work in-process. An app that
    raises mid-body looks to the client like a connection closed mid-stream."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port or 80),
            "client": ("127.0.0.1", 123),
            "root_path": "",
        }
        queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
        started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = (
            asyncio.get_running_loop().create_future()
        )
        sent_request = False
        done = asyncio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal sent_request
            if not sent_request:
                sent_request = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                started.set_result((message["status"], list(message.get("headers", []))))
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    queue.put_nowait(message["body"])
                if not message.get("more_body", False):
                    queue.put_nowait(None)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except BaseException as exc:
                if not started.done():
                    started.set_exception(exc)
                else:
                    queue.put_nowait(exc if isinstance(exc, Exception) else RuntimeError("cancelled"))
                if not isinstance(exc, Exception):
                    raise
            finally:
                done.set()

        task = asyncio.get_running_loop().create_task(run())
        status, headers = await started
        return httpx.Response(status, headers=headers, stream=_QueueStream(queue, task))
