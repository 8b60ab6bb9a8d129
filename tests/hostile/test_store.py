"""Reading a store never writes it, and a store that cannot write says what it lost (
points 6 and 7)."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from tests.support.proctree import upstream
from tests.support.servers import run_wirecheck
from tests.support.wire import completion, exchange, req, tool_req
from wirecheck.proxy import AdminApp, ProxyApp, TapConfig
from wirecheck.record import Store, StreamingASGITransport, _sqlite


def _wirecheck(*args: str) -> subprocess.CompletedProcess[str]:
    return run_wirecheck(*args, timeout=120)


def _digest(folder: Path) -> dict[str, str]:
    """Every file in the folder with its hash: a changed byte or a new -wal/-shm file shows."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_check_export_and_replay_leave_a_foreign_sqlite_file_byte_identical(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    foreign = data / "app.db"
    conn = sqlite3.connect(foreign)
    conn.executescript(
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users(name) VALUES ('ada');"
        "PRAGMA user_version = 0;"
    )
    conn.close()
    before = _digest(data)
    runs = {
        "check": _wirecheck("check", str(foreign)),
        "export": _wirecheck("export", str(foreign)),
        "replay": _wirecheck("replay", str(foreign), "--target", "http://127.0.0.1:9", "--dry-run"),
    }
    for name, run in runs.items():
        assert run.returncode == 2, (name, run.stdout, run.stderr)
        assert "not a wirecheck store" in run.stderr, (name, run.stderr)
        assert "Traceback" not in run.stderr
    assert _digest(data) == before  # the same bytes, and no journal, -wal or -shm file beside it
    # a writer refuses it too, before switching it to WAL
    run = _wirecheck(
        "replay", str(tmp_path / "none.jsonl"), "--target", "http://127.0.0.1:9", "--store", str(foreign)
    )
    assert run.returncode == 2
    assert _digest(data) == before


def test_reading_a_store_does_not_change_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    store = Store(data / "wc.db", writer=True)
    store.write_now([exchange(req(), completion(), id=f"ex-{i}", tap="caller") for i in range(3)])
    store.close()
    before = _digest(data)
    run = _wirecheck("check", str(data / "wc.db"))
    assert run.returncode == 0, run.stderr
    assert "3 exchange(s)" in run.stdout
    assert _wirecheck("export", str(data / "wc.db")).returncode == 0
    assert _digest(data) == before


def test_an_empty_capture_is_bad_input_not_a_pass(tmp_path: Path) -> None:
    empty_jsonl = tmp_path / "empty.jsonl"
    empty_jsonl.write_text("")
    Store(tmp_path / "empty.db").close()
    for path in (empty_jsonl, tmp_path / "empty.db"):
        run = _wirecheck("check", str(path))
        assert run.returncode == 2, (path, run.stdout, run.stderr)
        assert "an empty capture is not a pass" in run.stderr


def test_reading_a_postgres_database_runs_no_ddl(pg_url: str) -> None:
    run = _wirecheck("check", pg_url)
    assert run.returncode == 2, run.stderr
    assert "not a wirecheck store" in run.stderr
    with psycopg.connect(pg_url) as conn:
        tables = conn.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchone()
    assert tables == (0,)  # neither the schema table nor the migrations were created


def _page_cap(monkeypatch: pytest.MonkeyPatch) -> dict[str, int | None]:
    """A full disk on demand: set ``["pages"]`` and the store's next connection is capped there."""
    cap: dict[str, int | None] = {"pages": None}
    real_connect = _sqlite.connect

    def connect(path: str, *, readonly: bool = False) -> sqlite3.Connection:
        conn = real_connect(path, readonly=readonly)
        if cap["pages"] is not None and not readonly:
            conn.execute(f"PRAGMA max_page_count = {cap['pages']}")
        return conn

    monkeypatch.setattr(_sqlite, "connect", connect)
    return cap


async def test_a_full_disk_loses_no_exchange_silently(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Disk full, made real and bounded with SQLite's own page cap: past ``PRAGMA max_page_count`` SQLite
    fails writes with SQLITE_FULL ("database or disk is full"), the very error a full disk gives, without
    root, a loop device or a tmpfs, and the cap is lifted to let space return. The cap is per connection,
    so the store's connection set-up applies it (fault injection at that one boundary; everything else,
    SQLite included, is real)."""
    cap = _page_cap(monkeypatch)
    db = tmp_path / "wc.db"
    store = Store(db, writer=True, retries=1)
    app = ProxyApp(TapConfig(upstream="http://upstream"), store, transport=StreamingASGITransport(upstream))
    client = httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://proxy")
    body = {**tool_req(), "messages": [{"role": "user", "content": "x" * 4000}]}

    admin = httpx.AsyncClient(
        transport=httpx.ASGITransport(AdminApp([app], store)), base_url="http://localhost"
    )

    async def health() -> dict[str, Any]:
        return dict((await admin.get("/wirecheck/health")).json()["store"])

    async def until(cond: Any, what: str, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while not cond(h := await health()):
            assert time.monotonic() < deadline, (what, h)
            await asyncio.sleep(0.05)
        return h

    try:
        for _ in range(3):  # recorded
            assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
        await until(lambda h: h["written"] == 3, "3 written")
        # the disk fills up: capped at the pages it has now, on a fresh connection
        cap["pages"] = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
        store._reconnect()
        for _ in range(10):  # forwarded, but the store cannot write them
            assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
        h = await until(lambda h: h["dropped"] == 10, "10 counted as lost")
        assert "database or disk is full" in str(h["last_error"]), h  # SQLITE_FULL, said in health
        cap["pages"] = None  # space returns (a fresh connection: the cap is per connection)
        store._reconnect()
        await until(lambda h: h["gap_unwritten"] == 0, "gap row written")
        for _ in range(2):
            assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
        await until(lambda h: h["written"] == 5, "5 written")
    finally:
        await client.aclose()
        await admin.aclose()
        await app.aclose()
        store.close()
    reader = Store(db, readonly=True)
    assert sum(g[0] for g in reader.gaps()) == 10 and reader.count() == 5  # 15 sent, 5 recorded, 10 counted
    reader.close()
    run = _wirecheck("check", str(db))
    assert run.returncode == 0, run.stderr  # warnings only: the ordinary exchanges are fine
    assert "5 exchange(s)" in run.stdout and "10 exchange(s) lost" in run.stdout
    assert "store-gap" in run.stdout


async def test_health_says_the_store_cannot_write_from_the_first_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer retries a failing batch for about 20 s before it counts it as lost; health used to
    say ok all that time. Now it says degraded at the first failure: the fact shown is that health
    turned while nothing was counted lost yet (the batch still being retried)."""
    cap = _page_cap(monkeypatch)
    db = tmp_path / "wc.db"
    store = Store(db, writer=True)  # the default retries
    app = ProxyApp(TapConfig(upstream="http://upstream"), store, transport=StreamingASGITransport(upstream))
    client = httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://proxy")
    admin = httpx.AsyncClient(
        transport=httpx.ASGITransport(AdminApp([app], store)), base_url="http://localhost"
    )
    body = {**tool_req(), "messages": [{"role": "user", "content": "x" * 4000}]}

    async def until(cond: Any, what: str) -> dict[str, Any]:
        deadline = time.monotonic() + 20
        while not cond(h := (await admin.get("/wirecheck/health")).json()):
            assert time.monotonic() < deadline, (what, h)
            await asyncio.sleep(0.02)
        return dict(h)

    try:
        assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
        await until(lambda h: h["store"]["written"] == 1 and h["status"] == "ok", "1 written, ok")
        cap["pages"] = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
        store._reconnect()
        assert (await client.post("/v1/chat/completions", json=body)).status_code == 200
        h = await until(lambda h: h["status"] == "degraded", "degraded")
        assert "the store cannot write" in h["reason"] and "disk is full" in h["reason"], h
        assert h["store"]["dropped"] == 0 and h["store"]["written"] == 1, h  # still being retried
        cap["pages"] = None  # space returns: the retried batch is written, health is ok again
        store._reconnect()
        h = await until(lambda h: h["status"] == "ok" and h["store"]["written"] == 2, "written again")
        assert h["store"]["dropped"] == 0 and "failing_s" not in h["store"]
    finally:
        await client.aclose()
        await admin.aclose()
        await app.aclose()
        store.close()
