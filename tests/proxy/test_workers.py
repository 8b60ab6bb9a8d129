"""``wirecheck proxy --workers 2`` as a real process tree on loopback: two workers share the
ports, every request is recorded exactly once in the one store, each caller gets its own answer, and
the two taps of a request pair by correlation id even when different workers carried them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.proctree import alive, descendants, spawned, wait_guarded
from tests.support.servers import process
from tests.support.wire import completion, message
from wirecheck.record import Store, free_port, serve

REQUESTS = 200


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A chat completion whose content names the request (its ``user`` field) and the correlation id
    the upstream received, so that a caller can tell its own answer from another's."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        msg = await receive()
        body += msg.get("body", b"")
        if not msg.get("more_body"):
            break
    corr = dict(scope["headers"]).get(b"x-wirecheck-id", b"").decode()
    tag = json.loads(body)["user"]
    out = json.dumps(completion(message(f"{tag} {corr}"))).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


@contextlib.contextmanager
def workers_proxy(db: Path, upstream: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``--workers 2`` in dual tap: the caller tap forwards to the engine tap (both in the same
    workers), which forwards to ``upstream``. Yields the process and the caller tap's URL."""
    port, engine_port, admin = free_port(), free_port(), free_port()
    argv = [
        *(sys.executable, "-m", "wirecheck", "proxy", "--workers", "2"),
        *("--listen", f"127.0.0.1:{port}", "--upstream", f"http://127.0.0.1:{engine_port}"),
        *("--engine-listen", f"127.0.0.1:{engine_port}", "--engine-upstream", upstream),
        *("--store", str(db), "--settle", "0.2", "--admin", f"127.0.0.1:{admin}"),
    ]

    def both_workers_run() -> bool:
        health = httpx.get(f"http://127.0.0.1:{admin}/wirecheck/health", timeout=2).json()
        return bool(health["checks"]["workers"]["running"] == 2)

    with process(argv, ready=both_workers_run) as proc:
        yield proc, f"http://127.0.0.1:{port}"


async def _callers(url: str) -> dict[str, str]:
    """REQUESTS requests from 50 concurrent callers, each on its own connection (so that the kernel
    spreads them over the workers); returns each request's tag and the answer it got."""
    answers: dict[str, str] = {}
    limits = httpx.Limits(max_connections=50, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:

        async def one(i: int) -> None:
            tag = f"caller-{i}"
            body = {"model": "m", "user": tag, "messages": [{"role": "user", "content": tag}]}
            r = await client.post(f"{url}/v1/chat/completions", json=body, headers={"connection": "close"})
            assert r.status_code == 200, r.text
            answers[tag] = r.json()["choices"][0]["message"]["content"]

        await asyncio.gather(*(one(i) for i in range(REQUESTS)))
    return answers


def test_two_workers_record_every_request_once_and_pair_across_workers(tmp_path: Path) -> None:
    db = tmp_path / "wc.db"
    with serve(echo) as up, workers_proxy(db, up) as (proc, url):
        answers = asyncio.run(_callers(url))
        proc.send_signal(signal.SIGTERM)  # the workers flush their queues; the checker finishes
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    # each caller got its own answer, carrying a correlation id no other caller got
    assert sorted(answers) == sorted(f"caller-{i}" for i in range(REQUESTS))
    corr_of = {}
    for tag, content in answers.items():
        got_tag, corr = content.split(" ")
        assert got_tag == tag
        corr_of[tag] = corr
    assert len(set(corr_of.values())) == REQUESTS

    store = Store(db)
    try:
        exchanges = list(store.exchanges())
        rows = store._rows("SELECT id, tap, correlation, replica FROM exchanges")
        to_check = store.to_check()
        gaps = store.gaps()
    finally:
        store.close()
    # every request recorded exactly once per tap: 200 caller-side and 200 engine-side exchanges
    by_tap = Counter(ex.tap for ex in exchanges)
    assert by_tap == {"caller": REQUESTS, "engine": REQUESTS}
    tags = Counter((ex.tap, json.loads(ex.request.body)["user"]) for ex in exchanges)
    assert set(tags.values()) == {1}
    assert gaps == []  # nothing dropped
    # each request's two sides share its correlation id (the one its caller saw), whichever worker
    # carried each side: the workers mint and verify under one secret
    sides: dict[str, set[str]] = {}
    for ex in exchanges:
        assert ex.correlation is not None
        sides.setdefault(ex.correlation, set()).add(ex.tap)
    assert set(sides) == set(corr_of.values())
    assert all(s == {"caller", "engine"} for s in sides.values())
    # both workers served: each row names the process (replica host:pid) that wrote it
    replicas = Counter(r[3] for r in rows)
    assert len(replicas) == 2 and min(replicas.values()) > 0, replicas
    by_corr: dict[str, set[str]] = {}
    for _, _, corr, replica in rows:
        by_corr.setdefault(corr, set()).add(replica)
    assert any(len(r) == 2 for r in by_corr.values()), "no request crossed workers between its taps"
    # the one live checker checked every exchange once
    assert to_check == 0


def test_workers_refuse_bad_counts_and_taken_ports_with_a_message(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "wirecheck", "proxy", "--upstream", "http://127.0.0.1:9"]
    bad = subprocess.run(
        [*base, "--workers", "0", "--store", str(tmp_path / "a.db")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode != 0 and "--workers: must be a whole number from 1 to 256" in bad.stderr
    assert not (tmp_path / "a.db").exists()
    with socket.socket() as taken:  # an ordinary listener (no SO_REUSEPORT) holds the port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = subprocess.run(
            [*base, "--workers", "2", "--listen", f"127.0.0.1:{port}", "--admin", "off"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
        )
    assert busy.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} for the caller tap" in busy.stderr


def test_workers_and_their_checker_exit_when_the_supervisor_is_killed(tmp_path: Path) -> None:
    # holds for workers too: a SIGKILLed supervisor leaves no process behind
    with serve(echo) as up, workers_proxy(tmp_path / "wc.db", up) as (proc, _):
        helpers = descendants(proc.pid)
        assert len(helpers) >= 3  # two workers and the live checker (and spawn's resource tracker)
        wait_guarded(spawned(proc.pid))  # the guarantee is a running helper's (tests/hostile/test_orphans.py)
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in helpers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in helpers if alive(p)]
