"""The PostgreSQL backend of the store: one database shared by many proxy replicas and checking
workers (psycopg 3, ``pip install 'wirecheck[postgres]'``)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from wirecheck.contracts import InputError

from ._backend import MIGRATIONS, SCHEMA_VERSION, pg_spelling, too_new

__all__ = ["PostgresBackend", "is_postgres", "redact_url"]


def is_postgres(path: object) -> bool:
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """A connection URL without its password, for messages and evidence."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


def _connect(url: str) -> Any:
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


def _schema_version(conn: Any, name: str) -> int:
    row = conn.execute("SELECT version FROM wirecheck_schema").fetchone()
    version = int(row[0]) if row else 0
    if (err := too_new(version, name)) is not None:
        raise err
    return version


def _migrate(conn: Any, name: str) -> None:
    with conn.transaction():
        # one migrator at a time: replicas that start together must not race on the DDL
        conn.execute("SELECT pg_advisory_xact_lock(7303730373)")
        conn.execute("CREATE TABLE IF NOT EXISTS wirecheck_schema (version INTEGER NOT NULL)")
        if conn.execute("SELECT version FROM wirecheck_schema").fetchone() is None:
            conn.execute("INSERT INTO wirecheck_schema(version) VALUES (0)")
        for v in range(_schema_version(conn, name) + 1, SCHEMA_VERSION + 1):
            for stmt in (x.strip() for x in pg_spelling(MIGRATIONS[v]).split(";")):
                if stmt:
                    conn.execute(stmt)
            conn.execute("UPDATE wirecheck_schema SET version = %s", (v,))


def _check_readable(conn: Any, name: str) -> None:
    """Reading a PostgreSQL store runs no DDL: the session is read-only and the schema must be there."""
    conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    if conn.execute("SELECT to_regclass('wirecheck_schema')").fetchone()[0] is None:
        raise InputError("not a wirecheck store: the database has no wirecheck tables", source=name)
    if _schema_version(conn, name) == 0:
        raise InputError("not a wirecheck store: its schema was never created", source=name)


class PostgresBackend:
    """A PostgreSQL store, opened for writing (migrated under an advisory lock) or read-only."""

    def __init__(self, url: str, *, readonly: bool) -> None:
        self.url, self.path = url, redact_url(url)
        self.conn = _connect(url)
        try:
            (_check_readable if readonly else _migrate)(self.conn, self.path)
        except BaseException:
            self.conn.close()
            raise

    def q(self, sql: str) -> str:
        return sql.replace("?", "%s")

    @contextlib.contextmanager
    def tx(self, immediate: bool = False) -> Iterator[None]:
        with self.conn.transaction():
            yield

    def many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(self.q(sql), rows)

    def reconnect(self) -> None:
        with contextlib.suppress(Exception):  # the old connection is already broken
            self.conn.close()
        with contextlib.suppress(InputError):  # still down: the next attempt retries
            self.conn = _connect(self.url)

    def body_text(self, doc: str) -> str:
        return f"(({doc})::json -> 'request' ->> 'body_text')"

    def claim(self, pick: str, now: float, stale: float, cutoff: float, limit: int) -> list[tuple[Any, ...]]:
        rows = self.conn.execute(
            self.q(
                f"UPDATE exchanges SET checked = 2, claimed_at = ? WHERE id IN ({pick} FOR UPDATE SKIP LOCKED) "
                "RETURNING id, correlation, seq"
            ),
            (now, stale, cutoff, limit),
        ).fetchall()
        rows.sort(key=lambda r: r[2])
        return [(r[0], r[1]) for r in rows]
