"""The PostgreSQL store: the SQLite store's behaviour on a real server, shared by several writers."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import psycopg
import pytest

from wirecheck.contracts import (
    Exchange,
    Fault,
    Finding,
    HttpRequest,
    HttpResponse,
    InputError,
    Severity,
    dump_exchange,
)
from wirecheck.record import SCHEMA_VERSION, Store, is_store, open_store
from wirecheck.record._backend import MIGRATIONS, pg_spelling


def ex(i: int, tap: str = "caller") -> Exchange:
    return Exchange(
        id=f"{tap}-{i}",
        tap=tap,
        correlation=f"c{i}",
        request=HttpRequest(body=b'{"messages": []}'),
        response=HttpResponse(200, [("content-type", "application/json")], b"{}"),
    )


def test_both_backends_roundtrip_findings_gaps_and_claims_alike(store_url: str) -> None:
    s = Store(store_url, writer=True)
    for i in range(20):
        assert s.put(ex(i))
    s.close()
    r = Store(store_url)  # it writes below: open_store reads only
    assert is_store(store_url)
    assert [e.id for e in r.exchanges()] == [f"caller-{i}" for i in range(20)]
    assert [e.id for e in r.exchanges_for(["caller-3"], ["c4"])] == ["caller-3", "caller-4"]
    # a re-written id replaces the row (imports, the live checker): still one row per id
    r.write_now([ex(3)])
    assert r.count() == 20
    claimed = r.claim_unchecked(0.0, limit=5)
    assert [i for i, _ in claimed] == [f"caller-{i}" for i in range(5)]
    sized = r.claim_sized(0.0, limit=5)  # with each row's stored size (the checker's pieces)
    assert [i for i, _, _ in sized] == [f"caller-{i}" for i in range(5, 10)]
    assert all(0 < size < 4096 for _, _, size in sized)
    f = Finding(
        "tool-call-undeclared", Severity.ERROR, Fault.MODEL, "m", "caller-1", "caller", {"pointer": "/x"}
    )
    r.add_findings([f], [i for i, _ in claimed])
    assert r.findings(rule="tool-call-undeclared")[0]["evidence"] == {"pointer": "/x"}
    assert r.finding_counts() == [("tool-call-undeclared", "model", "error", 1)]
    assert len(r.unchecked(0.0)) == 10  # the second claim is not checked yet, only claimed
    assert list(r.replicas().values()) == [20]
    r.close()


def _found(rule: str, exchange_id: str, message: str = "m") -> Finding:
    return Finding(rule, Severity.ERROR, Fault.GATEWAY, message, exchange_id, "caller", {"pointer": ""})


def test_findings_amended_after_a_partner_came_change_only_what_differs(store_url: str) -> None:
    # the live checker judges an exchange again when a partner recorded after it is checked: one
    # already checked gets exactly the new findings (rows that stay keep their place, the checker's
    # own records stay); one not checked yet is left to its own check
    s = Store(store_url, writer=True)
    try:
        s.write_now([ex(1), ex(2), ex(3)])
        skipped = Finding(
            "live-check-skipped", Severity.WARNING, Fault.UNKNOWN, "set aside", "caller-1", "caller"
        )
        s.add_findings([_found("a", "caller-1"), _found("b", "caller-1"), skipped], ["caller-1"])
        s.add_findings(
            [_found("x", "caller-3")],
            ["caller-3"],
            {
                "caller-1": [_found("b", "caller-1"), _found("c", "caller-1")],
                "caller-2": [_found("d", "caller-2")],
            },
        )
        got = [(f["exchange_id"], f["rule"]) for f in s.findings()]
        assert sorted(got) == [("caller-1", r) for r in ("b", "c", "live-check-skipped")] + [
            ("caller-3", "x")
        ]
        assert got.index(("caller-1", "b")) < got.index(("caller-1", "live-check-skipped"))  # kept in place
        # caller-2 was not checked yet: its own check judges it
        assert s.to_check() == 1 and not s.findings(exchange_id="caller-2")
        # amended with what it already has: nothing is written
        mark = s.positions()[1]
        s.add_findings([], [], {"caller-1": [_found("b", "caller-1"), _found("c", "caller-1")]})
        assert s.positions()[1] == mark and len(s.findings(exchange_id="caller-1")) == 3
        # and with nothing left: only the checker's own record stays
        s.add_findings([], [], {"caller-1": []})
        assert [f["rule"] for f in s.findings(exchange_id="caller-1")] == ["live-check-skipped"]
    finally:
        s.close()


def test_a_set_rule_quiet_on_a_window_takes_back_what_it_said_there(store_url: str) -> None:
    # the live checker at several taps: a set rule that no longer fires on a batch's window (a pair
    # was found since) has its findings on the window's exchanges deleted, and only those
    s = Store(store_url, writer=True)
    try:
        early, inside, late = ex(1), ex(2), ex(3)
        early.started_at = "2026-12-06T10:00:00+00:00"
        inside.started_at = "2026-12-06T10:00:30+00:00"
        late.started_at = "2026-12-06T10:01:00+00:00"
        s.write_now([early, inside, late])
        s.add_findings(
            [_found("unpaired", i) for i in ("caller-1", "caller-2", "caller-3")]
            + [_found("other", "caller-2")],
            ["caller-1", "caller-2", "caller-3"],
        )
        s.add_findings(
            [], [], window=("2026-12-06T10:00:20+00:00", "2026-12-06T10:00:40+00:00", ["unpaired"])
        )
        got = sorted((f["exchange_id"], f["rule"]) for f in s.findings())
        assert got == [("caller-1", "unpaired"), ("caller-2", "other"), ("caller-3", "unpaired")]
    finally:
        s.close()


def test_postgres_schema_is_versioned_and_a_newer_one_is_refused(pg_url: str) -> None:
    Store(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM wirecheck_schema").fetchone() == (SCHEMA_VERSION,)
        cols = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'exchanges'"
            )
        }
        assert {"id", "tap", "correlation", "doc", "ended_at", "replica", "body"} <= cols
        assert not {"checked", "claimed_at"} & cols  # whether an exchange is checked: the checks table
        checks = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'checks'"
            )
        }
        assert checks == {"seq", "ended_at", "claimed_at"}
        conn.execute("UPDATE wirecheck_schema SET version = %s", (SCHEMA_VERSION + 1,))
    with pytest.raises(InputError, match="newer than this wirecheck"):
        Store(pg_url)


def test_an_unreachable_server_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        Store("postgresql://wc:s3cret@127.0.0.1:9/none")
    assert "cannot connect to the PostgreSQL store" in str(err.value) and "s3cret" not in str(err.value)


def test_replicas_migrating_and_writing_at_once_lose_and_duplicate_nothing(pg_url: str) -> None:
    stores: list[Store] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            stores.append(Store(pg_url, writer=True, batch_size=7))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(stores) == 4  # concurrent migrations serialise on the advisory lock
    for k, s in enumerate(stores):
        s.replica = f"replica-{k}"
    writers = [
        threading.Thread(target=lambda s=s, k=k: [s.put(ex(i, f"r{k}")) for i in range(250)])
        for k, s in enumerate(stores)
    ]
    for t in writers:
        t.start()
    for t in writers:
        t.join()
    for s in stores:
        s.close()
    r = open_store(pg_url)
    ids = [e.id for e in r.exchanges()]
    assert len(ids) == len(set(ids)) == 1000
    assert r.replicas() == {f"replica-{k}": 250 for k in range(4)}
    # two checking workers claiming at once never take the same exchange
    a, b = Store(pg_url), Store(pg_url)
    got: list[list[str]] = [[], []]

    def claim(s: Store, out: list[str]) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            batch = s.claim_unchecked(0.0, limit=37)
            if not batch:
                return
            out.extend(i for i, _ in batch)
            s.add_findings([], [i for i, _ in batch])

    ts = [threading.Thread(target=claim, args=(s, out)) for s, out in zip((a, b), got, strict=True)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not set(got[0]) & set(got[1]) and len(got[0]) + len(got[1]) == 1000
    for s in (a, b, r):
        s.close()


def test_a_lost_database_connection_is_reconnected_and_nothing_is_lost(pg_url: str) -> None:
    s = Store(pg_url, writer=True)
    for i in range(10):
        s.put(ex(i))
    s.flush()
    # the server drops the store's connection (a restart, a failover, an idle timeout)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    assert killed
    for i in range(10, 20):
        assert s.put(ex(i))
    s.close()
    assert s.stats.reconnects >= 1 and s.stats.dropped == 0 and s.stats.last_error
    r = open_store(pg_url)
    assert r.count() == 20 and r.gaps() == []
    r.close()


def test_a_postgres_store_of_schema_3_keeps_what_was_left_to_check(pg_url: str) -> None:
    # schema 4 moved "checked" and "claimed_at" out of the exchanges row into the checks table
    now = time.time()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE wirecheck_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO wirecheck_schema(version) VALUES (3)")
        for v in (1, 2, 3):
            for stmt in (x.strip() for x in pg_spelling(MIGRATIONS[v]).split(";")):
                if stmt:
                    conn.execute(stmt)
        for i, (checked, claimed_at) in enumerate([(0, None), (1, None), (2, now)]):
            conn.execute(
                "INSERT INTO exchanges(id, tap, correlation, ended_at, checked, claimed_at, doc) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (
                    f"caller-{i}",
                    "caller",
                    f"c{i}",
                    now - 10,
                    checked,
                    claimed_at,
                    json.dumps(dump_exchange(ex(i))),
                ),
            )
    s = Store(pg_url)
    try:
        assert s.to_check() == 2
        assert s.claim_unchecked(0.0) == [("caller-0", "c0")]  # caller-2's claim is not stale
        s.add_findings([], ["caller-0", "caller-2"])
        assert s.to_check() == 0
        s.write_now([ex(1)])  # written again: checked again
        assert s.claim_unchecked(0.0) == [("caller-1", "c1")]
    finally:
        s.close()
