"""One hostile exchange no longer stops checking: JSON nested thousands of levels
deep is a json-limit finding in ``wirecheck check`` and in the live checker, and the live checker is
supervised: killed, it is restarted, health says degraded meanwhile, and traffic keeps being checked."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import httpx

from tests.support.proctree import DEEP, alive, chat, proxy_process, spawned
from tests.support.servers import run_wirecheck
from tests.support.wire import call, completion, exchange, message, tool_req
from wirecheck.contracts import write_exchanges


def _checked(db: Path) -> tuple[int, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        total = conn.execute("SELECT COUNT(*) FROM exchanges").fetchone()[0]
        done = total - conn.execute("SELECT COUNT(*) FROM checks").fetchone()[0]
    finally:
        conn.close()
    return int(total), int(done)


def _wait_checked(db: Path, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while _checked(db) != (n, n):
        assert time.monotonic() < deadline, f"checked {_checked(db)}, expected {n} of {n}"
        time.sleep(0.1)


def test_check_reports_deep_json_as_a_finding_and_keeps_going(tmp_path: Path) -> None:
    deep_args = '{"a": ' + "[" * DEEP + "]" * DEEP + "}"
    deep_body = b'{"model": "m", "messages": ' + b"[" * DEEP + b"]" * DEEP + b"}"
    capture = tmp_path / "deep.jsonl"
    with capture.open("w", encoding="utf-8") as fh:
        write_exchanges(
            [
                exchange(deep_body, completion(), id="deep-body", tap="caller"),
                exchange(
                    tool_req(),
                    completion(message(None, tool_calls=[call(args=deep_args)]), "tool_calls"),
                    id="deep-args",
                ),
                exchange(tool_req(), completion(message(None, tool_calls=[call()]), "tool_calls"), id="fine"),
            ],
            fh,
        )
    out = run_wirecheck("check", str(capture), "--format", "json", timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 1  # error findings, not exit 2 (bad input) and not a crash
    report = json.loads(out.stdout)
    assert report["exchanges"] == 3
    limits = {
        (f["exchange_id"], f["evidence"]["pointer"]) for f in report["findings"] if f["rule"] == "json-limit"
    }
    assert limits == {
        ("deep-body", "/request/body"),
        ("deep-args", "/choices/0/message/tool_calls/0/function/arguments"),
    }
    assert not [f for f in report["findings"] if f["exchange_id"] == "fine"]


def test_live_checker_survives_deep_json_and_a_kill(tmp_path: Path) -> None:
    db = tmp_path / "wc.db"
    with proxy_process(db) as (proc, base, admin):
        # 1 hostile request, then 3 ordinary ones: all recorded and all checked
        assert chat(base, "deep").status_code == 200
        for i in range(3):
            assert chat(base, f"weather {i}").status_code == 200
        _wait_checked(db, 4)
        health = httpx.get(f"{admin}/wirecheck/health", timeout=5).json()
        assert health["status"] == "ok" and health["checks"]["worker_alive"], health
        found = httpx.get(f"{admin}/wirecheck/findings", params={"rule": "json-limit"}, timeout=5).json()
        assert len(found) == 1 and found[0]["evidence"]["pointer"].endswith("/function/arguments")

        # the worker dies (the OOM killer, a crash no handler catches): health says so, it comes back
        workers = spawned(proc.pid)  # the live-check worker (no view was asked for)
        assert workers, "no live-check worker below the proxy"
        for p in workers:
            os.kill(p, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while True:
            health = httpx.get(f"{admin}/wirecheck/health", timeout=5).json()
            if health["checks"]["restarts"] >= 1:
                break
            assert time.monotonic() < deadline, health
            time.sleep(0.1)
        assert health["status"] == "degraded" and "died" in health["reason"], health
        for i in range(3):
            assert chat(base, f"after {i}").status_code == 200
        _wait_checked(db, 7)
        assert not any(alive(p) for p in workers)
    assert proc.returncode == 0
