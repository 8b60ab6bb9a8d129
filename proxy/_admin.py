"""The admin listener: health, findings and metrics, apart from the forwarding
listeners.

Findings carry excerpts of other callers' prompts and answers, so they are not served where callers
connect: ``wirecheck proxy`` serves this app on its own address (``--admin``, loopback by default),
and beyond loopback only with a bearer token (``--admin-token`` / ``WIRECHECK_ADMIN_TOKEN``).
Parameters are validated: a bad one is a 400 with a message, never a 500.

Routes are added in one place, :meth:`AdminApp.route` (the table in ``__init__``), so that later pages
(a live view) join the same listener, token and error handling.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

from prometheus_client import generate_latest

from wirecheck.contracts import Fault, Severity
from wirecheck.record import Store

from ._app import ProxyApp, Receive, Scope, Send

__all__ = ["ADMIN_TOKEN_ENV", "AdminApp", "AdminError", "AdminReply"]

ADMIN_TOKEN_ENV = "WIRECHECK_ADMIN_TOKEN"

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


def _json(status: int, obj: Any) -> AdminReply:
    return status, "application/json", json.dumps(obj).encode()


class AdminApp:
    """ASGI app for the admin listener of one proxy run: the taps it serves, and their store."""

    def __init__(self, taps: Iterable[ProxyApp], store: Store | None, *, token: str | None = None) -> None:
        self.taps = list(taps)
        if not self.taps:
            raise ValueError("the admin app needs at least one tap")
        self.store = store
        self.token = token
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
        if self.token is not None:
            sent = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
            want = b"Bearer " + self.token.encode()
            if not hmac.compare_digest(sent, want):
                raise AdminError(401, "this admin listener needs Authorization: Bearer <token>")

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
        if first.checks is not None:
            # the live checker's state: degraded while it is down, just died, or lags
            checks = first.checks()
            info["checks"] = checks
            if checks.get("degraded"):
                info["status"] = "degraded"
                info["reason"] = checks["degraded"]
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
