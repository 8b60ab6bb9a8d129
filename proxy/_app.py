"""The transparent recording proxy: a plain ASGI callable.

On the request path it only forwards and tees bytes: the request goes to the configured upstream as
it came (hop-by-hop headers aside; a caller tap adds ``x-wirecheck-id``), and every upstream chunk is
sent on the moment it arrives, raw (gzip is not decoded), with its arrival offset noted from a
monotonic clock. When the exchange ends it is handed to the store's queue, which never blocks.
Parsing and checking happen elsewhere (the live-check worker), so a slow rule never slows a caller.

Failures are survived and recorded: a refused or timed-out upstream gets an OpenAI-shaped 502/504
marked ``x-wirecheck-proxy: error``; an upstream that breaks mid-body breaks the downstream connection
too (so the caller sees the truncation, as it would without the proxy); a caller that goes away
cancels the upstream request at once, so vLLM aborts it and frees its KV cache.

Safe defaults: it forwards only to its one upstream (an absolute-form target for another host is
refused with 403), and bodies over the limit get 413. A websocket upgrade gets a 501: the taps record
HTTP exchanges, and a tunnel they cannot read would pass through unchecked (vLLM's chat, Responses and
Messages endpoints are all plain HTTP).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from prometheus_client import CollectorRegistry, Counter

from wirecheck.contracts import (
    DEFAULT_REDACTION,
    Chunk,
    Exchange,
    ExchangeError,
    HttpRequest,
    HttpResponse,
    JoinedResponse,
    Redaction,
    native,
)
from wirecheck.record import CORRELATION_HEADER, Correlator, Sink, correlation_secret

from ._heads import HeaderNames
from ._histogram import LoopCounter, LoopHistogram
from ._http import CUT, DIRECT_BODY, TARGET, DirectBody
from ._stalls import NOTE_S, LoopStalls
from ._upstream import (
    Batch,
    UpstreamInvalid,
    UpstreamResponse,
    UpstreamTimeout,
    UpstreamUnreachable,
    make_upstream,
)
from ._version import UpstreamVersion

if TYPE_CHECKING:
    from . import _relay_c

__all__ = ["DEFAULT_REDACT", "Metrics", "ProxyApp", "TapConfig"]

#: the relayed body's compiled sink (proxy/_relay_c.c), or None: ``_DirectSink``
_native_relay = native("wirecheck.proxy._relay_c")

_CORRELATION = CORRELATION_HEADER.encode("ascii")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_log = logging.getLogger("wirecheck.proxy")

#: the default credential header names (the whole policy, query keys too, is contracts.Redaction)
DEFAULT_REDACT = DEFAULT_REDACTION.headers


@dataclass(kw_only=True, slots=True)
class TapConfig:
    """One listener of the proxy: which tap it is and where it forwards."""

    upstream: str
    tap: str = "caller"
    #: set x-wirecheck-id, replacing any the caller sent (the caller tap); the engine tap verifies it
    inject_correlation: bool = True
    #: the key that makes ids unforgeable; None: WIRECHECK_CORRELATION_SECRET, else this process's own
    correlation_secret: bytes | None = None
    #: what the record hides (headers and query keys); forwarding is unchanged
    redact: Redaction = DEFAULT_REDACTION
    body_limit: int = 32 * 1024 * 1024
    #: most bytes recorded per body side; the rest is forwarded but not kept
    record_limit: int = 16 * 1024 * 1024
    #: longest wait for a caller's whole request body once its head is in (408 past it)
    request_timeout_s: float = 30.0
    connect_timeout_s: float = 10.0
    #: longest wait for the upstream's next byte
    read_timeout_s: float = 600.0
    extra_headers: dict[str, str] = field(default_factory=dict)
    #: ask the upstream's GET /version once and write it on every exchange (proxy/_version.py); the
    #: command line asks the engine's (the engine tap's upstream, or the one tap's)
    ask_version: bool = False


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # changed on the event loop's thread only, several times an exchange: without a lock
        self.exchanges = LoopCounter("wirecheck_exchanges", "Exchanges forwarded.", ["tap", "outcome"], r)
        self.bytes = LoopCounter("wirecheck_bytes", "Bytes forwarded.", ["tap", "direction"], r)
        self.drops = LoopCounter(
            "wirecheck_store_drops", "Exchanges dropped because the store queue was full.", [], r
        )
        self.added = LoopHistogram(
            "wirecheck_added_latency_seconds",
            "Time from an upstream read's arrival to its hand-off downstream (once per downstream write).",
            "tap",
            (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05),
            r,
        )
        self.findings = Counter(
            "wirecheck_findings",
            "Findings by rule and fault (from the live checks).",
            ["rule", "fault", "severity"],
            registry=r,
        )
        self._seen: dict[tuple[str, str, str], int] = {}

    def sync_findings(self, counts: list[tuple[str, str, str, int]]) -> None:
        for rule, fault, severity, n in counts:
            key = (rule, fault, severity)
            delta = n - self._seen.get(key, 0)
            if delta > 0:
                self.findings.labels(rule=rule, fault=fault, severity=severity).inc(delta)
                self._seen[key] = n


def _json_error(status: int, message: str, kind: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps(
        {"error": {"message": f"wirecheck proxy: {message}", "type": kind, "param": None, "code": status}}
    ).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-wirecheck-proxy", b"error"),
    ]
    return status, headers, body


class ProxyApp:
    """ASGI app for one tap. ``store`` may be shared by several taps (dual-tap mode)."""

    def __init__(
        self,
        cfg: TapConfig,
        store: Sink | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.cfg = cfg
        self.store = store
        #: shared by the taps of one run, so that the admin listener serves one registry
        self.metrics = metrics or Metrics()
        up = urlsplit(cfg.upstream)
        if up.scheme not in ("http", "https") or not up.netloc:
            raise ValueError(f"upstream {cfg.upstream!r} is not an http(s) URL")
        self._up = up
        self._base_path = up.path.rstrip("/")
        self._upstream = make_upstream(
            up, transport=transport, connect_s=cfg.connect_timeout_s, read_s=cfg.read_timeout_s
        )
        self._version = UpstreamVersion(self._upstream, self._base_path) if cfg.ask_version else None
        self.in_flight = 0
        #: the live checker's state for health (set by the runner)
        self.checks: Callable[[], dict[str, Any]] | None = None
        self._corr = Correlator(cfg.correlation_secret or correlation_secret())
        self._names = HeaderNames(cfg.redact)
        self._extra: list[tuple[bytes, bytes]] = []  # the upstream request's bytes, encoded once
        for k, v in cfg.extra_headers.items():
            try:
                self._extra.append((k.encode("latin-1"), v.encode("latin-1")))
            except UnicodeEncodeError as exc:
                raise ValueError(f"extra header {k!r}: HTTP header lines are latin-1") from exc
        self._children: dict[tuple[int, str], Any] = {}
        #: the exchange counter's series for this tap by outcome, each looked up once
        self._outcomes: dict[str, Any] = {}
        #: the added-latency histogram's and the two byte counters' series for this tap, looked up once
        self._added = self.metrics.added.labels(cfg.tap)
        self._bytes_in = self._series(self.metrics.bytes, "request")
        self._bytes_out = self._series(self.metrics.bytes, "response")
        self._stalls = LoopStalls(idle=lambda: self.in_flight == 0)

    async def aclose(self) -> None:
        self._stalls.close()
        if self._version is not None:
            await self._version.aclose()
        await self._upstream.aclose()

    # --- ASGI --------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            if kind == "lifespan":
                await self._lifespan(receive, send)
            elif kind == "websocket":
                await _refuse_websocket(scope, send)
            return
        # every path is forwarded, /wirecheck/ too: the admin endpoints live on their own listener
        # (proxy/_admin.py), so a transparent tap claims no part of the upstream's namespace. The
        # forwarding is here, not in a coroutine of its own: one fewer to make, and to step through
        # each time the request's task wakes
        cfg = self.cfg
        t0 = time.monotonic()
        self.in_flight += 1
        started = _iso(time.time_ns())
        method: str = scope["method"]
        heads = self._names.request(scope.get("headers", []), keep_ids=not cfg.inject_correlation)
        try:
            # the exchange's id and the correlation id the caller tap mints for it share one nonce
            nonce = self._corr.nonce()
            # made without the dataclasses' ``__init__`` (see ``_new_chunk``): every field stored,
            # the extras made whole
            request = _new_request(HttpRequest)
            request.method, request.path, request.headers, request.body = (
                method,
                self._recorded_path(scope),
                heads.recorded,
                b"",
            )
            ex = _new_exchange(Exchange)
            ex.id, ex.tap, ex.request, ex.response = f"{cfg.tap}-{nonce}", cfg.tap, request, None
            ex.correlation, ex.started_at, ex.error, ex.extra = None, started, None, {"_t0_mono": t0}
            self._stalls.watch()
            ext: dict[str, Any] | None = scope.get("extensions")
            target = self._target(scope, ext)
            if heads.upgrade:
                await self._reply(
                    send,
                    _json_error(
                        501,
                        "this proxy records HTTP exchanges and does not forward protocol upgrades "
                        "(websocket); send the request straight to the upstream",
                        "upgrade_not_supported",
                    ),
                    ex,
                    outcome="refused",
                )
                return
            if target is None:
                await self._reply(
                    send,
                    _json_error(403, "this proxy forwards only to its configured upstream", "forbidden"),
                    ex,
                    outcome="refused",
                )
                return
            direct: DirectBody | None = ext.get(DIRECT_BODY) if ext else None
            try:
                if direct is not None and direct.body_arrived():
                    # what receive() would give in one message, without its coroutine: no wait to bound
                    whole = direct.whole_body()
                    disconnected = whole is None
                    body = b"" if whole is None else whole if len(whole) <= cfg.body_limit else None
                else:
                    async with asyncio.timeout(cfg.request_timeout_s):
                        body, disconnected = await self._read_body(receive)
            except TimeoutError:
                # a caller that trickles its body holds a connection and memory: 408
                message = f"the request body did not arrive within {cfg.request_timeout_s:g} s"
                ex.error = ExchangeError("client_abort", message, _ms(t0))
                status, headers, payload = _json_error(408, message, "request_timeout")
                await self._reply(
                    send,
                    (status, [*headers, (b"connection", b"close")], payload),
                    ex,
                    outcome="request_timeout",
                )
                return
            if body is None:
                await self._reply(
                    send,
                    _json_error(
                        413, f"request body over the limit of {cfg.body_limit} bytes", "request_too_large"
                    ),
                    ex,
                    outcome="too_large",
                )
                return
            if disconnected:
                ex.error = ExchangeError(
                    "client_abort", "the caller went away before sending the whole request", _ms(t0)
                )
                self._finish(ex, "client_abort")
                return
            ex.request.body = body
            if len(body) > cfg.record_limit:
                ex.request.body = body[: cfg.record_limit]
                _mark_truncated(ex, "request", cfg.record_limit, len(body))
            # the caller tap: no caller-chosen id goes on unless it verifies and is new; the
            # engine tap: an id that does not verify correlates nothing (pairing falls back)
            out_headers = heads.forwarded
            sent, ex.correlation = self._corr.take(heads.ids, caller=cfg.inject_correlation, nonce=nonce)
            if sent is not None:
                out_headers.append((_CORRELATION, sent.encode("latin-1")))
            out_headers += self._extra
            await self._exchange(
                ex,
                method=method,
                target=target,
                headers=out_headers,
                body=body,
                receive=receive,
                send=send,
                t0=t0,
                direct=direct,
                scope_ext=ext,
            )
        finally:
            self.in_flight -= 1

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # --- forwarding --------------------------------------------------------------------------------

    def _target(self, scope: Scope, ext: dict[str, Any] | None) -> str | None:
        """The target to send upstream, or None for an absolute-form target naming another host
        (``ext``: the scope's extensions)."""
        sent: bytes | None = ext.get(TARGET) if ext else None
        raw: bytes = scope.get("raw_path") or scope.get("path", "/").encode()
        target = raw.decode("latin-1")
        if sent is not None or target.startswith(("http://", "https://")):
            # absolute-form (``GET http://host/x``): the host must be the upstream, or this listener
            t = urlsplit((sent or raw).decode("latin-1"))
            if t.scheme.lower() not in ("http", "https") or not self._names_us(t.netloc, scope):
                return None
            target = t.path or "/"
        qs: bytes = scope.get("query_string") or b""
        return self._base_path + target + (("?" + qs.decode("latin-1")) if qs else "")

    def _names_us(self, netloc: str, scope: Scope) -> bool:
        name = netloc.lower().rsplit("@", 1)[-1]
        if name == self._up.netloc.lower():
            return True
        server: tuple[str, int] | None = scope.get("server")
        return server is not None and name == f"{server[0]}:{server[1]}".lower()

    def _recorded_path(self, scope: Scope) -> str:
        # the path as the caller sent it, query string included (docs/exchange-format.md; ASGI keeps
        # the query apart from raw_path), with credential query values redacted
        path = scope.get("raw_path", b"").decode("latin-1") or scope.get("path", "/")
        qs: bytes = scope.get("query_string") or b""
        return self.cfg.redact.target(path + ("?" + qs.decode("latin-1") if qs else ""))

    async def _read_body(self, receive: Receive) -> tuple[bytes | None, bool]:
        parts: list[bytes] = []
        size = 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return b"".join(parts), True
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.cfg.body_limit:
                return None, False
            parts.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(parts), False

    async def _exchange(
        self,
        ex: Exchange,
        *,
        method: str,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        receive: Receive,
        send: Send,
        t0: float,
        direct: DirectBody | None = None,
        scope_ext: dict[str, Any] | None = None,
    ) -> None:
        if self._version is not None:
            self._version.ask()
        try:
            upstream = await self._upstream.open(method, target, headers, body)
        except UpstreamTimeout as exc:
            ex.error = ExchangeError(
                "timeout",
                f"no answer from {self.cfg.redact.url(self.cfg.upstream)}: {type(exc).__name__}",
                _ms(t0),
            )
            await self._reply(
                send,
                _json_error(
                    504,
                    f"upstream {self.cfg.redact.url(self.cfg.upstream)} did not answer in time",
                    "upstream_timeout",
                ),
                ex,
                outcome="timeout",
                record_response=False,
            )
            return
        except UpstreamUnreachable as exc:
            ex.error = ExchangeError("upstream_refused", str(exc), _ms(t0))
            upstream_url = self.cfg.redact.url(self.cfg.upstream)
            await self._reply(
                send,
                _json_error(
                    502,
                    f"upstream {upstream_url} sent no usable answer: {exc}"
                    if isinstance(exc, UpstreamInvalid)
                    else f"upstream {upstream_url} is unreachable ({type(exc).__name__})",
                    "upstream_unreachable",
                ),
                ex,
                outcome="refused",
                record_response=False,
            )
            return
        resp_headers, down_headers = self._names.response(upstream.headers)
        chunks: list[Chunk] = []
        ex.response = HttpResponse(upstream.status, resp_headers, b"", chunks)
        outcome = "ok"
        sizes = [0]  # bytes forwarded, recorded or not
        kept: list[_relay_c.Sink] = []  # the compiled sink, which keeps the record itself
        # the body is pumped in this task; a caller that goes away cancels it at once (the upstream
        # request is then closed, so the engine aborts it). Our listener says so from its
        # connection_lost; any other ASGI server through ``receive``, watched by a task of its own
        gone = _Gone.current()
        watcher: asyncio.Future[None] | None = None
        if direct is not None:
            direct.on_gone(gone)
        else:
            watcher = asyncio.ensure_future(_watch_disconnect(receive))
            watcher.add_done_callback(gone.watched)
        err: BaseException | None = None
        try:
            try:
                await self._pump(
                    upstream, send, down_headers, chunks, t0, sizes=sizes, kept=kept, direct=direct
                )
            except asyncio.CancelledError:
                if not gone.fired or gone.task.uncancel() > 0:
                    raise  # cancelled by someone else (the listener stopping)
                # the caller went away: reading stopped at once, so the engine aborts the request
                ex.error = ExchangeError("client_abort", "the caller disconnected mid-response", _ms(t0))
                outcome = "client_abort"
            except Exception as exc:
                err = exc
            finally:
                # no await between the pump's end and here: a disconnect from now on cancels nothing
                gone.armed = False
                if direct is not None:
                    direct.on_gone(None)
            if err is not None:
                if isinstance(err, _DownstreamGone):
                    ex.error = ExchangeError("client_abort", "the caller disconnected mid-response", _ms(t0))
                    outcome = "client_abort"
                elif isinstance(err, UpstreamTimeout):
                    ex.error = ExchangeError(
                        "timeout", f"the upstream stopped sending: {type(err).__name__}", _ms(t0)
                    )
                    outcome = "timeout"
                else:
                    ex.error = ExchangeError("upstream_reset", str(err), _ms(t0))
                    outcome = "upstream_reset"
                if not isinstance(err, _DownstreamGone):
                    # make the caller see the break, as it would without the proxy: its
                    # connection is cut, and the log gets one line (the record has the rest)
                    cut = (scope_ext or {}).get(CUT)
                    if cut is None:
                        raise _Broken(str(err)) from err
                    _log.warning(
                        "wirecheck proxy: %s tap: %s after %d bytes (%s); the caller's connection was cut",
                        self.cfg.tap,
                        outcome.replace("_", " "),
                        sizes[0],
                        str(err)[:200],
                    )
                    cut()
        finally:
            if watcher is not None:
                watcher.cancel()
            await upstream.aclose()
            if kept:  # the body as the compiled sink kept it: joined, as a store row holds it
                ex.response = JoinedResponse.made(upstream.status, resp_headers, kept[0].joined())
            self._bytes_out.inc(sizes[0])
            if sizes[0] > self.cfg.record_limit:
                _mark_truncated(ex, "response", self.cfg.record_limit, sizes[0])
            self._bytes_in.inc(len(body))
            self._finish(ex, outcome)

    async def _pump(
        self,
        upstream: UpstreamResponse,
        send: Send,
        headers: list[tuple[bytes, bytes]],
        chunks: list[Chunk],
        t0: float,
        *,
        sizes: list[int],
        kept: list[_relay_c.Sink],
        direct: DirectBody | None,
    ) -> None:
        """The upstream's body to the caller, recorded: into ``chunks`` by the Python sinks, by the
        compiled one in itself (handed out in ``kept``, for the exchange to take the record from); the
        bytes forwarded in ``sizes``."""
        # our listener's response head and end are plain calls (``DirectBody.start``/``end``: the
        # ASGI ``send`` without its coroutine and message) unless ``send`` would wait
        try:
            if direct is None or not direct.start(upstream.status, headers):
                await send({"type": "http.response.start", "status": upstream.status, "headers": headers})
        except OSError as exc:
            raise _DownstreamGone(str(exc)) from exc
        limit, added = self.cfg.record_limit, self._added
        relay = upstream.relay
        sink = (
            _direct_sink(chunks, t0, limit, added, direct)
            if direct is not None and relay is not None and direct.usable()
            else None
        )
        tee = sink or _Tee(chunks, t0, limit, added)
        if sink is not None and not isinstance(sink, _DirectSink):
            kept.append(sink)
        try:
            if sink is not None:
                assert direct is not None and relay is not None
                # the body from the upstream's read callback straight to the caller's socket: per
                # read one record entry and one write, with no task step; this task wakes only when
                # the caller's buffer is full (to wait for it to drain) and at the end
                forward = sink.forward if isinstance(sink, _DirectSink) else sink
                while not await relay(forward, sink.end):
                    if direct.gone():  # a closed connection stays closed: the sink stopped for it, or will
                        raise _DownstreamGone("the caller's connection closed")
                    await direct.drain()
            else:
                assert isinstance(tee, _Tee)
                async for batch in upstream.batches:
                    # one downstream write per batch: the pieces that arrived while the loop was busy
                    # go out together; the record keeps each piece with its read's time
                    try:
                        await send({"type": "http.response.body", "body": tee.take(batch), "more_body": True})
                    except OSError as exc:
                        raise _DownstreamGone(str(exc)) from exc
                    tee.sent(batch)
        finally:
            sizes[0] = tee.size
        try:
            if direct is None or not direct.end():
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError as exc:
            raise _DownstreamGone(str(exc)) from exc

    async def _reply(
        self,
        send: Send,
        reply: tuple[int, list[tuple[bytes, bytes]], bytes],
        ex: Exchange,
        *,
        outcome: str,
        record_response: bool = True,
    ) -> None:
        status, headers, body = reply
        if record_response:
            ex.response = HttpResponse(status, [(k.decode(), v.decode()) for k, v in headers], body)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
        self._finish(ex, outcome)

    def _series(self, counter: LoopCounter, value: str) -> Any:
        """``counter``'s child for this tap and ``value`` (its second label), looked up once."""
        key = (id(counter), value)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = counter.labels(self.cfg.tap, value)
        return child

    def _finish(self, ex: Exchange, outcome: str) -> None:
        series = self._outcomes.get(outcome)
        if series is None:
            series = self._outcomes[outcome] = self._series(self.metrics.exchanges, outcome)
        series.inc()
        extra = ex.extra
        extra["_ended_mono"] = ended = time.monotonic()
        stall = self._stalls.longest(extra.pop("_t0_mono", ended))
        if stall >= NOTE_S:  # its arrival offsets may be squeezed by that much (proxy/_stalls.py)
            extra["stall_ms"] = round(stall * 1000.0, 1)
        if self._version is not None:
            self._version.stamp(ex)
        if self.store is not None and not self.store.put(ex):
            self.metrics.drops.inc()


class _DownstreamGone(Exception):
    """The caller's connection is gone."""


class _Broken(Exception):
    """Raised to the server so that it drops the caller's connection mid-response."""


class _Gone:
    """Cancels the exchange's task when the caller goes away while its response is pumped (once).

    Called from the event loop only (``DirectBody.on_gone``, a watcher's done callback), never from
    the task itself: while ``armed`` the task is then suspended inside the pump, which is where the
    cancellation lands. One requested of a running task would land at its next await, after the
    pump perhaps, and skip the exchange's record."""

    __slots__ = ("armed", "fired", "task")

    task: asyncio.Task[Any]
    armed: bool
    fired: bool

    @staticmethod
    def current() -> _Gone:
        """One for the running task: made without an ``__init__``, which a class's call enters
        from C (see ``_new_chunk``), where this call is inlined."""
        task = asyncio.current_task()
        assert task is not None
        gone = _new_gone(_Gone)
        gone.task, gone.armed, gone.fired = task, True, False
        return gone

    def __call__(self) -> None:
        if self.armed and not self.fired:
            self.fired = True
            self.task.cancel()

    def watched(self, watcher: asyncio.Future[None]) -> None:
        if not watcher.cancelled():
            self()


#: a record entry made without the dataclass's ``__init__``: ``Chunk(t, data)`` enters a Python
#: ``__init__`` from C (the type's call, its ``__init__`` looked up, a new frame), about 2k
#: instructions a read in this interpreter, where ``__new__`` and the two slot stores take 1.4k
#: (tests/proxy/test_direct_body.py holds the two equal)
_new_chunk = Chunk.__new__
#: the same for the disconnect's ``_Gone``, once an exchange
_new_gone = _Gone.__new__
#: and for the exchange and its request, once an exchange (the tests hold their fields to the ones
#: stored)
_new_exchange = Exchange.__new__
_new_request = HttpRequest.__new__


class _Tee:
    """What the record keeps of a response body: each piece with its read's arrival offset, up to
    the record limit (past it the bytes are still forwarded, never kept)."""

    __slots__ = ("added", "chunks", "limit", "size", "t0")

    def __init__(self, chunks: list[Chunk], t0: float, limit: int, added: Any) -> None:
        self.chunks, self.t0, self.limit, self.added = chunks, t0, limit, added
        #: bytes forwarded, recorded or not: the record holds the first ``limit`` of them
        self.size = 0

    def take(self, batch: Batch) -> bytes:
        """Records the batch and returns its bytes, to be written in one piece."""
        self.keep(batch)
        return batch[0][1] if len(batch) == 1 else b"".join([piece for _, piece in batch])

    def keep(self, batch: Batch) -> None:
        """Records the batch."""
        for arrived, piece in batch:
            size = self.size
            self.size = end = size + len(piece)
            if size < self.limit:
                kept = piece if end <= self.limit else piece[: self.limit - size]
                chunk = _new_chunk(Chunk)
                chunk.t_ms, chunk.data = (arrived - self.t0) * 1000.0, kept
                self.chunks.append(chunk)

    def sent(self, batch: Batch) -> None:
        # once per downstream write: the wait of the batch's oldest piece, from its read's arrival
        self.added.observe(time.monotonic() - batch[0][0])


class _DirectSink(_Tee):
    """The tee as the upstream's read callback's sink (``forward``), writing each read's pieces
    straight to the caller (``DirectBody.send``): the work of every forwarded event is in that one
    method and the one call it makes to the caller's side."""

    __slots__ = ("_send", "_send_end", "ended")

    def __init__(self, chunks: list[Chunk], t0: float, limit: int, added: Any, direct: DirectBody) -> None:
        super().__init__(chunks, t0, limit, added)
        self._send, self._send_end = direct.send, direct.send_end
        #: the body's end was written (``end``)
        self.ended = False

    def forward(self, batch: Batch) -> bool:
        """Writes the batch on and records it; whether the caller takes more (``BodySink``). A bound
        method, not ``__call__``: the read callback's call of it is then inlined by the interpreter,
        where an instance's ``__call__`` is entered from C (about 1k instructions a read more)."""
        if len(batch) == 1:
            arrived, data = batch[0]
            more = self._send(data)
            if more is None:
                return False  # the caller is gone: nothing forwarded, nothing recorded
            size = self.size
            self.size = end = size + len(data)
            if size < self.limit:
                kept = data if end <= self.limit else data[: self.limit - size]
                chunk = _new_chunk(Chunk)
                chunk.t_ms, chunk.data = (arrived - self.t0) * 1000.0, kept
                self.chunks.append(chunk)
        else:
            arrived, data = batch[0][0], b"".join([piece for _, piece in batch])
            more = self._send(data)
            if more is None:
                return False
            self.keep(batch)
        self.added.observe(time.monotonic() - arrived)
        return more

    def end(self, batch: Batch) -> bool:
        """``forward`` for the read that completed the body (``BodyEnd``): its pieces, perhaps none,
        and the body's end in one write (``DirectBody.send_end``), not the end in a write of its own
        once the exchange's task has woken: one write an exchange fewer."""
        data = batch[0][1] if len(batch) == 1 else b"".join([piece for _, piece in batch])
        more = self._send_end(data)
        if more is None:
            return False  # the caller is gone: nothing forwarded, nothing recorded
        self.ended = True
        if batch:
            self.keep(batch)
            self.added.observe(time.monotonic() - batch[0][0])
        return more


def _direct_sink(
    chunks: list[Chunk], t0: float, limit: int, added: Any, direct: DirectBody
) -> _DirectSink | _relay_c.Sink:
    """The relayed body's sink: the compiled twin where it is built (it also lets the upstream's
    compiled reader hand each read straight to it, and keeps the record itself, joined: its
    ``joined()``), else ``_DirectSink`` (which records into ``chunks``)."""
    if _native_relay is None:
        return _DirectSink(chunks, t0, limit, added, direct)
    conn, transport = direct.parts()  # (usable: the cycle runs)
    # (positional: a keyword made the call build a dict of its arguments, every exchange)
    made: _relay_c.Sink = _native_relay.Sink(
        t0, limit, added, conn, transport, direct.ended, direct.socket_fd()
    )
    return made


async def _refuse_websocket(scope: Scope, send: Send) -> None:
    """A server that upgrades websockets itself (the taps' does not) hands them over as their own
    scope: refused with the same 501 where the server can send a response, else closed."""
    if "websocket.http.response" in (scope.get("extensions") or {}):
        status, headers, body = _json_error(
            501, "this proxy does not forward websocket upgrades", "upgrade_not_supported"
        )
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1003})


async def _watch_disconnect(receive: Receive) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            return


def _mark_truncated(ex: Exchange, side: str, recorded: int, size: int) -> None:
    """Note in the record that a body was cut (docs/exchange-format.md, ``truncated``); the
    ``capture-truncated`` rule reports it."""
    marks: dict[str, Any] = ex.extra.setdefault("truncated", {})
    marks[side] = {"recorded": recorded, "size": size}


#: the second ``_iso`` last formatted, and its date and time of day (one tuple, replaced whole)
_SECOND: list[tuple[int, str]] = [(-1, "")]


def _iso(ns: int) -> str:
    """``ns`` (nanoseconds since the epoch: ``time.time_ns()``) as ``datetime.now(UTC).isoformat()``
    gives it (microseconds floored, as ``datetime.now`` floors the clock's; none shown when they are
    0), with the date and the time of day formatted once a second: ``datetime.now(UTC).isoformat()``
    took about 15k instructions, a tenth of what the tap's task spends on an exchange."""
    sec, ns = divmod(ns, 1_000_000_000)
    held = _SECOND[0]
    if held[0] != sec:
        held = _SECOND[0] = (sec, datetime.fromtimestamp(sec, UTC).isoformat().removesuffix("+00:00"))
    us = ns // 1000
    # zfill, not a format spec: the spec was parsed on every call (1.5k instructions more)
    return f"{held[1]}.{str(us).zfill(6)}+00:00" if us else f"{held[1]}+00:00"


def _ms(t0: float) -> float:
    return (time.monotonic() - t0) * 1000.0
