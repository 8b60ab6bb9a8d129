"""The live view in a process of its own: viewers cost the request path nothing.

Served in the proxy's process, ten viewers cost its event loop and GIL about 12 % more CPU at 256
streams (the frames sent, the store read in the view's threads), and that is time the forwarding
waits for. So the admin listener only reads a live-view request's head, then hands the connection
itself to a helper process:

1. The admin app authorises the request as usual (token, loopback) and finds it under the view's prefix.
2. The listener's protocol offers ``Handoff`` in the scope (``scope["extensions"]["wirecheck.handoff"]``)
   when the connection can be moved: plain TCP, the request complete, nothing pipelined behind it.
3. The connection's socket goes to the view process over a private Unix socket (``SCM_RIGHTS``), with
   the request's head rebuilt from the scope. The proxy then forgets the connection without closing
   it: the socket is the view process's now, and the proxy's loop never sees that caller again.
4. The view process serves ``LiveView`` on the socket it received (``Listener.adopt``), answers that
   one request (``connection: close``: the next request comes back through the admin listener and
   its token check) and streams events as long as the viewer stays.

The view process is started on the first view request, runs below the forwarding's CPU priority
(``_lifeline``: ``become_helper``), dies with the proxy, and is started again when it died (at most
every ``RESPAWN_S``). Whenever a request cannot be handed off (no ``send_fds``, TLS, the process
down or its queue full), the proxy serves it itself, as before. ``WIRECHECK_VIEW_PROCESS=0`` keeps the
whole view in the proxy's process.

The viewer cap holds across both processes. The proxy decides it, on its one event loop: a stream
request (``/events``) takes a slot of the shared :class:`ViewerSlots` before it is handed over (and
is marked so, ``x-wirecheck-viewer-slot``, a header the proxy sets and strips from callers), and the
view process says on the channel when each marked request has ended, which gives the slot back. A
stream the proxy serves itself takes from the same slots, so a burst of 200 (some handed over, some
served here while the channel is full) admits ``max_viewers`` in all. When the view process dies,
every slot it held is free again (its connections died with it).

The view's ``/state`` shows the proxy's own health (in flight, the store's queue and drops, the
checker): the view process asks the proxy for it on a second Unix socket, and the proxy answers
from its event loop, once per request (the page asks every 2 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import multiprocessing
import os
import socket
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from typing import Any

from wirecheck.record import Store

from ._app import Receive, Scope, Send
from ._http import HANDOFF, ListenerConfig
from ._lifeline import become_helper
from ._liveview import LiveView, LiveViewConfig, ViewerSlots
from ._server import Listener

__all__ = ["VIEW_PROCESS_ENV", "ViewProcess"]

#: ``0``: serve the live view in the proxy's own process
VIEW_PROCESS_ENV = "WIRECHECK_VIEW_PROCESS"
#: a view process that died is started again at most this often
RESPAWN_S = 5.0
#: how long the view process waits for the proxy's health before showing it as unknown
HEALTH_TIMEOUT_S = 1.0

_log = logging.getLogger("wirecheck.proxy")
#: set on a handed request that holds a viewer slot (never taken from a caller: stripped first)
VIEWER_SLOT = b"x-wirecheck-viewer-slot"
#: headers that frame a request body, left out of a handed request's head (see ``_request_head``)
_BODY = frozenset({b"content-length", b"transfer-encoding", b"expect"})
#: what sending to a view process that is gone fails with
_GONE = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ECONNREFUSED, errno.ENOTCONN})


def _request_head(scope: Scope, *, slot: bool = False) -> bytes:
    """The request's head as the caller sent it, near enough for a parser: method, path, query and
    headers from the scope (the admin app has read, and authorised, exactly these). ``slot``: mark it
    as holding a viewer slot (a caller's own mark is always dropped)."""
    target = bytes(scope.get("raw_path") or scope["path"].encode("utf-8"))
    query = bytes(scope.get("query_string", b""))
    if query:
        target += b"?" + query
    lines = [b"%s %s HTTP/1.1" % (scope["method"].encode("ascii"), target)]
    # a body sent with a GET was read here already: without its framing headers the view process's
    # parser takes the request as complete, as the admin listener did, and waits for nothing more
    lines += [
        bytes(k) + b": " + bytes(v)
        for k, v in scope.get("headers", [])
        if bytes(k).lower() not in _BODY and bytes(k).lower() != VIEWER_SLOT
    ]
    if slot:
        lines.append(VIEWER_SLOT + b": 1")
    return b"\r\n".join(lines) + b"\r\n\r\n"


class ViewProcess:
    """Mounted on the admin app in place of ``LiveView``: hands each view request to the view
    process, and serves it itself (``fallback``) when it cannot."""

    def __init__(
        self,
        store: Store,
        *,
        taps: Sequence[str],
        health: Callable[[], dict[str, Any]],
        max_head: int,
        config: LiveViewConfig | None = None,
    ) -> None:
        self.store_url = store.url
        self.taps = list(taps)
        self.health = health
        self.max_head = max_head
        cfg = config or LiveViewConfig()
        #: the one viewer cap of this proxy's view, in whichever process a viewer is served
        self.slots = ViewerSlots(cfg.max_viewers)
        self.fallback = LiveView(store.url, taps=self.taps, health=health, config=cfg, slots=self.slots)
        self.cfg = self.fallback.cfg
        self._events = self.cfg.prefix.rstrip("/") + "/events"
        self._there = 0  # slots held by streams handed to the view process
        self.handed = 0
        self.served_here = 0
        self.starts = 0
        self._enabled = hasattr(socket, "send_fds") and os.environ.get(VIEW_PROCESS_ENV, "1").strip() != "0"
        self._ctx = multiprocessing.get_context("spawn")
        self._proc: multiprocessing.process.BaseProcess | None = None
        self._chan: socket.socket | None = None
        self._health: socket.socket | None = None
        self._lifeline: Connection | None = None
        self._started_at = float("-inf")
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- the ASGI side ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._hand_off(scope):
            # the connection is the view process's now; this process sees it as gone and sends nothing
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        self.served_here += 1
        await self.fallback(scope, receive, send)

    def _hand_off(self, scope: Scope) -> bool:
        handoff = scope.get("extensions", {}).get(HANDOFF)
        if not self._enabled or handoff is None or scope.get("method") not in ("GET", "HEAD"):
            return False
        fd = handoff.fileno()  # first: a connection that cannot move starts no process
        if fd is None:
            return False
        stream = scope.get("path", "").rstrip("/") == self._events
        head = _request_head(scope, slot=stream)
        if len(head) > self.max_head or not self._ensure_running() or self._chan is None:
            return False
        if stream and not self.slots.take():
            return False  # served here, where the same slots answer it with a 503
        # counted before the send: once sent, the view process may answer before this line runs again
        self.handed += 1
        try:
            socket.send_fds(self._chan, [head], [fd])
        except OSError as exc:
            self.handed -= 1
            if stream:
                self.slots.give()
            if not isinstance(exc, BlockingIOError) and (exc.errno in _GONE or not self._proc_alive()):
                self._drop_process()  # the view process is gone: started again on a later request
            # else it is behind (its queue full) or a limit of the kernel's (ETOOMANYREFS): served here
            return False
        if stream:
            self._there += 1
        handoff.release()
        return True

    def _on_released(self) -> None:
        """The view process says streams ended (``R<count>``): their slots are free."""
        sock = self._chan
        while sock is not None:
            try:
                msg = sock.recv(64)
            except BlockingIOError:
                return
            except OSError:
                msg = b""
            if not msg:  # the view process is gone: _drop_process frees what it held
                self._stop_reading(sock)
                return
            if msg.startswith(b"R") and msg[1:].isdigit():
                n = min(int(msg[1:]), self._there)
                self._there -= n
                self.slots.give(n)

    # --- the process -----------------------------------------------------------------------------

    def _proc_alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    def _ensure_running(self) -> bool:
        if self._proc_alive():
            return True
        if self._proc is not None:
            self._drop_process()
        if time.monotonic() - self._started_at < RESPAWN_S:
            return False
        self._started_at = time.monotonic()
        try:
            self._spawn()
        except Exception as exc:  # no process (a limit, a full disk): the proxy serves the view itself
            _log.warning("wirecheck proxy: the live view's process did not start (%s); served here", exc)
            self._drop_process()
            return False
        return True

    def _spawn(self) -> None:
        chan_here, chan_there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        health_here, health_there = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        life_r, life_w = self._ctx.Pipe(duplex=False)
        try:
            proc = self._ctx.Process(
                target=run_view_process,
                args=(self.store_url,),
                kwargs={
                    "taps": self.taps,
                    "config": self.cfg,
                    "max_head": self.max_head,
                    "chan": chan_there,
                    "health": health_there,
                    "lifeline": life_r,
                    "parent_pid": os.getpid(),
                },
                name="wirecheck-live-view",
                daemon=True,
            )
            proc.start()
        except BaseException:
            for s in (chan_here, health_here):
                s.close()
            life_w.close()
            raise
        finally:
            chan_there.close()
            health_there.close()
            life_r.close()
        chan_here.setblocking(False)
        health_here.setblocking(False)
        self._proc, self._chan, self._health, self._lifeline = proc, chan_here, health_here, life_w
        self.starts += 1
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(health_here.fileno(), self._answer_health)
        self._loop.add_reader(chan_here.fileno(), self._on_released)

    def _answer_health(self) -> None:
        """One request from the view process for the proxy's health: its number, answered with it."""
        sock = self._health
        if sock is None:
            return
        try:
            asked = sock.recv(64)
        except BlockingIOError:
            return
        except OSError:
            asked = b""
        if not asked:  # the view process is gone
            self._stop_reading(sock)
            return
        try:
            info: Any = self.health()
        except Exception as exc:  # health is best effort here: say why it is missing
            info = {"status": "unknown", "reason": f"{type(exc).__name__}: {exc}"[:200]}
        with contextlib.suppress(OSError):
            sock.send(asked[:20] + b" " + json.dumps(info).encode())

    def _stop_reading(self, sock: socket.socket | None) -> None:
        if sock is not None and self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(sock.fileno())

    def _drop_process(self) -> None:
        self._stop_reading(self._health)
        self._stop_reading(self._chan)
        # its streams died with it: their slots are free
        self.slots.give(self._there)
        self._there = 0
        for s in (self._chan, self._health):
            if s is not None:
                s.close()
        if self._lifeline is not None:
            self._lifeline.close()
        self._chan = self._health = self._lifeline = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.is_alive():
            proc.kill()
        if proc is not None:
            proc.join(timeout=1)

    def stop(self) -> None:
        """The proxy is stopping: open streams end (here, and in the view process)."""
        self.fallback.stop()
        if self._chan is not None:
            with contextlib.suppress(OSError):
                self._chan.shutdown(socket.SHUT_RDWR)  # end-of-file there: its streams end

    def close(self, timeout: float = 5.0) -> None:
        self.stop()
        proc = self._proc
        if proc is not None:
            proc.join(timeout=timeout)
        self._drop_process()
        self.fallback.close()


# --- the view process ----------------------------------------------------------------------------


def run_view_process(
    store_url: str,
    *,
    taps: list[str],
    config: LiveViewConfig,
    max_head: int,
    chan: socket.socket,
    health: socket.socket,
    lifeline: Connection,
    parent_pid: int,
) -> None:
    """The view process: serves the connections the proxy hands it until the proxy says stop (end
    of file on ``chan``) or dies."""
    become_helper(lifeline, parent_pid, lambda _msg: None)
    view = LiveView(store_url, taps=taps, health=_RemoteHealth(health), config=config)
    asyncio.run(_serve_handed(view, max_head=max_head, chan=chan))


class _RemoteHealth:
    """The proxy's health, asked for on ``sock`` (a blocking call of the view's loop, bounded)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.asked = 0

    def __call__(self) -> dict[str, Any]:
        self.asked += 1
        tag = b"%d" % self.asked
        try:
            self.sock.settimeout(0)
            with contextlib.suppress(BlockingIOError):
                while self.sock.recv(1 << 18):  # late answers to questions that timed out
                    pass
            self.sock.settimeout(HEALTH_TIMEOUT_S)
            self.sock.send(tag)
            deadline = time.monotonic() + HEALTH_TIMEOUT_S
            while time.monotonic() < deadline:
                answer = self.sock.recv(1 << 18)
                if not answer:
                    break
                got, _, body = answer.partition(b" ")
                if got == tag:
                    info: dict[str, Any] = json.loads(body)
                    return info
        except (OSError, ValueError) as exc:
            return {"status": "unknown", "reason": f"the proxy did not answer ({type(exc).__name__})"}
        return {"status": "unknown", "reason": "the proxy did not answer"}


def _closing(app: Any, released: Callable[[], None]) -> Any:
    """Every response says ``connection: close``: a handed connection carries one request, so the
    next one goes through the admin listener (and its token check) again. A request that holds a
    viewer slot says so when it ends, however (``released``)."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def send_closing(msg: dict[str, Any]) -> None:
            if msg["type"] == "http.response.start":
                msg = {**msg, "headers": [*msg.get("headers", []), (b"connection", b"close")]}
            await send(msg)

        slot = any(bytes(k).lower() == VIEWER_SLOT for k, _ in scope.get("headers", []))
        try:
            await app(scope, receive, send_closing)
        finally:
            if slot:
                released()

    return wrapped


class _Releases:
    """Tells the proxy, on the channel, how many slot-holding requests have ended (``R<count>``);
    what cannot be sent at once (the channel full) goes with the next one, or a moment later."""

    def __init__(self, chan: socket.socket, loop: asyncio.AbstractEventLoop) -> None:
        self.chan, self.loop = chan, loop
        self.pending = 0
        self._retry: asyncio.TimerHandle | None = None

    def __call__(self) -> None:
        self.pending += 1
        self.flush()

    def flush(self) -> None:
        self._retry = None
        if not self.pending:
            return
        try:
            self.chan.send(b"R%d" % self.pending)
            self.pending = 0
        except BlockingIOError:
            if self._retry is None:
                self._retry = self.loop.call_later(0.05, self.flush)
        except OSError:
            self.pending = 0  # the proxy is gone


async def _serve_handed(view: LiveView, *, max_head: int, chan: socket.socket) -> None:
    loop = asyncio.get_running_loop()
    chan.setblocking(False)
    bounds = ListenerConfig(max_head=max_head, head_timeout_s=30.0, idle_timeout_s=5.0, direct_body=False)
    # it listens on no socket of its own: it adopts the connections the proxy hands over
    listener = Listener(_closing(view, _Releases(chan, loop)), bounds, lifespan=False)
    ended = asyncio.Event()
    adopting: set[asyncio.Task[None]] = set()  # held until done: the loop keeps only weak references

    async def adopt(head: bytes, fd: int) -> None:
        sock = socket.socket(fileno=fd)
        try:
            sock.setblocking(False)
            await listener.adopt(sock, head)
        except OSError:
            sock.close()

    def on_chan() -> None:
        while True:
            try:
                head, fds, flags, _ = socket.recv_fds(chan, max_head + 1024, 4)
            except BlockingIOError:
                return
            except OSError:
                head, fds, flags = b"", [], 0
            if not head and not fds:  # the proxy stops, or is gone
                loop.remove_reader(chan.fileno())
                ended.set()
                return
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC) or len(fds) != 1:
                for fd in fds:
                    os.close(fd)
                continue
            task = loop.create_task(adopt(head, fds[0]))
            adopting.add(task)
            task.add_done_callback(adopting.discard)

    loop.add_reader(chan.fileno(), on_chan)
    await ended.wait()
    view.stop()  # open streams end; their connections close
    await listener.stop(grace_s=5.0)
    view.close()
