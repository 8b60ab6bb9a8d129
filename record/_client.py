"""The recording client: send one request with httpx, record the answer as it streams with a
monotonic time per chunk, and name a transport failure with ONE map of error kinds.

This was written five times (generators, replay, acceptance twice, the tests) and
the copies disagreed, so the same failure got another ``error.kind`` depending on who recorded it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable

import httpx

from wirecheck.contracts import Chunk, Exchange, ExchangeError, HttpResponse

__all__ = ["HOP_HEADERS", "error_of", "record_async", "record_sync"]

#: headers that describe one connection or its framing, never the request: a recorder that re-sends
#: or forwards recomputes them (RFC 9110 section 7.6.1, plus host and length)
HOP_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "upgrade",
        "proxy-connection",
        "accept-encoding",
    }
)

Headers = Callable[[Iterable[tuple[str, str]]], list[tuple[str, str]]]


def error_of(exc: BaseException, *, responded: bool, t_ms: float | None = None) -> ExchangeError:
    """The one map from a failed exchange to its ``error.kind`` (docs/exchange-format.md):

    - ``timeout``: no answer, or no next chunk, in time (any httpx timeout);
    - ``upstream_refused``: no connection was made (connect failed, no such protocol), so nothing was
      answered;
    - ``request_invalid``: the request itself could not be sent as HTTP (a header name or value that
      HTTP's grammar refuses, such as a raw CR: h11 will not write it), so nothing reached the
      upstream and the fault is the caller's, not the engine's;
    - ``upstream_reset``: the connection broke after it was made: mid-answer, or before the answer's
      head (a peer that closes at once), and anything else that ends a stream early.
    """
    if isinstance(exc, httpx.TimeoutException):
        kind = "timeout"
    elif not responded and isinstance(exc, httpx.LocalProtocolError):
        kind = "request_invalid"
    elif not responded and isinstance(exc, httpx.ConnectError | httpx.UnsupportedProtocol):
        kind = "upstream_refused"
    else:
        kind = "upstream_reset"
    return ExchangeError(kind, f"{type(exc).__name__}: {exc}", t_ms)


def _ms(t0: float) -> float:
    return (time.monotonic() - t0) * 1000.0


def _opened(ex: Exchange, r: httpx.Response, headers: Headers | None) -> list[Chunk]:
    chunks: list[Chunk] = []
    got = list(r.headers.items())
    ex.response = HttpResponse(r.status_code, headers(got) if headers else got, b"", chunks)
    return chunks


async def record_async(
    client: httpx.AsyncClient,
    ex: Exchange,
    url: str | httpx.URL,
    *,
    headers: Iterable[tuple[str, str]] | dict[str, str],
    record_headers: Headers | None = None,
    on_head: Callable[[httpx.Response], Awaitable[None]] | None = None,
    on_chunk: Callable[[bytes], Awaitable[None]] | None = None,
) -> float:
    """Send ``ex.request`` (its method and body) to ``url`` with ``headers``; fill in ``ex.response``
    with each raw chunk and its time, or ``ex.error``. Never raises for HTTP or transport failures
    (what ``on_head`` and ``on_chunk``, a tap forwarding the answer, raise goes on up).
    ``record_headers`` maps the response headers before they are recorded (redaction). Returns the
    seconds from sending to the end of the body."""
    t0 = time.monotonic()
    try:
        async with client.stream(
            ex.request.method, url, content=ex.request.body, headers=list(_pairs(headers))
        ) as r:
            chunks = _opened(ex, r, record_headers)
            if on_head is not None:
                await on_head(r)
            async for piece in r.aiter_raw():
                chunks.append(Chunk(_ms(t0), piece))
                if on_chunk is not None:
                    await on_chunk(piece)
    except httpx.HTTPError as exc:
        ex.error = error_of(exc, responded=ex.response is not None, t_ms=_ms(t0))
    return time.monotonic() - t0


def record_sync(
    client: httpx.Client,
    ex: Exchange,
    url: str | httpx.URL,
    *,
    headers: Iterable[tuple[str, str]] | dict[str, str],
    record_headers: Headers | None = None,
) -> float:
    """:func:`record_async` for a blocking client (the scenarios, a Locust worker's greenlets)."""
    t0 = time.monotonic()
    try:
        with client.stream(
            ex.request.method, url, content=ex.request.body, headers=list(_pairs(headers))
        ) as r:
            chunks = _opened(ex, r, record_headers)
            for piece in r.iter_raw():
                chunks.append(Chunk(_ms(t0), piece))
    except httpx.HTTPError as exc:
        ex.error = error_of(exc, responded=ex.response is not None, t_ms=_ms(t0))
    return time.monotonic() - t0


def _pairs(headers: Iterable[tuple[str, str]] | dict[str, str]) -> Iterable[tuple[str, str]]:
    return headers.items() if isinstance(headers, dict) else headers
