"""The listeners' HTTP/1.1 server side: uvicorn's httptools protocol with the bounds it lacks.

uvicorn closes idle kept-alive connections (``timeout_keep_alive``), but with its httptools protocol it
bounds neither the request head's size nor the time a caller may take to send it, and it never times
out a connection that connects and says nothing. A caller could hold connections and memory forever.
Here: a head larger than ``max_head`` bytes is a 431, a head not complete within ``head_timeout_s``
is a 408, and a connection that sends nothing is closed after ``timeout_keep_alive`` like an idle one.
The request body's deadline is the app's (``TapConfig.request_timeout_s``), which can answer in JSON.

The head's bound is on the whole head, not on each read: a head that arrives whole in one read is
counted from the parser's callbacks (request line and every header), so 100 KiB sent at once is a
431 like 100 KiB sent in pieces.

Each request's scope also carries ``Cut`` (``scope["extensions"]["wirecheck.cut"]``): the app ends the
caller's connection mid-response with it (an upstream that broke: the caller sees the truncation)
without raising into uvicorn, which would log a whole traceback for each. And ``wirecheck.target``,
the request target as the caller sent it: uvicorn keeps only the path of an absolute-form target
(``GET http://other.host/x``), and the proxy must see the host to refuse it.

It also offers the app a shorter way out for a streamed body: ``DirectBody`` in the
request's scope (``scope["extensions"]["wirecheck.direct_body"]``) writes each piece to the caller's
socket from the upstream's read callback, framed as uvicorn frames a chunked body, instead of one ASGI
``send`` (a coroutine, a task step and a flow check) per piece.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import socket
import weakref
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

__all__ = [
    "CUT",
    "DIRECT_BODY",
    "HANDOFF",
    "TARGET",
    "Cut",
    "DirectBody",
    "Handoff",
    "guarded_protocol",
    "settle_gc",
    "tap_protocol",
]

#: the scope extension under which a listener offers ``DirectBody``
DIRECT_BODY = "wirecheck.direct_body"
#: the scope extension under which the admin listener offers ``Handoff``
HANDOFF = "wirecheck.handoff"
#: the scope extension under which a listener offers ``Cut``
CUT = "wirecheck.cut"
#: the scope extension holding the request target as sent (bytes), when it is not origin-form
TARGET = "wirecheck.target"
#: ``0`` turns ``DirectBody`` off in the proxy's listeners
DIRECT_BODY_ENV = "WIRECHECK_DIRECT_BODY"


class DirectBody:
    """The body of one chunked response, written straight to the caller's transport.

    Usable only once the app has started the response through ``send`` and uvicorn chose chunked
    framing for it (no content-length: every streamed answer), and never for HEAD. ``write`` writes
    the bytes uvicorn's ``send`` would write for a body message; the response is ended through
    ``send`` as usual, so uvicorn's state (keep-alive, the next pipelined request) stays its own."""

    # the cycle is held weakly: it holds the scope, and the scope this object, and a reference cycle
    # per request left every caller's socket and transport to the cyclic GC, whose full collections
    # then paused the event loop 35 ms at 256 streams. The transport lets go of the
    # protocol (and so of the cycle) when the connection closes.
    __slots__ = ("_cycle", "_flow", "_transport")

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = weakref.ref(cycle)
        self._transport = cycle.transport
        self._flow = cycle.flow

    def usable(self) -> bool:
        c = self._cycle()
        return (
            c is not None
            and c.response_started
            and not c.response_complete
            and c.chunked_encoding is True
            and c.scope["method"] != "HEAD"
        )

    def gone(self) -> bool:
        """The caller's connection is closed or closing: nothing written reaches it."""
        c = self._cycle()
        return c is None or c.disconnected or self._transport.is_closing()

    def write(self, data: bytes) -> None:
        if data:
            self._transport.write(b"%x\r\n%b\r\n" % (len(data), data))

    def full(self) -> bool:
        """The caller's transport is over its high-water mark: stop feeding it until ``drain``."""
        return self._flow.write_paused

    async def drain(self) -> None:
        await self._flow.drain()


class Cut:
    """Ends the caller's connection mid-response, as uvicorn does for an app that raises after the
    response began, but quietly: the app has recorded why, and says it in one line."""

    __slots__ = ("_cycle",)

    def __init__(self, cycle: RequestResponseCycle) -> None:
        self._cycle = weakref.ref(cycle)  # no reference cycle through the scope (see DirectBody)

    def __call__(self) -> None:
        c = self._cycle()
        if c is not None:
            c.disconnected = True  # uvicorn then takes the app's return as the end of the connection
            c.transport.close()


class Handoff:
    """The connection of one request, to be moved to another process (the live view's).

    ``fileno()`` is the socket to pass on, or None when the connection cannot move whole: TLS, the
    request's body not all read, a pipelined request already waiting behind it, the response begun.
    After the socket was passed on, ``release()`` makes this process forget the connection without
    ending it: reading stops and the transport is dropped (its descriptor closed, which sends nothing
    while another process holds the socket). uvicorn then sees the connection as lost."""

    __slots__ = ("_protocol",)

    def __init__(self, protocol: _Guarded) -> None:
        self._protocol = weakref.ref(protocol)  # no reference cycle through the scope (see DirectBody)

    def fileno(self) -> int | None:
        p = self._protocol()
        if p is None or p.transport.is_closing() or p.transport.get_extra_info("sslcontext") is not None:
            return None
        c = p.cycle
        if c is None or c.response_started or c.more_body or p.pipeline:
            return None
        sock = p.transport.get_extra_info("socket")
        return sock.fileno() if sock is not None else None

    def release(self) -> None:
        p = self._protocol()
        if p is not None:
            p.transport.pause_reading()
            p.transport.abort()


_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing a head over the bound."""


class _Guarded(HttpToolsProtocol):
    max_head = 64 * 1024
    head_timeout_s = 30.0
    direct_body = True
    handoff = False
    send_buffer = 0  # SO_SNDBUF of each connection; 0: the kernel's autotuning

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.send_buffer:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
        self._head_bytes = 0
        self._parsed_head = 0  # the head being parsed, counted from the parser's callbacks
        self._head_over = False
        self._in_head = True
        self._head_timer: asyncio.TimerHandle | None = None
        # uvicorn arms its idle timer only after a response: a silent new connection gets it too
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_too_slow)
        super().data_received(data)
        # counted before parsing and checked after, so a first read that also carries body bytes
        # past a complete head is never taken for a long head
        if self._in_head and self._head_bytes > self.max_head:
            self._refuse(431, f"request head over {self.max_head} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._parsed_head = 16  # the request line's method, version and line ends

    def on_url(self, url: bytes) -> None:
        self._parsed_head += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed_head += len(name) + len(value) + 4
        if self._parsed_head > self.max_head:
            # a head that came whole in one read is never seen long by the count per read: the
            # parser stops here (uvicorn answers a parse error through send_400_response, below)
            self._head_over = True
            raise _HeadTooLarge
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        if self._head_over:
            self._refuse(431, f"request head over {self.max_head} bytes")
            return
        super().send_400_response(msg)

    def _unsupported_upgrade_warning(self) -> None:
        pass  # the tap answers an upgrade itself (501), and records it: no log line per request

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._stop_head_timer()
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope and not cycle.response_started:
            # the app's task is created but has not run yet: it finds the extensions in its scope
            scope: dict[str, Any] = cycle.scope  # type: ignore[assignment]
            ext = scope.setdefault("extensions", {})
            ext[CUT] = Cut(cycle)
            if not self.url.startswith(b"/"):
                ext[TARGET] = bytes(self.url)  # absolute-form (or asterisk-form)
            if self.direct_body:
                ext[DIRECT_BODY] = DirectBody(cycle)
            if self.handoff:
                ext[HANDOFF] = Handoff(self)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True  # what comes next on this connection is the next request's head

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.cycle is not None and not self.cycle.response_complete:
            # a pipelined head behind a response still streaming: its clock starts when that ends
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_too_slow)
            return
        if self._in_head and self._head_bytes > 0:
            self._refuse(408, f"the request head did not arrive within {self.head_timeout_s:g} s")

    def _refuse(self, status: int, message: str) -> None:
        self._stop_head_timer()
        if self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:
            body = f"wirecheck proxy: {message}\n".encode()
            self.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"content-length: %d\r\nconnection: close\r\nx-wirecheck-proxy: error\r\n\r\n%s"
                % (status, _REASONS[status], len(body), body)
            )
        self.logger.warning("wirecheck proxy: refused a caller with %d: %s", status, message)
        self.transport.close()


def guarded_protocol(
    *,
    max_head: int,
    head_timeout_s: float,
    direct_body: bool | None = None,
    handoff: bool = False,
    send_buffer: int = 0,
) -> type[Any]:
    """uvicorn's ``http=`` protocol class for a listener with these bounds. ``direct_body``: offer
    ``DirectBody`` (None: yes, unless ``WIRECHECK_DIRECT_BODY=0``, the switch back to one ASGI
    ``send`` per piece, e.g. for an A/B of the two paths in benchmarks/proxy_overhead.py).
    ``handoff``: offer ``Handoff`` (the admin listener). ``send_buffer``: a fixed kernel send buffer
    per connection (the admin listener: a viewer that stops reading holds that much, not the
    megabytes autotuning grows to; the socket keeps it when it is handed to the view process)."""
    if direct_body is None:
        direct_body = os.environ.get(DIRECT_BODY_ENV, "1").strip() != "0"
    attrs = {
        "max_head": max_head,
        "head_timeout_s": head_timeout_s,
        "direct_body": direct_body,
        "handoff": handoff,
        "send_buffer": send_buffer,
    }
    return type("GuardedHttpTools", (_Guarded,), attrs)


def tap_protocol() -> type[Any]:
    """The protocol ``wirecheck proxy`` serves its taps with, at its default bounds: for serving a
    ``ProxyApp`` anywhere else (acceptance's taps, the tests) exactly as the proxy does."""
    return guarded_protocol(max_head=_Guarded.max_head, head_timeout_s=_Guarded.head_timeout_s)


def settle_gc() -> None:
    """Tune the cyclic GC of a long-running proxy process, once its start-up is done.

    What exists then (the modules, the rule registry, the apps) lives as long as the process: frozen,
    no collection scans it again. The request path leaves no cyclic garbage (a test holds it to that),
    so collections find little, but each scans every object alive at the time, in-flight streams
    included: at 256 streams gen-1 collections took 7-13 ms and full ones up to 35 ms, each stalling
    the event loop. Collecting every 10 000 net allocations instead of 700 lets most objects die by
    their reference count before any scan: in one 12 s run at 256 streams, collections over 3 ms went
    from 47 (337 ms of stalls) to 1."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
