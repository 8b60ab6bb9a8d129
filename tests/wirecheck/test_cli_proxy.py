"""``wirecheck proxy`` as a process: dual tap, live checks, SIGTERM flush; then export and check the store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx

from tests.support import wire
from tests.support.servers import dual_tap, port_open, run_wirecheck, running, sim_behind_gateway, stop
from wirecheck.record import free_port


def test_dual_tap_process_records_checks_and_flushes_on_sigterm(tmp_path: Path) -> None:
    db = tmp_path / "wc.db"
    sp, gp, cp, ep, ap = free_port(), free_port(), free_port(), free_port(), free_port()
    with (
        sim_behind_gateway(sp, gp, ep),
        running(
            *dual_tap(gp, cp, engine_upstream=f"http://127.0.0.1:{sp}", engine=ep, store=str(db), admin=ap),
            ready=port_open(cp, ep, ap),
        ) as proxy,
    ):
        try:
            for i in range(5):
                r = httpx.post(
                    f"http://127.0.0.1:{cp}/v1/chat/completions",
                    json=wire.tool_req(messages=[{"role": "user", "content": f"Weather in Kyoto {i}?"}]),
                    timeout=10,
                )
                assert r.status_code == 200
            # live checks run in the worker process; wait for them
            for _ in range(100):
                found = httpx.get(f"http://127.0.0.1:{ap}/wirecheck/findings", timeout=5).json()
                if len(found) >= 10:
                    break
                subprocess.run(["sleep", "0.1"], check=True)
            rules = {(f["rule"], f["fault"], f["tap"]) for f in found}
            assert ("tool-call-undeclared", "model", "engine") in rules
            assert ("gateway-reasoning-dropped", "gateway", "caller") in rules
        finally:
            _out, err = stop(proxy)
        assert proxy.returncode == 0, err
    check = run_wirecheck("check", str(db), "--format", "json")
    res = json.loads(check.stdout)
    # 10 chat exchanges and nothing else: readiness was a TCP connection, which a tap never records
    assert res["exchanges"] == 10 and res["summary"]["pairs"] == 5
    assert res["summary"]["by_fault"] == {"gateway": 5, "model": 5}
    har = tmp_path / "cap.har"
    exp = run_wirecheck("export", str(db), "--format", "har", "-o", str(har))
    assert exp.returncode == 0, exp.stderr
    entries = json.loads(har.read_text())["log"]["entries"]
    assert len(entries) == res["exchanges"] and {e["_wirecheck"]["tap"] for e in entries} == {
        "caller",
        "engine",
    }
    jsonl = run_wirecheck("export", str(db))
    assert len(jsonl.stdout.splitlines()) == res["exchanges"]


def test_proxy_rejects_a_bad_listen_address() -> None:
    out = run_wirecheck("proxy", "--upstream", "http://127.0.0.1:1", "--listen", "nope", timeout=30)
    assert out.returncode == 2 and "HOST:PORT" in out.stderr


def test_a_single_tap_straight_in_front_of_the_engine_says_so_with_direct(tmp_path: Path) -> None:
    """One tap, no gateway: without ``--direct`` a caller tap cannot rule out a gateway and blames
    model findings on ``unknown``; with it, live findings keep their rule's fault, as ``check
    --direct`` does, and the view (which shows the stored findings) with them."""
    sp = free_port()
    sim = ("sim", "--port", str(sp), "--time-scale", "0.001", "--faults", "model.undeclared_tool=1")
    with running(*sim, ready=port_open(sp)):  # listening before the first request: else a 502
        for direct, fault in ((True, "model"), (False, "unknown")):
            db, port, admin = tmp_path / f"direct-{direct}.db", free_port(), free_port()
            argv = ["proxy", "--upstream", f"http://127.0.0.1:{sp}", "--listen", f"127.0.0.1:{port}"]
            argv += ["--admin", f"127.0.0.1:{admin}", "--store", str(db), "--settle", "0.1"]
            with running(*argv, *(["--direct"] if direct else []), ready=port_open(port, admin)) as proxy:
                try:
                    r = httpx.post(
                        f"http://127.0.0.1:{port}/v1/chat/completions", json=wire.tool_req(), timeout=30
                    )
                    assert r.status_code == 200
                    found: list[dict[str, object]] = []
                    for _ in range(200):
                        found = httpx.get(f"http://127.0.0.1:{admin}/wirecheck/findings", timeout=5).json()
                        if found:
                            break
                        subprocess.run(["sleep", "0.05"], check=True)
                    assert {(f["rule"], f["fault"]) for f in found} == {("tool-call-undeclared", fault)}, (
                        found
                    )
                    health = httpx.get(f"http://127.0.0.1:{admin}/wirecheck/health", timeout=5).json()
                    assert health["direct"] is direct
                finally:
                    _out, err = stop(proxy)
                assert proxy.returncode == 0, err


def test_direct_is_refused_with_a_gateway_between_the_taps() -> None:
    out = run_wirecheck(
        "proxy",
        "--upstream",
        "http://127.0.0.1:1",
        "--engine-upstream",
        "http://127.0.0.1:2",
        "--direct",
        timeout=30,
    )
    assert out.returncode == 2 and "--direct" in out.stderr, out.stderr
