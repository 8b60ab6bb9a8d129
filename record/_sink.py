"""Where recorded exchanges go: the sink protocol every recorder writes to, and a memory sink that
pairs the two taps of one request for in-process checking (the scenarios' dual taps)."""

from __future__ import annotations

import threading
import time
from typing import Protocol

from wirecheck.contracts import Exchange

__all__ = ["MemorySink", "Sink"]


class Sink(Protocol):
    """What a recorder needs of a store: hand over one finished exchange, never block. False means it
    was dropped (a full queue), which the recorder counts."""

    def put(self, ex: Exchange) -> bool: ...


class MemorySink:
    """The exchanges of the request in flight, in memory, waited on.

    The scenarios send one request at a time, so the engine side of a request is what the engine tap
    recorded while it was in flight: under its correlation id when the gateway forwards
    ``x-wirecheck-id``, else without one (LiteLLM drops it). Either way both sides are handed to the
    checker, whose pairing (correlation, completion id, fingerprint) decides (waiting for a
    correlation id that never came cost 5 s a request and judged the caller side alone)."""

    def __init__(self) -> None:
        self._by_corr: dict[str, list[Exchange]] = {}
        self._loose: list[Exchange] = []  # engine exchanges without a correlation id
        self._cv = threading.Condition()

    def put(self, ex: Exchange) -> bool:
        with self._cv:
            if ex.correlation:
                self._by_corr.setdefault(ex.correlation, []).append(ex)
            else:
                self._loose.append(ex)
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
