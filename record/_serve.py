"""Serving on loopback, once: a free port, an ASGI app on a real socket (uvicorn in a thread), and an
httpx transport that runs an ASGI app in process while handing each body chunk on as it is sent."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import uvicorn

__all__ = ["StreamingASGITransport", "free_port", "read_body", "serve"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing holds now, drawn below the kernel's range of ephemeral
    ports where the kernel says what that range is (Linux). A port the OS picks for a bind to port 0
    is one of the ephemeral ones, which any outgoing connection may take as its source port before
    the caller binds it: under parallel tests and load generators a server then found its port taken.
    Drawn at random from the system's generator (hypothesis seeds ``random`` alike in every test
    process); the OS picks one where no free port turns up below the range. Another process may
    still take it before the caller binds it: a server of this process is given a socket bound at
    the draw instead (``serve``)."""
    with _drawn() as s:
        return int(s.getsockname()[1])


def _drawn() -> socket.socket:
    """A socket bound on 127.0.0.1 to a port drawn as ``free_port`` says, held from the draw on."""
    low = _ephemeral_low()
    if low is not None and low - _FLOOR >= 1024:
        for _ in range(64):
            try:
                return _bound_to(_DRAW.randrange(_FLOOR, low))
            except OSError:  # held: listening, bound, or in TIME_WAIT
                continue
    return _bound_to(0)


def _bound(port: int | None) -> socket.socket:
    """The socket a server of this process listens on: bound to ``port`` (which may be in TIME_WAIT
    from a server before, as uvicorn's own bind allows), or to a drawn one."""
    return _drawn() if port is None else _bound_to(port, reuse=True)


def _bound_to(port: int, *, reuse: bool = False) -> socket.socket:
    """A socket bound on 127.0.0.1 to ``port`` (``reuse``: with SO_REUSEADDR); where the bind
    fails, the socket is closed and the OSError raised."""
    s = socket.socket()
    try:
        if reuse:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        raise
    return s


#: the lowest port ``free_port`` draws: above the registered services that usually run on a host
_FLOOR = 20000
_DRAW = random.SystemRandom()


def _ephemeral_low() -> int | None:
    """The first port of the kernel's ephemeral range, or None where it does not say (not Linux)."""
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def serve(app: Any, port: int | None = None, *, log_level: str = "warning") -> Iterator[str]:
    """Run ``app`` on ``127.0.0.1:port`` (a free one when None) until the block ends; yields its URL.
    The socket is bound here, before uvicorn starts, and handed to it: a port drawn here is held
    from the draw on, so no other process takes it in between (a parallel test's server once did).
    (A proxy tap is served as ``wirecheck proxy`` serves it with ``wirecheck.proxy.serve_listener``.)"""
    sock = _bound(port or None)
    port = int(sock.getsockname()[1])
    try:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level, lifespan="auto")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError(f"uvicorn did not start on port {port}")
            time.sleep(0.01)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout=10)
    finally:
        sock.close()


async def read_body(receive: Callable[[], Awaitable[MutableMapping[str, Any]]]) -> bytes:
    """The whole request body of an ASGI request (what a caller sent before a disconnect, if any)."""
    body = b""
    while True:
        msg = await receive()
        body += bytes(msg.get("body", b""))
        if msg["type"] != "http.request" or not msg.get("more_body", False):
            return body


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
