"""Listeners: an ASGI app served over HTTP/1.1 on a listening socket (``_http.HttpConnection`` for
each caller), with the app's lifespan and a graceful stop. ``wirecheck proxy`` runs one per tap and
one for the admin listener; acceptance runs its taps and simulators on them; ``serve_listener`` runs
one in a thread, for tests and scripts."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

from ._http import App, HttpConnection, ListenerConfig, Message, _address
from ._loop import run_loop

__all__ = ["Listener", "serve_listener", "settle_gc"]

_log = logging.getLogger("wirecheck.proxy")


class Listener:
    """``app`` served on one listening socket. ``start`` runs the app's lifespan startup (an app
    without one is served all the same), then listens; ``stop`` stops listening, closes idle
    connections, lets each response under way end (``grace_s``: for at most that long; None: for as
    long as they take), then runs the lifespan shutdown."""

    def __init__(self, app: App, config: ListenerConfig | None = None, *, lifespan: bool = True) -> None:
        self.app = app
        self.config = config or ListenerConfig()
        self.connections: set[HttpConnection] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        #: the lifespan's state, copied into every request's scope (ASGI's lifespan state)
        self.state: dict[str, Any] = {}
        self._server: asyncio.Server | None = None
        self._lifespan = _Lifespan(app, self.state) if lifespan else None
        # the connections' head and idle bounds: one sweep every tick while any connection is open
        # (a twentieth of the shorter bound, at most a second) instead of a timer handle armed and
        # cancelled two or three times per connection; a bound is enforced at most a tick late
        cfg = self.config
        self._tick_s = min(1.0, max(min(cfg.head_timeout_s, cfg.idle_timeout_s) / 20, 0.001))
        self._sweeping: asyncio.TimerHandle | None = None
        #: the one address this listener listens on, when it is one (not a wildcard): every
        #: connection it accepts has it as its own end's address (``HttpConnection.address``)
        self.bound: tuple[str, int] | None = None

    def _connection(self) -> HttpConnection:
        return HttpConnection(self)

    def sweep(self) -> None:
        """Have the connections' bounds checked every tick from now on, while any is open."""
        if self._sweeping is None:
            self._sweeping = asyncio.get_running_loop().call_later(self._tick_s, self._sweep)

    def _sweep(self) -> None:
        self._sweeping = None
        if not self.connections:
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        for conn in list(self.connections):
            conn.overdue(now)
        if self.connections:
            self._sweeping = loop.call_later(self._tick_s, self._sweep)

    async def start(
        self, host: str = "127.0.0.1", port: int = 0, *, sock: socket.socket | None = None
    ) -> None:
        """Listen on ``host:port`` (0: a free port), or on ``sock`` when given (already bound)."""
        if self._lifespan is not None:
            await self._lifespan.startup()
        loop = asyncio.get_running_loop()
        if sock is not None:
            self._server = await loop.create_server(self._connection, sock=sock, backlog=2048)
        else:
            self._server = await loop.create_server(
                self._connection, host, port, backlog=2048, reuse_address=True
            )
        self.bound = _bound(self._server.sockets)

    @property
    def port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    async def adopt(self, sock: socket.socket, head: bytes) -> None:
        """Serve a connection accepted elsewhere (handed over by another process), whose request
        head ``head`` was already read from it."""
        loop = asyncio.get_running_loop()
        _, conn = await loop.connect_accepted_socket(self._connection, sock)
        conn.adopted = True  # its own end's address may be another listener's
        conn.data_received(head)

    async def stop(self, grace_s: float | None = None) -> None:
        loop = asyncio.get_running_loop()
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.shutdown()
        deadline = None if grace_s is None else loop.time() + grace_s
        while (self.connections or self.tasks) and (deadline is None or loop.time() < deadline):
            await asyncio.sleep(0.05)
            for conn in list(self.connections):
                if conn.lingering:  # its answer is written: no wait for a caller that keeps it open
                    conn.transport.close()
        for conn in list(self.connections):
            conn.transport.abort()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
        if self._sweeping is not None:
            self._sweeping.cancel()
            self._sweeping = None
        if self._lifespan is not None:
            await self._lifespan.shutdown()


def _bound(sockets: Any) -> tuple[str, int] | None:
    """The one specific address ``sockets`` listen on, or None (several sockets, or a wildcard)."""
    if len(sockets) != 1:
        return None
    address = _address(sockets[0].getsockname())
    if address is None or ipaddress.ip_address(address[0].split("%")[0]).is_unspecified:
        return None
    return address


class _Lifespan:
    """The ASGI lifespan protocol: startup before the first connection, shutdown after the last.
    An app that does not speak it (it returns or raises at once) is served without it."""

    def __init__(self, app: App, state: dict[str, Any]) -> None:
        self.app, self.state = app, state
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        self.failed: str | None = None
        self.task: asyncio.Task[None] | None = None
        self.started = asyncio.Event()
        self.ended = asyncio.Event()

    async def startup(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._main())
        await self.queue.put({"type": "lifespan.startup"})
        await _first(self.started.wait(), self.task)
        if self.failed is not None:
            raise RuntimeError(f"the app's lifespan startup failed: {self.failed}")

    async def shutdown(self) -> None:
        if self.task is None or self.task.done():
            return
        await self.queue.put({"type": "lifespan.shutdown"})
        await _first(self.ended.wait(), self.task)

    async def _main(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": self.state}
        try:
            await self.app(scope, self.queue.get, self._send)
        except Exception as exc:
            if not self.started.is_set():  # no lifespan in this app: served without one
                _log.debug("the app has no lifespan (%s)", type(exc).__name__)
            else:
                _log.error("the app's lifespan failed", exc_info=exc)
        finally:
            self.started.set()
            self.ended.set()

    async def _send(self, message: Message) -> None:
        kind = message["type"]
        if kind in ("lifespan.startup.complete", "lifespan.startup.failed"):
            if kind.endswith("failed"):
                self.failed = str(message.get("message", ""))
            self.started.set()
        elif kind in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
            if kind.endswith("failed"):
                _log.error("the app's lifespan shutdown failed: %s", message.get("message", ""))
            self.ended.set()


async def _first(wait: Any, task: asyncio.Task[None]) -> None:
    waiter = asyncio.ensure_future(wait)
    try:
        await asyncio.wait({waiter, task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()


@contextlib.contextmanager
def serve_listener(app: App, port: int = 0, *, config: ListenerConfig | None = None) -> Iterator[str]:
    """``app`` on ``127.0.0.1:port`` (0: a free one) in a ``Listener`` of its own, on the forwarding
    processes' event loop (``run_loop``) in a thread, until the block ends; yields its URL. What a test
    or a script serves a ``ProxyApp`` (or the admin app) with, exactly as ``wirecheck proxy`` does."""
    ready = threading.Event()
    got: dict[str, Any] = {}

    async def main() -> None:
        listener = Listener(app, config)
        try:
            await listener.start("127.0.0.1", port)
        except Exception as exc:  # said by the caller's thread
            got["error"] = exc
            ready.set()
            return
        stop = asyncio.Event()
        got.update(port=listener.port, loop=asyncio.get_running_loop(), stop=stop)
        ready.set()
        await stop.wait()
        await listener.stop(grace_s=5)

    thread = threading.Thread(target=run_loop, args=(main(),), name="wirecheck-listener", daemon=True)
    thread.start()
    if not ready.wait(30) or "error" in got:
        raise RuntimeError(f"a listener could not start on port {port}: {got.get('error')!r}")
    try:
        yield f"http://127.0.0.1:{got['port']}"
    finally:
        got["loop"].call_soon_threadsafe(got["stop"].set)
        thread.join(timeout=10)


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
