"""The proxy's side towards its upstream: one request out, the raw response back, chunk by chunk.

Two implementations of one small interface. For the network, a lean HTTP/1.1 client on asyncio
protocols with a keep-alive stack per upstream, parsing with llhttp (httptools): measured against httpx (about 700 us a request) and
httpcore (450 us, and its pool scans every connection on each request, which collapsed at 256
concurrent streams), it keeps the request path short. For in-process use, an httpx transport (tests
drive the proxy against ASGI apps without sockets). Both give the body raw: de-chunked, never
content-decoded, and both map their errors onto the three the proxy records.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import SplitResult

import httptools
import httpx

from wirecheck.contracts import native

if TYPE_CHECKING:
    from . import _relay_c

__all__ = [
    "Batch",
    "BodyEnd",
    "BodySink",
    "Upstream",
    "UpstreamBroken",
    "UpstreamInvalid",
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


class UpstreamInvalid(UpstreamUnreachable):
    """The upstream answered, but not with a usable response head (not HTTP, or over the bound)."""


#: body pieces with the monotonic time each arrived, as many as were waiting when the proxy asked
Batch = list[tuple[float, bytes]]
#: takes a batch the moment it is parsed; False: stop handing on (see ``UpstreamResponse.relay``)
BodySink = Callable[[Batch], bool]
#: takes the last batch of a complete body, the body's end with it (see ``UpstreamResponse.relay``)
BodyEnd = Callable[[Batch], object]


@dataclass(slots=True)
class UpstreamResponse:
    status: int
    headers: list[tuple[bytes, bytes]]
    #: the body in batches: every piece parsed since the last batch, each stamped when its read came
    #: in (under load the proxy forwards a backlog in one write, and the record keeps each
    #: piece with its true arrival time rather than the time the event loop got round to it)
    batches: AsyncIterator[Batch]
    aclose: Callable[[], Awaitable[None]]
    #: the body handed on from the upstream's read callback instead (None where not offered):
    #: ``await relay(sink, end)`` gives ``sink`` each read's pieces the moment they are parsed, with
    #: no task step between. ``sink`` returns False to stop (the caller's buffer is full,
    #: or the caller is gone); relay then returns False and reading waits until relay is called
    #: again. It returns True at the body's end and raises the errors ``batches`` raises. Use one of
    #: the two, not both. ``end`` (or None) takes the pieces of the read that completed the body in
    #: place of ``sink``: the response's end can then go out with them, in one write
    relay: Callable[[BodySink, BodyEnd | None], Awaitable[bool]] | None = None

    @property
    def body(self) -> AsyncIterator[bytes]:
        """The body piece by piece (for callers that want bytes only)."""

        async def pieces() -> AsyncIterator[bytes]:
            async for batch in self.batches:
                for _, piece in batch:
                    yield piece

        return pieces()


_new_response = UpstreamResponse.__new__


class Upstream:
    async def open(
        self, method: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        """Send the request: ``headers`` go on as given (names and values as bytes), ``host`` and
        the body's framing are the client's."""
        raise NotImplementedError

    async def aclose(self) -> None:
        raise NotImplementedError


_NO_BODY = frozenset({204, 304})
#: the longest response head accepted from the upstream
_MAX_HEAD = 64 * 1024
#: body bytes parsed but not yet taken by the proxy; past this the socket stops being read until the
#: proxy takes them (it takes all that are waiting at once)
_HIGH_WATER = 256 * 1024


#: the compiled twin of the request head's header lines (proxy/_heads_c.c; None: off or not built)
_twin = native("wirecheck.proxy._heads_c")


class _Surplus(Exception):
    """Bytes past the end of the response: never handed to the next caller."""


class _HeadTooLarge(Exception):
    """The response head passed ``_MAX_HEAD``: raised from the parser's callback, so that a head
    that arrives whole in one read is bounded too (the count per read never sees it)."""


#: the compiled reader of a chunked body's reads (proxy/_relay_c.c), or None: llhttp reads them all
_native_relay = native("wirecheck.proxy._relay_c")


class _Conn(asyncio.Protocol):
    """One upstream connection: llhttp (httptools) parses each response; this class only decides
    what the parse means for the connection. It is reusable only after a complete message with
    nothing after it; surplus bytes (in the same read or arriving later), bad framing, an early
    close or a caller that stops reading mid-body close it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.reused = False
        self.closed = False
        self.active = False
        self.paused = False
        self.waiter: asyncio.Future[None] | None = None
        self.sink: BodySink | None = None
        #: takes the last pieces of a complete body in place of ``sink`` (``relay``'s ``end``), once
        self.sink_end: BodyEnd | None = None
        self.halted = False  # the sink said stop
        #: while waiting (``_Raw._wait``): the time the wait ends by (None: ``read_s`` after the
        #: last read's stamp), and whether it ended by timing out
        self.deadline: float | None = None
        self.timed_out = False
        #: the parser saw its last message through to its end, kept alive: it reads the next one
        self.reparse = False
        self._begin(head_only=False)
        self.active = False

    def _begin(self, *, head_only: bool) -> None:
        if not self.reparse:
            # llhttp waits for the next message after one it parsed to the end on a connection kept
            # alive, so a reused connection keeps its parser (a new one is 5k instructions); not after
            # a HEAD answer, whose end only this class knew
            self.parser = httptools.HttpResponseParser(self)
        self.reparse = False
        self.head_only = head_only
        self.active = True
        self.got_bytes = False
        self.head_bytes = 0
        self.head_parsed = 0  # of the head being parsed, from the parser's callbacks
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.framed = False  # content-length or chunked: the body does not end with the connection
        self.informational = False
        self.headers_done = False
        self.complete = False
        self.keep = False
        self.pieces: Batch = []
        self.buffered = 0
        self.stamp = 0.0  # when the read being parsed arrived
        self.error: Exception | None = None
        #: the compiled reader that took the body over from llhttp (``_ConnC``), or None
        self.dechunk: _relay_c.Dechunker | None = None
        #: a head llhttp has not seen (``_ConnC._whole_head``): what it is fed, its callbacks quiet
        #: (``priming``), before the compiled reader hands it the rest of the body
        self.unread_head: bytes | None = None
        self.priming = False

    def usable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    # --- asyncio.Protocol ---------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        dechunk = self.dechunk
        if dechunk is None:
            self._read(data)
            return
        # a chunked body's read, by the compiled reader (``_ConnC``): relayed whole within this one
        # call, or handed back to llhttp from where it stops (``_dechunked``). ``_ConnReader`` does
        # this part in C, once a forwarded event
        self.stamp = stamp = time.monotonic()
        took = dechunk.feed(data, stamp, self.sink, self.pieces)
        if took is True:
            if self.halted:
                self._wake()
            return
        self._dechunked(data, took)

    def _dechunked(self, data: bytes, took: bool | int | tuple[bytes, int, bool, int]) -> None:
        """A read the compiled reader did not relay whole: stopped by the sink (False), kept in
        ``pieces`` (``took`` bytes), or handed back to llhttp from where it stops (a tuple)."""
        if took is False:
            self._halt()
            self._wake()
            return
        if isinstance(took, tuple):  # llhttp's from here
            self.dechunk = None
            primer, offset, filler, appended = took
            if self.sink is None:
                self.buffered += appended
            if self.unread_head is not None and primer == b"0\r" and data[offset:] == b"\n\r\n":
                self._plain_end()
            else:
                if self.unread_head is not None:
                    self._prime()
                first = len(self.pieces)
                self._feed(primer + data[offset:])
                if filler:  # the byte that only put llhttp after a chunk's data
                    del self.pieces[first]
                    if self.sink is None:
                        self.buffered -= 1
        elif self.sink is None:  # appended to ``pieces`` (``took`` bytes): nothing relays them yet
            self.buffered += took
        self._after_read(None)

    def _read(self, data: bytes) -> None:
        """A read for llhttp (no compiled reader has the body)."""
        if not self.active or self.complete or self.error is not None:
            # bytes nobody asked for (after a complete response, or on an idle connection)
            self.keep = False
            self.close()
            return
        self.got_bytes = True
        self.stamp = time.monotonic()  # one clock read per socket read, for every piece parsed from it
        if not self.headers_done:
            if not self.head_bytes and self._whole_head(data):
                return
            self.head_bytes += len(data)
        self._feed(data)
        # the compiled reader may take over after it
        self._after_read(data if _native_relay is not None else None)

    def _after_read(self, read_by_llhttp: bytes | None) -> None:
        """What a read brought, relayed or kept; the waiting task woken as needed, and the compiled
        reader's take-over after a read that llhttp parsed (``read_by_llhttp``)."""
        sink = self.sink
        if sink is not None:
            # relayed: what this read brought goes on now, in this callback; the waiting
            # task is woken only at the end, on an error, or when the sink says stop. The read
            # that completed the body goes to ``end``, with the body's end
            if self.complete and self.sink_end is not None and self.error is None:
                self._end()
            elif self.pieces:
                batch, self.pieces = self.pieces, []
                self.buffered = 0
                if not sink(batch):
                    self._halt()
            if self.halted or self.complete or self.error is not None:
                self._wake()
            if read_by_llhttp is not None:
                self._take_over(read_by_llhttp)
            return
        if self.buffered > _HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()
        if read_by_llhttp is not None:
            self._take_over(read_by_llhttp)

    def _take_over(self, data: bytes) -> None:
        """Overridden by ``_ConnC``: nothing to take over here."""

    def _whole_head(self, data: bytes) -> bool:
        """Overridden by ``_ConnC``: llhttp reads every head here."""
        return False

    def _plain_end(self) -> None:
        """The plain last chunk (``0``, an empty line) of a body whose head llhttp did not read,
        and nothing after it in the read: the message's end as ``on_message_complete`` takes it.
        llhttp, which saw none of the message, is where it would be after it: at the next one."""
        self.keep = self.reparse = self.unread_head is _KEPT_HEAD
        self.unread_head = None
        self.complete = True

    def _prime(self) -> None:
        """llhttp fed the head it has not seen (``unread_head``), its callbacks quiet: it then reads
        the rest of the body as it would have after the real one (the same version, framing and
        connection)."""
        head, self.unread_head = self.unread_head, None
        assert head is not None
        self.priming = True
        try:
            self.parser.feed_data(head)
        finally:
            self.priming = False

    def _feed(self, data: bytes) -> None:
        """``data`` through llhttp; what it means for the connection."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, _Surplus):
                self.keep = False  # the response itself is whole: only the connection goes
            elif isinstance(exc.__context__, _HeadTooLarge):
                self.error = UpstreamBroken(f"response head over {_MAX_HEAD} bytes")
            else:
                self.error = UpstreamBroken(f"{type(exc).__name__}: {exc}")
            self.close()
        except httptools.HttpParserError as exc:
            what = "bad HTTP framing" if self.headers_done else "not an HTTP response"
            self.error = UpstreamBroken(f"{what} from the upstream: {exc}")
            self.close()
        else:
            if not self.headers_done and self.head_bytes > _MAX_HEAD:
                self.error = UpstreamBroken(f"response head over {_MAX_HEAD} bytes")
                self.close()

    def hand_on(self) -> None:
        assert self.sink is not None
        if self.complete and self.sink_end is not None and self.error is None:
            self._end()
            return
        batch, self.pieces = self.pieces, []
        self.buffered = 0
        if not self.sink(batch):
            self._halt()

    def _end(self) -> None:
        """The body is complete: its last pieces (perhaps none) to ``sink_end``, once. Whether the
        caller takes more matters no longer: the task is woken for the body's end."""
        end, self.sink_end = self.sink_end, None
        assert end is not None
        batch, self.pieces = self.pieces, []
        self.buffered = 0
        end(batch)

    def _halt(self) -> None:
        """The sink said stop: reading waits until it is handed on again."""
        self.halted = True
        if not self.paused and self.transport is not None and not self.closed:
            self.paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.active and not self.complete and self.error is None:
            if self.headers_done and not self.framed:
                self.complete = True  # a body delimited by the connection's end
            elif self.got_bytes:
                self.error = UpstreamBroken("connection broken mid-response")
            else:
                self.error = _EarlyClose("the upstream closed the connection without answering")
        self._wake()

    # --- httptools callbacks --------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:
            raise _Surplus

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.priming:
            return
        self.head_parsed += len(name) + len(value) + 4
        if self.head_parsed > _MAX_HEAD:
            raise _HeadTooLarge
        self.headers.append((name, value))
        low = name.lower()
        if low == b"content-length" or (low == b"transfer-encoding" and b"chunked" in value.lower()):
            self.framed = True

    def on_headers_complete(self) -> None:
        if self.priming:
            return
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self.informational = True  # 100 Continue and friends: the real answer follows
            self.head_parsed = 0
            self.headers = []
            self.framed = False
            return
        self.status = status
        self.headers_done = True
        if self.head_only or status in _NO_BODY:
            self.framed = True
            if self.head_only:
                # llhttp does not know the request was HEAD: the head is the whole message
                self.complete = True
                self.keep = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        if self.complete:
            raise _Surplus  # a body after a HEAD response's head
        self.pieces.append((self.stamp, body))
        if self.sink is None:  # relayed, each read's pieces go on at its end: nothing to bound
            self.buffered += len(body)

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False
            return
        if not self.complete:
            self.complete = True
            self.keep = self.parser.should_keep_alive() and self.framed
            self.reparse = self.keep


class _ConnC(_Conn):
    """A connection whose chunked body the compiled reader takes over from llhttp (``_native_relay``;
    ``_Conn`` where it is not built): llhttp parses the head and what came with it, and from the end
    of the first read that leaves llhttp at a chunk's boundary (usually the head's own) the reader
    reads on: each read goes straight to the compiled sink while one relays the body, or is parsed
    into ``pieces`` as llhttp's callbacks would. It hands back to llhttp (``data_received``) what
    it does not read itself, so llhttp still judges every unusual byte, the last chunk and what
    follows it, and the connection's outcome is decided by the same callbacks as before.

    A chunk's boundary, from llhttp's callbacks: the last one of the read was the end of the head
    or of a chunk, and the read ends in CRLF (a size line begun after it cannot end in CRLF without
    llhttp calling ``on_chunk_header``)."""

    def _begin(self, *, head_only: bool) -> None:
        super()._begin(head_only=head_only)
        self.boundary = False
        self.chunked = False

    def _take_over(self, data: bytes) -> None:
        if (
            self.boundary
            and self.chunked
            and not self.complete
            and self.error is None
            and data.endswith(b"\r\n")
        ):
            self.dechunk = _Dechunker()

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if self.headers_done and self.framed_by_head():
            self.chunked = self.boundary = True

    def framed_by_head(self) -> bool:
        """The head says chunked and nothing else that makes llhttp read the body otherwise: one
        transfer-encoding of exactly ``chunked``, no content-length, no upgrade; a status with a
        body, and not the answer to HEAD."""
        if self.head_only or self.status in _NO_BODY or self.status < 200:
            return False
        te = 0
        for name, value in self.headers:
            low = name.lower()
            if low == b"transfer-encoding":
                if value.strip().lower() != b"chunked":
                    return False
                te += 1
            elif low in (b"content-length", b"upgrade"):
                return False
        return te == 1

    def _whole_head(self, data: bytes) -> bool:
        """The first read of a response whose head is whole in it and of the shape an engine streams
        with (``_heads_c.parse_response``): taken as llhttp's callbacks would take it, and the
        compiled reader has the body from the head's end on, a chunk's boundary. The plain last
        chunk with nothing after it ends the message without llhttp (``_plain_end``); llhttp is fed
        a head of the same framing only if the reader hands it anything else (a last chunk with
        trailers or an extension, bytes after it, a byte the reader does not read itself):
        ``_prime``."""
        if _twin is None or self.head_only:
            return False
        head = _twin.parse_response(data, _MAX_HEAD)
        if head is None:
            return False
        self.status, self.headers, close, size = head
        self.unread_head = _CLOSING_HEAD if close else _KEPT_HEAD
        self.framed = self.headers_done = self.chunked = self.boundary = True
        self.dechunk = dechunk = _Dechunker()
        # what came with the head is parsed into ``pieces`` (no sink: ``_after_read`` relays them
        # where one is already waiting), so the reader answers bytes or a hand-back, never True
        rest = data[size:]
        self._dechunked(rest, dechunk.feed(rest, self.stamp, None, self.pieces) if rest else 0)
        return True

    def on_chunk_header(self) -> None:
        self.boundary = False

    def on_chunk_complete(self) -> None:
        self.boundary = True


#: what llhttp is fed in place of a head it did not read (``_ConnC._prime``): what it reads the body
#: and the connection's end by is the same (HTTP/1.1, chunked, and whether a connection header says
#: close): ``parse_response`` takes no head that differs from one of these in anything else llhttp
#: reads
_KEPT_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
_CLOSING_HEAD = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"

if _native_relay is not None:
    _Dechunker = _native_relay.Dechunker

    class _ConnReader(_native_relay.Reader, _ConnC):  # type: ignore[misc,name-defined]  # found at run time
        """``_ConnC`` with its read callback compiled (proxy/_relay_c.c's ``Reader``): a read of
        the body that the compiled reader relays whole does not enter Python (the callback's frame
        and its attribute look-ups were about 8 % of the forwarding process's CPU at 256 streams);
        any other read goes on to ``_read`` or ``_dechunked`` as ``_ConnC.data_received`` sends it.
        ``dechunk``, ``sink``, ``pieces``, ``stamp`` and ``halted`` are the ``Reader``'s fields."""


class _EarlyClose(Exception):
    """The connection closed before any byte of the answer."""


class _Raw(Upstream):
    """HTTP/1.1 over asyncio protocols, with idle connections kept on a stack for reuse."""

    def __init__(self, up: SplitResult, connect_s: float, read_s: float, max_idle: int = 1024) -> None:
        self.host = up.hostname or "127.0.0.1"
        self.port = up.port or (443 if up.scheme == "https" else 80)
        self.host_header = up.netloc.encode("latin-1")
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if up.scheme == "https" else None
        self.connect_s, self.read_s = connect_s, read_s
        self.idle: list[_Conn] = []
        self.max_idle = max_idle
        # the read timeouts: one sweep over the waiting connections every ``_tick_s`` (while any
        # wait) instead of a timer per wait; asyncio.timeout's objects and timer handle, twice
        # per exchange, were a few per cent of the forwarding process. A wait ends at most a tick
        # (a twentieth of ``read_s``, at most a second) after its limit
        self._waiting: set[_Conn] = set()
        self._sweeping: asyncio.TimerHandle | None = None
        self._sweep_loop: asyncio.AbstractEventLoop | None = None
        self._tick_s = min(1.0, max(read_s / 20, 0.001))

    async def _wait(self, conn: _Conn, deadline: float | None = None) -> bool:
        """Wait for ``conn``'s next event; False: ``deadline`` passed first (None: ``read_s``
        after the stamp of its last read, or of the request)."""
        conn.deadline, conn.timed_out = deadline, False
        self._waiting.add(conn)
        loop = asyncio.get_running_loop()
        if self._sweeping is None or self._sweep_loop is not loop:  # (a loop that ended left one)
            self._sweep_loop = loop
            self._sweeping = loop.call_later(self._tick_s, self._sweep)
        # the connection's ``_wake`` ends the wait (here, not in a coroutine of the connection's own:
        # one coroutine fewer for the task to make and step through at each wake)
        conn.waiter = waiter = loop.create_future()
        try:
            await waiter
        finally:
            conn.waiter = None
            self._waiting.discard(conn)
        return not conn.timed_out

    def _sweep(self) -> None:
        self._sweeping = None
        now = time.monotonic()
        for conn in list(self._waiting):
            limit = conn.deadline if conn.deadline is not None else conn.stamp + self.read_s
            if now >= limit:
                conn.timed_out = True
                conn._wake()
        if self._waiting:
            self._sweeping = asyncio.get_running_loop().call_later(self._tick_s, self._sweep)

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_s):
                _, conn = await loop.create_connection(
                    _Conn if _native_relay is None else _ConnReader, self.host, self.port, ssl=self.ssl
                )
        except TimeoutError as exc:
            raise UpstreamTimeout("connect timeout") from exc
        except OSError as exc:
            raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc
        return conn

    def _take(self) -> _Conn | None:
        while self.idle:
            conn = self.idle.pop()
            if conn.usable():
                conn.reused = True
                return conn
            conn.close()
        return None

    def _give_back(self, conn: _Conn) -> None:
        conn.active = False
        if conn.paused and conn.transport is not None:
            conn.paused = False
            conn.transport.resume_reading()  # so that a late surplus byte is seen, and closes it
        if conn.usable() and len(self.idle) < self.max_idle:
            self.idle.append(conn)
        else:
            conn.close()

    async def open(
        self, method: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        head = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1"), b"host: ", self.host_header, b"\r\n"]
        lines = _twin.request_lines(headers) if _twin is not None else None
        if lines is not None:  # the compiled twin's (proxy/_heads_c.c): the same bytes
            head.append(lines)
        else:
            for k, v in headers:
                head += (k, b": ", v, b"\r\n")
        if body or method in ("POST", "PUT", "PATCH"):
            head.append(b"content-length: %d\r\n" % len(body))
        head.append(b"\r\n")
        request = b"".join(head) + body
        read_s = self.read_s
        conn: _Conn
        for attempt in (0, 1):
            taken = self._take() if attempt == 0 else None
            conn = taken or await self._connect()
            conn._begin(head_only=method == "HEAD")
            try:
                assert conn.transport is not None
                conn.transport.write(request)
                conn.stamp = time.monotonic()  # until the first read: the body's waits count from here
                deadline = conn.stamp + read_s
                while not conn.headers_done and conn.error is None:
                    if not await self._wait(conn, deadline):
                        raise UpstreamTimeout("no response headers in time")
            except BaseException:
                conn.close()
                raise
            if conn.error is None:
                break
            conn.close()
            if isinstance(conn.error, _EarlyClose) and conn.reused and attempt == 0:
                continue  # a kept-alive connection the upstream had closed: once more, fresh
            if isinstance(conn.error, UpstreamBroken) and conn.got_bytes:
                raise UpstreamInvalid(str(conn.error)) from conn.error
            raise UpstreamUnreachable(str(conn.error)) from conn.error
        state = {"done": False}

        async def body_iter() -> AsyncIterator[Batch]:
            while True:
                if conn.pieces:
                    # everything parsed so far, at once: one hand-off (and one downstream write) for a
                    # backlog instead of one per piece
                    batch, conn.pieces = conn.pieces, []
                    conn.buffered = 0
                    if conn.paused and conn.transport is not None:
                        conn.paused = False
                        conn.transport.resume_reading()
                    yield batch
                    continue
                if conn.error is not None:
                    conn.close()
                    raise conn.error
                if conn.complete:
                    state["done"] = True
                    return
                if not await self._wait(conn):
                    conn.close()
                    raise UpstreamTimeout("the upstream stopped sending")

        async def relay(sink: BodySink, end: BodyEnd | None = None) -> bool:
            conn.sink, conn.sink_end, conn.halted = sink, end, False
            try:
                if conn.pieces:
                    conn.hand_on()  # parsed before the relay began (with the head, or while paused)
                if not conn.halted and conn.paused and conn.transport is not None:
                    conn.paused = False
                    conn.transport.resume_reading()
                while not conn.halted:
                    if conn.error is not None:
                        conn.close()
                        raise conn.error
                    if conn.complete:
                        state["done"] = True
                        return True
                    # read_s bounds the wait for the next byte: the stamp of the last read says
                    # whether bytes came while this task slept
                    left = read_s - (time.monotonic() - conn.stamp) if conn.stamp else read_s
                    if left <= 0:
                        conn.close()
                        raise UpstreamTimeout("the upstream stopped sending")
                    await self._wait(conn)  # woken by a read's end, an error, a stop, or read_s
                return False
            finally:
                conn.sink = conn.sink_end = None

        async def aclose() -> None:
            if state["done"] and conn.keep and not conn.pieces and conn.error is None:
                self._give_back(conn)
            else:
                conn.close()

        # made without the dataclass's ``__init__``, entered from C (about 2k instructions)
        made = _new_response(UpstreamResponse)
        made.status, made.headers, made.batches, made.aclose, made.relay = (
            conn.status,
            conn.headers,
            body_iter(),
            aclose,
            relay,
        )
        return made

    async def aclose(self) -> None:
        if self._sweeping is not None:
            self._sweeping.cancel()
            self._sweeping = None
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
        self, method: str, target: str, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> UpstreamResponse:
        req = self.client.build_request(method, target, headers=headers, content=body)
        try:
            resp = await self.client.send(req, stream=True)
        except httpx.TimeoutException as exc:
            raise UpstreamTimeout(type(exc).__name__) from exc
        except httpx.HTTPError as exc:
            raise UpstreamUnreachable(f"{type(exc).__name__}: {exc}") from exc

        async def body_iter() -> AsyncIterator[Batch]:
            try:
                async for piece in resp.aiter_raw():
                    yield [(time.monotonic(), piece)]
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
