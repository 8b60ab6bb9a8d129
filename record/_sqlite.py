"""The SQLite backend of the store: one file in WAL mode, embedded, the default."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wirecheck.contracts import InputError

from ._backend import MIGRATIONS, SCHEMA_VERSION, too_new

__all__ = ["SQLITE_MAGIC", "SqliteBackend", "connect"]

SQLITE_MAGIC = b"SQLite format 3\x00"


def connect(path: str, *, readonly: bool = False) -> sqlite3.Connection:
    if readonly:
        # read-only at the SQLite level: reading never migrates, never switches the
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


def _version(conn: sqlite3.Connection, name: str) -> int:
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if (err := too_new(version, name)) is not None:
        raise err
    return version


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _refuse_foreign(conn: sqlite3.Connection, name: str) -> None:
    """Another program's database (tables, but not wirecheck's schema) is never written to."""
    version = _version(conn, name)
    tables = _tables(conn)
    if (version == 0 and tables) or (version > 0 and "exchanges" not in tables):
        raise InputError(
            "not a wirecheck store: an SQLite database with other tables (left as it is)", source=name
        )


def _check_readable(conn: sqlite3.Connection, name: str) -> None:
    """A store opened for reading must already be a wirecheck store: anything else is bad input."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version == 0 or not {"exchanges", "gaps", "findings"} <= _tables(conn):
        raise InputError(
            "not a wirecheck store: an SQLite database without wirecheck's tables (left as it is)",
            source=name,
        )
    _version(conn, name)


def _migrate(conn: sqlite3.Connection, name: str) -> None:
    for v in range(_version(conn, name) + 1, SCHEMA_VERSION + 1):
        # one transaction per step: a crash mid-migration leaves the previous version intact
        try:
            conn.executescript(f"BEGIN IMMEDIATE;\n{MIGRATIONS[v]}\nPRAGMA user_version={v};\nCOMMIT;")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


class SqliteBackend:
    """An SQLite store file, opened for writing (migrated to the current schema) or read-only."""

    def __init__(self, path: str, *, readonly: bool) -> None:
        self.path = path
        try:
            self.conn = connect(path, readonly=readonly)
            try:
                (_check_readable if readonly else _migrate)(self.conn, path)
            except BaseException:
                self.conn.close()
                raise
        except sqlite3.DatabaseError as exc:
            raise InputError(f"not a usable wirecheck store ({exc})", source=path) from None

    def q(self, sql: str) -> str:
        return sql

    @contextlib.contextmanager
    def tx(self, immediate: bool = False) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield
        except BaseException:
            # SQLITE_FULL (a full disk) rolls the transaction back itself: a second ROLLBACK would
            # raise "no transaction is active" and hide the real error
            if self.conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            self.conn.executemany(sql, rows)

    def reconnect(self) -> None:
        with contextlib.suppress(Exception):  # the old connection is already broken
            self.conn.close()
        with contextlib.suppress(InputError, sqlite3.Error):  # still down: the next attempt retries
            self.conn = connect(self.path)

    def body_text(self, doc: str) -> str:
        return f"json_extract({doc}, '$.request.body_text')"

    def serialize_amends(self) -> None:
        """A writing transaction here is already the only one (``BEGIN IMMEDIATE``)."""

    def claim(self, pick: str, now: float, stale: float, cutoff: float, limit: int) -> list[tuple[Any, ...]]:
        # the row's size: its body's bytes (a blob's length is in its header) where it has one (a
        # streamed response; its document is then the small part), else its document's characters
        rows = self.conn.execute(
            "SELECT e.id, e.correlation, e.seq, COALESCE(length(e.body), length(e.doc)) "
            f"FROM exchanges e WHERE e.seq IN ({pick}) ORDER BY e.seq",
            (stale, cutoff, limit),
        ).fetchall()
        seqs = [r[2] for r in rows]
        for k in range(0, len(seqs), 250):  # a group a statement: one a row took 0.9-1.3 us, 0.3 so
            group = seqs[k : k + 250]
            self.conn.execute(
                f"UPDATE checks SET claimed_at = ? WHERE seq IN ({','.join('?' * len(group))})", (now, *group)
            )
        return list(rows)
