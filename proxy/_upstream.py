"""The proxy's side towards its upstream: one request out, the raw response back, chunk by chunk.

Two implementations of one small interface: httpcore's connection pool for the network (what runs in
production: a third of the per-request cost of going through httpx's client), and an httpx transport
for in-process use (tests drive the proxy against ASGI apps without sockets). Both give the body raw:
de-chunked, never content-decoded, and both map their errors onto the three the proxy records.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import SplitResult

import httpcore
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


class _Httpcore(Upstream):
    def __init__(self, up: SplitResult, connect_s: float, read_s: float) -> None:
        self.origin = f"{up.scheme}://{up.netloc}"
        self.host = up.netloc.encode("latin-1")
        self.timeouts = {"connect": connect_s, "read": read_s, "write": read_s, "pool": None}
        self.pool = httpcore.AsyncConnectionPool(
            max_connections=None, max_keepalive_connections=1024, keepalive_expiry=60.0
        )

    async def open(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes
    ) -> UpstreamResponse:
        out = [(b"host", self.host)]
        out += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        if body or method in ("POST", "PUT", "PATCH"):
            out.append((b"content-length", str(len(body)).encode()))
        req = httpcore.Request(
            method.encode(),
            self.origin + target,
            headers=out,
            content=body,
            extensions={"timeout": self.timeouts},
        )
        try:
            resp = await self.pool.handle_async_request(req)
        except httpcore.TimeoutException as exc:
            raise UpstreamTimeout(f"{type(exc).__name__}") from exc
        except (httpcore.ConnectError, httpcore.NetworkError, httpcore.ProtocolError, OSError) as exc:
            raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc
        stream = resp.stream

        async def body_iter() -> AsyncIterator[bytes]:
            try:
                async for piece in stream:  # type: ignore[union-attr]
                    yield piece
            except httpcore.TimeoutException as exc:
                raise UpstreamTimeout(type(exc).__name__) from exc
            except (httpcore.NetworkError, httpcore.ProtocolError, OSError) as exc:
                raise UpstreamBroken(f"{type(exc).__name__}: {exc}") from exc

        return UpstreamResponse(resp.status, list(resp.headers), body_iter(), resp.aclose)

    async def aclose(self) -> None:
        await self.pool.aclose()


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
    return _Httpcore(up, connect_s, read_s)
