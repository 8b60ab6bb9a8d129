"""Reading a store never writes it, and a store that cannot write says what it lost (issue 11,
points 6 and 7)."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.wire import completion, exchange, req
from wirecheck.proxy import Store


def _wirecheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wirecheck", *args], capture_output=True, text=True, timeout=120, check=False
    )


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
