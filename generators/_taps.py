"""Dual taps for the scenarios (``via_proxy``): wirecheck's proxy on both sides of a gateway, each
tap a uvicorn server in its own thread, recording into memory so that each scenario request is
judged, with attribution, as soon as both sides have it."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from wirecheck.contracts import Exchange
from wirecheck.proxy import ProxyApp, TapConfig

__all__ = ["MemorySink", "dual_taps"]


class _Stats:
    queued = 0
    written = 0
    dropped = 0


class MemorySink:
    """What the proxy needs of a store, in memory: the exchanges of the request in flight, waited on.

    The scenarios send one request at a time, so the engine side of a request is what the engine tap
    recorded while it was in flight: under its correlation id when the gateway forwards
    ``x-wirecheck-id``, else without one (LiteLLM drops it). Either way both sides are handed to the
    checker, whose pairing (correlation, completion id, fingerprint) decides (issue 14: waiting for a
    correlation id that never came cost 5 s a request and judged the caller side alone)."""

    def __init__(self) -> None:
        self.path = ":memory:"
        self.stats = _Stats()
        self._by_corr: dict[str, list[Exchange]] = {}
        self._loose: list[Exchange] = []  # engine exchanges without a correlation id
        self._cv = threading.Condition()

    def put(self, ex: Exchange) -> bool:
        with self._cv:
            if ex.correlation:
                self._by_corr.setdefault(ex.correlation, []).append(ex)
            else:
                self._loose.append(ex)
            self.stats.queued += 1
            self._cv.notify_all()
        return True

    def take(self, correlation: str, timeout: float = 30.0, engine_wait: float = 2.0) -> list[Exchange]:
        """The caller side of ``correlation`` and every engine exchange recorded for it: waits for the
        caller side (``timeout``), then up to ``engine_wait`` for an engine side (a gateway that
        answers by itself, a 401 say, never reaches the engine)."""
        deadline = time.monotonic() + timeout
        with self._cv:

            def caller_seen() -> bool:
                return any(e.tap != "engine" for e in self._by_corr.get(correlation, []))

            def engine_seen() -> bool:
                return bool(self._loose) or any(e.tap == "engine" for e in self._by_corr.get(correlation, []))

            self._cv.wait_for(caller_seen, max(0.0, deadline - time.monotonic()))
            self._cv.wait_for(engine_seen, engine_wait)
            out = self._by_corr.pop(correlation, []) + self._loose
            self._loose = []
            return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serve(app: Any, port: int) -> Iterator[str]:
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="auto")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"a scenario tap did not start on port {port}")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def dual_taps(gateway: str, engine: str, engine_port: int) -> Iterator[tuple[str, MemorySink]]:
    """Caller tap -> ``gateway``; engine tap on ``engine_port`` -> ``engine``. Yields the caller
    tap's URL and the sink both record into."""
    sink = MemorySink()
    engine_app = ProxyApp(TapConfig(upstream=engine, tap="engine", inject_correlation=False), sink)  # type: ignore[arg-type]
    caller_app = ProxyApp(TapConfig(upstream=gateway, tap="caller"), sink)  # type: ignore[arg-type]
    with _serve(engine_app, engine_port), _serve(caller_app, _free_port()) as caller_url:
        yield caller_url, sink
