"""``wirecheck proxy``: one or two listeners (single or dual tap) in one process, the admin listener,
the store writer, and the live-check worker process. SIGTERM and SIGINT stop the listeners, then flush
the store. With ``--workers N`` the listeners run in N processes instead (``_workers.py``)."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from wirecheck.contracts import CheckConfig, ConfigError, native_summary
from wirecheck.record import Store

from ._admin import AdminApp
from ._app import Metrics, ProxyApp, TapConfig
from ._http import ListenerConfig
from ._live import CheckerSupervisor, start_checker
from ._liveview import SEND_BUFFER, LiveView
from ._loop import run_loop
from ._server import Listener, settle_gc
from ._viewproc import ViewProcess

__all__ = ["ProxyRun", "run_proxy"]


@dataclass(kw_only=True, slots=True)
class ProxyRun:
    taps: list[tuple[TapConfig, str, int]]  # (tap, host, port)
    store_path: str | None = "wirecheck.db"
    live_checks: bool = True
    settle_s: float = 1.0
    #: (host, port) of the admin listener (health, findings, metrics); None: no admin listener
    admin: tuple[str, int] | None = None
    #: bearer token the admin listener asks for; None: none (loopback only, the CLI enforces it)
    admin_token: str | None = None
    #: Host names the admin listener answers without a token, besides loopback's (DNS rebinding)
    admin_hosts: tuple[str, ...] = ()
    #: largest request head a caller may send (431 past it)
    max_head: int = 64 * 1024
    #: longest a caller may take to send a request head (408 past it)
    head_timeout_s: float = 30.0
    #: an idle connection (kept alive, or never used) is closed after this long
    idle_timeout_s: float = 75.0
    #: proxy processes sharing the listeners' ports (SO_REUSEPORT): see _workers.py
    workers: int = 1
    #: the taps sit straight in front of the engine (no gateway): the live checks judge single-tap
    #: findings with their rule's own fault, as ``wirecheck check --direct`` does
    direct: bool = False

    def check_config(self) -> CheckConfig:
        """How the live checker judges this run's exchanges."""
        return CheckConfig(direct=self.direct)


async def _serve(
    run: ProxyRun,
    store: Store | None,
    checker: CheckerSupervisor | None = None,
    *,
    sockets: list[socket.socket] | None = None,
    checks: Callable[[], dict[str, Any]] | None = None,
    serve_taps: bool = True,
) -> None:
    """The listeners of one process. A worker of ``--workers`` passes its ``sockets`` (one per tap,
    bound by the supervisor); the supervisor runs the admin listener only (``serve_taps=False``)."""
    # the store's writer thread (JSON of each exchange) shares this process's GIL with forwarding: an
    # event loop woken by a socket waits for the GIL until the writer is made to yield, up to the
    # switch interval (5 ms by default, a whole p99 budget at 64 streams). 0.5 ms bounds that wait;
    # it costs switches only while both threads want to run.
    sys.setswitchinterval(0.0005)
    metrics = Metrics()  # one registry for every tap: the admin listener serves it
    apps = [ProxyApp(cfg, store, metrics=metrics) for cfg, _, _ in run.taps]
    for app in apps:
        # health (and the workers' state under --workers)
        app.checks = checker.state if checker is not None else checks
    bounds = ListenerConfig(
        max_head=run.max_head, head_timeout_s=run.head_timeout_s, idle_timeout_s=run.idle_timeout_s
    )
    settle_gc()
    listeners: list[tuple[Listener, str, int, socket.socket | None]] = []
    if serve_taps:
        for i, (app, (_, host, port)) in enumerate(zip(apps, run.taps, strict=True)):
            listeners.append((Listener(app, bounds), host, port, sockets[i] if sockets is not None else None))
    view: LiveView | ViewProcess | None = None
    if run.admin is not None:
        host, port = run.admin
        own = f"[{host}]" if ":" in host else host  # the listener's own address is a loopback name too
        admin = AdminApp(apps, store, token=run.admin_token, hosts=(*run.admin_hosts, own), direct=run.direct)
        taps = [a.cfg.tap for a in apps]
        if store is not None and serve_taps:
            # the live view is the admin listener's too: it shows every caller's traffic.
            # Its connections are handed to a process of its own, so viewers cost forwarding nothing
            view = ViewProcess(store, taps=taps, health=admin.health_info, max_head=run.max_head)
            admin.mount(view.cfg.prefix, view)
        elif store is not None:  # the supervisor of --workers forwards nothing: the view stays here
            view = LiveView(store.url, taps=taps, health=admin.health_info)
            admin.mount(view.cfg.prefix, view)
        admin_bounds = replace(
            bounds,
            idle_timeout_s=5.0,
            handoff=isinstance(view, ViewProcess),  # the view's connections can move
            send_buffer=SEND_BUFFER,  # a viewer that stops reading holds this much
        )
        listeners.append((Listener(admin, admin_bounds), host, port, None))
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def stop() -> None:
        stopping.set()
        if view is not None:
            view.stop()  # open event streams end, so the listeners can close

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    started: list[Listener] = []
    try:
        for listener, host, port, sock in listeners:
            try:
                await listener.start(host, port, sock=sock)
            except OSError as exc:
                raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
            started.append(listener)
        await stopping.wait()
        await asyncio.gather(*(listener.stop() for listener in started))
    finally:
        for app in apps:
            await app.aclose()
        if view is not None:
            view.close()


def run_proxy(run: ProxyRun) -> int:
    if run.workers > 1:
        from ._workers import run_workers

        return run_workers(run)
    store = Store(run.store_path, writer=True) if run.store_path else None
    checker = None
    if store is not None and run.live_checks:
        checker = start_checker(store, settle_s=run.settle_s, config=run.check_config())
    for cfg, host, port in run.taps:
        # the log is an artefact too: no user:password@ or ?key= from the upstream URL
        upstream = cfg.redact.url(cfg.upstream)
        print(f"wirecheck proxy: {cfg.tap} tap on http://{host}:{port} -> {upstream}", flush=True)
    if run.admin is not None:
        print(f"wirecheck proxy: admin on http://{run.admin[0]}:{run.admin[1]}/wirecheck/health", flush=True)
    print(f"wirecheck proxy: {native_summary()}", flush=True)
    try:
        run_loop(_serve(run, store, checker))
    finally:
        if store is not None:
            store.flush()  # everything queued is written, then the worker checks what is left
        if checker is not None:
            checker.stop(timeout=30)
        if store is not None:
            store.close()
    return 0
