"""The PostgreSQL backend of the store: one database shared by many proxy replicas and checking
workers (psycopg 3, ``pip install 'wirecheck[postgres]'``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from wirecheck.contracts import DEFAULT_REDACTION, InputError

from ._backend import MIGRATIONS, SCHEMA_VERSION, pg_spelling, too_new

__all__ = ["PostgresBackend", "dsn_secrets", "is_postgres", "redact_url"]

#: libpq's connection parameters that hold a secret, besides those the redaction policy names
_SECRET_PARAMS = frozenset({"password", "sslpassword"})
_MASK = "[redacted]"


def is_postgres(path: object) -> bool:
    return isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))


def redact_url(url: str) -> str:
    """A connection URL without its secrets, for messages, health and evidence: the password of
    ``user:PW@`` (also with no user: ``:PW@``) and of ``?password=`` become ``[redacted]``. A URL that
    does not parse shows its scheme only."""
    try:
        u = urlsplit(url)
        u.port  # noqa: B018 - a bad port raises here, not in urlsplit
    except ValueError:
        return url.split("://", 1)[0] + "://" + _MASK if "://" in url else _MASK
    netloc = u.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        netloc = f"{user}{':' + _MASK if colon else ''}@{host}"
    query = "&".join(
        f"{k}={_MASK}" if k.lower() in _SECRET_PARAMS or DEFAULT_REDACTION.is_secret_query_key(k) else part
        for part in u.query.split("&")
        if part
        for k in [unquote(part.partition("=")[0])]
    )
    return urlunsplit((u.scheme, netloc, u.path, query, u.fragment))


def dsn_secrets(url: str) -> list[str]:
    """The secret values in a connection URL (as written and percent-decoded), to scrub from any
    text that might quote them (a driver's error message)."""
    found: set[str] = set()
    try:
        u = urlsplit(url)
    except ValueError:
        return [url]  # cannot tell the parts apart: the whole of it is the secret
    userinfo = u.netloc.rpartition("@")[0]
    if ":" in userinfo:
        found.add(userinfo.partition(":")[2])
    for k, v in parse_qsl(u.query, keep_blank_values=False):
        if k.lower() in _SECRET_PARAMS or DEFAULT_REDACTION.is_secret_query_key(k):
            found.add(v)
    found |= {unquote(x) for x in found}
    return sorted((x for x in found if len(x) >= 1), key=len, reverse=True)


def _scrubbed(text: str, url: str) -> str:
    for secret in dsn_secrets(url):
        text = text.replace(secret, _MASK)
    return text


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
            f"cannot connect to the PostgreSQL store ({_scrubbed(str(exc).strip(), url)})",
            source=redact_url(url),
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

    def serialize_amends(self) -> None:
        self.conn.execute("SELECT pg_advisory_xact_lock(7303730374)")  # the migration's is ...73

    def claim(self, pick: str, now: float, stale: float, cutoff: float, limit: int) -> list[tuple[Any, ...]]:
        rows = self.conn.execute(
            self.q(
                f"UPDATE checks c SET claimed_at = ? FROM exchanges e WHERE e.seq = c.seq AND c.seq IN "
                f"({pick} FOR UPDATE SKIP LOCKED) RETURNING e.id, e.correlation, c.seq, "
                # as SQLite's (the body, else the document); octet_length reads a stored value's size
                # from its TOAST pointer, without the value
                "COALESCE(octet_length(e.body), octet_length(e.doc))"
            ),
            (now, stale, cutoff, limit),
        ).fetchall()
        rows.sort(key=lambda r: r[2])
        return [(r[0], r[1], r[2], r[3]) for r in rows]
