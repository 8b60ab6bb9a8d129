"""Callers that send their own ``x-wirecheck-id`` (the same one on many requests, or
one shaped like the proxy's own) must not pair unrelated requests: no false gateway findings."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.support import wire
from tests.support.proxy_process import ProxyProcess, proxy_process, recorded
from tests.support.servers import run_wirecheck, running, wait_up
from wirecheck.contracts import Exchange
from wirecheck.record import free_port

PER_KIND = 12
FORGED = {
    "plain": "dup",
    # the shape of a minted id (24 hex, a dot, 32 hex), without the secret
    "shaped": "0123456789abcdef01234567.0123456789abcdef0123456789abcdef",
}


@contextlib.contextmanager
def taps_around_a_clean_gateway(tmp_path: Path) -> Iterator[ProxyProcess]:
    """The simulator behind a gateway without faults (every gateway finding would be a false one),
    and ``wirecheck proxy``'s two taps around the gateway, recording without live checks."""
    sp, gp, ep = free_port(), free_port(), free_port()
    with (
        running("sim", "--port", str(sp), "--time-scale", "0.001"),
        running("sim-gateway", "--upstream", f"http://127.0.0.1:{ep}", "--port", str(gp)),
    ):
        wait_up(f"http://127.0.0.1:{sp}/health")
        wait_up(f"http://127.0.0.1:{gp}/health")
        engine = ["--engine-upstream", f"http://127.0.0.1:{sp}", "--engine-listen", f"127.0.0.1:{ep}"]
        with proxy_process(f"http://127.0.0.1:{gp}", tmp_path, *engine, "--no-live-checks") as px:
            yield px


def test_forged_and_duplicated_ids_give_no_false_gateway_findings(tmp_path: Path) -> None:
    with taps_around_a_clean_gateway(tmp_path) as px:

        def send(i: int) -> int:
            kind = ("plain", "shaped", "none")[i % 3]
            headers = {"x-wirecheck-id": FORGED[kind]} if kind in FORGED else {}
            body = wire.req(
                messages=[{"role": "user", "content": f"Request {i}: say {'word ' * (i % 5 + 1)}"}],
                stream=i % 2 == 0,
            )
            return httpx.post(
                f"{px.url}/v1/chat/completions", json=body, headers=headers, timeout=30
            ).status_code

        sent = 3 * PER_KIND
        with ThreadPoolExecutor(6) as pool:
            assert set(pool.map(send, range(sent))) == {200}
    exchanges = [
        ex for ex in recorded(px.store) if ex.request and ex.request.path.endswith("/chat/completions")
    ]
    assert len(exchanges) == 2 * sent, f"sent {sent} through two taps, recorded {len(exchanges)}"
    # a forged id can only mispair, which the content, tool-call and request comparisons show; the one
    # timing rule (gateway-stream-buffered compares chunk gaps at the two taps) is left out: a vLLM
    # server starting beside this test on a 2-core CI machine once made it read a stream as buffered
    check = run_wirecheck(
        "check", str(px.store), "--format", "json", "--disable", "gateway-stream-buffered", timeout=120
    )
    res = json.loads(check.stdout)
    assert res["summary"]["pairs"] == sent
    assert "gateway" not in res["summary"]["by_fault"], res["summary"]
    caller_ids = [ex.correlation for ex in exchanges if ex.tap == "caller"]
    assert len(set(caller_ids)) == sent and not set(caller_ids) & set(FORGED.values())


def _wait_for(store: Path, count: int) -> list[Exchange]:
    deadline = time.monotonic() + 30
    while True:
        with contextlib.suppress(Exception):
            got = recorded(store)
            if len(got) >= count:
                return got
        assert time.monotonic() < deadline, "the exchanges were never stored"
        time.sleep(0.05)


def test_an_id_the_caller_tap_minted_is_never_taken_back_from_a_caller(tmp_path: Path) -> None:
    """The caller tap's own id travels on to the gateway and the engine, where a caller may read it
    (a gateway that echoes or logs headers). Sent back by another caller, it put two requests on one
    id, and ``check`` paired the victim's exchange with the wrong engine side: 7 false gateway
    errors. Here the id is read from the store, as such a leak would give it."""
    with taps_around_a_clean_gateway(tmp_path) as px:
        victim = wire.tool_req(messages=[{"role": "user", "content": "What is the weather in Osaka?"}])
        assert httpx.post(f"{px.url}/v1/chat/completions", json=victim, timeout=30).status_code == 200
        [minted] = {ex.correlation for ex in _wait_for(px.store, 2) if ex.tap == "caller"}
        assert minted is not None
        attacker = wire.req(messages=[{"role": "user", "content": "Say something else entirely."}])
        for stream in (False, True):
            r = httpx.post(
                f"{px.url}/v1/chat/completions",
                json={**attacker, "stream": stream},
                headers={"x-wirecheck-id": minted},
                timeout=30,
            )
            assert r.status_code == 200
    exchanges = recorded(px.store)
    assert len(exchanges) == 6
    assert [ex.correlation for ex in exchanges].count(minted) == 2  # the victim's two sides only
    check = run_wirecheck(
        "check", str(px.store), "--format", "json", "--disable", "gateway-stream-buffered", timeout=120
    )
    res = json.loads(check.stdout)
    assert res["summary"]["pairs"] == 3
    assert not [f for f in res["findings"] if f["fault"] == "gateway"], res["summary"]
