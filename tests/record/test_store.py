"""The SQLite store: versioned schema, batch writer, overflow accounting, crash safety."""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.support.servers import process
from wirecheck.contracts import Chunk, Exchange, HttpRequest, HttpResponse, InputError, dump_exchange
from wirecheck.record import SCHEMA_VERSION, Store, open_store
from wirecheck.record._backend import MIGRATIONS


def ex(i: int) -> Exchange:
    return Exchange(
        id=f"e{i}",
        tap="caller",
        correlation=f"c{i}",
        request=HttpRequest(body=b'{"messages": []}'),
        response=HttpResponse(200, [("content-type", "application/json")], b"{}"),
    )


def test_roundtrip_and_schema_version(tmp_path: Path) -> None:
    s = Store(tmp_path / "a.db", writer=True)
    for i in range(10):
        assert s.put(ex(i))
    s.close()
    r = open_store(tmp_path / "a.db")
    assert [e.id for e in r.exchanges()] == [f"e{i}" for i in range(10)]
    r.close()
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_full_queue_drops_counts_and_records_the_gap(tmp_path: Path) -> None:
    s = Store(tmp_path / "b.db", writer=True, queue_size=3)
    with s._lock:  # the disk is stuck: the writer cannot take its batch
        time.sleep(0.05)
        results = [s.put(ex(i)) for i in range(10)]
    s.close()
    kept = results.count(True)
    assert results.count(False) == s.stats.dropped > 0
    r = open_store(tmp_path / "b.db")
    assert r.count() == kept
    [(dropped, first, last)] = r.gaps()
    assert dropped == s.stats.dropped and first <= last
    r.close()


def test_unusable_files_are_clear_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_text("not sqlite")
    with pytest.raises(InputError, match="not a wirecheck store"):
        open_store(junk)
    with pytest.raises(InputError, match="no such store"):
        open_store(tmp_path / "missing.db")
    newer = tmp_path / "newer.db"
    sqlite3.connect(newer).execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(InputError, match="newer than this wirecheck"):
        Store(newer)


WRITER = textwrap.dedent(
    """
    import sys, time
    from wirecheck.contracts import Exchange, HttpRequest, HttpResponse
    from wirecheck.record import Store
    s = Store(sys.argv[1], writer=True, batch_size=50)
    i = 0
    while True:
        s.put(Exchange(id=f"e{i}", request=HttpRequest(body=b"x" * 2000), response=HttpResponse(200, [], b"y" * 2000)))
        i += 1
        if i % 100 == 0:
            print(i, flush=True)
            time.sleep(0.001)
    """
)


def _rows(db: Path) -> int:
    """The rows committed to ``db`` so far (0 before its table exists)."""
    try:
        with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
            return int(conn.execute("SELECT count(*) FROM exchanges").fetchone()[0])
    except sqlite3.OperationalError:  # the writer has not created the table yet
        return 0


def test_sigkill_mid_write_never_corrupts_the_store(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    with process([sys.executable, "-c", WRITER, str(db)]) as proc:
        assert proc.stdout is not None
        for _ in range(30):  # let it queue a few thousand exchanges
            proc.stdout.readline()
        # and commit some (the writer lingers for a batch), then kill it while it writes the rest
        deadline = time.monotonic() + 60
        while _rows(db) <= 100:
            assert time.monotonic() < deadline, "the writer committed nothing in 60 s"
            proc.stdout.readline()
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = conn.execute("SELECT doc FROM exchanges").fetchall()
    assert len(rows) > 100
    assert all(json.loads(d)["response"]["status"] == 200 for (d,) in rows)
    conn.close()
    r = open_store(db)
    ids = [e.id for e in r.exchanges()]
    assert ids == [f"e{i}" for i in range(len(ids))]  # a prefix: whole batches only
    r.close()


def test_a_store_of_schema_3_keeps_what_was_left_to_check(tmp_path: Path) -> None:
    # schema 4 moved "checked" and "claimed_at" out of the exchanges row into the checks table
    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for v in (1, 2, 3):
        conn.executescript(f"BEGIN;\n{MIGRATIONS[v]}\nPRAGMA user_version={v};\nCOMMIT;")
    now = time.time()
    for i, (checked, claimed_at) in enumerate([(0, None), (1, None), (2, now)]):
        doc = dump_exchange(ex(i))
        conn.execute(
            "INSERT INTO exchanges(id, tap, correlation, ended_at, checked, claimed_at, doc) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (f"e{i}", "caller", f"c{i}", now - 10, checked, claimed_at, json.dumps(doc)),
        )
    conn.close()
    s = Store(path)
    try:
        assert s.to_check() == 2  # e0 waiting, e2 claimed by a live worker; e1 checked
        assert s.unchecked(0.0) == [("e0", "c0")]
        assert s.claim_unchecked(0.0) == [("e0", "c0")]  # e2's claim is not stale
        s.add_findings([], ["e0", "e2"])
        assert s.to_check() == 0
        s.write_now([ex(1)])  # written again: checked again
        assert s.claim_unchecked(0.0) == [("e1", "c1")]
        cols = {r[1] for r in s._rows("PRAGMA table_info(exchanges)")}
        assert not {"checked", "claimed_at"} & cols
    finally:
        s.close()


def test_a_claim_says_what_each_row_stores(tmp_path: Path) -> None:
    # the live checker checks long streams a few at a time: the claim gives each row's stored size
    # (a streamed response's chunks, else the document)
    pieces = [b'data: {"n": %d}\n\n' % i * 50 for i in range(40)]
    long = Exchange(
        id="long",
        tap="caller",
        started_at="2026-12-03T10:00:00+00:00",
        request=HttpRequest("POST", "/v1/chat/completions", [], b'{"stream": true}'),
        response=HttpResponse(
            200, [("content-type", "text/event-stream")], b"", [Chunk(1.0, p) for p in pieces]
        ),
    )
    s = Store(tmp_path / "sized.db")
    try:
        s.write_now([ex(0), long])
        sizes = {i: size for i, _, size in s.claim_sized(0.0)}
        body = sum(len(p) for p in pieces)
        assert sizes["long"] == body  # a streamed response's chunks: its document is the small part
        assert 0 < sizes["e0"] < 2000
    finally:
        s.close()


def test_a_batch_stores_what_a_statement_a_row_stored(store_url: str) -> None:
    """A batch is written by statements of many rows: batches of every size, and one holding an id
    twice (the later exchange replaces the earlier, in its place), store one row per id in write
    order, each to be checked, as one statement a row did."""
    s = Store(store_url)
    try:
        written = 0
        for size in (1, 2, 3, 16, 64, 65, 130):
            s.write_now([ex(written + i) for i in range(size)])
            written += size
        again = Exchange(id="e0", tap="engine", request=HttpRequest(body=b"second"))
        s.write_now([ex(1000), again, ex(1001), Exchange(id="e1000", tap="engine")])
        ids = [e.id for e in s.exchanges()]
        assert ids == [f"e{i}" for i in range(written)] + ["e1000", "e1001"]
        first = s.exchanges_for(["e0", "e1000"], [])
        assert [(e.tap, e.request.body) for e in first] == [("engine", b"second"), ("engine", b"")]
        assert s.to_check() == len(ids)
        s.add_findings([], ids)
        assert s.to_check() == 0
        s.write_now([ex(5), ex(6)])  # written again: to be checked again
        assert [i for i, _ in s.unchecked(-60.0)] == ["e5", "e6"]
    finally:
        s.close()
