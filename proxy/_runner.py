"""``wirecheck proxy``: one or two listeners (single or dual tap) in one process, the store writer,
and the live-check worker process. SIGTERM and SIGINT stop the listeners, then flush the store."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from ._app import ProxyApp, TapConfig
from ._live import start_checker
from ._liveview import LiveView
from ._store import Store

__all__ = ["ListenerServer", "ProxyRun", "run_proxy"]


class ListenerServer(uvicorn.Server):
    """uvicorn's server without its own signal capture, for running several in one loop: the
    process that runs them stops them all together."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass(kw_only=True, slots=True)
class ProxyRun:
    taps: list[tuple[TapConfig, str, int]]  # (tap, host, port)
    store_path: str | None = "wirecheck.db"
    live_checks: bool = True
    settle_s: float = 1.0


async def _serve(run: ProxyRun, store: Store | None) -> None:
    apps = [ProxyApp(cfg, store) for cfg, _, _ in run.taps]
    view = _liveview(apps, store)
    servers = [
        ListenerServer(
            uvicorn.Config(
                app, host=host, port=port, log_level="warning", lifespan="on", timeout_keep_alive=75
            )
        )
        for app, (_, host, port) in zip(apps, run.taps, strict=True)
    ]
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for s in servers:
            s.should_exit = True
        if view is not None:
            view.stop()  # open event streams end, so the listeners can close

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    try:
        await asyncio.gather(*(s.serve() for s in servers))
    finally:
        for app in apps:
            await app.aclose()
        if view is not None:
            view.close()


def _liveview(apps: list[ProxyApp], store: Store | None) -> LiveView | None:
    """One live view over the store, served by every listener under /wirecheck/ (issue 18)."""
    if store is None:
        return None

    def health() -> dict[str, object]:
        return {
            "taps": [{"tap": a.cfg.tap, "upstream": a.cfg.upstream, "in_flight": a.in_flight} for a in apps],
            "store": {
                "path": store.path,
                "queued": store.stats.queued,
                "written": store.stats.written,
                "dropped": store.stats.dropped,
                "reconnects": store.stats.reconnects,
                "last_error": store.stats.last_error,
            },
        }

    view = LiveView(store.url, taps=[a.cfg.tap for a in apps], health=health)
    for app in apps:
        app.liveview = view
    return view


def run_proxy(run: ProxyRun) -> int:
    store = Store(run.store_path, writer=True) if run.store_path else None
    checker = None
    if store is not None and run.live_checks:
        checker = start_checker(store.url, settle_s=run.settle_s)
    for cfg, host, port in run.taps:
        print(f"wirecheck proxy: {cfg.tap} tap on http://{host}:{port} -> {cfg.upstream}", flush=True)
    try:
        asyncio.run(_serve(run, store))
    finally:
        if store is not None:
            store.close()  # everything queued is written before the process ends
        if checker is not None:
            proc, ev = checker
            ev.set()
            proc.join(timeout=30)
    return 0
