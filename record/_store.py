"""The store: SQLite in WAL mode (embedded, the default) or PostgreSQL (one store shared by many proxy
replicas and checking workers), one versioned schema, and a batch writer behind a bounded queue.

The request path never waits on the disk: :meth:`Store.put` hands an exchange to a queue and returns;
when the queue is full the exchange is dropped, counted, and the gap is written down (a ``gaps`` row
with the count and the time span) as soon as the writer catches up, so evidence is never silently
incomplete. A writer thread commits in batches; :meth:`Store.close` (SIGTERM) flushes everything. A
SIGKILL loses at most the batch in flight: each batch is one transaction, and WAL keeps the file
consistent.

Exchanges are stored in their interchange form (docs/exchange-format.md), one JSON document a row, so
export and replay read back exactly what the taps saw.

``Store("path/to/wirecheck.db")`` is SQLite; ``Store("postgresql://user@host/db")`` is PostgreSQL
(psycopg 3, ``pip install 'wirecheck[postgres]'``). Both run the same numbered migrations (the DDL
spelled for each), so a store moves between them with ``export`` and ``check`` reading either. With
several writers, every row says which replica wrote it; checking workers claim rows
(``FOR UPDATE SKIP LOCKED`` on PostgreSQL) so that no exchange is checked twice.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from wirecheck.contracts import Exchange, Fault, Finding, InputError, Severity, dump_exchange, json_loads

from ._backend import SCHEMA_VERSION, Backend
from ._postgres import PostgresBackend, is_postgres
from ._rows import plain_row_text, row_exchange, row_text
from ._sqlite import SQLITE_MAGIC, SqliteBackend

__all__ = [
    "LIVE_CHECK_SKIPPED",
    "SCHEMA_VERSION",
    "Store",
    "StoreStats",
    "is_store",
    "open_store",
    "store_notes",
]

_COLUMNS = (
    "id, tap, correlation, started_at, ended_mono, ended_at, replica, method, path, status, error, doc, body"
)
#: one spelling for both backends (SQLite >= 3.24): a re-written id keeps its row and place (and is
#: checked again: ``_TO_CHECK``)
_UPSERT = f"INSERT INTO exchanges({_COLUMNS}) VALUES {{rows}} ON CONFLICT (id) DO UPDATE SET " + ", ".join(
    f"{c} = excluded.{c}" for c in _COLUMNS.split(", ")[1:]
)
#: an exchange written, or written again, is to be checked (again): its row in ``checks``
_TO_CHECK = (
    "INSERT INTO checks(seq, ended_at) SELECT seq, ended_at FROM exchanges WHERE id IN ({ids}) "
    "ON CONFLICT (seq) DO UPDATE SET ended_at = excluded.ended_at, claimed_at = NULL"
)
#: exchanges written by one statement at most: 13 values each stay under the 999 variables of older
#: SQLite builds. A statement a batch, not a statement a row, took a fifth off the database's work
#: for an exchange (binding, stepping, the GIL given up and taken back for every row)
_ROWS = 64


@cache
def _write_sql(rows: int) -> tuple[str, str]:
    """The upsert of ``rows`` exchanges and the statement that puts them in ``checks``. Batches are
    written in statements of 64, 32, 16, ... rows (the binary digits of their size), so that a few
    statement texts, each compiled once (SQLite's statement cache), serve every size of batch."""
    marks = "(" + ", ".join("?" * len(_COLUMNS.split(", "))) + ")"
    return _UPSERT.format(rows=", ".join([marks] * rows)), _TO_CHECK.format(ids=", ".join("?" * rows))


#: rows read at a time by ``Store.exchanges``: memory per page, whatever the store's size
_PAGE = 64
#: keys asked in one statement (SQLite's variable limit is 999 in older builds)
_KEYS = 250
#: a claim left by a checking worker that died is taken over after this long
CLAIM_TIMEOUT_S = 60.0
#: how often the writer takes what was queued: each transaction costs about 380 us of the proxy
#: process's CPU besides its rows (the index pages it writes again), so at 150 exchanges a second
#: 20 ms (batches of 4) cost 150 us an exchange and 100 ms (batches of 15) 75 us. An exchange
#: reaches the store that much later (the live checker waits a second anyway)
LINGER_S = 0.1


def is_store(path: str | Path) -> bool:
    if is_postgres(path):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _replica() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True)
class StoreStats:
    queued: int = 0
    written: int = 0
    dropped: int = 0
    batches: int = 0
    reconnects: int = 0
    last_error: str | None = None
    #: monotonic time of the first failed write since the last one that worked (None: writing works):
    #: health says so from the first failure, not only once the retries are spent
    failing_since: float | None = None


class Store:
    """A wirecheck store. ``Store(path)`` opens or creates it; ``writer=True`` starts the batch writer."""

    def __init__(
        self,
        path: str | Path,
        *,
        writer: bool = False,
        readonly: bool = False,
        queue_size: int = 10000,
        batch_size: int = 256,
        retries: int = 8,
    ) -> None:
        if readonly and writer:
            raise ValueError("a store opened read-only has no writer")
        self.pg = is_postgres(path)
        self._db: Backend = (
            PostgresBackend(str(path), readonly=readonly)
            if self.pg
            else SqliteBackend(str(path), readonly=readonly)
        )
        self.url = str(path)
        self.path = self._db.path
        self.readonly = readonly
        self.replica = _replica()
        self.stats = StoreStats()
        self._lock = threading.Lock()
        # the hand-off to the writer: a deque the request path appends to (atomic under the GIL) and
        # the writer takes from every LINGER_S. A queue.Queue took a lock and notified a condition
        # on every put and every get, and woke the writer with a futex
        self._queued: deque[Exchange] = deque()
        self._queue_size = queue_size
        self._busy = False  # the writer holds a batch it took and has not written yet
        self._stop = threading.Event()  # set: write everything queued, then end
        self._nudge = threading.Event()  # set: take what is queued now (flush, close)
        self._batch = batch_size
        self._retries = max(1, retries)
        self._gap: list[Any] = []  # [count, first, last] of drops not yet written
        self._gap_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        # a store of an older schema, read-only, has no body column (record/_rows.py): none is read
        self._body = "body" if self._has_body() else "NULL"
        if writer:
            self._thread = threading.Thread(target=self._run, name="wirecheck-store-writer", daemon=True)
            self._thread.start()

    def _has_body(self) -> bool:
        try:
            self._rows("SELECT body FROM exchanges WHERE 1 = 0")
        except Exception:  # no such column (SQLite and PostgreSQL word it differently)
            return False
        return True

    # --- the request path ------------------------------------------------------------------------

    def put(self, ex: Exchange) -> bool:
        """Queue an exchange for writing; never blocks. False when it was dropped (queue full)."""
        if len(self._queued) < self._queue_size:
            self._queued.append(ex)
            self.stats.queued += 1
            return True
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with self._gap_lock:
            self.stats.dropped += 1
            if self._gap:
                self._gap[0] += 1
                self._gap[2] = now
            else:
                self._gap = [1, now, now]
        return False

    # --- the writer ------------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            # one transaction for what ended in that time; the request path's put() never wakes
            # this thread (waking it on every put was the proxy's costliest call after the socket
            # writes at 256 streams)
            self._nudge.wait(LINGER_S)
            self._nudge.clear()
            stopping = self._stop.is_set()
            while True:
                self._busy = True  # before taking: flush() sees the queue or this, never neither
                batch = self._take()
                try:
                    self._write_safely(batch, stopping=stopping)
                finally:
                    self._busy = False
                if len(batch) < self._batch:
                    break  # the queue is empty (or was when taken): wait for more
            if stopping:
                return

    def _take(self) -> list[Exchange]:
        batch: list[Exchange] = []
        queued = self._queued
        while queued and len(batch) < self._batch:
            batch.append(queued.popleft())
        return batch

    def _write_safely(self, batch: list[Exchange], *, stopping: bool = False) -> None:
        """Write a batch; when the database fails (a PostgreSQL restart, a lost connection, a locked
        or full disk), reconnect and retry with backoff instead of letting the writer die. While it
        retries, the request path keeps going: new exchanges queue, and past the queue's bound they
        are dropped and counted as a gap. A batch that still fails after the retries is counted as a
        gap too, so the store says what it is missing."""
        delay = 0.2
        for attempt in range(self._retries if not stopping else min(3, self._retries)):
            try:
                self._write(batch)
                if attempt:
                    self.stats.reconnects += 1
                self.stats.failing_since = None
                return
            except Exception as exc:  # any database error: retry, then account for it
                self.stats.last_error = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
                if self.stats.failing_since is None:
                    self.stats.failing_since = time.monotonic()
                time.sleep(delay)
                delay = min(delay * 2, 5.0)
                self._reconnect()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with self._gap_lock:
            self.stats.dropped += len(batch)
            if self._gap:
                self._gap[0] += len(batch)
                self._gap[2] = now
            elif batch:
                self._gap = [len(batch), now, now]
            pending = self._gap[0] if self._gap else 0
        if stopping and pending:
            # the last chance: the process ends and the gap row could not be written either; say it where an operator looks rather than lose it silently
            print(
                f"wirecheck store: {pending} exchange(s) could not be written to {self.path} and are lost"
                f" ({self.stats.last_error})",
                file=sys.stderr,
                flush=True,
            )

    def _reconnect(self) -> None:
        with self._lock:
            self._db.reconnect()

    def _exec(self, sql: str, args: tuple[Any, ...] | list[Any] = ()) -> Any:
        return self._db.conn.execute(self._db.q(sql), args)

    def _rows(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return list(self._exec(sql, args).fetchall())

    def _write(self, batch: list[Exchange]) -> None:
        with self._gap_lock:
            gap, self._gap = self._gap, []
        if not batch and not gap:
            return
        try:
            with self._lock, self._db.tx():
                self._insert(batch)
                if gap:
                    self._exec(
                        "INSERT INTO gaps(dropped, first_at, last_at, replica) VALUES (?, ?, ?, ?)",
                        (*gap, self.replica),
                    )
        except BaseException:
            # the gap row was not written (a full disk fails it like the batch): keep it pending, so
            # that it is written once space returns instead of being lost with the transaction
            if gap:
                with self._gap_lock:
                    if self._gap:
                        self._gap = [self._gap[0] + gap[0], gap[1], self._gap[2]]
                    else:
                        self._gap = gap
            raise
        self.stats.written += len(batch)
        self.stats.batches += 1

    def _insert(self, batch: Iterable[Exchange]) -> None:
        # the rows' values in one flat list, as the statements take them; the clocks read once a
        # batch (an exchange's wall-clock end is the batch's time less how long ago it ended)
        values: list[Any] = []
        ids: list[str] = []
        now, mono = time.time(), time.monotonic()
        replica = self.replica
        for ex in batch:
            text, body, path = row_text(ex)
            ended = ex.extra.get("_ended_mono")
            ids.append(ex.id)
            values += (
                ex.id,
                ex.tap,
                ex.correlation,
                ex.started_at,
                mono if ended is None else ended,
                now if ended is None else now - max(mono - ended, 0.0),
                replica,
                ex.request.method,
                path,  # redacted like the doc
                ex.response.status if ex.response else None,
                ex.error.kind if ex.error else None,
                text,
                body,
            )
        width = len(values) // len(ids) if ids else 0
        if len(set(ids)) < len(ids):
            # an id twice in one batch: a statement a row, the later row an update of the earlier
            # (PostgreSQL refuses to update a row that its own statement inserted)
            upsert, to_check = _write_sql(1)
            self._db.many(upsert, [tuple(values[i : i + width]) for i in range(0, len(values), width)])
            self._db.many(to_check, [(i,) for i in ids])
            return
        start, left = 0, len(ids)
        while left:
            size = min(_ROWS, 1 << (left.bit_length() - 1))
            upsert, to_check = _write_sql(size)
            self._exec(upsert, values[start * width : (start + size) * width])
            self._exec(to_check, ids[start : start + size])
            start, left = start + size, left - size

    def write_now(self, exchanges: Iterable[Exchange]) -> None:
        """Write synchronously (imports, tests), bypassing the queue."""
        with self._lock, self._db.tx():
            self._insert(exchanges)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything queued so far is written."""
        if self._thread is None:
            self._write([])
            return
        deadline = time.monotonic() + timeout
        self._nudge.set()
        while (self._queued or self._busy) and self._thread.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
            self._nudge.set()

    def close(self) -> None:
        """Flush every queued exchange and close (what SIGTERM does)."""
        if self._thread is not None and self._thread.is_alive():
            self._stop.set()
            self._nudge.set()
            self._thread.join(timeout=60)
        if not self.readonly:
            self._write_safely([], stopping=True)
        with self._lock:
            self._db.conn.close()

    # --- reading ---------------------------------------------------------------------------------

    def exchanges(
        self, *, where: str = "", args: tuple[Any, ...] = (), max_doc: int | None = None
    ) -> Iterator[Exchange]:
        """Every exchange in write order; ``where`` is SQL (``WHERE ...``) with ``?`` placeholders
        (either backend). Read a page of rows at a time, so memory does not grow with the store; a
        row whose document (with the response bytes beside it) is over ``max_doc`` characters, or
        is not an exchange, is an :class:`InputError` that names it (the store is a capture like
        any other)."""
        cond = f"({where.strip()[len('WHERE') :]}) AND " if where.strip() else ""
        size = f"length(doc) + COALESCE(length({self._body}), 0)"
        doc, body = "doc", self._body
        if max_doc is not None:
            doc, body = (f"CASE WHEN {size} <= ? THEN {col} END" for col in (doc, body))
        last = -1
        while True:
            limit_args = (max_doc, max_doc) if max_doc is not None else ()
            with self._lock:
                rows = self._exec(
                    f"SELECT seq, {doc}, {size}, id, {body} FROM exchanges WHERE {cond}seq > ? "
                    "ORDER BY seq LIMIT ?",
                    (*limit_args, *args, last, _PAGE),
                ).fetchall()
            for seq, text, length, ex_id, data in rows:
                last = seq
                yield self._loaded(seq, ex_id, text, length, max_doc, body=data)
            if len(rows) < _PAGE:
                return

    def _loaded(
        self, seq: int, ex_id: Any, text: Any, length: Any, max_doc: int | None, *, body: Any = None
    ) -> Exchange:
        def where() -> str:
            # said only of a row that is not an exchange: a string made for every row the live
            # checker reads cost as much as reading its id
            return f"row {seq} (exchange {str(ex_id)[:80]!r})"

        if text is None:
            raise InputError(
                f"{where()}: a document of {length} bytes, over the limit of {max_doc} for one entry "
                "(--max-entry-size raises it)",
                source=self.path,
            )
        plain = plain_row_text(text, body)  # the rows the store writes, read at once
        if plain is not None:
            return plain
        try:
            obj = json_loads(text)
        except (ValueError, TypeError) as exc:
            raise InputError(
                f"{where()}: its document is not JSON ({type(exc).__name__})", source=self.path
            ) from None
        except RecursionError:
            raise InputError(
                f"{where()}: its document is nested too deep to read", source=self.path
            ) from None
        try:
            return row_exchange(obj, body, source="")
        except InputError as exc:
            raise InputError(exc.reason, source=f"{self.path} {where()}") from None
        except RecursionError:
            raise InputError(
                f"{where()}: its document is nested too deep to read", source=self.path
            ) from None

    def exchanges_for(self, ids: list[str], correlations: list[str]) -> list[Exchange]:
        """The exchanges with these ids, and every exchange sharing one of these correlations, in
        write order. Asked a group of keys at a time, each row once: paging one ``IN`` list by
        ``seq`` looked every key up again for every page (19 us a row where a row costs 2.5)."""
        found: dict[int, tuple[Any, ...]] = {}
        for column, keys in (("id", ids), ("correlation", correlations)):
            for k in range(0, len(keys), _KEYS):
                group = keys[k : k + _KEYS]
                rows = self._rows(  # no size: it is said only of a document over a limit, none here
                    f"SELECT seq, doc, NULL, id, {self._body} FROM exchanges "
                    f"WHERE {column} IN ({','.join('?' * len(group))})",
                    tuple(group),
                )
                found.update((row[0], row) for row in rows)
        return [
            self._loaded(seq, ex_id, text, length, None, body=data)
            for seq, text, length, ex_id, data in (found[s] for s in sorted(found))
        ]

    def rows_for(self, ids: list[str], correlations: list[str]) -> list[tuple[str, Any]]:
        """(id, version) of the exchanges :meth:`exchanges_for` would read, in write order, without
        reading them: the version (``ended_at``) changes when an id is written again, so a reader
        that holds an exchange knows whether it is still the row's."""
        if not ids and not correlations:
            return []
        marks_i = ",".join("?" * len(ids)) or "NULL"
        marks_c = ",".join("?" * len(correlations)) or "NULL"
        return [
            (str(r[0]), r[1])
            for r in self._rows(
                f"SELECT id, ended_at FROM exchanges WHERE id IN ({marks_i}) OR correlation IN ({marks_c}) "
                "ORDER BY seq",
                (*ids, *correlations),
            )
        ]

    def rows_between(self, lo: str, hi: str) -> list[tuple[str, Any]]:
        """(id, version) of the exchanges that started between these two ISO times, in write order
        (see :meth:`rows_for`). An index holds all it reads: the rows themselves are not touched."""
        rows: list[tuple[str, Any]] = self._rows(  # id is TEXT NOT NULL: read as it is
            "SELECT id, ended_at FROM exchanges WHERE started_at >= ? AND started_at <= ? ORDER BY seq",
            (lo, hi),
        )
        return rows

    def count(self) -> int:
        with self._lock:
            return int(self._exec("SELECT COUNT(*) FROM exchanges").fetchone()[0])

    def replicas(self) -> dict[str, int]:
        """How many exchanges each writer (host:pid) wrote."""
        rows = self._rows("SELECT COALESCE(replica, ''), COUNT(*) FROM exchanges GROUP BY replica")
        return {str(r[0]): int(r[1]) for r in rows}

    def gap_unwritten(self) -> int:
        """Exchanges lost and counted, whose gap row is not in the database yet (it is written as
        soon as the database takes writes again)."""
        with self._gap_lock:
            return int(self._gap[0]) if self._gap else 0

    def gaps(self) -> list[tuple[int, str, str]]:
        rows = self._rows("SELECT dropped, first_at, last_at FROM gaps ORDER BY seq")
        return [(int(r[0]), str(r[1]), str(r[2])) for r in rows]

    def add_findings(
        self,
        findings: Iterable[Finding],
        checked_ids: Iterable[str],
        amend: Mapping[str, Iterable[Finding]] | None = None,
        window: tuple[str, str, list[str]] | None = None,
    ) -> None:
        """Store the findings of the exchanges ``checked_ids`` and mark them checked. ``amend``: the
        findings of exchanges judged again with these (a partner recorded after them changed what
        they find): those already checked get exactly these in place of what they had (only what
        differs is written; the live checker's own records stay), the others are left to their own
        check. ``window``: (lo, hi, rules): these rules find nothing of the exchanges that started
        between the ISO times lo and hi (what they found of them before is deleted)."""
        rows = [_finding_row(f) for f in findings]
        with self._lock, self._db.tx(immediate=True):
            if amend or window is not None:
                self._db.serialize_amends()
            if amend:
                rows.extend(self._amend(amend))
            if window is not None:
                lo, hi, quiet = window
                self._exec(
                    f"DELETE FROM findings WHERE rule IN ({','.join('?' * len(quiet))}) AND exchange_id IN "
                    "(SELECT id FROM exchanges WHERE started_at >= ? AND started_at <= ?)",
                    (*quiet, lo, hi),
                )
            self._db.many(
                "INSERT INTO findings(exchange_id, tap, rule, severity, fault, message, evidence) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            # a group of ids a statement: one statement an id took 3.2-3.7 us an exchange, 1.7-2.0 so
            ids = list(checked_ids)
            for k in range(0, len(ids), _KEYS):
                group = ids[k : k + _KEYS]
                self._exec(
                    "DELETE FROM checks WHERE seq IN "
                    f"(SELECT seq FROM exchanges WHERE id IN ({','.join('?' * len(group))}))",
                    group,
                )

    def _amend(self, amend: Mapping[str, Iterable[Finding]]) -> list[tuple[Any, ...]]:
        """Within the caller's transaction (amendments serialized): delete the stored findings of the
        checked ones of ``amend`` that are no longer found, and return the rows to insert (those not
        stored yet)."""
        ids = list(amend)
        checked: set[str] = set()
        stored: dict[str, list[tuple[Any, ...]]] = {}
        for k in range(0, len(ids), _KEYS):
            group = ids[k : k + _KEYS]
            marks = ",".join("?" * len(group))
            checked.update(
                r[0]
                for r in self._exec(
                    f"SELECT id FROM exchanges e WHERE id IN ({marks}) "
                    "AND NOT EXISTS (SELECT 1 FROM checks c WHERE c.seq = e.seq)",
                    group,
                ).fetchall()
            )
            for r in self._exec(
                "SELECT seq, exchange_id, tap, rule, severity, fault, message, evidence FROM findings "
                f"WHERE exchange_id IN ({marks}) AND rule <> ?",
                (*group, LIVE_CHECK_SKIPPED),
            ).fetchall():
                stored.setdefault(r[1], []).append(r)
        add: list[tuple[Any, ...]] = []
        gone: list[int] = []
        for i in ids:
            if i not in checked:
                continue  # not checked yet: its own check judges it with what is there by then
            want = Counter(_finding_row(f) for f in amend[i])
            for r in stored.get(i, []):
                row = tuple(r[1:])
                if want[row] > 0:
                    want[row] -= 1
                else:
                    gone.append(r[0])
            add.extend(want.elements())
        for k in range(0, len(gone), _KEYS):
            seqs = gone[k : k + _KEYS]
            self._exec(f"DELETE FROM findings WHERE seq IN ({','.join('?' * len(seqs))})", seqs)
        return add

    def findings(self, **filters: Any) -> list[dict[str, Any]]:
        """Stored findings; filters: rule, fault, severity, tap, exchange_id (exact), limit."""
        limit = int(filters.pop("limit", 1000))
        clauses, args = [], []
        for key in ("rule", "fault", "severity", "tap", "exchange_id"):
            if filters.get(key):
                clauses.append(f"{key} = ?")
                args.append(filters[key])
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        with self._lock:
            rows = self._exec(
                f"SELECT exchange_id, tap, rule, severity, fault, message, evidence FROM findings {where} ORDER BY seq LIMIT ?",
                (*args, limit),
            ).fetchall()
        keys = ("exchange_id", "tap", "rule", "severity", "fault", "message", "evidence")
        return [{**dict(zip(keys, r, strict=True)), "evidence": json.loads(r[6])} for r in rows]

    def finding_counts(self) -> list[tuple[str, str, str, int]]:
        rows = self._rows(
            "SELECT rule, fault, severity, COUNT(*) FROM findings GROUP BY rule, fault, severity"
        )
        return [(str(r[0]), str(r[1]), str(r[2]), int(r[3])) for r in rows]

    # --- reading for the live view: plain SELECTs from a row position -----------------

    def positions(self) -> tuple[int, int]:
        """The last exchange row and the last finding row (0 when empty)."""
        with self._lock:
            x = self._exec("SELECT COALESCE(MAX(seq), 0) FROM exchanges").fetchone()[0]
            f = self._exec("SELECT COALESCE(MAX(seq), 0) FROM findings").fetchone()[0]
        return int(x), int(f)

    def exchange_rows_after(self, seq: int, limit: int) -> list[tuple[Any, ...]]:
        """(seq, id, tap, correlation, started_at, method, path, status, error, request body text)
        of the exchanges after row ``seq``, in row order."""
        return self._rows(
            "SELECT seq, id, tap, correlation, started_at, method, path, status, error, "
            f"{self._db.body_text('doc')} FROM exchanges WHERE seq > ? ORDER BY seq LIMIT ?",
            (seq, limit),
        )

    def finding_rows_after(self, seq: int, limit: int) -> list[tuple[Any, ...]]:
        """(seq, exchange_id, tap, rule, severity, fault, message, evidence JSON, request body text)
        of the findings after row ``seq``, in row order."""
        return self._rows(
            "SELECT f.seq, f.exchange_id, f.tap, f.rule, f.severity, f.fault, f.message, f.evidence, "
            f"{self._db.body_text('e.doc')} FROM findings f LEFT JOIN exchanges e ON e.id = f.exchange_id "
            "WHERE f.seq > ? ORDER BY f.seq LIMIT ?",
            (seq, limit),
        )

    def exchange_doc(self, exchange_id: str) -> dict[str, Any] | None:
        """One exchange in its interchange form, or None."""
        with self._lock:
            row = self._exec(
                f"SELECT seq, doc, {self._body} FROM exchanges WHERE id = ?", (exchange_id,)
            ).fetchone()
        if row is None:
            return None
        if row[2] is None:
            return dict(json.loads(row[1]))
        return dump_exchange(row_exchange(json.loads(row[1]), row[2], source=f"{self.path} row {row[0]}"))

    def recent_taps(self, limit: int) -> list[tuple[str, str | None]]:
        """(tap, correlation) of the last ``limit`` exchanges, newest first."""
        rows = self._rows("SELECT tap, correlation FROM exchanges ORDER BY seq DESC LIMIT ?", (limit,))
        return [(str(r[0]), r[1]) for r in rows]

    def unchecked(self, settle_s: float, limit: int = 500) -> list[tuple[str, str | None]]:
        """(id, correlation) of exchanges that ended at least ``settle_s`` ago and are not checked."""
        cutoff = time.time() - settle_s
        rows = self._rows(
            "SELECT e.id, e.correlation FROM checks c JOIN exchanges e ON e.seq = c.seq "
            "WHERE c.claimed_at IS NULL AND COALESCE(c.ended_at, 0) <= ? ORDER BY c.seq LIMIT ?",
            (cutoff, limit),
        )
        return [(r[0], r[1]) for r in rows]

    def to_check(self) -> int:
        """How many exchanges are not checked yet (waiting or claimed)."""
        return int(self._rows("SELECT COUNT(*) FROM checks")[0][0])

    def claim_unchecked(self, settle_s: float, limit: int = 500) -> list[tuple[str, str | None]]:
        """Like :meth:`unchecked`, but the rows are claimed for this worker (their ``checks`` row
        gets ``claimed_at``), so that several checking workers on one store never check an exchange
        twice. A claim older than ``CLAIM_TIMEOUT_S`` (its worker died) is taken over."""
        return [(i, c) for i, c, _ in self.claim_sized(settle_s, limit)]

    def claim_sized(self, settle_s: float, limit: int = 500) -> list[tuple[str, str | None, int]]:
        """:meth:`claim_unchecked`, with each row's stored size in bytes (the body of a streamed
        response, else the document: about what the exchange takes once read): what a checker holds
        at once is bounded by size, not by count (a long stream is a hundred times a short one)."""
        now = time.time()
        cutoff, stale = now - settle_s, now - CLAIM_TIMEOUT_S
        pick = (
            "SELECT seq FROM checks WHERE (claimed_at IS NULL OR claimed_at < ?) "
            "AND COALESCE(ended_at, 0) <= ? ORDER BY seq LIMIT ?"
        )
        with self._lock, self._db.tx(immediate=True):
            rows = self._db.claim(pick, now, stale, cutoff, limit)
        return [(r[0], r[1], int(r[3] or 0)) for r in rows]


def open_store(path: str | Path) -> Store:
    """Open an existing store for reading, read-only (a clear error when the file is not one; the
    file is never written)."""
    if is_postgres(path):
        return Store(path, readonly=True)
    p = Path(path)
    if not p.exists():
        raise InputError("no such store", source=str(p))
    if not is_store(p):
        raise InputError("not a wirecheck store (not an SQLite file)", source=str(p))
    return Store(p, readonly=True)


def _finding_row(f: Finding) -> tuple[str, str, str, str, str, str, str]:
    """A finding as the store's row holds it (but its seq)."""
    return (f.exchange_id, f.tap, f.rule, str(f.severity), str(f.fault), f.message, json.dumps(f.evidence))


#: record ids of the checker (contracts' RECORDS, listed in docs/rules.md)
STORE_GAP = "store-gap"
LIVE_CHECK_SKIPPED = "live-check-skipped"


def store_notes(store: Store) -> list[Finding]:
    """What a store says about its own completeness, as findings for ``check``: one ``store-gap`` per
    gap row (exchanges it could not write, with ``evidence.lost``), and the exchanges the live checker
    set aside."""
    notes = [
        Finding(
            rule=STORE_GAP,
            severity=Severity.WARNING,
            fault=Fault.UNKNOWN,
            message=f"{n} exchange(s) went through the proxy but the store could not write them "
            f"(between {first} and {last})",
            exchange_id=f"store-gap-{i}",
            tap="store",
            evidence={"pointer": "", "lost": n},
        )
        for i, (n, first, last) in enumerate(store.gaps(), 1)
    ]
    for row in store.findings(rule=LIVE_CHECK_SKIPPED, limit=100000):
        notes.append(
            Finding(
                rule=LIVE_CHECK_SKIPPED,
                severity=Severity.WARNING,
                fault=Fault.UNKNOWN,
                message=str(row["message"]),
                exchange_id=str(row["exchange_id"]),
                tap=str(row["tap"]),
                evidence=row["evidence"] if isinstance(row["evidence"], dict) else {"pointer": ""},
            )
        )
    return notes
