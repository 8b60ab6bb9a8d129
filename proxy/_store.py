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

import contextlib
import json
import os
import queue
import re
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wirecheck.contracts import Exchange, Fault, Finding, InputError, Severity, dump_exchange, load_exchange

__all__ = ["SCHEMA_VERSION", "Store", "StoreStats", "is_store", "open_store", "store_notes"]

SCHEMA_VERSION = 2
_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE exchanges (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        tap TEXT NOT NULL,
        correlation TEXT,
        started_at TEXT,
        ended_mono REAL,
        method TEXT,
        path TEXT,
        status INTEGER,
        error TEXT,
        checked INTEGER NOT NULL DEFAULT 0,
        doc TEXT NOT NULL
    );
    CREATE INDEX exchanges_correlation ON exchanges(correlation);
    CREATE INDEX exchanges_checked ON exchanges(checked, seq);
    CREATE TABLE findings (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        exchange_id TEXT NOT NULL,
        tap TEXT NOT NULL,
        rule TEXT NOT NULL,
        severity TEXT NOT NULL,
        fault TEXT NOT NULL,
        message TEXT NOT NULL,
        evidence TEXT NOT NULL
    );
    CREATE INDEX findings_exchange ON findings(exchange_id);
    CREATE TABLE gaps (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        dropped INTEGER NOT NULL,
        first_at TEXT NOT NULL,
        last_at TEXT NOT NULL
    );
    """,
    # 2: many writers: wall-clock end (monotonic clocks differ between hosts), claims, the replica
    2: """
    ALTER TABLE exchanges ADD COLUMN ended_at REAL;
    ALTER TABLE exchanges ADD COLUMN claimed_at REAL;
    ALTER TABLE exchanges ADD COLUMN replica TEXT;
    ALTER TABLE gaps ADD COLUMN replica TEXT;
    """,
}
#: the same migrations, spelled for PostgreSQL
_PG_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE exchanges (
        seq BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        tap TEXT NOT NULL,
        correlation TEXT,
        started_at TEXT,
        ended_mono DOUBLE PRECISION,
        method TEXT,
        path TEXT,
        status INTEGER,
        error TEXT,
        checked INTEGER NOT NULL DEFAULT 0,
        doc TEXT NOT NULL
    );
    CREATE INDEX exchanges_correlation ON exchanges(correlation);
    CREATE INDEX exchanges_checked ON exchanges(checked, seq);
    CREATE TABLE findings (
        seq BIGSERIAL PRIMARY KEY,
        exchange_id TEXT NOT NULL,
        tap TEXT NOT NULL,
        rule TEXT NOT NULL,
        severity TEXT NOT NULL,
        fault TEXT NOT NULL,
        message TEXT NOT NULL,
        evidence TEXT NOT NULL
    );
    CREATE INDEX findings_exchange ON findings(exchange_id);
    CREATE TABLE gaps (
        seq BIGSERIAL PRIMARY KEY,
        dropped INTEGER NOT NULL,
        first_at TEXT NOT NULL,
        last_at TEXT NOT NULL
    );
    """,
    2: """
    ALTER TABLE exchanges ADD COLUMN ended_at DOUBLE PRECISION;
    ALTER TABLE exchanges ADD COLUMN claimed_at DOUBLE PRECISION;
    ALTER TABLE exchanges ADD COLUMN replica TEXT;
    ALTER TABLE gaps ADD COLUMN replica TEXT;
    """,
}
_COLUMNS = "id, tap, correlation, started_at, ended_mono, ended_at, replica, method, path, status, error, doc"
#: one spelling for both backends (SQLite >= 3.24): a re-written id keeps its row and place, and is
#: checked again
_UPSERT = (
    f"INSERT INTO exchanges({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS.split(", ")[1:])
    + ", checked = 0"
)
#: a claim left by a checking worker that died is taken over after this long
CLAIM_TIMEOUT_S = 60.0
_SQLITE_MAGIC = b"SQLite format 3\x00"


def is_postgres(path: str | Path) -> bool:
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """A connection URL without its password, for messages and evidence."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def is_store(path: str | Path) -> bool:
    if is_postgres(path):
        return True
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == _SQLITE_MAGIC
    except OSError:
        return False


def _connect(path: str, *, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        # read-only at the SQLite level (issue 11, point 7): reading never migrates, never switches the
        # journal mode, never adds a table; the URI form keeps odd characters in the path literal
        # A WAL database opened with mode=ro still gets a -wal and -shm file created beside it. With
        # no -wal file there, no connection has the database open in WAL mode and nothing is left
        # un-checkpointed, so it is read as immutable (no locks, no side files); with one, a writer
        # may be live, and mode=ro reads its WAL through the -shm it keeps.
        target = Path(path).resolve()
        live = Path(f"{target}-wal").exists()
        uri = target.as_uri() + ("?mode=ro" if live else "?mode=ro&immutable=1")
        conn = sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=10000")
        return conn
    conn = sqlite3.connect(path, timeout=10, check_same_thread=False, isolation_level=None)
    try:
        _refuse_foreign(conn, path)  # before WAL: switching the journal mode writes the file
    except BaseException:
        conn.close()
        raise
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=10000")
    return conn


def _refuse_foreign(conn: sqlite3.Connection, name: str) -> None:
    """Another program's database (tables, but not wirecheck's schema) is never written to."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise InputError(
            f"store schema version {version} is newer than this wirecheck ({SCHEMA_VERSION})", source=name
        )
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if (version == 0 and tables) or (version > 0 and "exchanges" not in tables):
        raise InputError(
            "not a wirecheck store: an SQLite database with other tables (left as it is)", source=name
        )


def _check_readable(conn: sqlite3.Connection, name: str) -> None:
    """A store opened for reading must already be a wirecheck store: anything else is bad input."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if version == 0 or not {"exchanges", "gaps", "findings"} <= tables:
        raise InputError(
            "not a wirecheck store: an SQLite database without wirecheck's tables (left as it is)",
            source=name,
        )
    if version > SCHEMA_VERSION:
        raise InputError(
            f"store schema version {version} is newer than this wirecheck ({SCHEMA_VERSION})", source=name
        )


def _migrate(conn: sqlite3.Connection, name: str) -> None:
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise InputError(
            f"store schema version {version} is newer than this wirecheck ({SCHEMA_VERSION})", source=name
        )
    for v in range(version + 1, SCHEMA_VERSION + 1):
        # one transaction per step: a crash mid-migration leaves the previous version intact
        try:
            conn.executescript(f"BEGIN IMMEDIATE;\n{_MIGRATIONS[v]}\nPRAGMA user_version={v};\nCOMMIT;")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _connect_pg(url: str) -> Any:
    try:
        import psycopg
    except ImportError:
        raise InputError(
            "a PostgreSQL store needs psycopg 3: pip install 'wirecheck[postgres]'", source=redact_url(url)
        ) from None
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise InputError(
            f"cannot connect to the PostgreSQL store ({str(exc).strip()})", source=redact_url(url)
        ) from None


def _migrate_pg(conn: Any, name: str) -> None:
    with conn.transaction():
        # one migrator at a time: replicas that start together must not race on the DDL
        conn.execute("SELECT pg_advisory_xact_lock(7303730373)")
        conn.execute("CREATE TABLE IF NOT EXISTS wirecheck_schema (version INTEGER NOT NULL)")
        row = conn.execute("SELECT version FROM wirecheck_schema").fetchone()
        version = row[0] if row else 0
        if row is None:
            conn.execute("INSERT INTO wirecheck_schema(version) VALUES (0)")
        if version > SCHEMA_VERSION:
            raise InputError(
                f"store schema version {version} is newer than this wirecheck ({SCHEMA_VERSION})", source=name
            )
        for v in range(version + 1, SCHEMA_VERSION + 1):
            for stmt in (x.strip() for x in _PG_MIGRATIONS[v].split(";")):
                if stmt:
                    conn.execute(stmt)
            conn.execute("UPDATE wirecheck_schema SET version = %s", (v,))


def _check_readable_pg(conn: Any, name: str) -> None:
    """Reading a PostgreSQL store runs no DDL: the session is read-only and the schema must be there."""
    conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    if conn.execute("SELECT to_regclass('wirecheck_schema')").fetchone()[0] is None:
        raise InputError("not a wirecheck store: the database has no wirecheck tables", source=name)
    row = conn.execute("SELECT version FROM wirecheck_schema").fetchone()
    version = row[0] if row else 0
    if version == 0:
        raise InputError("not a wirecheck store: its schema was never created", source=name)
    if version > SCHEMA_VERSION:
        raise InputError(
            f"store schema version {version} is newer than this wirecheck ({SCHEMA_VERSION})", source=name
        )


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
        self.url = str(path)
        self.path = redact_url(self.url) if self.pg else str(path)
        self.readonly = readonly
        self.replica = _replica()
        self.stats = StoreStats()
        if self.pg:
            self._conn = _connect_pg(self.url)
            try:
                if readonly:
                    _check_readable_pg(self._conn, self.path)
                else:
                    _migrate_pg(self._conn, self.path)
            except BaseException:
                self._conn.close()
                raise
        else:
            try:
                self._conn = _connect(self.path, readonly=readonly)
                try:
                    if readonly:
                        _check_readable(self._conn, self.path)
                    else:
                        _migrate(self._conn, self.path)
                except BaseException:
                    self._conn.close()
                    raise
            except sqlite3.DatabaseError as exc:
                raise InputError(f"not a usable wirecheck store ({exc})", source=self.path) from None
        self._lock = threading.Lock()
        self._queue: queue.Queue[Exchange | None] = queue.Queue(maxsize=queue_size)
        self._batch = batch_size
        self._retries = max(1, retries)
        self._gap: list[Any] = []  # [count, first, last] of drops not yet written
        self._gap_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if writer:
            self._thread = threading.Thread(target=self._run, name="wirecheck-store-writer", daemon=True)
            self._thread.start()

    # --- the request path ------------------------------------------------------------------------

    def put(self, ex: Exchange) -> bool:
        """Queue an exchange for writing; never blocks. False when it was dropped (queue full)."""
        try:
            self._queue.put_nowait(ex)
            self.stats.queued += 1
            return True
        except queue.Full:
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
        stop = False
        while not stop:
            try:
                first = self._queue.get(timeout=0.2)
            except queue.Empty:
                self._write_safely([])
                continue
            taken = 1
            batch: list[Exchange] = []
            if first is None:
                stop = True
            else:
                batch.append(first)
            while len(batch) < self._batch and not stop:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                taken += 1
                if item is None:
                    stop = True
                else:
                    batch.append(item)
            try:
                self._write_safely(batch, stopping=stop)
            finally:
                for _ in range(taken):
                    self._queue.task_done()

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
                return
            except Exception as exc:  # any database error: retry, then account for it
                self.stats.last_error = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
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
            # the last chance: the process ends and the gap row could not be written either (issue
            # 11, point 6); say it where an operator looks rather than lose it silently
            print(
                f"wirecheck store: {pending} exchange(s) could not be written to {self.path} and are lost"
                f" ({self.stats.last_error})",
                file=sys.stderr,
                flush=True,
            )

    def _reconnect(self) -> None:
        with self._lock:
            with contextlib.suppress(Exception):  # the old connection is already broken
                self._conn.close()
            with contextlib.suppress(InputError, sqlite3.Error):  # still down: the next attempt retries
                self._conn = _connect_pg(self.url) if self.pg else _connect(self.path)

    # --- SQL on either backend --------------------------------------------------------------------

    def _q(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.pg else sql

    def _exec(self, sql: str, args: tuple[Any, ...] | list[Any] = ()) -> Any:
        return self._conn.execute(self._q(sql), args)

    @contextlib.contextmanager
    def _tx(self, immediate: bool = False) -> Iterator[None]:
        """One transaction (call with ``self._lock`` held)."""
        if self.pg:
            with self._conn.transaction():
                yield
            return
        self._conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield
        except BaseException:
            # SQLITE_FULL (a full disk) rolls the transaction back itself: a second ROLLBACK would
            # raise "no transaction is active" and hide the real error (issue 11, point 6)
            if self._conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if not rows:
            return
        if self.pg:
            with self._conn.cursor() as cur:
                cur.executemany(self._q(sql), rows)
        else:
            self._conn.executemany(sql, rows)

    def _write(self, batch: list[Exchange]) -> None:
        with self._gap_lock:
            gap, self._gap = self._gap, []
        if not batch and not gap:
            return
        try:
            with self._lock, self._tx():
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
        rows = []
        now = time.time()
        for ex in batch:
            doc = dump_exchange(ex)
            ended = ex.extra.get("_ended_mono")
            doc.pop("_ended_mono", None)
            rows.append(
                (
                    ex.id,
                    ex.tap,
                    ex.correlation,
                    ex.started_at,
                    ended if ended is not None else time.monotonic(),
                    now if ended is None else now - max(time.monotonic() - ended, 0.0),
                    self.replica,
                    ex.request.method,
                    doc["request"]["path"],  # redacted like the doc (issue 11 point 4)
                    ex.response.status if ex.response else None,
                    ex.error.kind if ex.error else None,
                    json.dumps(doc, ensure_ascii=False, separators=(",", ":")),
                )
            )
        self._many(_UPSERT, rows)

    def write_now(self, exchanges: Iterable[Exchange]) -> None:
        """Write synchronously (imports, tests), bypassing the queue."""
        with self._lock, self._tx():
            self._insert(exchanges)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything queued so far is written."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and self._thread is not None and self._thread.is_alive():
            if time.monotonic() > deadline:
                break
            time.sleep(0.005)
        if self._thread is None:
            self._write([])

    def close(self) -> None:
        """Flush every queued exchange and close (what SIGTERM does)."""
        if self._thread is not None and self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout=60)
        if not self.readonly:
            self._write_safely([], stopping=True)
        with self._lock:
            self._conn.close()

    # --- reading ---------------------------------------------------------------------------------

    def exchanges(self, *, where: str = "", args: tuple[Any, ...] = ()) -> Iterator[Exchange]:
        """Every exchange in write order; ``where`` is SQL with ``?`` placeholders (either backend)."""
        with self._lock:
            rows = self._exec(f"SELECT seq, doc FROM exchanges {where} ORDER BY seq", args).fetchall()
        for seq, doc in rows:
            yield load_exchange(json.loads(doc), source=self.path, line=seq)

    def exchanges_for(self, ids: list[str], correlations: list[str]) -> list[Exchange]:
        """The exchanges with these ids, and every exchange sharing one of these correlations."""
        if not ids and not correlations:
            return []
        marks_i = ",".join("?" * len(ids)) or "NULL"
        marks_c = ",".join("?" * len(correlations)) or "NULL"
        return list(
            self.exchanges(
                where=f"WHERE id IN ({marks_i}) OR correlation IN ({marks_c})", args=(*ids, *correlations)
            )
        )

    def count(self) -> int:
        with self._lock:
            return int(self._exec("SELECT COUNT(*) FROM exchanges").fetchone()[0])

    def replicas(self) -> dict[str, int]:
        """How many exchanges each writer (host:pid) wrote."""
        with self._lock:
            rows = self._exec(
                "SELECT COALESCE(replica, ''), COUNT(*) FROM exchanges GROUP BY replica"
            ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    def gap_unwritten(self) -> int:
        """Exchanges lost and counted, whose gap row is not in the database yet (it is written as
        soon as the database takes writes again: issue 11, point 6)."""
        with self._gap_lock:
            return int(self._gap[0]) if self._gap else 0

    def gaps(self) -> list[tuple[int, str, str]]:
        with self._lock:
            return [
                (int(r[0]), str(r[1]), str(r[2]))
                for r in self._exec("SELECT dropped, first_at, last_at FROM gaps ORDER BY seq").fetchall()
            ]

    def add_findings(self, findings: Iterable[Finding], checked_ids: Iterable[str]) -> None:
        rows = [
            (f.exchange_id, f.tap, f.rule, str(f.severity), str(f.fault), f.message, json.dumps(f.evidence))
            for f in findings
        ]
        with self._lock, self._tx(immediate=True):
            self._many(
                "INSERT INTO findings(exchange_id, tap, rule, severity, fault, message, evidence) VALUES (?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            self._many("UPDATE exchanges SET checked = 1 WHERE id = ?", [(i,) for i in checked_ids])

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
        with self._lock:
            return [
                (str(r[0]), str(r[1]), str(r[2]), int(r[3]))
                for r in self._exec(
                    "SELECT rule, fault, severity, COUNT(*) FROM findings GROUP BY rule, fault, severity"
                ).fetchall()
            ]

    # --- reading for the live view (issue 18): plain SELECTs from a row position -----------------

    def positions(self) -> tuple[int, int]:
        """The last exchange row and the last finding row (0 when empty)."""
        with self._lock:
            x = self._exec("SELECT COALESCE(MAX(seq), 0) FROM exchanges").fetchone()[0]
            f = self._exec("SELECT COALESCE(MAX(seq), 0) FROM findings").fetchone()[0]
        return int(x), int(f)

    def exchange_rows_after(self, seq: int, limit: int) -> list[tuple[Any, ...]]:
        """(seq, id, tap, correlation, started_at, method, path, status, error, request body text)
        of the exchanges after row ``seq``, in row order."""
        with self._lock:
            return list(
                self._exec(
                    "SELECT seq, id, tap, correlation, started_at, method, path, status, error, "
                    f"{self._body_text('doc')} FROM exchanges WHERE seq > ? ORDER BY seq LIMIT ?",
                    (seq, limit),
                ).fetchall()
            )

    def finding_rows_after(self, seq: int, limit: int) -> list[tuple[Any, ...]]:
        """(seq, exchange_id, tap, rule, severity, fault, message, evidence JSON, request body text)
        of the findings after row ``seq``, in row order."""
        with self._lock:
            return list(
                self._exec(
                    "SELECT f.seq, f.exchange_id, f.tap, f.rule, f.severity, f.fault, f.message, f.evidence, "
                    f"{self._body_text('e.doc')} FROM findings f LEFT JOIN exchanges e ON e.id = f.exchange_id "
                    "WHERE f.seq > ? ORDER BY f.seq LIMIT ?",
                    (seq, limit),
                ).fetchall()
            )

    def _body_text(self, doc: str) -> str:
        # the request body only, not the whole document (responses with their chunks are the bulk)
        if self.pg:
            return f"(({doc})::json -> 'request' ->> 'body_text')"
        return f"json_extract({doc}, '$.request.body_text')"

    def exchange_doc(self, exchange_id: str) -> dict[str, Any] | None:
        """One exchange in its interchange form, or None."""
        with self._lock:
            row = self._exec("SELECT doc FROM exchanges WHERE id = ?", (exchange_id,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def recent_taps(self, limit: int) -> list[tuple[str, str | None]]:
        """(tap, correlation) of the last ``limit`` exchanges, newest first."""
        with self._lock:
            return [
                (str(r[0]), r[1])
                for r in self._exec(
                    "SELECT tap, correlation FROM exchanges ORDER BY seq DESC LIMIT ?", (limit,)
                ).fetchall()
            ]

    def unchecked(self, settle_s: float, limit: int = 500) -> list[tuple[str, str | None]]:
        """(id, correlation) of exchanges that ended at least ``settle_s`` ago and are not checked."""
        cutoff = time.time() - settle_s
        with self._lock:
            return [
                (r[0], r[1])
                for r in self._exec(
                    "SELECT id, correlation FROM exchanges WHERE checked = 0 AND COALESCE(ended_at, 0) <= ? ORDER BY seq LIMIT ?",
                    (cutoff, limit),
                ).fetchall()
            ]

    def claim_unchecked(self, settle_s: float, limit: int = 500) -> list[tuple[str, str | None]]:
        """Like :meth:`unchecked`, but the rows are claimed for this worker (``checked = 2``), so that
        several checking workers on one store never check an exchange twice. A claim older than
        ``CLAIM_TIMEOUT_S`` (its worker died) is taken over."""
        now = time.time()
        cutoff, stale = now - settle_s, now - CLAIM_TIMEOUT_S
        pick = (
            "SELECT id FROM exchanges WHERE (checked = 0 OR (checked = 2 AND claimed_at < ?)) "
            "AND COALESCE(ended_at, 0) <= ? ORDER BY seq LIMIT ?"
        )
        with self._lock, self._tx(immediate=True):
            if self.pg:
                rows = self._exec(
                    f"UPDATE exchanges SET checked = 2, claimed_at = ? WHERE id IN ({pick} FOR UPDATE SKIP LOCKED) "
                    "RETURNING id, correlation, seq",
                    (now, stale, cutoff, limit),
                ).fetchall()
                rows.sort(key=lambda r: r[2])
            else:
                rows = self._exec(
                    pick.replace("SELECT id", "SELECT id, correlation"), (stale, cutoff, limit)
                ).fetchall()
                self._conn.executemany(
                    "UPDATE exchanges SET checked = 2, claimed_at = ? WHERE id = ?",
                    [(now, r[0]) for r in rows],
                )
        return [(r[0], r[1]) for r in rows]


def open_store(path: str | Path) -> Store:
    """Open an existing store for reading, read-only (a clear error when the file is not one; the
    file is never written: issue 11, point 7)."""
    if is_postgres(path):
        return Store(path, readonly=True)
    p = Path(path)
    if not p.exists():
        raise InputError("no such store", source=str(p))
    if not is_store(p):
        raise InputError("not a wirecheck store (not an SQLite file)", source=str(p))
    return Store(p, readonly=True)


#: record ids of the checker (contracts' RECORDS, listed in docs/rules.md)
STORE_GAP = "store-gap"
LIVE_CHECK_SKIPPED = "live-check-skipped"


def store_notes(store: Store) -> list[Finding]:
    """What a store says about its own completeness, as findings for ``check``: one ``store-gap`` per
    gap row (exchanges it could not write, with ``evidence.lost``), and the exchanges the live checker
    set aside (issue 11, points 3 and 6)."""
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
