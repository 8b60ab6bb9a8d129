"""The listeners' HTTP/1.1 server side, one connection at a time: httptools (llhttp, the parser of
Node and uvicorn) parses each request; this module owns what is around it and serves the ASGI app.
A request of the common shape that arrives whole in one read (every SDK's, as a rule) is read by
the compiled twin instead (``_heads_c.parse_request``: one call for what the parser's callbacks did
in a dozen), which declines anything else; the connection's parser is made at the first request it
declines, and reads the rest of that connection.

What a server for a proxy needs beyond parsing, and where each is:

- bounds on what a caller may hold: a request head past ``max_head`` bytes is a 431 (the whole head:
  counted per read while it arrives, and from the parser's callbacks for a head that came in one
  read), a head not complete within ``head_timeout_s`` is a 408, and a connection that is idle (kept
  alive after a response, or never used) is closed after ``idle_timeout_s``. The request body's
  deadline is the app's (``TapConfig.request_timeout_s``), which can answer in JSON;
- keep-alive and pipelining: requests on one connection are answered in order, one app call at a time;
- back-pressure both ways: reading pauses while a request body waits unread past 64 KiB, and a
  response waits (``send`` and ``DirectBody.drain``) while the caller's socket buffer is full;
- the response framing the app's headers ask for: its content-length, or chunked when it gives none;
- what the ASGI scope lacks, offered in ``scope["extensions"]``: ``DirectBody`` writes a streamed
  body's pieces straight to the caller's socket from the upstream's read callback; ``Handoff`` moves
  the whole connection to another process (the live view's); ``Cut`` ends the caller's connection
  mid-response (an upstream that broke: the caller sees the truncation) without the app raising;
  ``wirecheck.target`` is the request target as sent when it is not origin-form (the scope's path
  keeps only the path of ``GET http://other.host/x``, and the proxy must see the host to refuse it).
  A protocol upgrade (a websocket) reaches the app as a plain request, which the tap refuses.

No header is added that the app did not send (no ``server`` or ``date``): a proxy's answer carries
the upstream's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http
import logging
import re
import socket
import urllib.parse
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import httptools

from wirecheck.contracts import native

if TYPE_CHECKING:
    from ._server import Listener

__all__ = [
    "CUT",
    "DIRECT_BODY",
    "HANDOFF",
    "TARGET",
    "Cut",
    "DirectBody",
    "Handoff",
    "HttpConnection",
    "ListenerConfig",
]

#: the scope extension under which a listener offers ``DirectBody``
DIRECT_BODY = "wirecheck.direct_body"
#: the scope extension under which a listener configured for it offers ``Handoff``
HANDOFF = "wirecheck.handoff"
#: the scope extension under which a listener offers ``Cut``
CUT = "wirecheck.cut"
#: the scope extension holding the request target as sent (bytes), when it is not origin-form
TARGET = "wirecheck.target"
#: ``0`` turns ``DirectBody`` off in the proxy's listeners (an A/B of the two paths:
#: benchmarks/proxy_overhead.py)
DIRECT_BODY_ENV = "WIRECHECK_DIRECT_BODY"
#: ``0``: the compiled sink writes a relayed body through the caller's transport only, never to its
#: socket itself (an A/B of the two, and a way back: ``DirectBody.socket_fd``)
DIRECT_WRITE_ENV = "WIRECHECK_DIRECT_WRITE"
#: the transports over a plain stream socket whose ``write`` sends at once what it cannot hold back
#: and holds back only what ``get_write_buffer_size`` counts (uvloop's, asyncio's): one of them with
#: nothing held lets a writer of its own reach the socket first without reordering a byte
_PLAIN_TRANSPORTS = frozenset(
    (
        ("uvloop.loop", "TCPTransport"),
        ("uvloop.loop", "UnixTransport"),
        ("asyncio.selector_events", "_SelectorSocketTransport"),
    )
)
#: request body bytes held for an app that has not read them yet, before reading pauses
BODY_HIGH_WATER = 64 * 1024

Message = MutableMapping[str, Any]
#: a whole request as ``_heads_c.parse_request`` reads it: method, path, query, version, headers,
#: keep-alive, body
_Whole = tuple[str, bytes, bytes, str, list[tuple[bytes, bytes]], bool, bytes]
App = Callable[
    [Message, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]

_log = logging.getLogger("wirecheck.proxy")
# RFC 9110 token characters for a name; no control characters but tab in a value
_BAD_NAME = re.compile(b'[\x00-\x1f\x7f()<>@,;:\\[\\]={} \t\\\\"]')
_BAD_VALUE = re.compile(b"[\x00-\x08\x0a-\x1f\x7f]")
#: response header names found good: the same few on every response, each searched once (a search
#: is most of a header's cost here); any name past the bound is searched every time
_GOOD_NAMES: set[bytes] = set()
_GOOD_NAMES_KEPT = 1024


def _status_line(code: int) -> bytes:
    try:
        phrase = http.HTTPStatus(code).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (code, phrase)


_STATUS = {code: _status_line(code) for code in range(100, 600)}
#: the compiled twin of a response head's header lines (proxy/_heads_c.c; None: off or not built)
_twin = native("wirecheck.proxy._heads_c")


def _switched_on(env: str) -> bool:
    """A switch that is on unless the variable ``env`` says ``0``."""
    import os

    return os.environ.get(env, "1").strip() != "0"


@dataclass(frozen=True, kw_only=True, slots=True)
class ListenerConfig:
    #: largest request head a caller may send (431 past it)
    max_head: int = 64 * 1024
    #: longest a caller may take to send a request head (408 past it)
    head_timeout_s: float = 30.0
    #: an idle connection (kept alive, or never used) is closed after this long
    idle_timeout_s: float = 75.0
    #: after an answer that ends its connection, how long (seconds) and how much (bytes) of what the
    #: caller still sends is read and dropped before the socket is closed (``HttpConnection.linger``)
    linger_s: float = 5.0
    linger_bytes: int = 16 * 1024 * 1024
    #: offer ``DirectBody`` (the taps; on unless ``WIRECHECK_DIRECT_BODY=0``)
    direct_body: bool = field(default_factory=functools.partial(_switched_on, DIRECT_BODY_ENV))
    #: let ``DirectBody.socket_fd`` give the caller's socket (on unless ``WIRECHECK_DIRECT_WRITE=0``)
    direct_write: bool = field(default_factory=functools.partial(_switched_on, DIRECT_WRITE_ENV))
    #: offer ``Handoff`` (the admin listener, whose live view connections move)
    handoff: bool = False
    #: SO_SNDBUF of each connection; 0: the kernel's autotuning (the admin listener sets one: a viewer
    #: that stops reading holds that much, not the megabytes autotuning grows to; the socket keeps it
    #: when it is handed to the view process)
    send_buffer: int = 0


class HttpConnection(asyncio.Protocol):
    """One caller connection: parses requests, runs the app for each in turn, writes its answers."""

    def __init__(self, listener: Listener) -> None:
        self.listener = listener
        self.cfg = listener.config
        self.loop = asyncio.get_running_loop()
        #: made at the first request the compiled twin does not take whole (``_parser``): a connection
        #: whose requests all come whole in one read each never needs one
        self.parser: httptools.HttpRequestParser | None = None
        #: a request taken whole said "connection: close": what follows is ignored, as the parser's
        #: ``lenient_data_after_close`` ignores it
        self._after_close = False
        self.transport: asyncio.Transport = None  # type: ignore[assignment]
        #: this end's address, read at the first request (``address``); ``adopted``: accepted
        #: elsewhere and handed over (``Listener.adopt``), so not the listener's own address
        self.server: tuple[str, int] | None = None
        self.adopted = False
        #: the newest request parsed; ``pipeline``: parsed ones waiting for the one before to end
        self.cycle: _Cycle | None = None
        self.pipeline: deque[_Cycle] = deque()
        self.read_paused = self.write_paused = False
        #: the caller's socket takes more, or the connection is gone (a waiting ``drain`` ends): an
        #: asyncio.Event's flag, with the Event made only when a ``drain`` waits (one made and set
        #: for every connection was 3k instructions of its set-up)
        self.writable = True
        self._writable: asyncio.Event | None = None
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._expect_100 = False
        self._in_head = True
        self._head_bytes = 0  # the head's bytes read so far, counted per read
        self._parsed_head = 0  # the head being parsed, counted from the parser's callbacks
        self._head_over = False
        #: when the head under way and the idle spell end (the loop's clock; 0: not running),
        #: checked by the listener's sweep (``Listener.sweep``): no timer handle per connection
        self.head_by = 0.0
        self.idle_by = 0.0
        #: called once when the connection is lost (``DirectBody.on_gone``: the running app's)
        self.on_gone: Callable[[], None] | None = None
        #: the answer is written and this side shut (``linger``): what the caller sends is dropped
        self.lingering = False
        self._lingered = 0
        #: the socket's descriptor for ``DirectBody.socket_fd`` (-1: none to write to; None: not asked)
        self.sock_fd: int | None = None

    # --- the transport's side ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, but not an asyncio.Transport instance on uvloop (the forwarding
        # processes' loop): its classes implement the same methods without subclassing
        self.transport = cast(asyncio.Transport, transport)
        self.listener.connections.add(self)
        if self.cfg.send_buffer:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.cfg.send_buffer)
        self._arm_idle()  # a connection that never says anything is idle too

    def connection_lost(self, exc: Exception | None) -> None:
        self.listener.connections.discard(self)
        self._stop_head_timer()
        self._disarm_idle()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True
        if self.cycle is not None:
            self.cycle.notify()
        self._set_writable(True)  # a response waiting to write finds the connection gone
        if self.on_gone is not None:
            gone, self.on_gone = self.on_gone, None
            gone()
        self.pipeline.clear()
        self.parser = None  # it holds this object: no cycle left for the GC

    def eof_received(self) -> bool | None:
        return None  # the caller closed its side: close ours too

    def pause_writing(self) -> None:
        self.write_paused = True
        self._set_writable(False)

    def resume_writing(self) -> None:
        self.write_paused = False
        self._set_writable(True)

    def _set_writable(self, writable: bool) -> None:
        self.writable = writable
        if self._writable is not None:
            if writable:
                self._writable.set()
            else:
                self._writable.clear()

    async def drain(self) -> None:
        if not self.writable:
            if self._writable is None:
                self._writable = asyncio.Event()
            await self._writable.wait()

    def pause_reading(self) -> None:
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        if self.lingering:
            self._lingered += len(data)
            if self._lingered > self.cfg.linger_bytes:
                self.transport.close()
            return
        self.idle_by = 0.0  # (``_disarm_idle``, inline: once a read)
        if self._in_head:
            self._head_bytes += len(data)
            if not self.head_by:
                self.head_by = self.loop.time() + self.cfg.head_timeout_s
                self.listener.sweep()
        parser = self.parser
        if parser is None and not self._after_close:
            # a request of the common shape, whole in this read: taken as the parser's callbacks
            # would take it, in one call (the parser is made for the first one that is not)
            whole = _twin.parse_request(data, self.cfg.max_head) if _twin is not None else None
            if whole is None:
                parser = self.parser = self._parser()
            else:
                try:
                    self._whole(whole)
                except Exception:  # as a callback's error stops the parser
                    _log.exception("wirecheck proxy: a request taken whole failed")
                    self._refuse(400, "invalid HTTP request")
                    return
        if parser is not None:
            try:
                parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                pass  # no protocol upgrade here: the request was served as plain HTTP
            except httptools.HttpParserError:
                if self._head_over:
                    self._refuse(431, f"request head over {self.cfg.max_head} bytes")
                else:
                    self._refuse(400, "invalid HTTP request")
                return
        # counted before parsing and checked after, so a first read that also carries body bytes
        # past a complete head is never taken for a long head
        if self._in_head and self._head_bytes > self.cfg.max_head:
            self._refuse(431, f"request head over {self.cfg.max_head} bytes")

    def address(self) -> tuple[str, int] | None:
        """This end's address (ASGI's ``server``): the listener's, when it listens on one address
        and the connection came through it (the same for every connection it accepts), else the
        socket's own (a system call), read once."""
        if self.server is None:
            bound = None if self.adopted else self.listener.bound
            self.server = bound or _address(self.transport.get_extra_info("sockname"))
        return self.server

    # --- the parser's callbacks -------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._url, self._headers, self._expect_100 = b"", [], False
        self._parsed_head = 16  # the request line's method, version and line ends

    def on_url(self, url: bytes) -> None:
        self._parsed_head += len(url)
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._parsed_head += len(name) + len(value) + 4
        if self._parsed_head > self.cfg.max_head:
            # a head that came whole in one read is never long by the count per read: the parser
            # stops here, and data_received answers 431
            self._head_over = True
            raise _HeadTooLarge
        name = name.lower()
        value = value.rstrip(b" \t")  # llhttp keeps trailing whitespace, which RFC 9110 leaves out
        if name == b"expect" and value.lower() == b"100-continue":
            self._expect_100 = True
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self.head_by = 0.0  # (``_stop_head_timer``, inline)
        parser = self.parser
        assert parser is not None
        version = parser.get_http_version()
        url = httptools.parse_url(self._url)
        self._request(
            parser.get_method().decode("ascii"),
            url.path,
            url.query or b"",
            version,
            self._headers,
            keep_alive=version != "1.0" and parser.should_keep_alive(),
            expect_100=self._expect_100,
            # absolute-form (or asterisk-form)
            target=None if self._url.startswith(b"/") else bytes(self._url),
        )

    def _whole(self, whole: _Whole) -> None:
        """A whole request, as the compiled twin read it (``_heads_c.parse_request``): what the
        parser's callbacks would have done with it, from its head's end to its message's."""
        method, raw_path, query, version, headers, keep_alive, body = whole
        self._in_head = False
        self._head_bytes = 0
        self.head_by = 0.0
        self._request(
            method, raw_path, query, version, headers, keep_alive=keep_alive, expect_100=False, target=None
        )
        if body:
            self.on_body(body)
        self.on_message_complete()
        if not keep_alive:
            self._after_close = True

    def _parser(self) -> httptools.HttpRequestParser:
        parser = httptools.HttpRequestParser(self)
        # answer the first of pipelined requests even when it says "connection: close"
        parser.set_dangerous_leniencies(lenient_data_after_close=True)
        return parser

    def _request(
        self,
        method: str,
        raw_path: bytes,
        query: bytes,
        version: str,
        headers: list[tuple[bytes, bytes]],
        *,
        keep_alive: bool,
        expect_100: bool,
        target: bytes | None,
    ) -> None:
        """A request's head has been read: its cycle starts now, or waits behind the one running."""
        path = raw_path.decode("ascii")
        ext: dict[str, Any] = {}
        scope: Message = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": version,
            "method": method,
            "scheme": "http",
            "path": urllib.parse.unquote(path) if "%" in path else path,
            "raw_path": raw_path,
            "query_string": query,
            "root_path": "",
            "headers": headers,
            "server": self.address(),
            # the peer's address would be a system call a connection, and no app of wirecheck reads
            # it: not asked (ASGI lets a server leave it out)
            "client": None,
            "state": dict(self.listener.state),
            "extensions": ext,
        }
        cycle = _Cycle.made(self, scope, keep_alive=keep_alive, expect_100=expect_100)
        # the app's task has not run yet: it finds the extensions in its scope
        # ``Cut(cycle)`` and ``DirectBody(cycle)`` made without their ``__init__`` (a class's call
        # enters a Python ``__init__`` from C, about 2k instructions on this interpreter): the same
        # slots, and the one weak reference to the cycle that both would take
        held = weakref.ref(cycle)
        cut = ext[CUT] = _new_cut(Cut)
        cut._cycle = held
        if target is not None:
            ext[TARGET] = target
        cfg = self.cfg
        if cfg.direct_body:
            direct = ext[DIRECT_BODY] = _new_direct(DirectBody)
            direct._cycle, direct._transport = held, self.transport
        if cfg.handoff:
            ext[HANDOFF] = Handoff(self)
        running = self.cycle
        self.cycle = cycle
        if running is None or running.response_complete:
            self._start(cycle)
        else:  # pipelined behind a response still going: it waits its turn, and reading waits too
            self.pause_reading()
            self.pipeline.append(cycle)

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return
        cycle.body += body
        if len(cycle.body) > BODY_HIGH_WATER:
            self.pause_reading()
        cycle.message = True  # (``cycle.notify()``, inline: once a request at least)
        if cycle.message_event is not None:
            cycle.message_event.set()

    def on_message_complete(self) -> None:
        self._in_head = True  # what comes next on this connection is the next request's head
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            return
        cycle.more_body = False
        cycle.message = True  # (``cycle.notify()``, inline)
        if cycle.message_event is not None:
            cycle.message_event.set()

    # --- requests in turn -------------------------------------------------------------------------

    def _start(self, cycle: _Cycle) -> None:
        task = self.loop.create_task(cycle.run(self.listener.app))
        self.listener.tasks.add(task)
        task.add_done_callback(self.listener.tasks.discard)

    def response_complete(self) -> None:
        """The running request's response has ended: the next pipelined one starts, or the
        connection waits, idle, for the next request (none after an answer that ends it)."""
        if self.lingering or self.transport.is_closing():
            return
        self.resume_reading()
        if self.pipeline:
            self._start(self.pipeline.popleft())
        else:
            self._arm_idle()

    def shutdown(self) -> None:
        """The listener stops: an idle connection closes now, a busy one after its response."""
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()
        else:
            self.cycle.keep_alive = False

    def linger(self) -> None:
        """End the connection after an answer: its bytes are written, then this side is shut, and
        what the caller still sends is read and dropped until it closes its side, for at most
        ``linger_s`` and ``linger_bytes`` (then the socket is closed). Closing at once with the
        caller's bytes unread (a pipelined request after "connection: close", a body past a refusal)
        makes the kernel answer with a reset, which can take the answer from a caller that has not
        read it yet. A transport that cannot shut one side (TLS) is closed as before."""
        transport = self.transport
        if self.lingering or transport.is_closing():
            return
        if not transport.can_write_eof():
            transport.close()
            return
        self.lingering = True
        self.pipeline.clear()
        self._stop_head_timer()
        try:
            transport.write_eof()  # after what is buffered has been written
        except (OSError, RuntimeError):
            transport.close()
            return
        self.idle_by = self.loop.time() + self.cfg.linger_s  # (the sweep closes it: ``overdue``)
        self.listener.sweep()
        self.resume_reading()

    # --- bounds -----------------------------------------------------------------------------------

    def _arm_idle(self) -> None:
        self.idle_by = self.loop.time() + self.cfg.idle_timeout_s
        self.listener.sweep()

    def _disarm_idle(self) -> None:
        self.idle_by = 0.0

    def _stop_head_timer(self) -> None:
        self.head_by = 0.0

    def overdue(self, now: float) -> None:
        """The listener's sweep: end what is over its bound at ``now`` (the loop's clock)."""
        if self.idle_by and now >= self.idle_by:
            self.idle_by = 0.0
            if not self.transport.is_closing():
                self.transport.close()
        if self.head_by and now >= self.head_by:
            self.head_by = 0.0
            self._head_too_slow()

    def _head_too_slow(self) -> None:
        if self.cycle is not None and not self.cycle.response_complete:
            # a pipelined head behind a response still streaming: its clock starts when that ends
            self.head_by = self.loop.time() + self.cfg.head_timeout_s
            return
        if self._in_head and self._head_bytes > 0:
            self._refuse(408, f"the request head did not arrive within {self.cfg.head_timeout_s:g} s")

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` in plain text when no response is under way, then close."""
        self._stop_head_timer()
        if self.lingering or self.transport.is_closing():
            return
        _log.warning("wirecheck proxy: refused a caller with %d: %s", status, message)
        if self.cycle is not None and not self.cycle.response_complete:
            self.transport.close()  # an answer under way: it breaks off
            return
        body = f"wirecheck proxy: {message}\n".encode()
        self.transport.write(
            _STATUS[status] + b"content-type: text/plain; charset=utf-8\r\n"
            b"content-length: %d\r\nconnection: close\r\nx-wirecheck-proxy: error\r\n\r\n%s"
            % (len(body), body)
        )
        self.linger()


class _Cycle:
    """One request and its response: the ASGI ``receive`` and ``send`` of one app call."""

    __slots__ = (
        "__weakref__",
        "body",
        "chunked",
        "conn",
        "disconnected",
        "keep_alive",
        "left",
        "message",
        "message_event",
        "more_body",
        "response_complete",
        "response_started",
        "scope",
        "terminated",
        "waiting_100",
    )

    conn: HttpConnection | None
    scope: Message
    keep_alive: bool
    waiting_100: bool
    disconnected: bool
    body: bytearray
    more_body: bool
    message: bool
    message_event: asyncio.Event | None
    response_started: bool
    response_complete: bool
    chunked: bool | None
    left: int
    terminated: bool

    @staticmethod
    def made(conn: HttpConnection, scope: Message, *, keep_alive: bool, expect_100: bool) -> _Cycle:
        """A cycle for one request: made by ``__new__`` and its slots' stores, without an
        ``__init__`` (which a class's call enters from C: about 2k instructions a request more)."""
        self = _new_cycle(_Cycle)
        self.conn = conn  # let go of when the app returns (no cycle for the GC)
        self.scope = scope
        self.keep_alive = keep_alive
        self.waiting_100 = expect_100
        self.disconnected = False
        self.body = bytearray()
        self.more_body = True
        #: ``receive`` has something to say (body bytes, the body's end, a disconnect): what an
        #: asyncio.Event would hold, kept as a flag, with the Event made only for a ``receive`` that
        #: waits (the taps take a body that came with its head without one: an Event and its sets
        #: were 4-5k instructions a request)
        self.message = False
        self.message_event = None
        self.response_started = self.response_complete = False
        #: chunked framing (None: not decided yet); ``left``: bytes of a content-length still due
        self.chunked = None
        self.left = 0
        #: the chunked body's end went out with its last read (``DirectBody.ended``): the response's
        #: end writes nothing more
        self.terminated = False
        return self

    def notify(self) -> None:
        """``receive`` has something to say: its wait ends (``asyncio.Event.set``)."""
        self.message = True
        if self.message_event is not None:
            self.message_event.set()

    def unnotify(self) -> None:
        """``receive`` said it (``asyncio.Event.clear``)."""
        self.message = False
        if self.message_event is not None:
            self.message_event.clear()

    @property
    def transport(self) -> asyncio.Transport:
        assert self.conn is not None
        return self.conn.transport

    async def run(self, app: App) -> None:
        conn = self.conn
        assert conn is not None
        try:
            await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            _log.error(
                "wirecheck: the app failed on %s %s", self.scope["method"], self.scope["path"], exc_info=exc
            )
            if not self.response_started:
                await self._send_500()
            else:
                conn.transport.close()  # mid-response: the caller sees the answer break off
            if not isinstance(exc, Exception):
                raise
        else:
            if not self.response_started and not self.disconnected:
                _log.error("wirecheck: the app returned without a response")
                await self._send_500()
            elif not self.response_complete and not self.disconnected:
                _log.error("wirecheck: the app returned without ending its response")
                conn.transport.close()
        finally:
            self.conn = None

    async def _send_500(self) -> None:
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"connection", b"close")]
        await self.send({"type": "http.response.start", "status": 500, "headers": headers})
        await self.send({"type": "http.response.body", "body": b"Internal Server Error"})

    async def receive(self) -> Message:
        conn = self.conn
        if conn is None:
            return {"type": "http.disconnect"}
        if not self.message and not self.disconnected and not self.response_complete:
            self._continue(conn)  # a caller waiting for it sends its body only then
            conn.resume_reading()
            if self.message_event is None:
                self.message_event = asyncio.Event()
            await self.message_event.wait()
        body = self.take_body()
        if body is None:
            return {"type": "http.disconnect"}
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    def take_body(self) -> bytes | None:
        """The body bytes that have arrived, taken (None: the caller is gone, or its response
        ended): ``receive`` once it has something to say, and ``DirectBody.whole_body``, which
        never waits."""
        conn = self.conn
        if conn is None:
            return None
        self._continue(conn)
        if self.disconnected or self.response_complete:
            return None
        conn.resume_reading()
        self.unnotify()
        body = bytes(self.body)
        self.body = bytearray()
        return body

    def _continue(self, conn: HttpConnection) -> None:
        """``100 Continue`` to a caller that asked for it (``Expect: 100-continue``), once."""
        if self.waiting_100 and not conn.transport.is_closing():
            conn.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            self.waiting_100 = False

    async def send(self, message: Message) -> None:
        conn = self.conn
        if conn is None:
            raise RuntimeError("ASGI send after the app returned")
        if conn.write_paused and not self.disconnected:
            await conn.drain()
        if self.disconnected:
            return
        if not self.response_started:
            if message["type"] != "http.response.start":
                raise RuntimeError(f"expected http.response.start, got {message['type']!r}")
            self._start(conn, int(message["status"]), message.get("headers", []))
        elif not self.response_complete:
            if message["type"] != "http.response.body":
                raise RuntimeError(f"expected http.response.body, got {message['type']!r}")
            self._body(conn, bytes(message.get("body", b"")), bool(message.get("more_body", False)))
        else:
            raise RuntimeError(f"{message['type']!r} sent after the response ended")

    def _start(self, conn: HttpConnection, status: int, headers: Any) -> None:
        self.response_started = True
        self.waiting_100 = False
        lines = _twin.response_lines(headers) if _twin is not None else None
        head = [_STATUS[status]]
        closes = False
        if lines is not None:  # the compiled twin's: no header of the framing, nothing refused
            head.append(lines)
            headers = ()
        for name, value in headers:
            if type(name) is not bytes or name not in _GOOD_NAMES:  # (a bytearray is searched each time)
                if _BAD_NAME.search(name):
                    raise RuntimeError(f"invalid response header name {name!r}")
                if type(name) is bytes and len(_GOOD_NAMES) < _GOOD_NAMES_KEPT:
                    _GOOD_NAMES.add(name)
            if _BAD_VALUE.search(value):
                raise RuntimeError(f"invalid response header value for {name!r}")
            lower = name.lower()
            if lower == b"content-length" and self.chunked is None:
                self.left = int(value)
                self.chunked = False
            elif lower == b"transfer-encoding" and value.lower() == b"chunked":
                self.left = 0
                self.chunked = True
            elif lower == b"connection" and b"close" in [t.strip().lower() for t in value.split(b",")]:
                self.keep_alive = False
                closes = True
            head += [lower, b": ", value, b"\r\n"]
        if not self.keep_alive and not closes:
            head.append(b"connection: close\r\n")
        if self.chunked is None and self.scope["method"] != "HEAD" and status not in (204, 304):
            self.chunked = True
            head.append(b"transfer-encoding: chunked\r\n")
        head.append(b"\r\n")
        conn.transport.write(b"".join(head))

    def _body(self, conn: HttpConnection, body: bytes, more: bool) -> None:
        if self.scope["method"] == "HEAD":
            self.left = 0
        elif self.chunked:
            out = _chunk(body) if body else b""
            if not more and not self.terminated:
                out += _END
            if out:
                conn.transport.write(out)
        else:
            if len(body) > self.left:
                raise RuntimeError("response body longer than its content-length")
            self.left -= len(body)
            conn.transport.write(body)
        if more:
            return
        if self.left != 0:
            raise RuntimeError("response body shorter than its content-length")
        self.response_complete = True
        self.notify()
        if not self.keep_alive:
            conn.linger()
        conn.response_complete()


#: the size lines of chunks up to 1 KB (most SSE events): looked up, not formatted, once a chunk
_SIZE_LINES = [b"%x\r\n" % n for n in range(1024)]


#: the chunked body's end (the last chunk, no trailers)
_END = b"0\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    """``data`` in chunked framing (one chunk)."""
    n = len(data)
    return (_SIZE_LINES[n] if n < 1024 else b"%x\r\n" % n) + data + b"\r\n"


class _HeadTooLarge(Exception):
    """Raised from a parser callback to stop parsing a head over the bound."""


class Cut:
    """Ends the caller's connection mid-response, as for an app that raises after its response
    began, but quietly: the app has recorded why, and says it in one line."""

    __slots__ = ("_cycle",)

    def __init__(self, cycle: _Cycle) -> None:
        self._cycle = weakref.ref(cycle)  # no reference cycle through the scope (see DirectBody)

    def __call__(self) -> None:
        c = self._cycle()
        if c is not None and c.conn is not None:
            c.disconnected = True  # the app's return is then taken as the end of the connection
            c.conn.transport.close()


class DirectBody:
    """The body of one chunked response, written straight to the caller's transport.

    Usable only once the app has started the response through ``send`` with chunked framing (no
    content-length: every streamed answer), and never for HEAD. ``DirectBody.send`` writes what the
    ASGI ``send`` would for a body message; the response is ended through the ASGI ``send`` as usual,
    so keep-alive and the next pipelined request stay the connection's."""

    # the request is held weakly: it holds the scope, and the scope this object, and a reference cycle
    # per request left every caller's socket and transport to the cyclic GC, whose full collections
    # then paused the event loop 35 ms at 256 streams
    __slots__ = ("_cycle", "_transport")

    def __init__(self, cycle: _Cycle) -> None:
        assert cycle.conn is not None
        self._cycle = weakref.ref(cycle)
        self._transport = cycle.conn.transport

    def usable(self) -> bool:
        c = self._cycle()
        return (
            c is not None
            and c.response_started
            and not c.response_complete
            and c.chunked is True
            and c.scope["method"] != "HEAD"
        )

    def body_arrived(self) -> bool:
        """The whole request body has been read: ``receive`` hands it over without waiting (so the
        app need not bound that wait). The usual case: a request's head and body in one read."""
        c = self._cycle()
        return c is not None and not c.more_body

    def whole_body(self) -> bytes | None:
        """Once ``body_arrived``: the request's body, handed over as the ASGI ``receive`` would
        hand it (in one message) but without its coroutine, its message or its wait; None where
        ``receive`` would say ``http.disconnect``."""
        c = self._cycle()
        if c is None:
            return None
        if c.more_body:
            raise RuntimeError("whole_body() before the whole body arrived")
        return c.take_body()

    def gone(self) -> bool:
        """The caller's connection is closed or closing: nothing written reaches it."""
        c = self._cycle()
        return c is None or c.disconnected or self._transport.is_closing()

    def send(self, data: bytes) -> bool | None:
        """``data`` as one chunk unless the caller is gone (``gone``, asked inline), and whether its
        transport takes more, in one call (a relayed read's only call here): None: the caller is
        gone and nothing was written; False: written, and its transport is over its high-water mark
        (wait for ``drain``); True: written, and it takes more."""
        c = self._cycle()
        if c is None or c.disconnected or self._transport.is_closing():
            return None
        if n := len(data):  # _chunk's, without its call (once a forwarded event)
            self._transport.write((_SIZE_LINES[n] if n < 1024 else b"%x\r\n" % n) + data + b"\r\n")
        conn = c.conn
        return conn is not None and not conn.write_paused

    def send_end(self, data: bytes) -> bool | None:
        """``send``, with the body's end (the chunked terminator) in the same write: the last read of
        a complete body. Then ``ended``."""
        c = self._cycle()
        if c is None or c.disconnected or self._transport.is_closing():
            return None
        self._transport.write((_chunk(data) if data else b"") + _END)
        self.ended()
        conn = c.conn
        return conn is not None and not conn.write_paused

    def ended(self) -> None:
        """The body's end was written with its last read (``send_end``, or the compiled sink's
        ``end``): the response's end (``end``, or the ASGI ``send``) writes nothing more, and the
        caller going away from now on aborts nothing (it has the whole response)."""
        c = self._cycle()
        if c is None:
            return
        c.terminated = True
        conn = c.conn
        if conn is not None:
            conn.on_gone = None

    def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> bool:
        """What the ASGI ``send`` of ``http.response.start`` does, as a plain call where that ``send``
        would not wait: True: done (the head written, or nothing to do for a caller that is gone);
        False: nothing done, ``send`` it (it waits for the caller's buffer to drain, or raises)."""
        c = self._cycle()
        conn = c.conn if c is not None else None
        if conn is None or c is None or c.response_started or (conn.write_paused and not c.disconnected):
            return False
        if not c.disconnected:
            c._start(conn, int(status), headers)
        return True

    def end(self) -> bool:
        """What the ASGI ``send`` of the body's end (``http.response.body``, empty, no more body) does,
        as a plain call where that ``send`` would not wait: True: done; False: nothing done, ``send``
        it (it waits for the caller's buffer to drain, or raises)."""
        c = self._cycle()
        conn = c.conn if c is not None else None
        if conn is None or c is None or (conn.write_paused and not c.disconnected):
            return False
        if c.disconnected:
            return True
        if not c.response_started or c.response_complete:
            return False
        c._body(conn, b"", False)
        return True

    def parts(self) -> tuple[HttpConnection, asyncio.Transport]:
        """What ``send`` reads, for its compiled twin (proxy/_relay_c.c's ``Sink``), while ``usable``:
        the caller's connection and its transport. The twin holds the connection for the body's
        length, and asks only the transport whether the caller is gone: the loss of the connection,
        and a cut, close the transport before they mark the cycle disconnected."""
        c = self._cycle()
        if c is None or c.conn is None:
            raise RuntimeError("parts() of a request cycle that is over")
        return c.conn, self._transport

    def socket_fd(self) -> int:
        """The caller's socket's descriptor, for a writer that sends to it itself (the compiled sink:
        proxy/_relay_c.c) while the transport holds nothing unsent and is not closing; -1 where
        there is none to write to so: a transport of another kind (TLS above the socket above all:
        bytes written to it would bypass the encryption), or ``direct_write`` off. Asked of the
        transport once a connection."""
        c = self._cycle()
        conn = c.conn if c is not None else None
        if conn is None:
            return -1
        if conn.sock_fd is None:
            conn.sock_fd = _plain_fd(self._transport) if conn.cfg.direct_write else -1
        return conn.sock_fd

    def on_gone(self, callback: Callable[[], None] | None) -> None:
        """Have ``callback`` called once, from the event loop, when the caller's connection is lost
        (soon, when it is already gone); None forgets it. What an app's own ``receive`` would say
        as ``http.disconnect``, without a task waiting on ``receive`` for each request. Never
        called from within this call: an app that cancels its own task from it is suspended then."""
        c = self._cycle()
        conn = c.conn if c is not None else None
        if callback is None:
            if conn is not None:
                conn.on_gone = None
        elif conn is None or conn.transport.is_closing() or c is None or c.disconnected:
            asyncio.get_running_loop().call_soon(callback)
        else:
            conn.on_gone = callback

    async def drain(self) -> None:
        """Wait until the caller's socket takes more, or the connection is gone."""
        c = self._cycle()
        conn = c.conn if c is not None else None
        if conn is not None:
            await conn.drain()


_new_cut = Cut.__new__
_new_direct = DirectBody.__new__
_new_cycle = _Cycle.__new__


class Handoff:
    """The connection of one request, to be moved to another process (the live view's).

    ``fileno()`` is the socket to pass on, or None when the connection cannot move whole: TLS, the
    request's body not all read, a pipelined request already waiting behind it, the response begun.
    After the socket was passed on, ``release()`` makes this process forget the connection without
    ending it: reading stops and the transport is dropped (its descriptor closed, which sends nothing
    while another process holds the socket). The app's ``receive`` then says the caller is gone."""

    __slots__ = ("_conn",)

    def __init__(self, conn: HttpConnection) -> None:
        self._conn = weakref.ref(conn)  # no reference cycle through the scope (see DirectBody)

    def fileno(self) -> int | None:
        p = self._conn()
        if p is None or p.transport.is_closing() or p.transport.get_extra_info("sslcontext") is not None:
            return None
        c = p.cycle
        if c is None or c.response_started or c.more_body or p.pipeline:
            return None
        sock = p.transport.get_extra_info("socket")
        return sock.fileno() if sock is not None else None

    def release(self) -> None:
        p = self._conn()
        if p is not None:
            p.transport.pause_reading()
            p.transport.abort()


def _plain_fd(transport: asyncio.BaseTransport) -> int:
    """The descriptor of the socket under ``transport``, where it is one of the ``_PLAIN_TRANSPORTS``
    (stream sockets' all) without TLS; else -1."""
    kind = type(transport)
    if (kind.__module__, kind.__name__) not in _PLAIN_TRANSPORTS:
        return -1
    if transport.get_extra_info("sslcontext") is not None:
        return -1
    sock = transport.get_extra_info("socket")
    try:
        fd = sock.fileno() if sock is not None else -1
    except OSError:
        return -1
    return fd if isinstance(fd, int) and fd >= 0 else -1


def _address(info: Any) -> tuple[str, int] | None:
    # twice a connection: an IPv4 address as the socket gives it is taken as it is (the isinstance
    # of a ``tuple | list`` union and the new tuple took 3k instructions a call)
    if type(info) is tuple and len(info) == 2 and type(info[0]) is str and type(info[1]) is int:
        return info
    if isinstance(info, (tuple, list)) and len(info) >= 2:
        return (str(info[0]), int(info[1]))
    return None
