"""Live checks, off the request path: a worker process that reads finished exchanges from the store,
runs the contracts over them (pairing the two taps of a request), and stores the findings.

An exchange is checked once it has been finished for ``settle_s``, so that the other tap's side of the
same request (recorded a moment later by the engine tap, or earlier) is there to pair with.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.synchronize import Event

from wirecheck.contracts import CheckConfig, check_exchanges

from ._store import Store

__all__ = ["check_pending", "run_checker", "start_checker"]


def check_pending(store: Store, *, settle_s: float = 1.0, config: CheckConfig | None = None) -> int:
    """Check every settled, unchecked exchange once; returns how many were checked."""
    pending = store.claim_unchecked(settle_s)
    if not pending:
        return 0
    ids = [i for i, _ in pending]
    corrs = sorted({c for _, c in pending if c})
    exchanges = store.exchanges_for(ids, corrs)
    cfg = config or CheckConfig(pair_by_fingerprint=True)
    result = check_exchanges(exchanges, cfg)
    wanted = set(ids)
    store.add_findings([f for f in result.findings if f.exchange_id in wanted], ids)
    return len(ids)


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
