"""The proxy in process: byte-exact forwarding, recording, headers, limits and failures."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import wire
from wirecheck.contracts import CheckConfig, check_exchanges
from wirecheck.proxy import AdminApp, ProxyApp, TapConfig, check_pending
from wirecheck.record import Store, StreamingASGITransport, mint_correlation, read_body
from wirecheck.sim import SimConfig, create_app

#: every test here runs with the compiled twins of the forwarding side in use and on the Python path
pytestmark = pytest.mark.usefixtures("twin_paths")


class Lockstep:
    """Paces an upstream by its caller: each piece goes out only once the caller holds every byte
    sent before it. Each piece is then its own read at the proxy, however busy the machine is, and a
    proxy that held a piece back would stall the upstream (and fail at the bound) rather than pass."""

    def __init__(self, bound_s: float = 30.0) -> None:
        self.bound_s = bound_s
        self.sent = 0
        self.received = 0  # the caller's thread adds to it as its bytes come

    def took(self, data: bytes) -> bytes:
        self.received += len(data)
        return data

    async def wait(self) -> None:
        deadline = time.monotonic() + self.bound_s
        while self.received < self.sent:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the caller holds {self.received} of the {self.sent} bytes sent")
            await asyncio.sleep(0.001)


def raw_upstream(
    pieces: list[bytes],
    *,
    status: int = 200,
    ctype: bytes = b"text/event-stream",
    fail_after: int | None = None,
    delay: float = 0.0,
    lockstep: Lockstep | None = None,
) -> Any:
    """An upstream that sends exactly these pieces (and remembers the request it got); ``delay``
    sleeps before each piece, ``lockstep`` waits for the caller to hold the ones before."""
    seen: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = await read_body(receive)
        seen["headers"] = {k.decode(): v.decode() for k, v in scope["headers"]}
        seen["body"] = body
        seen["path"] = scope["path"]
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", ctype),
                    (b"x-upstream", b"yes"),
                    (b"connection", b"keep-alive"),
                ],
            }
        )
        for i, p in enumerate(pieces):
            if lockstep is not None:
                await lockstep.wait()
            if fail_after is not None and i == fail_after:
                raise ConnectionResetError("upstream reset")
            if delay:
                await asyncio.sleep(delay)
            if lockstep is not None:
                lockstep.sent += len(p)
            await send({"type": "http.response.body", "body": p, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    app.seen = seen  # type: ignore[attr-defined]
    return app


async def recorded(store: Store, n: int) -> list[Any]:
    """The store's exchanges once at least ``n`` are written (the proxy hands them over as it finishes)."""
    for _ in range(400):
        store.flush()
        if store.count() >= n:
            break
        await asyncio.sleep(0.005)
    return list(store.exchanges())


async def fetch(
    c: httpx.AsyncClient,
    body: bytes = b"{}",
    headers: dict[str, str] | None = None,
    path: str = "/v1/chat/completions",
) -> tuple[httpx.Response, bytes]:
    async with c.stream("POST", path, content=body, headers=headers or {}) as r:
        data = b"".join([p async for p in r.aiter_raw()])
    return r, data


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(st.binary(min_size=1, max_size=3000), st.lists(st.integers(1, 3000), max_size=12))
async def test_bytes_downstream_equal_bytes_upstream_for_any_split(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store, data: bytes, cuts: list[int]
) -> None:
    points = sorted({c for c in cuts if c < len(data)})
    pieces = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    c = through_proxy(raw_upstream(pieces))
    before = store.count()
    r, got = await fetch(c)
    assert got == data
    assert r.headers["x-upstream"] == "yes"
    ex = (await recorded(store, before + 1))[-1]
    assert ex.response is not None and [ch.data for ch in ex.response.chunks or []] == pieces
    assert all(
        a.t_ms <= b.t_ms
        for a, b in zip(ex.response.chunks or [], (ex.response.chunks or [])[1:], strict=False)
    )


async def test_streamed_sse_from_the_simulator_is_forwarded_and_recorded(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store
) -> None:
    c = through_proxy(create_app(SimConfig(time_scale=0.001)))
    r, got = await fetch(
        c,
        body=wire.frames(done=False)
        or b'{"model": "moonshotai/Kimi-K2-Thinking", "stream": true, "messages": [{"role": "user", "content": "Weather in Tokyo?"}], "tools": []}',
    )
    assert r.status_code == 400  # tools: [] is rejected by vLLM (and the simulator)
    import json as _json

    body = _json.dumps(wire.tool_req(stream=True)).encode()
    r, got = await fetch(c, body=body)
    assert r.status_code == 200 and got.endswith(b"data: [DONE]\n\n")
    exs = await recorded(store, 2)
    assert [e.response.status for e in exs if e.response] == [400, 200]
    res = check_exchanges(exs[1:], CheckConfig(direct=True))
    assert res.findings == []


async def test_correlation_is_injected_at_the_caller_tap_and_credentials_redacted_in_the_record(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store
) -> None:
    up = raw_upstream([b"{}"], ctype=b"application/json")
    c = through_proxy(up)
    await fetch(
        c,
        headers={
            "authorization": "Bearer sk-secret",
            "x-api-key": "k",
            "keep-alive": "timeout=5",
            "user-agent": "team-agent/1",
        },
    )
    seen = up.seen
    assert seen["headers"]["authorization"] == "Bearer sk-secret"  # forwarded unchanged
    assert "keep-alive" not in seen["headers"]  # hop-by-hop
    assert seen["headers"]["user-agent"] == "team-agent/1"  # the caller's, not the proxy's client's
    corr = seen["headers"]["x-wirecheck-id"]
    [ex] = await recorded(store, 1)
    assert ex.correlation == corr and ex.tap == "caller"
    # one nonce an exchange: the id the tap minted is made of the exchange id's (the time first)
    assert ex.id == f"caller-{corr.split('.')[0]}" and len(ex.id) == len("caller-") + 24
    assert (
        ex.request.header("authorization") == "[redacted]" and ex.request.header("x-api-key") == "[redacted]"
    )


async def test_engine_tap_reads_the_correlation_and_adds_none(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store
) -> None:
    up = raw_upstream([b"{}"], ctype=b"application/json")
    c = through_proxy(up, tap="engine", inject_correlation=False)
    minted = mint_correlation()  # what this process's caller tap sends on
    await fetch(c, headers={"x-wirecheck-id": minted})
    await fetch(c, headers={"x-wirecheck-id": "abc"})  # forged: recorded, correlating nothing
    await fetch(c)
    assert [e.correlation for e in await recorded(store, 3)] == [minted, None, None]
    assert "x-wirecheck-id" not in up.seen["headers"]


async def test_upstream_reset_mid_stream_is_recorded_and_reaches_the_caller(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store
) -> None:
    c = through_proxy(raw_upstream([b"data: {}\n\n", b"data: {}\n\n", b"x"], fail_after=2))
    try:
        await fetch(c)
        broke = False
    except httpx.HTTPError:
        broke = True
    assert broke
    [ex] = await recorded(store, 1)
    assert ex.error is not None and ex.error.kind == "upstream_reset"
    assert ex.response is not None and len(ex.response.chunks or []) == 2
    assert "transport-error" in {f.rule for f in check_exchanges([ex], CheckConfig(direct=True)).findings}


async def test_refused_upstream_gets_an_openai_shaped_502_marked_as_the_proxys(store: Store) -> None:
    from wirecheck.record import free_port

    app = ProxyApp(TapConfig(upstream=f"http://127.0.0.1:{free_port()}", connect_timeout_s=2), store)
    c = httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://proxy")
    r, body = await fetch(c)
    await app.aclose()
    assert r.status_code == 502 and r.headers["x-wirecheck-proxy"] == "error"
    err = httpx.Response(502, content=body).json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == 502
    [ex] = await recorded(store, 1)
    assert ex.error is not None and ex.error.kind == "upstream_refused" and ex.response is None


async def test_upstream_silence_times_out(store: Store) -> None:
    from wirecheck.record import serve

    # timeouts live in httpx's network layer: this upstream is a real socket
    with serve(raw_upstream([b"data: {}\n\n", b"late"], delay=0.5)) as url:
        app = ProxyApp(TapConfig(upstream=url, read_timeout_s=0.2), store)
        c = httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://proxy")
        await _drain(c)
        await app.aclose()
    [ex] = await recorded(store, 1)
    assert ex.error is not None and ex.error.kind == "timeout"


async def _drain(c: httpx.AsyncClient) -> None:
    with contextlib.suppress(httpx.HTTPError):
        await fetch(c)


async def test_body_limit_and_foreign_absolute_targets(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store
) -> None:
    c = through_proxy(raw_upstream([b"{}"], ctype=b"application/json"), body_limit=100)
    r, _ = await fetch(c, body=b"x" * 101)
    assert r.status_code == 413
    app: ProxyApp = c.proxy  # type: ignore[attr-defined]
    sent: list[Any] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(msg: Any) -> None:
        sent.append(msg)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "http://evil.example/x",
        "raw_path": b"http://evil.example/x",
        "headers": [],
        "query_string": b"",
    }
    await app(scope, receive, send)
    assert sent[0]["status"] == 403


async def test_control_endpoints_health_findings_metrics(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store
) -> None:
    import json as _json

    sim = create_app(
        SimConfig(
            time_scale=0.001,
            faults=__import__("wirecheck.sim", fromlist=["parse_faults"]).parse_faults(
                "model.undeclared_tool"
            ),
        )
    )
    c = through_proxy(sim, tap="engine", inject_correlation=False)
    await fetch(c, body=_json.dumps(wire.tool_req()).encode())
    # the endpoints are served by the admin app (its own listener in `wirecheck proxy`), not the tap
    admin = httpx.AsyncClient(
        transport=StreamingASGITransport(AdminApp([c.proxy], store)),  # type: ignore[attr-defined]
        base_url="http://localhost",  # a loopback name: without a token the admin app answers no other
    )
    c = admin
    health = (await c.get("/wirecheck/health")).json()
    assert health["status"] == "ok" and health["tap"] == "engine"
    await recorded(store, 1)
    assert check_pending(store, settle_s=0) == 1
    found = (await c.get("/wirecheck/findings", params={"fault": "model"})).json()
    assert [f["rule"] for f in found] == ["tool-call-undeclared"]
    assert (await c.get("/wirecheck/findings", params={"fault": "gateway"})).json() == []
    metrics = (await c.get("/wirecheck/metrics")).text
    assert (
        'wirecheck_findings_total{fault="model",rule="tool-call-undeclared",severity="error"} 1.0' in metrics
    )
    assert 'wirecheck_exchanges_total{outcome="ok",tap="engine"} 1.0' in metrics
    assert "wirecheck_added_latency_seconds_bucket" in metrics


async def test_an_exchange_notes_how_long_its_taps_loop_was_held_up(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store
) -> None:
    # the tap stamps pieces when its loop reads them: a loop held up mid-stream squeezes their
    # offsets, and the exchange says by how much it could have (gateway-stream-buffered reads it)
    async def held_up(scope: Any, receive: Any, send: Any) -> None:
        await read_body(receive)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for i in range(3):
            if i == 1:
                time.sleep(0.08)  # in the tap's own loop (the upstream runs in-process here)
            await send({"type": "http.response.body", "body": b"data: {}\n\n", "more_body": True})
            await asyncio.sleep(0.01)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    before = store.count()
    await fetch(through_proxy(held_up))
    ex = (await recorded(store, before + 1))[-1]
    assert ex.extra["stall_ms"] >= 80 - 5  # at least as long, less the timer's tick
    assert "_t0_mono" not in ex.extra
