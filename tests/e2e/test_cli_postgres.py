"""Two proxy replicas and an engine tap, three processes, one PostgreSQL store: nothing lost or
duplicated, each exchange checked once, and ``check`` / ``export`` read it like the SQLite default."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx

from tests.support import wire
from tests.support.servers import port_open, process, run_wirecheck, sim_behind_gateway
from wirecheck.record import free_port

N = 40


#: replicas in several processes agree on x-wirecheck-id only with one shared secret
SECRET = "test-replicas-share-this"


def _proxy(upstream: str, port: int, tap: str, store: str, admin: int) -> list[str]:
    return [
        *(sys.executable, "-m", "wirecheck", "proxy", "--upstream", upstream),
        *("--listen", f"127.0.0.1:{port}", "--tap", tap, "--store", store, "--settle", "0.5"),
        *("--admin", f"127.0.0.1:{admin}"),
    ]


def _wc(*args: str) -> subprocess.CompletedProcess[str]:
    return run_wirecheck(*args, timeout=120)


def test_two_caller_replicas_and_an_engine_tap_share_one_postgres_store(pg_url: str, tmp_path: Path) -> None:
    sp, gp, ep, r1, r2 = (free_port() for _ in range(5))
    admins = [free_port() for _ in range(3)]
    argvs = [
        _proxy(f"http://127.0.0.1:{sp}", ep, "engine", pg_url, admins[0]),
        _proxy(f"http://127.0.0.1:{gp}", r1, "caller", pg_url, admins[1]),
        _proxy(f"http://127.0.0.1:{gp}", r2, "caller", pg_url, admins[2]),
    ]
    logs = [tmp_path / f"proxy{i}" for i in range(3)]
    with sim_behind_gateway(sp, gp, ep), ExitStack() as stack:
        procs = [
            stack.enter_context(
                process(
                    argv,
                    ready=port_open(tap, port),
                    logs=log,
                    env={"WIRECHECK_CORRELATION_SECRET": SECRET},
                )
            )
            for argv, tap, port, log in zip(argvs, (ep, r1, r2), admins, logs, strict=True)
        ]

        def send(i: int) -> int:
            port = (r1, r2)[i % 2]
            body = wire.tool_req(
                messages=[{"role": "user", "content": f"Weather in Kyoto {i}?"}], stream=i % 3 == 0
            )
            return httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30
            ).status_code

        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(send, range(N))) == {200}
        # the live checkers of all three processes share the work: wait until every exchange is checked
        for _ in range(150):
            found = httpx.get(f"http://127.0.0.1:{admins[1]}/wirecheck/findings?limit=1000", timeout=5).json()
            if len(found) >= 2 * N:
                break
            subprocess.run(["sleep", "0.1"], check=True)
    # each replica was stopped with SIGTERM on leaving, and ended cleanly
    errs = [log.with_suffix(".stderr").read_text() for log in logs]
    assert all(p.returncode == 0 for p in procs), errs
    per = Counter((f["exchange_id"], f["rule"]) for f in found)
    assert per and max(per.values()) == 1, "an exchange was checked twice"
    rules = Counter((f["rule"], f["fault"], f["tap"]) for f in found)
    assert rules[("tool-call-undeclared", "model", "engine")] == N
    assert rules[("gateway-reasoning-dropped", "gateway", "caller")] == N
    # check and export read the shared store; the JSONL export checks the same as the store itself
    res = json.loads(_wc("check", pg_url, "--format", "json").stdout)
    chat = N * 2
    assert res["summary"]["pairs"] == N and res["exchanges"] >= chat
    exported = tmp_path / "all.jsonl"
    exp = _wc("export", pg_url, "-o", str(exported))
    assert exp.returncode == 0, exp.stderr
    lines = [json.loads(x) for x in exported.read_text().splitlines()]
    ids = [x["id"] for x in lines]
    assert len(ids) == len(set(ids)) == res["exchanges"]
    chat_lines = [x for x in lines if x["request"]["path"].endswith("/chat/completions")]
    assert Counter(x["tap"] for x in chat_lines) == {"caller": N, "engine": N}
    assert len({x["correlation"] for x in chat_lines}) == N  # every request: both taps, once each
    again = json.loads(_wc("check", str(exported), "--format", "json").stdout)
    assert again["summary"]["by_rule"] == res["summary"]["by_rule"]
