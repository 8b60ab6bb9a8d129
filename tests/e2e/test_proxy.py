"""The proxy over real loopback sockets: incremental delivery, cancellation, the openai SDK, and two
taps around a real nginx and the simulated gateway."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import httpx
import openai
from prometheus_client.parser import text_string_to_metric_families

from tests.proxy.test_app import recorded
from tests.support import wire
from tests.support.nginx import nginx_gateway
from wirecheck.contracts import CheckConfig, check_exchanges
from wirecheck.proxy import ProxyApp, TapConfig, check_pending, serve_listener
from wirecheck.record import Store, read_body, serve
from wirecheck.sim import GatewayConfig, SimConfig, create_app, create_gateway, parse_gateway_faults


@contextmanager
def proxy(upstream: str, store: Store, **cfg: Any) -> Iterator[str]:
    app = ProxyApp(TapConfig(upstream=upstream, **cfg), store)
    with serve_listener(app) as url:
        yield url


def test_chunks_are_delivered_as_they_arrive(store: Store) -> None:
    # the upstream sends "last" only once the caller has "first": a proxy that held the first back
    # until the end would never deliver it (and the caller's read would time out)
    got_first = threading.Event()

    async def upstream(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        await send({"type": "http.response.body", "body": b"data: first\n\n", "more_body": True})
        while not got_first.is_set():
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"data: last\n\n"})

    with serve(upstream) as up_url, proxy(up_url, store) as url:
        pieces = []
        with httpx.stream("POST", f"{url}/v1/chat/completions", content=b"{}", timeout=30) as r:
            for piece in r.iter_raw():
                pieces.append(piece)
                if b"first" in piece:
                    got_first.set()
    assert b"".join(pieces) == b"data: first\n\ndata: last\n\n"
    assert b"last" not in pieces[0]  # the first arrived alone


def test_a_caller_that_disconnects_cancels_the_upstream(store: Store) -> None:
    sim = create_app(SimConfig(decode_tokens_per_s=20.0))  # 50 ms a token: the stream lasts seconds
    with serve(sim) as sim_url, proxy(sim_url, store) as url:
        with httpx.stream("POST", f"{url}/v1/chat/completions", json=wire.req(stream=True)) as r:
            for _ in r.iter_raw():
                break
        engine = sim.state.sim.engine
        deadline = time.monotonic() + 30  # a bound to fail by; the stream alone would last seconds
        while engine.running or engine.waiting:
            assert time.monotonic() < deadline, "the upstream request was never cancelled"
            time.sleep(0.01)
        metrics = httpx.get(f"{sim_url}/metrics").text
    # the engine's request was aborted, not run to its end
    ended = {
        s.labels["finished_reason"]: s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == "vllm:request_success_total"
    }
    assert ended.get("abort") == 1 and not any(v for k, v in ended.items() if k != "abort"), ended
    [ex] = asyncio.run(recorded(store, 1))
    assert ex.error is not None and ex.error.kind == "client_abort"


def test_openai_sdk_streams_tool_calls_through_the_proxy(store: Store) -> None:
    sim = create_app(SimConfig(time_scale=0.001))
    with (
        serve(sim) as sim_url,
        proxy(sim_url, store) as url,
        openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test", max_retries=0) as client,
        client.chat.completions.stream(
            model="moonshotai/Kimi-K2-Thinking",
            messages=[{"role": "user", "content": "Weather in Osaka?"}],
            tools=[wire.WEATHER],  # type: ignore[list-item]
        ) as s,
    ):
        final = s.get_final_completion()
    call = final.choices[0].message.tool_calls[0]  # type: ignore[index]
    assert (call.id, call.function.name, json.loads(call.function.arguments)["city"]) == (
        "functions.get_weather:0",
        "get_weather",
        "Osaka",
    )  # type: ignore[union-attr]
    [ex] = asyncio.run(recorded(store, 1))
    assert ex.request.header("authorization") == "[redacted]"
    assert check_exchanges([ex], CheckConfig(direct=True)).findings == []


@contextmanager
def dual_tap(store: Store, gateway: str, sim_url: str) -> Iterator[tuple[str, str]]:
    """Caller tap -> gateway -> engine tap -> simulator; returns (caller tap URL, engine tap URL)."""
    with ExitStack() as stack:
        engine_url = stack.enter_context(proxy(sim_url, store, tap="engine", inject_correlation=False))
        yield gateway.format(engine=engine_url), engine_url


def _run_pair(store: Store, caller_url: str, n: int = 2) -> list[Any]:
    for i in range(n):
        body = wire.req(stream=True, messages=[{"role": "user", "content": f"Hello {i}"}])
        with httpx.stream(
            "POST", f"{caller_url}/v1/chat/completions", json=body, headers={"accept-encoding": "gzip"}
        ) as r:
            r.read()
    asyncio.run(recorded(store, 2 * n))
    check_pending(store, settle_s=0)
    return store.findings()


GZIP_SSE = "gzip on; gzip_types text/event-stream; gzip_min_length 0;"


def _nginx_run(store: Store, buffering: bool, extra: str = "") -> list[dict[str, Any]]:
    sim = create_app(SimConfig(decode_tokens_per_s=80.0))  # ~12 ms a token: spread over ~0.4 s
    with (
        serve(sim) as sim_url,
        proxy(sim_url, store, tap="engine", inject_correlation=False) as engine_url,
        nginx_gateway(engine_url, buffering=buffering, extra=extra) as gw,
        proxy(gw, store) as caller_url,
    ):
        return _run_pair(store, caller_url)


def test_nginx_buffering_sse_is_blamed_on_the_gateway(store: Store) -> None:
    # proxy_buffering on with gzip for event streams: nginx holds the stream until it ends
    found = _nginx_run(store, buffering=True, extra=GZIP_SSE)
    assert {(f["rule"], f["fault"], f["tap"]) for f in found} == {
        ("gateway-stream-buffered", "gateway", "caller")
    }
    assert len(store.findings(rule="gateway-stream-buffered")) == 2
    # the caller tap recorded gzip as it travelled; the checker decoded it
    caller = [e for e in store.exchanges() if e.tap == "caller"]
    assert all(e.response.header("content-encoding") == "gzip" for e in caller)


def test_nginx_1_22_proxy_buffering_on_alone_does_not_hold_back_sse(store: Store) -> None:
    # Where the reports and a real server disagree, the server wins: nginx 1.22 with proxy_buffering
    # on (and no gzip) still passed these small SSE frames on as they came, so nothing is found.
    assert _nginx_run(store, buffering=True) == []


def test_nginx_with_buffering_off_passes_clean(store: Store) -> None:
    assert _nginx_run(store, buffering=False, extra=GZIP_SSE.replace("gzip on", "gzip off")) == []


def test_simulated_gateway_fault_between_real_taps_is_the_gateways(store: Store) -> None:
    sim = create_app(SimConfig(time_scale=0.001))
    with serve(sim) as sim_url, proxy(sim_url, store, tap="engine", inject_correlation=False) as engine_url:
        gw = create_gateway(
            GatewayConfig(upstream=engine_url, faults=parse_gateway_faults("reasoning_merged"))
        )
        with serve(gw) as gw_url, proxy(gw_url, store) as caller_url:
            found = _run_pair(store, caller_url)
    assert {(f["rule"], f["fault"], f["tap"]) for f in found} >= {
        ("gateway-reasoning-merged", "gateway", "caller")
    }
    assert {f["fault"] for f in found} == {"gateway"}


def test_an_upstream_that_never_answers_gets_an_openai_shaped_504(store: Store) -> None:
    import socket as _socket

    silent = _socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # accepts connections, never answers
    try:
        with proxy(f"http://127.0.0.1:{silent.getsockname()[1]}", store, read_timeout_s=0.3) as url:
            r = httpx.post(f"{url}/v1/chat/completions", json=wire.req(), timeout=10)
    finally:
        silent.close()
    assert r.status_code == 504 and r.headers["x-wirecheck-proxy"] == "error"
    assert r.json()["error"]["code"] == 504
    [ex] = asyncio.run(recorded(store, 1))
    assert ex.error is not None and ex.error.kind == "timeout" and ex.response is None
