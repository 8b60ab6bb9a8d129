"""The live view: exchanges and findings as the live checker stores them, as an event
stream and as one self-contained page.

Routes (under ``prefix``, ``/wirecheck`` by default):

- ``GET /wirecheck/`` and ``/wirecheck/view``: the page (``_liveview_page.html``: inline CSS and
  script, no build step, nothing fetched from elsewhere);
- ``GET /wirecheck/events``: Server-Sent Events, ``event: exchange`` and ``event: finding``, each
  with ``id: X-F`` (the exchange row and the finding row the reader has reached after this event), so
  that a browser that reconnects with ``Last-Event-ID`` gets exactly what it missed from the store.
  Filters: ``tap``, ``rule``, ``fault``, ``severity``, ``model``, ``kind`` (exact; a bad value is a
  400 naming it); without ``Last-Event-ID`` the stream starts ``backlog`` rows back (default 100);
- ``GET /wirecheck/state``: the taps' health, the store's counts and gaps, the pairing of the taps;
- ``GET /wirecheck/exchange/{id}``: one exchange as stored (interchange form), its findings and the
  exchanges of the other tap that share its correlation.

Bounded by construction: every viewer reads the store from its own position, in pages of ``batch``
rows, through the view's own reader connection and threads (never the writer's), so nothing is queued
for a viewer at all; viewers at the same position share one read and one encoding. A slow browser
only slows its own reads; one that stops reading is dropped and counted once its connection holds
what its kernel send buffer (``SEND_BUFFER``, set on the admin listener's sockets) and the transport's
high-water mark hold and ``send_timeout_s`` passes (it reconnects and resumes from its last id).

The viewer cap is a :class:`ViewerSlots`: a slot is taken before the request awaits anything, so a
burst cannot pass the check together, and one proxy's view shares one (the view process's viewers and
those the proxy serves itself while it cannot hand them over count alike: ``_viewproc``). Viewers past
``max_viewers`` get a 503. An exchange's detail is served with each body cut to ``detail_body``
bytes (a 16 MiB exchange asked for by 40 stalled readers held 738 MB), at most ``max_details`` at a
time, and a reader that does not take it within ``send_timeout_s`` is cut off. The proxy's request
path and the checker never wait on any of it.

Rows are read in row-id order. SQLite has one writer at a time, so ids commit in order. On a
PostgreSQL store shared by several replicas, ids are handed out at insert and committed a moment
later, so a row can become visible after one with a higher id: a viewer that passed it in that moment
does not see it (the store, ``check`` and ``/wirecheck/findings`` still have it).

Model output is hostile: the page writes every stored string with ``textContent``, and the JSON here
is served as ``application/json``, never interpolated into HTML.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from wirecheck.contracts import REGISTRY, Fault, Severity
from wirecheck.record import Store

from ._http import CUT

__all__ = ["SEND_BUFFER", "LiveView", "LiveViewConfig", "ViewerSlots"]

#: the kernel send buffer of an admin connection (Linux doubles it): a viewer that stops reading
#: holds at most this, the transport's 64 KiB high-water mark and one page of events. Left to the
#: kernel's autotuning it grew to about 4 MB a viewer, and 420 stalled viewers reached the host's
#: TCP memory pressure
SEND_BUFFER = 128 * 1024

_PAGE = Path(__file__).with_name("_liveview_page.html")
_T = TypeVar("_T")
#: a tap name as the CLI accepts it; anything else cannot be in the store
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
_EVENT_ID = re.compile(r"(\d{1,18})-(\d{1,18})")
#: the model of a request from its body text without parsing the whole body: in JSON text an unescaped
#: "model" followed by a colon and a string is a key (quotes inside strings are escaped)
_MODEL = re.compile(r'"model"\s*:\s*"((?:[^"\\]|\\.){1,256})"')
_KINDS = ("exchange", "finding")


@dataclass(kw_only=True, slots=True)
class LiveViewConfig:
    """Limits of the live view; the defaults suit a handful of people watching one proxy."""

    prefix: str = "/wirecheck"
    #: how often a viewer that has caught up reads the store again
    poll_s: float = 0.2
    #: rows of each table a viewer reads at a time
    batch: int = 200
    #: rows a fresh stream (no Last-Event-ID) starts back from the end
    backlog: int = 100
    max_viewers: int = 64
    #: a viewer whose connection takes longer than this to accept one event is dropped
    send_timeout_s: float = 10.0
    ping_s: float = 15.0
    #: exchanges looked at for the pairing state
    pairing_window: int = 1000
    #: an exchange's detail shows at most this much of each body (and of its chunks together)
    detail_body: int = 256 * 1024
    #: exchange details being read or sent at once; more get a 503 (each holds its answer in memory)
    max_details: int = 16


class ViewerSlots:
    """The viewer cap as slots. ``take`` and ``give`` run on one event loop and never await, so a
    check and its count are one step: a burst of 200 requests admits ``limit`` of them, never more."""

    __slots__ = ("limit", "open")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    def take(self) -> bool:
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def give(self, n: int = 1) -> None:
        self.open = max(0, self.open - n)


@dataclass(slots=True)
class ViewStats:
    viewers: int = 0
    connected: int = 0
    refused: int = 0
    dropped: int = 0
    events: int = 0
    read_errors: int = 0


@dataclass(kw_only=True, slots=True)
class _Filters:
    tap: str | None = None
    rule: str | None = None
    fault: str | None = None
    severity: str | None = None
    model: str | None = None
    kinds: tuple[str, ...] = _KINDS
    extra: dict[str, str] = field(default_factory=dict)


class _BadRequest(Exception):
    pass


def _model_of(body_text: str | None) -> str | None:
    if not body_text:
        return None
    m = _MODEL.search(body_text[:65536])
    if m is None:
        return None
    try:
        value = json.loads(f'"{m.group(1)}"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def _filters(request: Request) -> _Filters:
    q = request.query_params
    allowed = {"tap", "rule", "fault", "severity", "model", "kind", "backlog", "last_event_id"}
    unknown = sorted(set(q.keys()) - allowed)
    if unknown:
        raise _BadRequest(f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(allowed))}")
    f = _Filters()
    if (tap := q.get("tap")) is not None:
        if not _NAME.fullmatch(tap):
            raise _BadRequest(f"tap {tap!r} is not a tap name (letters, digits, _ . : -, up to 64)")
        f.tap = tap
    if (rule := q.get("rule")) is not None:
        if rule not in REGISTRY:
            raise _BadRequest(f"rule {rule[:80]!r} is not a wirecheck rule (see wirecheck rules)")
        f.rule = rule
    if (fault := q.get("fault")) is not None:
        if fault not in {str(x) for x in Fault}:
            raise _BadRequest(f"fault {fault[:80]!r}; known: {', '.join(str(x) for x in Fault)}")
        f.fault = fault
    if (sev := q.get("severity")) is not None:
        if sev not in {str(x) for x in Severity}:
            raise _BadRequest(f"severity {sev[:80]!r}; known: {', '.join(str(x) for x in Severity)}")
        f.severity = sev
    if (model := q.get("model")) is not None:
        if not 0 < len(model) <= 256:
            raise _BadRequest("model must be 1 to 256 characters")
        f.model = model
    if (kind := q.get("kind")) is not None:
        if kind not in _KINDS:
            raise _BadRequest(f"kind {kind[:80]!r}; known: {', '.join(_KINDS)}")
        f.kinds = (kind,)
    return f


def _int_param(request: Request, name: str, default: int, top: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) > top:
        raise _BadRequest(f"{name} must be a whole number from 0 to {top}")
    return int(raw)


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse(
        {
            "error": {
                "message": f"wirecheck live view: {message}",
                "type": kind,
                "param": None,
                "code": status,
            }
        },
        status_code=status,
    )


@dataclass(slots=True, frozen=True)
class _Row:
    """One stored row as the stream sends it: the fields the filters look at, and its JSON."""

    seq: int
    kind: str
    tap: str
    model: str | None
    data: bytes
    rule: str | None = None
    fault: str | None = None
    severity: str | None = None

    def matches(self, f: _Filters) -> bool:
        if self.kind == "exchange" and (f.rule or f.fault or f.severity):
            return False  # finding-only filters: an exchange matches none of them
        return (
            (f.tap is None or self.tap == f.tap)
            and (f.model is None or self.model == f.model)
            and (f.rule is None or self.rule == f.rule)
            and (f.fault is None or self.fault == f.fault)
            and (f.severity is None or self.severity == f.severity)
        )


def _fetch(store: Store, *, kind: str, pos: int, limit: int) -> list[_Row]:
    out: list[_Row] = []
    if kind == "exchange":
        keys = ("seq", "id", "tap", "correlation", "started_at", "method", "path", "status", "error")
        for r in store.exchange_rows_after(pos, limit):
            model = _model_of(r[9])
            data = json.dumps({**dict(zip(keys, r[:9], strict=True)), "model": model}).encode()
            out.append(_Row(int(r[0]), kind, str(r[2]), model, data))
        return out
    for seq, exchange_id, tap, rule, severity, fault, message, evidence, body in store.finding_rows_after(
        pos, limit
    ):
        model = _model_of(body)
        data = json.dumps(
            {
                "seq": seq,
                "exchange_id": exchange_id,
                "tap": tap,
                "rule": rule,
                "severity": severity,
                "fault": fault,
                "message": message,
                "evidence": json.loads(evidence),
                "model": model,
            }
        ).encode()
        out.append(_Row(int(seq), kind, str(tap), model, data, rule, fault, severity))
    return out


class LiveView:
    """An ASGI app serving the live view over the store at ``store_path``.

    ``taps`` names the listeners (for the pairing state, also when one has no traffic yet);
    ``health`` returns what the proxy knows of itself (in flight, queue, drops), shown as it is.
    """

    def __init__(
        self,
        store_path: str,
        *,
        taps: Sequence[str] = ("caller",),
        health: Callable[[], dict[str, Any]] | None = None,
        config: LiveViewConfig | None = None,
        slots: ViewerSlots | None = None,
    ) -> None:
        self.cfg = config or LiveViewConfig()
        self.store_path = store_path
        self.taps = list(taps)
        self.health = health
        self.stats = ViewStats()
        #: the cap, shared with whatever else serves this proxy's viewers (``_viewproc``)
        self.slots = slots or ViewerSlots(self.cfg.max_viewers)
        self._details = 0
        self._reader: Store | None = None
        # its own threads: the viewers' reads never wait behind (or hold up) anything else's
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="wirecheck-liveview")
        self._closing = False
        self._cache: dict[tuple[str, int], tuple[float, list[_Row]]] = {}
        self._pending: dict[tuple[str, int], asyncio.Future[list[_Row]]] = {}
        self._head: tuple[int, int] = (0, 0)
        self._head_changed = asyncio.Event()
        self._watcher: asyncio.Future[None] | None = None
        p = self.cfg.prefix.rstrip("/")
        self.app = Starlette(
            # the proxy's control endpoints answer errors in OpenAI's JSON shape; so does the view
            exception_handlers={404: _not_found, 405: _not_found},
            routes=[
                Route(f"{p}/", self.page),
                Route(f"{p}/view", self.page),
                Route(f"{p}/events", self.events),
                Route(f"{p}/state", self.state),
                Route(p + "/exchange/{exchange_id:path}", self.exchange),
            ],
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    def stop(self) -> None:
        """End every open stream (the proxy is shutting down)."""
        self._closing = True

    def close(self) -> None:
        self.stop()
        self._pool.shutdown(wait=True)
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    # --- reading, in the view's own threads ------------------------------------------------------

    def _store(self) -> Store:
        # a reader of its own: the writer's connection and lock stay the request path's
        if self._reader is None:
            self._reader = Store(self.store_path)
        return self._reader

    async def _read(self, fn: Callable[[Store], _T]) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: self._guarded(fn))

    def _guarded(self, fn: Callable[[Store], _T]) -> _T:
        try:
            return fn(self._store())
        except Exception:
            # a lost database connection (a PostgreSQL restart): the next read opens a new one
            self.stats.read_errors += 1
            reader, self._reader = self._reader, None
            if reader is not None:
                with contextlib.suppress(Exception):
                    reader.close()
            raise

    # --- routes ----------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        return HTMLResponse(
            _PAGE.read_bytes(),
            headers={
                # everything is inline; nothing may be loaded from anywhere else
                "content-security-policy": "default-src 'none'; script-src 'unsafe-inline'; "
                "style-src 'unsafe-inline'; connect-src 'self'; img-src 'none'; base-uri 'none'",
                "x-content-type-options": "nosniff",
                "cache-control": "no-store",
            },
        )

    async def events(self, request: Request) -> Response:
        try:
            filters = _filters(request)
            backlog = _int_param(request, "backlog", self.cfg.backlog, 100_000)
            last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
            start: tuple[int, int] | None = None
            if last is not None:
                m = _EVENT_ID.fullmatch(last.strip())
                if m is None:
                    raise _BadRequest(f"Last-Event-ID {last[:40]!r} is not one of this stream's ids (X-F)")
                start = (int(m.group(1)), int(m.group(2)))
        except _BadRequest as exc:
            return _error(400, str(exc), "invalid_request")
        # the slot is taken before anything awaits: a burst cannot pass this check together
        if not self.slots.take():
            self.stats.refused += 1
            return _error(503, f"already {self.slots.open} viewers (the limit)", "too_many_viewers")
        self.stats.viewers += 1
        if start is None:
            try:
                x, f = await self._read(Store.positions)
            except Exception as exc:  # the database is down: say so; the browser retries
                self._leave()
                return _error(503, f"the store cannot be read ({type(exc).__name__})", "store_unavailable")
            start = (max(x - backlog, 0), max(f - backlog, 0))
        self.stats.connected += 1
        return _Stream(
            self._stream(filters, start),
            ping=self.cfg.ping_s,
            send_timeout=self.cfg.send_timeout_s,
            headers={"cache-control": "no-store", "x-accel-buffering": "no"},
            view=self,
        )

    def _leave(self) -> None:
        """A viewer is gone (its response ended, however): its slot is free again."""
        self.stats.viewers -= 1
        self.slots.give()

    async def _stream(self, f: _Filters, start: tuple[int, int]) -> AsyncIterator[ServerSentEvent | bytes]:
        xpos, fpos = start
        batch = self.cfg.batch
        idle = 0
        # the browser retries after this long when the connection drops
        yield ServerSentEvent(retry=1000, comment="wirecheck live view")
        while not self._closing:
            try:
                xs = await self._rows("exchange", xpos) if "exchange" in f.kinds else []
                fs = await self._rows("finding", fpos) if "finding" in f.kinds else []
            except Exception:  # the database is away: keep the stream and the position, retry
                await asyncio.sleep(1.0)
                continue
            # exchanges first: a finding names an exchange that is already stored. One write
            # a read, not one an event: a busy proxy carries hundreds of exchanges a second,
            # and each send costs the proxy's event loop (the data is one line of JSON, which
            # escapes every line break, so the frames are whole)
            frames: list[bytes] = []
            for row in xs:
                xpos = row.seq
                if row.matches(f):
                    frames.append(
                        b"id: %d-%d\r\nevent: exchange\r\ndata: %s\r\n\r\n" % (xpos, fpos, row.data)
                    )
            for row in fs:
                fpos = row.seq
                if row.matches(f):
                    frames.append(b"id: %d-%d\r\nevent: finding\r\ndata: %s\r\n\r\n" % (xpos, fpos, row.data))
            if frames:
                self.stats.events += len(frames)
                yield b"".join(frames)
            idle = idle + 1 if not xs and not fs else 0
            if idle > 1:  # the head said there was more, yet nothing came: never spin
                await asyncio.sleep(self.cfg.poll_s)
            if len(xs) < batch and len(fs) < batch:
                await self._news(xpos, fpos, f.kinds)
            else:
                await asyncio.sleep(0)  # a long catch-up still lets the proxy's loop run

    async def _news(self, xpos: int, fpos: int, kinds: tuple[str, ...]) -> None:
        """Wait until the store holds rows past this viewer's position. One watcher reads the
        store's last rows for all viewers, so a caught-up viewer costs nothing while nothing new
        comes."""
        while not self._closing:
            hx, hf = self._head
            if ("exchange" in kinds and hx > xpos) or ("finding" in kinds and hf > fpos):
                return
            if self._watcher is None or self._watcher.done():
                self._watcher = asyncio.ensure_future(self._watch())
            changed = self._head_changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=5 * self.cfg.poll_s)

    async def _watch(self) -> None:
        """Every ``poll_s`` while anyone watches: the store's last exchange and finding rows."""
        while self.stats.viewers > 0 and not self._closing:
            try:
                head = await self._read(Store.positions)
            except Exception:  # the database is away: the viewers wait, the watcher retries
                head = self._head
            if head != self._head:
                self._head = head
                changed, self._head_changed = self._head_changed, asyncio.Event()
                changed.set()
            await asyncio.sleep(self.cfg.poll_s)

    async def _rows(self, kind: str, pos: int) -> list[_Row]:
        """The rows after ``pos``, read once for every viewer at that position: viewers that have
        caught up sit at the same position, so ten of them cost one query and one encoding per
        poll, not ten. A result is reused for half a poll interval at most."""
        loop = asyncio.get_running_loop()
        key = (kind, pos)
        hit = self._cache.get(key)
        if hit is not None and loop.time() - hit[0] < self.cfg.poll_s / 2:
            return hit[1]
        fut = self._pending.get(key)
        if fut is None:
            fut = asyncio.ensure_future(self._read(partial(_fetch, kind=kind, pos=pos, limit=self.cfg.batch)))
            self._pending[key] = fut

            def done(f: asyncio.Future[list[_Row]]) -> None:
                self._pending.pop(key, None)
                # only rows are reused: an empty answer ("caught up") goes stale at once
                if not f.cancelled() and f.exception() is None and f.result():
                    now = loop.time()
                    for k in [k for k, (t, _) in self._cache.items() if now - t > 1.0]:
                        del self._cache[k]
                    self._cache[key] = (now, f.result())

            fut.add_done_callback(done)
        # shielded: a viewer that goes away does not cancel the read the others wait on
        return await asyncio.shield(fut)

    async def state(self, request: Request) -> Response:
        def read(store: Store) -> dict[str, Any]:
            gaps = store.gaps()
            recent = store.recent_taps(self.cfg.pairing_window)
            return {
                "positions": list(store.positions()),
                "exchanges": store.count(),
                "finding_counts": [
                    {"rule": r, "fault": fa, "severity": s, "count": n}
                    for r, fa, s, n in store.finding_counts()
                ],
                "gaps": {
                    "count": len(gaps),
                    "dropped": sum(g[0] for g in gaps),
                    "last": [{"dropped": d, "first_at": a, "last_at": b} for d, a, b in gaps[-20:]],
                },
                "pairing": _pairing(recent, self.taps),
            }

        try:
            body = await self._read(read)
            body["store_ok"] = True
        except Exception as exc:  # the database is down: say so, keep serving the page
            body = {"store_ok": False, "store_error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        body["health"] = self.health() if self.health is not None else None
        body["viewers"] = {
            "open": self.slots.open,
            "connected": self.stats.connected,
            "refused": self.stats.refused,
            "dropped": self.stats.dropped,
            "events": self.stats.events,
            "read_errors": self.stats.read_errors,
            "limit": self.cfg.max_viewers,
            "pid": os.getpid(),  # the process serving the view (the proxy's own, or its view process)
        }
        return JSONResponse(body, headers={"cache-control": "no-store"})

    async def exchange(self, request: Request) -> Response:
        exchange_id: str = request.path_params["exchange_id"]
        if not 0 < len(exchange_id) <= 200:
            return _error(400, "an exchange id is 1 to 200 characters", "invalid_request")
        if self._details >= self.cfg.max_details:
            return _error(503, f"already {self._details} exchange details being served", "busy")
        self._details += 1
        try:
            body = await self._read(partial(self._detail, exchange_id=exchange_id))
        except BaseException:
            self._details -= 1
            raise
        if body is None:
            self._details -= 1
            return _error(404, f"no exchange {exchange_id[:80]!r} in the store", "not_found")
        return _Detail(body, headers={"cache-control": "no-store"}, view=self)

    def _detail(self, store: Store, *, exchange_id: str) -> dict[str, Any] | None:
        """One exchange for the page, its bodies cut to ``detail_body``: the whole stays in the store
        (``wirecheck export``)."""
        doc = store.exchange_doc(exchange_id)
        if doc is None:
            return None
        cut = _cut_bodies(doc, self.cfg.detail_body)
        corr = doc.get("correlation")
        pairs = (
            [
                {"id": e.id, "tap": e.tap}
                for e in store.exchanges(where="WHERE correlation = ? AND id <> ?", args=(corr, exchange_id))
            ]
            if isinstance(corr, str)
            else []
        )
        out: dict[str, Any] = {
            "exchange": doc,
            "findings": store.findings(exchange_id=exchange_id),
            "pairs": pairs,
        }
        if cut:
            out["view_truncated"] = cut
        return out


async def _not_found(request: Request, exc: Exception) -> Response:
    code = getattr(exc, "status_code", 404)
    return _error(code, f"no such live view endpoint: {request.method} {request.url.path[:200]}", "not_found")


def _pairing(recent: list[tuple[str, str | None]], taps: list[str]) -> dict[str, Any]:
    """Of the recent exchanges, how many each tap saw and how many of them the other tap saw too
    (same correlation): a gateway that drops x-wirecheck-id, or a tap that is not in the path, shows
    here as unpaired exchanges."""
    by_tap: dict[str, set[str]] = {t: set() for t in taps}
    counts: dict[str, int] = dict.fromkeys(taps, 0)
    for tap, corr in recent:
        counts[tap] = counts.get(tap, 0) + 1
        if corr:
            by_tap.setdefault(tap, set()).add(corr)
    out: dict[str, Any] = {"window": len(recent), "taps": {}}
    for tap, n in counts.items():
        others: set[str] = set()
        for t, cs in by_tap.items():
            if t != tap:
                others |= cs
        mine = by_tap.get(tap, set())
        out["taps"][tap] = {"exchanges": n, "paired": len(mine & others), "unpaired": len(mine - others)}
    return out


class _Stream(EventSourceResponse):
    """An event stream that gives its viewer's slot back however it ends (its generator may never
    have started), and counts the viewers it drops for not reading (send timeout)."""

    def __init__(self, *args: Any, view: LiveView, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._view = view

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except TimeoutError:  # sse-starlette's SendTimeoutError: the browser stopped reading
            self._view.stats.dropped += 1
        finally:
            self._view._leave()


class _Detail(JSONResponse):
    """An exchange's detail: counted while it is read or sent (``max_details``), and cut off when
    the reader does not take it within ``send_timeout_s`` (the answer is held until it is sent)."""

    def __init__(self, content: Any, *, view: LiveView, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._view = view

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with asyncio.timeout(self._view.cfg.send_timeout_s):
                await super().__call__(scope, receive, send)
        except TimeoutError:
            self._view.stats.dropped += 1
            cut = (scope.get("extensions") or {}).get(CUT)
            if cut is not None:
                cut()  # the connection goes; uvicorn takes the app's return as its end
        finally:
            self._view._details -= 1


def _cut_bodies(doc: dict[str, Any], limit: int) -> dict[str, int]:
    """Cut each body of an interchange-form exchange to ``limit`` bytes (a response's chunks to
    ``limit`` together), in place; returns what was cut, by part, with its whole size."""
    cut: dict[str, int] = {}
    for side in ("request", "response"):
        part = doc.get(side)
        if not isinstance(part, dict):
            continue
        if "body" in part:
            text = json.dumps(part["body"])
            if len(text) > limit:
                del part["body"]
                part["body_text"] = text
        for key in ("body_text", "body_b64"):
            value = part.get(key)
            if isinstance(value, str) and len(value) > limit:
                part[key] = value[: limit - limit % 4] if key == "body_b64" else value[:limit]
                cut[f"{side}.{key}"] = len(value)
        chunks = part.get("chunks")
        if isinstance(chunks, list):
            total, kept = 0, 0
            for c in chunks:
                total += len(str(c.get("text") or c.get("b64") or "")) if isinstance(c, dict) else 0
                if total > limit:
                    break
                kept += 1
            if kept < len(chunks):
                cut[f"{side}.chunks"] = len(chunks)
                del chunks[kept:]
    return cut
