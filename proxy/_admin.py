"""The admin listener: health, findings and metrics, apart from the forwarding
listeners.

Findings carry excerpts of other callers' prompts and answers, so they are not served where callers
connect: ``wirecheck proxy`` serves this app on its own address (``--admin``, loopback by default),
and beyond loopback only with a bearer token (``--admin-token``, ``--admin-token-file`` or
``WIRECHECK_ADMIN_TOKEN``). Parameters are validated: a bad one is a 400 with a message, never a 500.

Without a token, loopback alone is not enough: a web page the operator opens can point a name of its
own at 127.0.0.1 (DNS rebinding) and read the listener as same-origin. Such a request carries the
page's name in ``Host``, so without a token only loopback names (and those given with
``--admin-host``) are answered; any other ``Host`` gets a 403 that says why.

A browser's ``EventSource`` cannot send an ``Authorization`` header, so with a token the live view
is opened once as ``/wirecheck/?token=TOKEN``: the token is exchanged for an ``HttpOnly``,
``SameSite=Strict`` cookie (a MAC of the token, not the token) and the browser is sent on to the
same address without it, so the token stays out of the address bar, history and every log.

Routes are added in one place, :meth:`AdminApp.route` (the table in ``__init__``), so that later pages
(a live view) join the same listener, token and error handling.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode

from prometheus_client import generate_latest

from wirecheck.contracts import Fault, Severity
from wirecheck.record import Store

from ._app import ProxyApp, Receive, Scope, Send

__all__ = ["ADMIN_TOKEN_ENV", "LOOPBACK_NAMES", "AdminApp", "AdminError", "AdminReply"]

ADMIN_TOKEN_ENV = "WIRECHECK_ADMIN_TOKEN"
#: the Host names a listener without a token answers (with or without a port), besides --admin-host's
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
#: the cookie a browser gets for the token it brought once in ``?token=``
_COOKIE = "wirecheck_admin"

#: (status, content type, body)
AdminReply = tuple[int, str, bytes]
Handler = Callable[[dict[str, str]], Awaitable[AdminReply]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_FINDING_FILTERS = ("rule", "fault", "severity", "tap", "exchange_id", "limit")
_MAX_LIMIT = 100_000


class AdminError(Exception):
    """A request the admin app refuses, with its status and a message for the caller."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _host_name(host: bytes) -> str:
    """The name of a ``Host`` header, lower case, without its port (``[::1]`` keeps its brackets)."""
    text = host.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text[: text.find("]") + 1] if "]" in text else text
    return text.rsplit(":", 1)[0] if text.count(":") == 1 else text


def _query_token(scope: Scope) -> str | None:
    """The ``token`` query parameter of a GET, if one was sent."""
    if scope.get("method") not in ("GET", "HEAD"):
        return None
    query = bytes(scope.get("query_string", b""))
    if b"token=" not in query:
        return None
    return dict(parse_qsl(query.decode("latin-1"))).get("token")


def _json(status: int, obj: Any) -> AdminReply:
    return status, "application/json", json.dumps(obj).encode()


class AdminApp:
    """ASGI app for the admin listener of one proxy run: the taps it serves, and their store."""

    def __init__(
        self,
        taps: Iterable[ProxyApp],
        store: Store | None,
        *,
        token: str | None = None,
        hosts: Iterable[str] = (),
        direct: bool = False,
    ) -> None:
        self.taps = list(taps)
        if not self.taps:
            raise ValueError("the admin app needs at least one tap")
        self.store = store
        self.token = token
        #: no gateway behind the taps: the live checks keep each single-tap finding's fault
        self.direct = direct
        #: Host names answered without a token: loopback's and the operator's own
        self.hosts = LOOPBACK_NAMES | {_host_name(h.encode("latin-1")) for h in hosts}
        self._cookie = (
            hmac.new(token.encode(), b"wirecheck admin cookie", hashlib.sha256).hexdigest()
            if token is not None
            else None
        )
        self.routes: dict[str, tuple[tuple[str, ...], Handler]] = {}
        #: (prefix, ASGI app) served below the routes: the live view
        self.mounts: list[tuple[str, ASGIApp]] = []
        self.route("/wirecheck/health", self.health)
        self.route("/wirecheck/findings", self.findings, params=_FINDING_FILTERS)
        self.route("/wirecheck/metrics", self.metrics)

    def route(self, path: str, handler: Handler, *, params: tuple[str, ...] = ()) -> None:
        """Serve ``handler`` at ``path`` (GET only); query parameters outside ``params`` are a 400."""
        if path in self.routes:
            raise ValueError(f"admin route {path} is added twice")
        self.routes[path] = (params, handler)

    def mount(self, prefix: str, app: ASGIApp) -> None:
        """Serve ``app`` for paths under ``prefix`` that no route answers (same token rule)."""
        self.mounts.append((prefix.rstrip("/") + "/", app))

    def _mounted(self, path: str) -> ASGIApp | None:
        if (path.rstrip("/") or "/") in self.routes:
            return None
        for prefix, app in self.mounts:
            if path.startswith(prefix) or path == prefix.rstrip("/"):
                return app
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        try:
            self._authorise(scope)
            if self.token is not None and _query_token(scope) is not None:
                await self._set_cookie(scope, send)
                return
            mounted = self._mounted(scope.get("path", "/"))
            if mounted is not None:
                await mounted(scope, receive, send)
                return
            status, ctype, body = await self._dispatch(scope)
        except AdminError as exc:
            status, ctype, body = _json(
                exc.status, {"error": {"message": str(exc), "type": "admin", "code": exc.status}}
            )
        headers = [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b'Bearer realm="wirecheck admin"'))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})

    def _authorise(self, scope: Scope) -> None:
        headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
        if self.token is None:
            host = next((v for k, v in headers if k.lower() == b"host"), None)
            if host is not None and _host_name(host) not in self.hosts:
                raise AdminError(
                    403,
                    f"this admin listener answers loopback names only, not Host {_host_name(host)[:100]!r} "
                    "(a page that points its own name at this machine must not read it); give the name "
                    "with --admin-host, or set an admin token",
                )
            return
        if self._bearer_ok(headers) or self._cookie_ok(headers):
            return
        sent = _query_token(scope)
        if sent is not None and hmac.compare_digest(sent.encode(), self.token.encode()):
            return
        raise AdminError(401, "this admin listener needs Authorization: Bearer <token>")

    def _bearer_ok(self, headers: list[tuple[bytes, bytes]]) -> bool:
        assert self.token is not None
        sent = next((v for k, v in headers if k.lower() == b"authorization"), b"")
        # the scheme is case-insensitive (RFC 9110, section 11.1); the token is compared as sent
        scheme, _, credentials = sent.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self.token.encode())

    def _cookie_ok(self, headers: list[tuple[bytes, bytes]]) -> bool:
        assert self._cookie is not None
        want = f"{_COOKIE}={self._cookie}".encode()
        for k, v in headers:
            if k.lower() == b"cookie":
                for part in v.split(b";"):
                    if hmac.compare_digest(part.strip(), want):
                        return True
        return False

    async def _set_cookie(self, scope: Scope, send: Send) -> None:
        """The token came in the query (a browser's first visit): a cookie in its place, and the same
        address again without the token."""
        assert self._cookie is not None
        query = [(k, v) for k, v in parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1"))]
        rest = urlencode([(k, v) for k, v in query if k != "token"])
        location = scope.get("path", "/") + (f"?{rest}" if rest else "")
        cookie = f"{_COOKIE}={self._cookie}; Path=/wirecheck; HttpOnly; SameSite=Strict"
        headers = [
            (b"location", location.encode("latin-1", "replace")),
            (b"set-cookie", cookie.encode()),
            (b"cache-control", b"no-store"),
            (b"referrer-policy", b"no-referrer"),
            (b"content-length", b"0"),
        ]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _dispatch(self, scope: Scope) -> AdminReply:
        path: str = scope.get("path", "/")
        found = self.routes.get(path.rstrip("/") or "/")
        if found is None:
            raise AdminError(404, f"no admin endpoint {path}; there are {', '.join(sorted(self.routes))}")
        if scope.get("method") not in ("GET", "HEAD"):
            raise AdminError(405, "admin endpoints answer GET only")
        allowed, handler = found
        try:
            pairs = parse_qsl(bytes(scope.get("query_string", b"")).decode("utf-8"), strict_parsing=False)
        except UnicodeDecodeError as exc:
            raise AdminError(400, "the query string is not UTF-8") from exc
        query: dict[str, str] = {}
        for k, v in pairs:
            if k not in allowed:
                known = ", ".join(allowed) or "none"
                raise AdminError(400, f"unknown parameter {k!r} (known: {known})")
            if k in query:
                raise AdminError(400, f"parameter {k!r} given twice")
            query[k] = v
        return await handler(query)

    # --- the endpoints ---------------------------------------------------------------------------

    def health_info(self) -> dict[str, Any]:
        """What /wirecheck/health answers; the live view shows the same."""
        first = self.taps[0]
        info: dict[str, Any] = {
            "status": "ok",
            "tap": first.cfg.tap,
            "upstream": first.cfg.redact.url(first.cfg.upstream),
            "in_flight": sum(t.in_flight for t in self.taps),
            # how single-tap findings are blamed: their rule's fault (no gateway), or unknown
            "direct": self.direct,
            "taps": [
                {"tap": t.cfg.tap, "upstream": t.cfg.redact.url(t.cfg.upstream), "in_flight": t.in_flight}
                for t in self.taps
            ],
        }
        if self.store is not None:
            stats = self.store.stats
            info["store"] = {
                "path": self.store.path,
                "queued": stats.queued,
                "written": stats.written,
                "dropped": stats.dropped,
                "gap_unwritten": self.store.gap_unwritten(),
                "reconnects": getattr(stats, "reconnects", 0),
                "last_error": getattr(stats, "last_error", None),
            }
        reasons: list[str] = []
        if self.store is not None and (since := self.store.stats.failing_since) is not None:
            # from the first failed write: the batch is still being retried, and what cannot be
            # written is counted as lost only once the retries are spent (about 20 s)
            info["store"]["failing_s"] = round(time.monotonic() - since, 1)
            reasons.append(f"the store cannot write ({self.store.stats.last_error})")
        if first.checks is not None:
            # the live checker's state: degraded while it is down, just died, or lags
            checks = first.checks()
            info["checks"] = checks
            if checks.get("degraded"):
                reasons.append(str(checks["degraded"]))
        if reasons:
            info["status"] = "degraded"
            info["reason"] = "; ".join(reasons)
        return info

    async def health(self, query: dict[str, str]) -> AdminReply:
        return _json(200, self.health_info())

    async def findings(self, query: dict[str, str]) -> AdminReply:
        filters: dict[str, Any] = dict(query)
        if "limit" in filters:
            text = filters["limit"]
            if not text.isdigit() or not 1 <= int(text) <= _MAX_LIMIT:
                raise AdminError(400, f"limit must be a whole number from 1 to {_MAX_LIMIT}, not {text!r}")
            filters["limit"] = int(text)
        for name, enum in (("fault", Fault), ("severity", Severity)):
            if name in filters and filters[name] not in {str(e) for e in enum}:
                known = ", ".join(str(e) for e in enum)
                raise AdminError(400, f"{name} must be one of {known}, not {filters[name]!r}")
        if self.store is None:
            return _json(200, [])
        rows = await asyncio.to_thread(self.store.findings, **filters)
        return _json(200, rows)

    async def metrics(self, query: dict[str, str]) -> AdminReply:
        metrics = self.taps[0].metrics
        if self.store is not None:
            metrics.sync_findings(await asyncio.to_thread(self.store.finding_counts))
        return 200, "text/plain; version=0.0.4; charset=utf-8", generate_latest(metrics.registry)
