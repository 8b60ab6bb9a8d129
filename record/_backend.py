"""What the store needs of a database: one schema (numbered migrations, spelled once), and the
backend protocol that SQLite and PostgreSQL each implement (the store was one class with a
branch per backend at every query)."""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from typing import Any, Protocol

from wirecheck.contracts import InputError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "Backend", "pg_spelling", "too_new"]

SCHEMA_VERSION = 4
#: the schema in SQLite's spelling; :func:`pg_spelling` gives PostgreSQL's (the same tables)
MIGRATIONS: dict[int, str] = {
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
    # 3: a response recorded chunk by chunk keeps its bytes in ``body`` (record/_rows.py); the live
    # checker lists the exchanges around each batch by start time, which scanned the whole table in
    # every batch: with what it reads in the index, the index alone answers
    3: """
    ALTER TABLE exchanges ADD COLUMN body BLOB;
    CREATE INDEX exchanges_started ON exchanges(started_at, id, ended_at);
    """,
    # 4: the exchanges still to check are rows of a narrow table of their own (an exchange is checked
    # when it has none). Claiming and marking an exchange checked rewrote its whole row, document
    # and body, twice, and the index on ``checked`` with each write: at 500 a batch, about 2 MB of
    # pages a batch, and 20 us of the checker's CPU an exchange where the narrow rows take 2
    4: """
    CREATE TABLE checks (
        seq INTEGER PRIMARY KEY,
        ended_at REAL,
        claimed_at REAL
    );
    INSERT INTO checks(seq, ended_at, claimed_at)
        SELECT seq, ended_at, CASE WHEN checked = 2 THEN claimed_at END FROM exchanges WHERE checked <> 1;
    DROP INDEX exchanges_checked;
    ALTER TABLE exchanges DROP COLUMN checked;
    ALTER TABLE exchanges DROP COLUMN claimed_at;
    """,
}


def pg_spelling(ddl: str) -> str:
    """A migration in PostgreSQL's spelling: 64-bit serial keys, double-precision reals."""
    ddl = ddl.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY")
    # a row's own key in SQLite (its rowid) is one exchange's seq: 64 bits in PostgreSQL as well
    ddl = ddl.replace("seq INTEGER PRIMARY KEY,", "seq BIGINT PRIMARY KEY,")
    return re.sub(r"\bREAL\b", "DOUBLE PRECISION", ddl).replace(" BLOB", " BYTEA")


def too_new(version: int, name: str) -> InputError | None:
    """The error for a store written by a newer wirecheck (never migrated down, never written)."""
    if version > SCHEMA_VERSION:
        return InputError(
            f"store schema version {version} is newer than this wirecheck ({SCHEMA_VERSION})", source=name
        )
    return None


class Backend(Protocol):
    """One open database behind a :class:`~wirecheck.record.Store` (always called with the store's
    lock held). SQL is written once with ``?`` placeholders; :meth:`q` respells it."""

    conn: Any
    #: the store's name in messages and evidence (a PostgreSQL URL without its password)
    path: str

    def q(self, sql: str) -> str: ...

    def tx(self, immediate: bool = False) -> AbstractContextManager[None]: ...

    def many(self, sql: str, rows: list[tuple[Any, ...]]) -> None: ...

    def reconnect(self) -> None: ...

    def body_text(self, doc: str) -> str: ...

    def serialize_amends(self) -> None:
        """Within a writing transaction: wait for any other process's amendment of findings to
        commit (two checkers that judge one partner again must not both add what it lacked)."""
        ...

    def claim(self, pick: str, now: float, stale: float, cutoff: float, limit: int) -> list[tuple[Any, ...]]:
        """Claim the rows ``pick`` selects: (id, correlation, seq, stored size) of each, by seq."""
        ...
