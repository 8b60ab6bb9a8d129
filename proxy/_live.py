"""Live checks, off the request path: a worker process that reads finished exchanges from the store,
runs the contracts over them (pairing the two taps of a request), and stores the findings.

An exchange is checked once it has been finished for ``settle_s``, so that the other tap's side of the
same request (recorded a moment later by the engine tap, or earlier) is there to pair with.

Supervised: one hostile exchange stopped live checking for good while health said
ok. Now the worker tells its parent which exchanges it is checking before it checks them; when it dies
(a crash the checker could not catch, the OOM killer), :class:`CheckerSupervisor` starts another, which
first checks the exchanges that were in flight one at a time. An exchange on which the worker died
``max_tries`` times is set aside: marked checked with a ``live-check-skipped`` finding, which
``/wirecheck/health`` counts and ``wirecheck check STORE`` shows. Database errors (a full disk, a
restarting PostgreSQL) do not kill the worker: it waits and tries again. Health says ``degraded``,
with the reason, while the worker is down, has just died, or lags behind the traffic.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from multiprocessing.connection import Connection, wait
from typing import Any

from wirecheck.contracts import (
    CALLER,
    ENGINE,
    CheckConfig,
    Exchange,
    ExchangeView,
    Fault,
    Finding,
    Severity,
    TapSet,
    build_view,
    build_views,
    check_exchanges,
    may_pair,
    rules,
    twin_key,
)
from wirecheck.record import LIVE_CHECK_SKIPPED, Store, WindowRows

from ._kin import Kin, KinIndex, kin_of, nearest, unreadable
from ._lifeline import become_helper
from ._server import settle_gc

__all__ = ["CheckerSupervisor", "check_ids", "check_pending", "run_checker", "start_checker", "worker_main"]

#: checking counts as lagging when an exchange has waited this long past ``settle_s``
LAG_S = 15.0
#: health stays degraded this long after the worker died
CRASH_MEMORY_S = 30.0

#: seconds around a batch whose exchanges are loaded as possible partners (a pair starts within
#: the caller's request time; a long stream is paired from its start)
NEIGHBOUR_S = 5.0
#: how much lower the checker's CPU priority is than the proxy's (``WIRECHECK_CHECKER_NICE``, 0 to 19);
#: 0 by default: on a loaded CI machine a checker niced by 10 was once still alive 5 s after its proxy
#: was killed (tests/hostile/test_orphans.py), and the gain could not be shown beyond noise
CHECKER_NICE_ENV = "WIRECHECK_CHECKER_NICE"
CHECKER_NICE = 0
#: exchanges claimed at once at the most. Under load a batch is what the last second brought (the
#: checker waits ``BUSY_INTERVAL_S`` after a batch smaller than this): at 500, 640 a second came as a
#: batch of 500 and one of 140, the second paying its window's walk for a fifth as many exchanges
#: (``benchmarks/live_checker.py``: 87.9 us an exchange in batches of 500, 84.4 in batches of 1000).
#: The memory held does not grow with it: a batch is checked in pieces of ``PIECE_BYTES``
BATCH = 1000
#: views the checker keeps between batches at the most (see :class:`Recent`)
RECENT_MAX = 20_000
#: and the most of their exchanges' recorded bytes (bodies and chunks): a view takes about four times
#: its exchange's bytes. A stream of 20 frames records about 4.5 KB, so at 640 exchanges a second the
#: ten seconds of a batch's window fit; one of 400 frames records 80 KB, and without a bound in bytes
#: the window's views of such streams took 0.8 GB (benchmarks/checker_memory.py)
RECENT_BYTES = 32 * 1024 * 1024
#: the most stored bytes (``Store.claim_sized``) checked at once: a claimed batch of long streams is
#: checked in pieces of about this size, each as a batch of its own (its findings do not depend on
#: how exchanges are grouped into batches)
PIECE_BYTES = 8 * 1024 * 1024
#: the exchanges around a batch are read a page at a time, for their twins only: those whose views
#: ``Recent`` does not keep are let go before the next page is read. A page starts small and doubles,
#: up to this many (the store's statement) or to ``PIECE_BYTES`` of exchanges the size of the last
#: page's; the checker keeps the size from batch to batch (``Recent.page``)
NEIGHBOUR_PAGE = 500
NEIGHBOUR_FIRST_PAGE = 8
#: views built at once (``Recent.prepare``): at most this many exchanges, or this many of their
#: recorded bytes (a run's views are held until asked); an exchange over ``RUN_EXCHANGE_BYTES`` is
#: built alone. A long stream's view costs its frames far more than the steps' caches, and a run of
#: them, interleaved in memory with the views kept, held a fifth more of the checker's memory at
#: 400 frames with two taps (``benchmarks/checker_memory.py --taps 2``)
PREPARE_MAX = 100
PREPARE_BYTES = 256 * 1024
RUN_EXCHANGE_BYTES = 32 * 1024
#: the recorded bytes of the exchanges around a piece of a batch of several taps loaded with it (its
#: group, ``_kin``) beyond the piece's own: the other tap's side of each of its exchanges fits (a
#: gateway's few bytes more included) where a batch's claim split a request's two sides, whatever
#: their size. Past them, those nearest the batch in time are loaded and the rest counted as cut: a
#: group past it is one prompt sent again and again (a load test), whose views come on top of the
#: piece's and those ``Recent`` keeps. 2 MB is 450 exchanges of 20 frames (a pair's sides start
#: milliseconds apart)
GROUP_BYTES = 2 * 1024 * 1024
#: two exchanges of the window's other groups tried at the most, a batch, to tell whether any pairs
#: (``taps-unpaired``); a group of both taps that shares keys almost always pairs at the first
PAIR_TRIES = 64
#: the checker's young-generation GC threshold (net allocations between collections; the proxy's
#: is 10 000, see ``settle_gc``). A batch holds tens of thousands of objects for a moment (the
#: window's rows, the batch's views and findings) and the views of the window ahead for seconds:
#: collecting every 10 000 scanned them again and again, 36-48 us of CPU an exchange, and promoted
#: them to older generations scanned in turn. Nothing here waits on a collection, and garbage that
#: only the GC frees (cycles) stays bounded by the threshold
GC_THRESHOLD = 100_000
#: the wait after a batch that left no backlog. Each batch also walks the exchanges recorded
#: ``NEIGHBOUR_S`` around it, about ``2 * NEIGHBOUR_S / wait`` rows an exchange checked whatever the
#: traffic: 40 rows at a quarter of a second, a third of what checking an exchange costs in small
#: batches. So a batch of ``BUSY_BATCH`` or more (traffic) is followed by a second's wait, a
#: smaller one by a quarter's (few exchanges: their findings come sooner)
INTERVAL_S = 0.25
BUSY_INTERVAL_S = 1.0
BUSY_BATCH = 20


#: any row version (see :meth:`Recent.exchange`)
ANY = object()

TwinKey = tuple[str, str]


class Recent:
    """The views of the exchanges recorded around the last batch, kept for the next one.

    Each batch is checked with everything recorded ``NEIGHBOUR_S`` around it, and consecutive batches
    share most of those exchanges: reading them from the store and parsing them again in every batch
    was two thirds of the checker's CPU at 128 streams. A batch's own exchanges were mostly read
    already, as an earlier batch's neighbours: they are not read again either, unless the row was
    written again since (each view is kept with its row's version, ``ended_at``, which a write of the
    same id changes). Views that started before the last batch's window are let go, which keeps about
    what one batch held at once anyway, and never more than ``limit``.

    With one tap, what later batches ask of an exchange is only whether it is a twin (its tap, twin
    key and whether it was streamed): that is kept for every exchange whose view was built (its
    *twin*, at its row version), indexed by twin key and counted by tap, so that a batch asks it of
    the thousands of exchanges around it by key, not one by one; :meth:`slim` lets a checked
    exchange's view go and keeps its twin (a view with its exchange is about 18 KB; the checked half
    of the window was half the checker's memory). A twin found that way is read from the store
    again."""

    def __init__(self, limit: int = RECENT_MAX, limit_bytes: int = RECENT_BYTES) -> None:
        self.limit = limit
        self.limit_bytes = limit_bytes
        #: id -> (start, version, view, its exchange's recorded bytes)
        self._views: dict[str, tuple[float, Any, ExchangeView, int]] = {}
        self._bytes = 0  # of the views kept
        #: how many exchanges around a batch are read at once (see ``NEIGHBOUR_PAGE``)
        self.page = NEIGHBOUR_FIRST_PAGE
        self._read: dict[str, Any] = {}  # id -> version of the exchanges read, views not built yet
        #: the exchanges announced by ``prepare`` (kept alive while any is not yet built: their ids
        #: key the two dicts), the position of each not yet built, and the views built not yet asked
        self._queue: list[Exchange] = []
        self._pending: dict[int, int] = {}
        self._ready: dict[int, ExchangeView] = {}
        #: id -> (start, version, tap, twin key, streamed) of the exchanges whose twin is known
        self._twins: dict[str, tuple[float, Any, str, TwinKey | None, bool]] = {}
        #: id -> version of the same exchanges: (id, version) pairs, for a set difference with a window's
        self._versions: dict[str, Any] = {}
        #: twin key -> the ids in ``_twins`` with it
        self._keyed: dict[TwinKey, set[str]] = {}
        #: (twin key, streamed) -> how many in ``_twins`` are of it
        self._kinds: dict[tuple[TwinKey, bool], int] = {}
        #: tap -> how many in ``_twins`` are of it
        self._taps: dict[str, int] = {}
        #: id -> the kin (``_kin.Kin``, with its row version) of exchanges seen around batches of
        #: several taps: a later batch finds its group from them without building their views again
        self._kin: dict[str, Kin] = {}
        #: exchanges of batches checked with only part of their group (past ``GROUP_BYTES``), and
        #: the exchanges of those groups left out (``CheckerSupervisor.state``'s ``cut``)
        self.cut_checked = 0
        self.cut_left_out = 0
        #: the rows of the last batch's window, the next one's read from them and what changed
        self.window = WindowRows()

    def __len__(self) -> int:
        return len(self._views)

    def exchange(self, exchange_id: str, version: Any = ANY) -> Exchange | None:
        """The kept exchange of this id (when ``version`` is given: only if it is that row version)."""
        return self.held([(exchange_id, version)])[exchange_id]

    def read(self, ex: Exchange, version: Any) -> None:
        """An exchange just read from the store at this row version (kept once its view is built)."""
        self._read[ex.id] = version

    def view(self, ex: Exchange) -> ExchangeView:
        held = self._views.get(ex.id)
        if held is not None and held[2].ex is ex:
            return held[2]
        return self._keep_view(ex, self._built(ex))

    def prepare(self, exchanges: list[Exchange]) -> None:
        """The exchanges the caller is about to ask :meth:`view` (or :meth:`twin`) of, in that order:
        their views are built a run at a time (``build_views``, at most ``PREPARE_MAX`` exchanges
        or ``PREPARE_BYTES`` of them), as the first of each run is asked, and each is kept when it is
        asked, as :meth:`view` keeps one it builds then (a run's views kept at once would push each
        other out of the bytes kept). Replaces what an earlier call left unasked."""
        self._queue = list(exchanges)  # the caller's list may change: the positions are this one's
        self._pending = {id(ex): k for k, ex in enumerate(self._queue)}
        self._ready = {}

    def _built(self, ex: Exchange) -> ExchangeView:
        """A new view of ``ex``: from the run :meth:`prepare` announced it in, else built alone (as
        is a long exchange, and one whose view raised in its run: then it raises here)."""
        pending = self._pending
        at = pending.pop(id(ex), None)
        if at is not None and self._queue[at] is ex and (size := recorded_bytes(ex)) <= RUN_EXCHANGE_BYTES:
            run = [ex]
            for other in self._queue[at + 1 :]:
                if len(run) >= PREPARE_MAX or size >= PREPARE_BYTES:
                    break
                if id(other) not in pending:
                    continue  # asked already
                held = self._views.get(other.id)
                if held is not None and held[2].ex is other:
                    del pending[id(other)]  # kept from before: asked, it is there
                    continue
                more = recorded_bytes(other)
                if more > RUN_EXCHANGE_BYTES:
                    continue  # built alone when asked
                del pending[id(other)]
                run.append(other)
                size += more
            for other, made in zip(run, build_views(run), strict=True):
                if made is not None:
                    self._ready[id(other)] = made
        if not pending:  # every one announced is built: the list is let go
            self._queue = []
        made = self._ready.pop(id(ex), None)
        return made if made is not None and made.ex is ex else build_view(ex)

    def _keep_view(self, ex: Exchange, view: ExchangeView) -> ExchangeView:
        """Keep the view just built of ``ex`` (with its start, row version and size), within the
        limits; returns it."""
        start = ex.started_epoch
        version = self._read.pop(ex.id, None)
        twin = self._twins.get(ex.id)
        if twin is not None and (version is None or twin[1] != version):
            self._let_twin_go(ex.id)  # of another version of the row, or of an exchange not from one
        if start is not None:  # without a time it can never be a neighbour again: not kept
            self._drop(ex.id)
            size = recorded_bytes(ex)
            self._views[ex.id] = (start, version, view, size)
            self._bytes += size
            if len(self._views) > self.limit:
                self._drop(next(iter(self._views)))  # the first kept
            # over the bytes: the last kept before this one go first (those kept first are of the
            # exchanges whose own batches come next); never this one, whose twin is kept with it
            while len(self._views) > 1 and self._bytes > self.limit_bytes:
                newest = reversed(self._views)
                next(newest)
                self._drop(next(newest))
        return view

    def version(self, ex: Exchange) -> Any:
        """The row version ``ex`` was read at, as kept with its view (``ANY``: not known)."""
        held = self._views.get(ex.id)
        return held[1] if held is not None and held[2].ex is ex and held[1] is not None else ANY

    def size(self, ex: Exchange) -> int:
        """:func:`recorded_bytes` of ``ex``, as kept with its view where it is."""
        held = self._views.get(ex.id)
        return held[3] if held is not None and held[2].ex is ex else recorded_bytes(ex)

    def _drop(self, i: str) -> None:
        held = self._views.pop(i, None)
        if held is not None:
            self._bytes -= held[3]

    def twin(self, ex: Exchange) -> tuple[TwinKey | None, bool]:
        """The exchange's twin key (:func:`twin_key`) and whether it was streamed; kept with its
        row version while its view is."""
        held = self._views.get(ex.id)
        if held is not None and held[2].ex is ex and (known := self._twins.get(ex.id)) is not None:
            return known[3], known[4]
        view = self.view(ex)
        key, streamed = twin_key(view), view.kind == "stream"
        held = self._views.get(ex.id)
        if held is not None and held[2] is view:
            self._keep_twin(ex.id, (held[0], held[1], ex.tap, key, streamed))
        return key, streamed

    def _keep_twin(self, i: str, twin: tuple[float, Any, str, TwinKey | None, bool]) -> None:
        self._let_twin_go(i)
        self._twins[i] = twin
        self._versions[i] = twin[1]
        if twin[3] is not None:
            self._keyed.setdefault(twin[3], set()).add(i)
            kind = (twin[3], twin[4])
            self._kinds[kind] = self._kinds.get(kind, 0) + 1
        self._taps[twin[2]] = self._taps.get(twin[2], 0) + 1
        if len(self._twins) > self.limit:
            self._let_twin_go(next(iter(self._twins)))  # the first kept

    def _let_twin_go(self, i: str) -> None:
        twin = self._twins.pop(i, None)
        if twin is None:
            return
        del self._versions[i]
        if twin[3] is not None:
            ids = self._keyed[twin[3]]
            ids.discard(i)
            if not ids:
                del self._keyed[twin[3]]
            kind = (twin[3], twin[4])
            if self._kinds[kind] > 1:
                self._kinds[kind] -= 1
            else:
                del self._kinds[kind]
        left = self._taps[twin[2]] - 1
        if left:
            self._taps[twin[2]] = left
        else:
            del self._taps[twin[2]]

    def slim(self, ids: list[str]) -> None:
        """Let these exchanges' views go, keeping their twins (what a later batch of one tap asks)."""
        views, twins = self._views, self._twins
        for i in ids:
            held = views.get(i)
            if held is not None:
                if i not in twins:  # worked out by its batch, as a rule: then not asked again
                    self.twin(held[2].ex)
                self._drop(i)

    def unknown(self, rows: list[tuple[str, Any]], but: set[str]) -> list[tuple[str, Any]]:
        """Those of these (id, version) rows whose twin is not kept at that version, but for ``but``."""
        versions = self._versions
        return [r for r in rows if versions.get(r[0], ANY) != r[1] and r[0] not in but]

    def known(self, exchange_id: str) -> tuple[Any, str, TwinKey | None, bool] | None:
        """(version, tap, twin key, streamed) of this exchange, where its twin is kept."""
        twin = self._twins.get(exchange_id)
        return None if twin is None else twin[1:]

    def known_at(self, exchange_id: str, version: Any) -> tuple[Any, str, TwinKey | None, bool] | None:
        """:meth:`known`, where the twin kept is of the row at this ``version``."""
        twin = self._twins.get(exchange_id)
        return twin[1:] if twin is not None and twin[1] == version else None

    def keyed(self, key: TwinKey) -> set[str]:
        """The ids whose kept twin has this key."""
        return self._keyed.get(key, set())

    def any_of(self, key: TwinKey, streamed: bool) -> bool:
        """Whether any kept twin has this key and was streamed (or not) as asked: at any version, in
        any window (so False says none is around a batch, True only that one may be)."""
        return (key, streamed) in self._kinds

    def taps(self) -> set[str]:
        """The taps of the kept twins."""
        return set(self._taps)

    def keep_kin(self, kin: Kin) -> None:
        if kin.start is None or kin.row[1] is ANY:  # never a neighbour again, or not of a known row
            return
        self._kin.pop(kin.row[0], None)
        self._kin[kin.row[0]] = kin
        if len(self._kin) > self.limit:
            del self._kin[next(iter(self._kin))]  # the first kept

    def held(self, rows: list[tuple[str, Any]]) -> dict[str, Exchange | None]:
        """For each (id, version) row, the kept exchange at that version (any, for ``ANY``) or None."""
        views = self._views
        out: dict[str, Exchange | None] = {}
        for i, v in rows:
            held = views.get(i)
            out[i] = None if held is None or (v is not ANY and held[1] != v) else held[2].ex
        return out

    def forget_before(self, t: float) -> None:
        """Let go of what started before ``t``, in the order it was kept, up to the first that did
        not: an exchange kept after later-started ones (a long stream, written at its end) waits
        for those, and every batch does not walk all that is kept."""
        views, twins, kin = self._views, self._twins, self._kin
        while views and (first := next(iter(views.items())))[1][0] < t:
            self._drop(first[0])
        while twins and (oldest := next(iter(twins.items())))[1][0] < t:
            self._let_twin_go(oldest[0])
        while kin and ((earliest := next(iter(kin.values()))).start or 0.0) < t:
            del kin[earliest.row[0]]
        self._read.clear()
        self.prepare([])  # what a batch's callers left unasked


def _load(store: Store, rows: list[tuple[str, Any]], recent: Recent) -> list[Exchange]:
    """The exchanges of these (id, version) rows, in their order: from ``recent`` where it holds the
    row (at that version, unless ``ANY``), the rest from the store (in bounded statements: SQLite's
    variable limit)."""
    held = recent.held(rows)
    missing = [i for i, _ in rows if held[i] is None]
    versions = dict(rows)
    for k in range(0, len(missing), 500):
        for got in store.exchanges_for(missing[k : k + 500], []):
            recent.read(got, versions.get(got.id))
            held[got.id] = got
    # None: a row that is not an exchange any more (never deleted today)
    return [ex for i, _ in rows if (ex := held.get(i)) is not None]


def check_ids(store: Store, ids: list[str], *, config: CheckConfig | None = None) -> int:
    """Check these exchanges (with their other tap's side) and store their findings."""
    if not ids:
        return 0
    corrs = sorted({e.correlation for e in store.exchanges_for(ids, []) if e.correlation})
    recent = Recent()
    _check_batch(store, ids, _load(store, store.rows_for(ids, corrs), recent), config, recent)
    return len(ids)


def check_pending(
    store: Store,
    *,
    settle_s: float = 1.0,
    config: CheckConfig | None = None,
    announce: Any = None,
    recent: Recent | None = None,
    limit: int = BATCH,
) -> int:
    """Check settled, unchecked exchanges, at most ``limit`` of them (one batch); returns how many
    were checked. ``announce`` (a callable) hears the ids before they are checked, and ``None``
    after. ``recent``: views kept from the last batch (the worker's; none: every exchange is read
    from the store)."""
    pending = store.claim_sized(settle_s, limit=limit)
    if not pending:
        return 0
    if announce is not None:
        announce([i for i, _, _ in pending])
    recent = recent if recent is not None else Recent()
    for piece in _pieces(pending):
        ids = [i for i, _, _ in piece]
        corrs = sorted({c for _, c, _ in piece if c})
        _check_batch(store, ids, _load(store, store.rows_for(ids, corrs), recent), config, recent)
    if announce is not None:
        announce(None)
    return len(pending)


def _pieces(rows: list[tuple[str, str | None, int]]) -> list[list[tuple[str, str | None, int]]]:
    """Claimed (id, correlation, size) rows in pieces of at most ``PIECE_BYTES`` stored bytes (at
    least one row each), in their order."""
    pieces: list[list[tuple[str, str | None, int]]] = []
    size = 0
    for row in rows:
        if not pieces or size + row[2] > PIECE_BYTES:
            pieces.append([])
            size = 0
        pieces[-1].append(row)
        size += row[2]
    return pieces


def recorded_bytes(ex: Exchange) -> int:
    """What an exchange recorded: its bodies and its chunks, in bytes."""
    size = len(ex.request.body)
    resp = ex.response
    if resp is not None:
        size += len(resp.body) + resp.chunk_bytes()
    return size


def _check_batch(
    store: Store, ids: list[str], exchanges: list[Exchange], config: CheckConfig | None, recent: Recent
) -> None:
    """Check the exchanges ``ids`` (``exchanges``: them and their partners by correlation) with what
    was recorded around them, and store their findings. ``recent`` keeps the views for the next
    batch (an empty one: every neighbour is read from the store)."""
    # the batch's starts (with its partners by correlation): the window is around them
    times = sorted(t for ex in exchanges if (t := ex.started_epoch) is not None)
    around, one_tap, rest, left_out = _neighbours(store, exchanges, times, recent)
    exchanges += around
    wanted = set(ids)
    if left_out:
        recent.cut_checked += len(wanted)
        recent.cut_left_out += left_out
    # at several taps without the correlation id, the batch's group is judged whole: an exchange
    # of it may move a pairing between two judged before it (the fingerprint pairs first with first)
    focus = wanted if rest is None else wanted | {ex.id for ex in around}
    recent.prepare(exchanges)
    result = check_exchanges(
        exchanges, config or CheckConfig(), focus=focus, view_of=recent.view, around=rest
    )
    starts = [t for ex in exchanges if ex.id in wanted and (t := ex.started_epoch) is not None]
    if starts:
        recent.forget_before(min(starts) - NEIGHBOUR_S)
    if one_tap:
        recent.slim(ids)
    # the batch's partners recorded before it were judged without it: their findings are amended
    partners = (result.whole or wanted) - wanted
    amend: dict[str, list[Finding]] = {i: [] for i in partners}
    mine: list[Finding] = []
    fired: set[str] = set()
    for f in result.findings:
        fired.add(f.rule)
        if f.exchange_id in wanted:
            mine.append(f)
        elif f.exchange_id in amend:
            amend[f.exchange_id].append(f)
    if rest is None:
        store.add_findings(mine, ids, amend)
    else:
        # at several taps, the set rules judge the batch's window: one that no longer fires there
        # takes back what it said of the window before (a pair found since ends a "none paired")
        quiet = sorted(_set_rules() - fired)
        store.add_findings(mine, ids, amend, window=(*_window_of(times), quiet) if quiet else None)


def _set_rules() -> frozenset[str]:
    """The ids of the rules of scope ``set``."""
    return frozenset(r.id for r in rules("set"))


def _window_of(times: list[float]) -> tuple[str, str]:
    """The ISO start times of the window a batch is checked in: ``NEIGHBOUR_S`` either side of its
    sorted starts, ``times`` (not empty: ``_neighbours`` judges no window otherwise)."""
    return (
        datetime.fromtimestamp(times[0] - NEIGHBOUR_S, UTC).isoformat(),
        datetime.fromtimestamp(times[-1] + NEIGHBOUR_S, UTC).isoformat(),
    )


Neighbours = tuple[list[Exchange], bool, TapSet | None, int]


def _neighbours(store: Store, batch: list[Exchange], times: list[float], recent: Recent) -> Neighbours:
    """Exchanges recorded around this batch (``times``: its starts, sorted), checked before or not yet
    settled: a partner without the correlation id (a gateway that drops it) pairs by completion id
    or fingerprint only when it is there to be seen, the same as in an offline ``wirecheck check``.
    Only what ``recent`` does not hold is read from the store. And whether the batch and all around it are of one tap;
    with several taps, the rest of the window in summary (for ``check_exchanges``'s ``around``) and
    how many exchanges of the batch's group were left out (``GROUP_BYTES``)."""
    sides: dict[str, set[str]] = {}
    for ex in batch:
        if ex.correlation:
            sides.setdefault(ex.correlation, set()).add(ex.tap)
    paired = all(ex.correlation and len(sides[ex.correlation]) > 1 for ex in batch)
    if not times:
        return [], False, None, 0
    lo, hi = _window_of(times)
    # the order stays the write order (the twins of one request pair first with first)
    rows = recent.window.rows(store, lo, hi)  # thousands a batch: each is looked at once here
    have = {ex.id for ex in batch}
    taps = {ex.tap for ex in batch}
    if len(taps) > 1 and not paired:  # a batch of several taps: any exchange around may be a partner
        return _group(store, batch, [r for r in rows if r[0] not in have], (times[0], times[-1]), recent)
    # the twins of those not seen by an earlier batch (or written again since): their views are
    # built here, kept for their own batch as far as ``recent`` keeps them; read a page at a time, so
    # that what it does not keep is let go before the next page (a window of long streams is large)
    unknown = recent.unknown(rows, have)
    loose: dict[str, tuple[TwinKey | None, bool]] = {}
    for got in _paged(store, unknown, recent):
        recent.prepare(got)
        for ex in got:
            loose[ex.id] = recent.twin(ex)
            taps.add(ex.tap)
        del got
    if paired:
        # every exchange has its partner by correlation: of those around, only a twin of one (the
        # same request at the same tap, streamed or not) changes what it finds, and the twin is
        # judged with its own partner
        twins = _twins_around(batch, rows, have, recent, loose=loose, window={})
        if not twins:
            return [], False, None, 0
        found = _load(store, twins, recent)
        corrs = sorted({c for ex in found if (c := ex.correlation) and c not in sides})
        more = {ex.id for ex in found} | have
        partners = [r for r in store.rows_for([], corrs) if r[0] not in more] if corrs else []
        return found + _load(store, partners, recent), False, None, 0

    window: dict[str, Any] = {}  # id -> version, but for the batch: asked only where the above is not enough
    if not recent.taps() <= taps:  # the twins kept reach past the window: ask the window's own
        window = {i: v for i, v in rows if i not in have}
        taps.update(twin[1] for i, v in window.items() if (twin := recent.known_at(i, v)) is not None)
    if len(taps) > 1:  # any of them may be a partner: those of the batch's group (``_kin``) are
        return _group(store, batch, [r for r in rows if r[0] not in have], (times[0], times[-1]), recent)
    # one tap: nothing pairs across taps (nor can the taps go unpaired), so of the exchanges around
    # only a twin of one in the batch (the same request, streamed or not) changes its findings
    twins = _twins_around(batch, rows, have, recent, loose=loose, window=window)
    if not twins:
        return [], True, None, 0
    return _load(store, twins, recent), True, None, 0


def _twins_around(
    batch: list[Exchange],
    rows: list[tuple[str, Any]],
    have: set[str],
    recent: Recent,
    *,
    loose: dict[str, tuple[TwinKey | None, bool]],
    window: dict[str, Any],
) -> list[tuple[str, Any]]:
    """The rows of the window (``rows``, but the batch's, ``have``) that may be a twin of one in the
    batch: of each of the batch's twin keys, all the window holds, where it holds one seen the other
    way (a twin pairs a streamed and a plain exchange of one key: a key seen one way only pairs
    nothing). ``loose``: the twins of the window's rows that ``recent`` did not keep, read for this
    batch; ``window``: id -> version of the window's rows but the batch's, where already made."""
    kinds: dict[TwinKey, set[bool]] = {}
    recent.prepare(batch)
    for ex in batch:
        key, streamed = recent.twin(ex)
        if key is not None:
            kinds.setdefault(key, set()).add(streamed)
    # the window's rows are not asked where no exchange around can be a twin of one in the batch: of
    # each key, none seen the other way (the batch seeing it one way only: one prompt streamed again
    # and again, a load test, where every exchange around has the key), or none at all, kept or read
    read: dict[TwinKey, set[bool]] = {}
    for maybe, streamed in loose.values():
        if maybe in kinds:
            read.setdefault(maybe, set()).add(streamed)

    def twinless(key: TwinKey, seen: set[bool]) -> bool:
        if len(seen) == 1:
            other = not next(iter(seen))
            if not recent.any_of(key, other) and other not in read.get(key, ()):
                return True
        return key not in read and not recent.keyed(key) - have

    if all(twinless(key, seen) for key, seen in kinds.items()):
        return []
    # around it, by key: the twins kept, and those not kept (an exchange without a start time)
    window = window or {i: v for i, v in rows if i not in have}
    kin: dict[TwinKey, dict[str, bool]] = {key: {} for key in kinds}
    for key, of_key in kin.items():
        for i in recent.keyed(key):
            if i in window and (twin := recent.known_at(i, window[i])) is not None:
                of_key[i] = twin[3]
    for i, (maybe, streamed) in loose.items():
        if maybe is not None and maybe in kin and recent.known_at(i, window[i]) is None:
            kin[maybe][i] = streamed
    wanted: set[str] = set()
    for key, seen in kinds.items():
        if len(seen | set(kin[key].values())) == 2:
            wanted.update(kin[key])
    return [r for r in rows if r[0] in wanted]


def _paged(store: Store, rows: list[tuple[str, Any]], recent: Recent) -> Iterator[list[Exchange]]:
    """The exchanges of these rows a page at a time (``recent.page``); the caller lets each page go
    before it asks for the next. The next page (this batch's or the next one's) is twice this one,
    up to what ``PIECE_BYTES`` holds of exchanges this size."""
    k = 0
    while k < len(rows):
        page = recent.page
        got = _load(store, rows[k : k + page], recent)
        k += page
        yield got
        size = sum([recent.size(ex) for ex in got])
        fits = PIECE_BYTES * len(got) // size if size else NEIGHBOUR_PAGE
        recent.page = max(1, min(NEIGHBOUR_PAGE, 2 * page, fits))
        del got


def _group(
    store: Store,
    batch: list[Exchange],
    rows: list[tuple[str, Any]],
    span: tuple[float, float],
    recent: Recent,
) -> Neighbours:
    """The batch's group among the window's ``rows`` (the exchanges around it, of several taps; see
    ``_kin``), loaded within the batch's own bytes and ``GROUP_BYTES`` more (those nearest the
    batch's ``span`` of starts); the rest of the window in summary for the set rules; and how many
    of the group were left out."""
    index = KinIndex(_window_kin(store, rows, recent))
    agent_taps: set[str] = set()
    wanted: list[int] = []
    recent.prepare(batch)
    for ex in batch:
        try:
            view = recent.view(ex)
            one = kin_of(view, recent.version(ex), recent.size(ex))
        except Exception:  # checked alone: ``check_exchanges`` records why
            continue
        recent.keep_kin(one)  # the batch is around the next batches
        wanted.extend(one.wanted)
        if view.is_agent:
            agent_taps.add(view.tap)
    kin = index.kin
    members = index.reach(wanted)
    budget = GROUP_BYTES + sum([recent.size(ex) for ex in batch])
    kept, left_out = nearest(kin, members, span[0], span[1], budget)
    group = _load(store, [kin[n].row for n in kept], recent)
    rest, missed = _rest(store, index, kept, agent_taps, recent)
    return group, False, rest, left_out + missed


def _window_kin(store: Store, rows: list[tuple[str, Any]], recent: Recent) -> list[Kin]:
    """The kin of these rows' exchanges, in their order: as ``recent`` keeps it, or read a page at a
    time (and kept)."""
    fresh: dict[str, Kin] = {}
    versions = dict(rows)
    # the kin kept of each row at its version, looked up in place once: a method's call a row of the
    # window was a tenth of this
    kept = recent._kin
    held = {r[0]: k for r in rows if (k := kept.get(r[0])) is not None and k.row[1] == r[1]}
    for got in _paged(store, [r for r in rows if r[0] not in held], recent):
        recent.prepare(got)
        for ex in got:
            try:
                one = kin_of(recent.view(ex), versions[ex.id], recent.size(ex))
            except Exception:  # an exchange that cannot be read pairs with nothing (it is checked alone)
                one = unreadable(ex.id, versions[ex.id], ex.tap, ex.started_epoch, recent.size(ex))
            recent.keep_kin(one)
            fresh[ex.id] = one
        del got
    # a row no longer there is left out
    return [k for r in rows if (k := held.get(r[0])) is not None or (k := fresh.get(r[0])) is not None]


def _rest(
    store: Store, index: KinIndex, kept: list[int], agent_taps: set[str], recent: Recent
) -> tuple[TapSet, int]:
    """The window but the batch and the ``kept`` of its group, as the set rules count it: its agent
    exchanges by tap, the first of each tap where the batch (``agent_taps``: the taps of its agent
    exchanges) and its group have none, and whether any of it paired; and how many exchanges of a
    group too large to load may have hidden a pair. Its groups are apart from the batch's: one of
    both taps that pairs alone pairs in the window."""
    kin = index.kin
    rest = TapSet()
    missed = 0
    inside = set(kept)
    firsts: dict[str, tuple[str, Any]] = {}
    for n, k in enumerate(kin):
        if k.agent and n not in inside:
            rest.agents[k.tap] = rest.agents.get(k.tap, 0) + 1
            firsts.setdefault(k.tap, k.row)
    agent_taps = agent_taps | {kin[n].tap for n in kept if kin[n].agent}
    firsts = {tap: row for tap, row in firsts.items() if tap not in agent_taps}
    for ex in _load(store, list(firsts.values()), recent):
        rest.first[ex.tap] = recent.view(ex)
    if {CALLER, ENGINE} <= agent_taps | set(rest.agents):  # else no pair changes what they find
        # a caller and an engine side that may pair (``may_pair``) are paired with one or the other
        # by ``pair_taps``: the window pairs where two of a group may, tried two at a time
        tries = 0
        for other in index.others():
            if tries < PAIR_TRIES:
                paired, tries = _may_pair_within(store, index, other, tries, recent)
                if paired:
                    rest.pairs = 1
                    break
            if tries == PAIR_TRIES:  # not told apart: the set rules may have missed a pair there
                missed += len(other)
    return rest, missed


def _may_pair_within(
    store: Store, index: KinIndex, members: list[int], tries: int, recent: Recent
) -> tuple[bool, int]:
    """Whether a caller and an engine side of these members may pair, tried two at a time until
    ``PAIR_TRIES`` tries in all (``tries``: those made before); and the tries made by then."""
    kin = index.kin
    for c, e in index.cross(members):
        tries += 1
        two = _load(store, [kin[c].row, kin[e].row], recent)
        if len(two) == 2 and may_pair(recent.view(two[0]), recent.view(two[1])):
            return True, tries
        if tries == PAIR_TRIES:
            break
    return False, tries


def settle_checker_gc() -> None:
    """The checker process's GC: the proxy's (``settle_gc``: its full collections took up to 128 ms
    of CPU each at 256 streams), young collections every ``GC_THRESHOLD`` net allocations."""
    settle_gc()
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])


def run_checker(
    path: str,
    *,
    lifeline: Connection,
    status: Connection,
    parent_pid: int,
    settle_s: float = 1.0,
    interval_s: float = INTERVAL_S,
    busy_interval_s: float = BUSY_INTERVAL_S,
    isolate: list[str] | None = None,
    config: CheckConfig | None = None,
) -> None:
    """The worker process: dies with its parent, stops when the parent says so (then checks what is
    left), reports each batch before checking it, and survives database errors. ``config``: how
    to judge (``direct``: no gateway between the taps and the engine)."""
    stop = threading.Event()
    # forwarding first: the checker runs on the CPU forwarding leaves (``yield_cpu``), falls
    # behind under overload (health says so past LAG_S) and catches up, losing nothing
    nice = 0
    with contextlib.suppress(ValueError):
        nice = int(os.environ.get(CHECKER_NICE_ENV, CHECKER_NICE))
    become_helper(lifeline, parent_pid, lambda _msg: stop.set(), nice=nice)

    settle_checker_gc()

    def announce(ids: list[str] | None) -> None:
        status.send(("batch", ids) if ids is not None else ("done", None))

    store: Store | None = None
    recent = Recent()
    reported = (0, 0)  # what the parent was told of ``recent``'s cut groups

    def report_cut() -> None:
        nonlocal reported
        now = (recent.cut_checked, recent.cut_left_out)
        if now != reported:
            status.send(("cut", (now[0] - reported[0], now[1] - reported[1])))
            reported = now

    delay = interval_s
    while not stop.is_set():
        try:
            if store is None:
                store = Store(path)
            for one in isolate or []:  # in flight when the last worker died: one at a time
                announce([one])
                check_ids(store, [one], config=config)
                announce(None)
            isolate = None
            # a batch costs its exchanges and the window around it: batches back to back took one or
            # two exchanges each, all but the first, so the next waits unless this one left a backlog
            done = check_pending(store, settle_s=settle_s, config=config, announce=announce, recent=recent)
            report_cut()
            if done < BATCH:
                stop.wait(busy_interval_s if done >= BUSY_BATCH else interval_s)
            delay = interval_s
        except Exception as exc:  # the database failed (full disk, lost server): wait, reopen, go on
            status.send(("error", f"{type(exc).__name__}: {str(exc).strip()[:200]}"))
            if store is not None:
                with contextlib.suppress(Exception):
                    store.close()
                store = None
            stop.wait(delay)
            delay = min(delay * 2, 5.0)
    try:
        if store is None:
            store = Store(path)
        # the last ones, on the way out
        check_pending(store, settle_s=0.0, config=config, announce=announce, recent=recent)
        with contextlib.suppress(OSError):  # the parent may be gone already
            report_cut()
    finally:
        if store is not None:
            store.close()


class CheckerSupervisor:
    """Runs the live-check worker process and restarts it when it dies (see the module docstring).
    ``state()`` is what ``/wirecheck/health`` shows."""

    def __init__(
        self,
        store: Store,
        *,
        settle_s: float = 1.0,
        max_tries: int = 2,
        lag_s: float = LAG_S,
        config: CheckConfig | None = None,
    ) -> None:
        self.store = store
        self.settle_s = settle_s
        self.config = config
        self.max_tries = max_tries
        self.lag_s = lag_s
        self.restarts = 0
        self.skipped = 0
        #: exchanges of batches checked with only part of their group of exchanges around them
        #: (``GROUP_BYTES``), and the exchanges of those groups left out, as the workers reported them
        self.cut_checked = 0
        self.cut_left_out = 0
        self.last_crash: tuple[float, str] | None = None
        self.last_error: str | None = None
        self._lagging = False
        self._attempts: dict[str, int] = {}
        self._in_flight: list[str] = []
        self._in_flight_was_empty = True
        self._suspects: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._exited: int | None = None  # readable once the worker has exited (a pidfd), where there is one
        self._lifeline: Connection | None = None
        self._status: Connection | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # --- the worker ------------------------------------------------------------------------------

    def _spawn(self, isolate: list[str]) -> None:
        """Start the worker: a Python of its own (not multiprocessing's spawn, which also starts
        multiprocessing's resource tracker, a 14 MB process this one never needs) given the read
        end of the lifeline and the write end of the status pipe; how to run comes as the
        lifeline's first message."""
        life_r, life_w = multiprocessing.Pipe(duplex=False)
        stat_r, stat_w = multiprocessing.Pipe(duplex=False)
        fds = (life_r.fileno(), stat_w.fileno())
        try:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-c", _WORKER_MAIN, *map(str, fds)],
                pass_fds=fds,
                stdin=subprocess.DEVNULL,
            )
        finally:
            life_r.close()  # only the worker holds the read end: EOF there means this process is gone
            stat_w.close()
        with contextlib.suppress(OSError):  # a worker dead already: _watch sees it and starts another
            life_w.send(
                {
                    "path": self.store.url,
                    "parent_pid": os.getpid(),
                    "settle_s": self.settle_s,
                    "isolate": isolate,
                    "config": self.config,
                }
            )
        self._proc, self._lifeline, self._status = proc, life_w, stat_r
        self._exited = _exit_signal(proc)
        self._in_flight = []

    def start(self) -> CheckerSupervisor:
        self._spawn([])
        self._thread = threading.Thread(target=self._watch, name="wirecheck-checker-supervisor", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        backoff = 0.2
        last_lag_check = 0.0
        while not self._stopping.is_set():
            proc, status, exited = self._proc, self._status, self._exited
            assert proc is not None and status is not None
            ready = wait([status] if exited is None else [exited, status], timeout=0.5)
            if status in ready:
                self._drain(status)
            if time.monotonic() - last_lag_check > 1.0:
                last_lag_check = time.monotonic()
                self._check_lag()
            if (exited in ready) if exited is not None else proc.poll() is not None:
                self._drain(status)  # what it said before it died
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1)
                if exited is not None:
                    os.close(exited)
                    self._exited = None
                if self._stopping.is_set():
                    return
                self._crashed(proc.returncode)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0) if self._in_flight_was_empty else 0.2
                self._spawn(self._suspects)

    def _drain(self, status: Connection) -> None:
        with contextlib.suppress(EOFError, OSError):
            while status.poll():
                kind, value = status.recv()
                if kind == "batch":
                    self._in_flight = list(value)
                elif kind == "done":
                    for i in self._in_flight:
                        self._attempts.pop(i, None)
                    self._in_flight = []
                elif kind == "error":
                    self.last_error = str(value)
                elif kind == "cut":
                    self.cut_checked += int(value[0])
                    self.cut_left_out += int(value[1])

    def _crashed(self, exitcode: int | None) -> None:
        """The worker died: count a try against what it was checking; set aside what failed too often."""
        self.restarts += 1
        self.last_crash = (time.monotonic(), f"the live-check worker died (exit code {exitcode})")
        print(f"wirecheck proxy: {self.last_crash[1]}; restarting it", file=sys.stderr, flush=True)
        flight, self._in_flight = self._in_flight, []
        self._in_flight_was_empty = not flight
        self._suspects = []
        for i in flight:
            self._attempts[i] = self._attempts.get(i, 0) + 1
            if len(flight) == 1 and self._attempts[i] >= self.max_tries:
                self._skip(i, exitcode)
            else:
                self._suspects.append(i)

    def _skip(self, exchange_id: str, exitcode: int | None) -> None:
        tap = next((e.tap for e in self.store.exchanges_for([exchange_id], [])), "caller")
        finding = Finding(
            rule=LIVE_CHECK_SKIPPED,
            severity=Severity.WARNING,
            fault=Fault.UNKNOWN,
            message=f"the live-check worker died {self._attempts[exchange_id]} times checking this exchange"
            f" (last exit code {exitcode}); it was skipped so that live checking goes on",
            exchange_id=exchange_id,
            tap=tap,
            evidence={"pointer": ""},
        )
        try:
            self.store.add_findings([finding], [exchange_id])
        except Exception as exc:  # the store is failing too: it stays unchecked and is tried again
            self.last_error = f"{type(exc).__name__}: {exc}"
            return
        self._attempts.pop(exchange_id, None)
        self.skipped += 1

    def _check_lag(self) -> None:
        try:
            self._lagging = bool(self.store.unchecked(self.settle_s + self.lag_s, limit=1))
        except Exception as exc:  # health must answer even when the database does not
            self.last_error = f"{type(exc).__name__}: {exc}"

    # --- health and shutdown -----------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        alive = self._proc is not None and self._proc.poll() is None
        reasons = []
        if not alive and not self._stopping.is_set():
            reasons.append("the live-check worker is not running")
        if self.last_crash is not None and time.monotonic() - self.last_crash[0] < CRASH_MEMORY_S:
            reasons.append(f"{self.last_crash[1]} {time.monotonic() - self.last_crash[0]:.0f} s ago")
        if self._lagging:
            reasons.append(f"an exchange has waited over {self.settle_s + self.lag_s:.0f} s to be checked")
        return {
            "worker_alive": alive,
            "restarts": self.restarts,
            "skipped": self.skipped,
            "cut": {"checked": self.cut_checked, "left_out": self.cut_left_out},
            "last_error": self.last_error,
            "degraded": "; ".join(reasons) or None,
        }

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the worker to check what is left and exit; waits up to ``timeout``."""
        self._stopping.set()
        if self._lifeline is not None:
            with contextlib.suppress(OSError):
                self._lifeline.send("stop")
        if self._proc is not None:
            try:
                self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._proc.terminate()
        if self._exited is not None:
            with contextlib.suppress(OSError):
                os.close(self._exited)
            self._exited = None
        if self._thread is not None:
            self._thread.join(timeout=5)


#: the worker's main: the lifeline's and the status pipe's descriptors are its arguments
_WORKER_MAIN = "import sys; from wirecheck.proxy._live import worker_main; worker_main(sys.argv[1:])"


def worker_main(fds: list[str]) -> None:
    """The worker process's entry (``_WORKER_MAIN``): the lifeline's first message says how to run."""
    lifeline = Connection(int(fds[0]), writable=False)
    status = Connection(int(fds[1]), readable=False)
    try:
        how: dict[str, Any] = lifeline.recv()
    except (EOFError, OSError):
        return  # the proxy went away before it said
    run_checker(how.pop("path"), lifeline=lifeline, status=status, **how)


def _exit_signal(proc: subprocess.Popen[bytes]) -> int | None:
    """A descriptor that becomes readable when ``proc`` exits (Linux's pidfd), or None where the
    platform has none (the supervisor then polls the process every half second)."""
    try:
        return os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return None


def start_checker(
    store: Store, *, settle_s: float = 1.0, config: CheckConfig | None = None
) -> CheckerSupervisor:
    """Start the supervised live-check worker over this (writer's) store; ``config`` is how it
    judges (``CheckConfig(direct=True)`` for taps with no gateway behind them)."""
    return CheckerSupervisor(store, settle_s=settle_s, config=config).start()
