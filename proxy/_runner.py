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
from ._live import CheckerSupervisor, start_checker
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


async def _serve(run: ProxyRun, store: Store | None, checker: CheckerSupervisor | None = None) -> None:
    apps = [ProxyApp(cfg, store) for cfg, _, _ in run.taps]
    for app in apps:
        app.checks = checker.state if checker is not None else None  # health: issue 11, point 3
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

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    try:
        await asyncio.gather(*(s.serve() for s in servers))
    finally:
        for app in apps:
            await app.aclose()


def run_proxy(run: ProxyRun) -> int:
    store = Store(run.store_path, writer=True) if run.store_path else None
    checker = None
    if store is not None and run.live_checks:
        checker = start_checker(store, settle_s=run.settle_s)
    for cfg, host, port in run.taps:
        # the log is an artefact too: no user:password@ or ?key= from the upstream URL (issue 11)
        upstream = cfg.redact.url(cfg.upstream)
        print(f"wirecheck proxy: {cfg.tap} tap on http://{host}:{port} -> {upstream}", flush=True)
    try:
        asyncio.run(_serve(run, store, checker))
    finally:
        if store is not None:
            store.flush()  # everything queued is written, then the worker checks what is left
        if checker is not None:
            checker.stop(timeout=30)
        if store is not None:
            store.close()
    return 0
