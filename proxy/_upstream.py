"""The proxy's side towards its upstream: one request out, the raw response back, chunk by chunk.

Two implementations of one small interface. For the network, a lean HTTP/1.1 client on asyncio
streams with a keep-alive stack per upstream: measured against httpx (about 700 us a request) and
httpcore (450 us, and its pool scans every connection on each request, which collapsed at 256
concurrent streams), it keeps the request path short. For in-process use, an httpx transport (tests
drive the proxy against ASGI apps without sockets). Both give the body raw: de-chunked, never
content-decoded, and both map their errors onto the three the proxy records.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import SplitResult

import httpx

__all__ = [
    "Upstream",
    "UpstreamBroken",
    "UpstreamResponse",
    "UpstreamTimeout",
    "UpstreamUnreachable",
    "make_upstream",
]


class UpstreamTimeout(Exception):
    """No answer, or no next byte, in time."""


class UpstreamUnreachable(Exception):
    """No connection could be made."""


class UpstreamBroken(Exception):
    """The connection broke mid-response."""


@dataclass(slots=True)
class UpstreamResponse:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: AsyncIterator[bytes]
    aclose: Callable[[], Awaitable[None]]


class Upstream:
    async def open(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> UpstreamResponse:
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError


_NO_BODY = frozenset({204, 304})
_MAX_HEAD = 64 * 1024


class _Conn:
    __slots__ = ("reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.reused = reader, writer, False

    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class _Raw(Upstream):
    """HTTP/1.1 over asyncio streams, with idle connections kept on a stack for reuse."""

    def __init__(self, up: SplitResult, connect_s: float, read_s: float, max_idle: int = 1024) -> None:
        self.host = up.hostname or "127.0.0.1"
        self.port = up.port or (443 if up.scheme == "https" else 80)
        self.host_header = up.netloc.encode("latin-1")
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if up.scheme == "https" else None
        self.connect_s, self.read_s = connect_s, read_s
        self.idle: list[_Conn] = []
        self.max_idle = max_idle

    async def _connect(self) -> _Conn:
        try:
            async with asyncio.timeout(self.connect_s):
                r, w = await asyncio.open_connection(self.host, self.port, ssl=self.ssl, limit=_MAX_HEAD)
        except TimeoutError as exc:
            raise UpstreamTimeout("connect timeout") from exc
        except OSError as exc:
            raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc
        return _Conn(r, w)

    def _take(self) -> _Conn | None:
        while self.idle:
            conn = self.idle.pop()
            if conn.usable():
                conn.reused = True
                return conn
            conn.close()
        return None

    def _give_back(self, conn: _Conn) -> None:
        if conn.usable() and len(self.idle) < self.max_idle:
            self.idle.append(conn)
        else:
            conn.close()

    async def open(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> UpstreamResponse:
        head = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), b"host: ", self.host_header, b"\r\n"]
        for k, v in headers:
            head.append(f"{k}: {v}\r\n".encode("latin-1"))
        if body or method in ("POST", "PUT", "PATCH"):
            head.append(b"content-length: %d\r\n" % len(body))
        head.append(b"\r\n")
        request = b"".join(head) + body
        conn: _Conn
        for attempt in (0, 1):
            taken = self._take() if attempt == 0 else None
            conn = taken or await self._connect()
            try:
                conn.writer.write(request)
                async with asyncio.timeout(self.read_s):
                    raw = await conn.reader.readuntil(b"\r\n\r\n")
                break
            except TimeoutError as exc:
                conn.close()
                raise UpstreamTimeout("no response headers in time") from exc
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError) as exc:
                conn.close()
                if conn.reused and attempt == 0 and not getattr(exc, "partial", b""):
                    continue  # a kept-alive connection the upstream had closed: once more, fresh
                raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc
        lines = raw.decode("latin-1").split("\r\n")
        try:
            status = int(lines[0].split(" ", 2)[1])
        except (IndexError, ValueError) as exc:
            conn.close()
            raise UpstreamUnreachable(f"not an HTTP response: {lines[0][:80]!r}") from exc
        hdrs: list[tuple[bytes, bytes]] = []
        length: int | None = None
        chunked = False
        keep = True
        for line in lines[1:]:
            if not line:
                continue
            k, _, v = line.partition(":")
            k, v = k.strip(), v.strip()
            hdrs.append((k.encode("latin-1"), v.encode("latin-1")))
            low = k.lower()
            if low == "content-length" and v.isdigit():
                length = int(v)
            elif low == "transfer-encoding" and "chunked" in v.lower():
                chunked = True
            elif low == "connection" and "close" in v.lower():
                keep = False
        if method == "HEAD" or status in _NO_BODY or 100 <= status < 200:
            length, chunked = 0, False
        if not chunked and length is None:
            keep = False  # delimited by the connection's end
        state = {"done": False}
        read_s = self.read_s

        async def body_iter() -> AsyncIterator[bytes]:
            reader = conn.reader
            try:
                if chunked:
                    while True:
                        async with asyncio.timeout(read_s):
                            size_line = await reader.readline()
                        if not size_line:
                            raise asyncio.IncompleteReadError(b"", None)
                        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                        if size == 0:
                            async with asyncio.timeout(read_s):
                                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                                    pass  # trailers
                            break
                        async with asyncio.timeout(read_s):
                            data = await reader.readexactly(size + 2)
                        yield data[:-2]
                elif length is not None:
                    left = length
                    while left > 0:
                        async with asyncio.timeout(read_s):
                            data = await reader.read(min(left, 65536))
                        if not data:
                            raise asyncio.IncompleteReadError(b"", left)
                        left -= len(data)
                        yield data
                else:
                    while True:
                        async with asyncio.timeout(read_s):
                            data = await reader.read(65536)
                        if not data:
                            break
                        yield data
                state["done"] = True
            except TimeoutError as exc:
                conn.close()
                raise UpstreamTimeout("the upstream stopped sending") from exc
            except (asyncio.IncompleteReadError, ValueError, OSError) as exc:
                conn.close()
                raise UpstreamBroken(f"{type(exc).__name__}: connection broken mid-response") from exc

        async def aclose() -> None:
            if state["done"] and keep:
                self._give_back(conn)
            else:
                conn.close()

        return UpstreamResponse(status, hdrs, body_iter(), aclose)

    async def aclose(self) -> None:
        while self.idle:
            self.idle.pop().close()


class _Httpx(Upstream):
    def __init__(
        self, up: SplitResult, transport: httpx.AsyncBaseTransport, connect_s: float, read_s: float
    ) -> None:
        self.client = httpx.AsyncClient(
            base_url=f"{up.scheme}://{up.netloc}",
            transport=transport,
            timeout=httpx.Timeout(connect=connect_s, read=read_s, write=read_s, pool=None),
            follow_redirects=False,
        )
        self.client.headers = httpx.Headers()  # no headers of httpx's own: forward the caller's only

    async def open(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> UpstreamResponse:
        req = self.client.build_request(method, target, headers=headers, content=body)
        try:
            resp = await self.client.send(req, stream=True)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(type(exc).__name__) from exc
        except httpx.HTTPError as exc:
            raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc

        async def body_iter() -> AsyncIterator[bytes]:
            try:
                async for piece in resp.aiter_raw():
                    yield piece
            except httpx.TimeoutException as exc:
                raise UpstreamTimeout(type(exc).__name__) from exc
            except httpx.HTTPError as exc:
                raise UpstreamBroken(f"{type(exc).__name__}: {exc}") from exc

        return UpstreamResponse(resp.status_code, list(resp.headers.raw), body_iter(), resp.aclose)

    async def aclose(self) -> None:
        await self.client.aclose()


def make_upstream(
    up: SplitResult, *, transport: httpx.AsyncBaseTransport | None, connect_s: float, read_s: float
) -> Upstream:
    if transport is not None:
        return _Httpx(up, transport, connect_s, read_s)
    return _Raw(up, connect_s, read_s)
