"""Live checks, off the request path: a worker process that reads finished exchanges from the store,
runs the contracts over them (pairing the two taps of a request), and stores the findings.

An exchange is checked once it has been finished for ``settle_s``, so that the other tap's side of the
same request (recorded a moment later by the engine tap, or earlier) is there to pair with.
"""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime
from multiprocessing.synchronize import Event

from wirecheck.contracts import CheckConfig, Exchange, check_exchanges

from ._store import Store

__all__ = ["check_pending", "run_checker", "start_checker"]

#: seconds around a batch whose exchanges are loaded as possible partners (a pair starts within
#: the caller's request time; a long stream is paired from its start)
NEIGHBOUR_S = 5.0


def check_pending(store: Store, *, settle_s: float = 1.0, config: CheckConfig | None = None) -> int:
    """Check every settled, unchecked exchange once; returns how many were checked."""
    pending = store.claim_unchecked(settle_s)
    if not pending:
        return 0
    ids = [i for i, _ in pending]
    corrs = sorted({c for _, c in pending if c})
    exchanges = store.exchanges_for(ids, corrs)
    exchanges += _neighbours(store, exchanges)
    cfg = config or CheckConfig()
    result = check_exchanges(exchanges, cfg)
    wanted = set(ids)
    store.add_findings([f for f in result.findings if f.exchange_id in wanted], ids)
    return len(ids)


def _neighbours(store: Store, batch: list[Exchange]) -> list[Exchange]:
    """Exchanges recorded around this batch, checked before or not yet settled: a partner without the
    correlation id (a gateway that drops it) pairs by completion id or fingerprint only when it is
    there to be seen, the same as in an offline ``wirecheck check`` (issue 14)."""
    sides: dict[str, set[str]] = {}
    for ex in batch:
        if ex.correlation:
            sides.setdefault(ex.correlation, set()).add(ex.tap)
    if all(ex.correlation and len(sides[ex.correlation]) > 1 for ex in batch):
        return []  # every exchange has its partner by correlation: nothing more to load
    times = sorted(t for ex in batch if (t := _epoch(ex.started_at)) is not None)
    if not times:
        return []
    lo = datetime.fromtimestamp(times[0] - NEIGHBOUR_S, UTC).isoformat()
    hi = datetime.fromtimestamp(times[-1] + NEIGHBOUR_S, UTC).isoformat()
    have = {ex.id for ex in batch}
    return [
        ex
        for ex in store.exchanges(where="WHERE started_at >= ? AND started_at <= ?", args=(lo, hi))
        if ex.id not in have
    ]


def _epoch(started_at: str | None) -> float | None:
    if not started_at:
        return None
    try:
        return datetime.fromisoformat(started_at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def run_checker(path: str, stop: Event, settle_s: float = 1.0, interval_s: float = 0.25) -> None:
    store = Store(path)
    try:
        while not stop.is_set():
            if check_pending(store, settle_s=settle_s) == 0:
                stop.wait(interval_s)
        check_pending(store, settle_s=0.0)  # the last ones, on the way out
    finally:
        store.close()


def start_checker(path: str, *, settle_s: float = 1.0) -> tuple[multiprocessing.process.BaseProcess, Event]:
    ctx = multiprocessing.get_context("spawn")
    stop = ctx.Event()
    proc = ctx.Process(
        target=run_checker, args=(path, stop, settle_s), name="wirecheck-live-checks", daemon=True
    )
    proc.start()
    return proc, stop
