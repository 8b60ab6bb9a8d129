"""The proxy asks its upstream's GET /version once and writes the answer on the exchanges it records,
for the known-bug catalogue's version ranges; a gateway that has no /version (LiteLLM answers 404) or
answers something else than vLLM's shape leaves the exchanges without one."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.proxy.test_app import fetch, recorded
from tests.support import wire
from wirecheck.contracts import dump_exchange, load_exchange
from wirecheck.proxy import ProxyApp, TapConfig
from wirecheck.proxy._version import UpstreamVersion
from wirecheck.record import Store, StreamingASGITransport
from wirecheck.sim import SimConfig, create_app


def counting(version_status: int, version_body: bytes) -> tuple[Any, list[str]]:
    """An upstream that answers every POST with a chat completion, /version as given, and notes the
    paths it was asked."""
    paths: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        while (await receive()).get("more_body"):
            pass
        paths.append(scope["path"])
        status, body = (
            (version_status, version_body)
            if scope["path"] == "/version"
            else (200, json.dumps(wire.completion()).encode())
        )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return app, paths


async def answered(app: ProxyApp) -> None:
    """Until the question the first request started has its answer (a recorded fact, not a sleep)."""
    version = app._version
    assert version is not None
    for _ in range(400):
        if version._task is not None and version._task.done():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the /version question never finished")


async def test_the_engines_version_is_asked_once_and_written_on_every_exchange(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store
) -> None:
    sim = create_app(SimConfig(time_scale=0.001, version="0.32.0"))
    c = through_proxy(sim, ask_version=True)
    body = json.dumps(wire.req()).encode()
    await fetch(c, body=body)
    await answered(c.proxy)  # type: ignore[attr-defined]
    await fetch(c, body=body)
    await fetch(c, body=body)
    exs = await recorded(store, 3)
    # the question itself is not traffic: three exchanges, all of them POSTs
    assert [e.request.method for e in exs] == ["POST"] * 3
    assert [e.extra.get("server_version") for e in exs[1:]] == ["0.32.0", "0.32.0"]
    # it travels with the exchange through the interchange format (the store keeps that form)
    assert load_exchange(dump_exchange(exs[-1])).extra["server_version"] == "0.32.0"


@pytest.mark.parametrize(
    ("status", "answer"),
    [
        (404, b'{"detail": "Not Found"}'),  # LiteLLM between the taps has no /version
        (200, b'{"version": "latest"}'),  # not a version
        (200, b'{"version": "0.32.0", "detail": ["'),  # not JSON
        (401, b'{"error": "Unauthorized"}'),  # vLLM with --api-key: /version is behind it too
    ],
)
async def test_an_answer_that_is_not_vllms_version_writes_none_and_is_not_asked_again(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store, status: int, answer: bytes
) -> None:
    app, paths = counting(status, answer)
    c = through_proxy(app, ask_version=True)
    await fetch(c)
    await answered(c.proxy)  # type: ignore[attr-defined]
    await fetch(c)
    await fetch(c)
    exs = await recorded(store, 3)
    assert paths.count("/version") == 1
    assert all("server_version" not in e.extra for e in exs)


async def test_without_ask_version_the_upstream_sees_only_the_callers_requests(
    through_proxy: Callable[..., httpx.AsyncClient], store: Store
) -> None:
    app, paths = counting(200, b'{"version": "0.32.0"}')
    c = through_proxy(app)
    await fetch(c)
    await fetch(c)
    exs = await recorded(store, 2)
    assert paths == ["/v1/chat/completions"] * 2
    assert all("server_version" not in e.extra for e in exs)


class _Refusing:
    """An upstream that is not up: every connection refused."""

    def __init__(self) -> None:
        self.asked = 0

    async def open(self, method: str, target: str, headers: Any, body: bytes) -> Any:
        from wirecheck.proxy._upstream import UpstreamUnreachable

        self.asked += 1
        raise UpstreamUnreachable("connection refused")

    async def aclose(self) -> None:
        pass


async def test_a_refused_question_is_asked_again_only_after_a_while() -> None:
    now = [100.0]
    up = _Refusing()
    v = UpstreamVersion(up, "", clock=lambda: now[0])  # type: ignore[arg-type]

    async def ask() -> None:
        v.ask()
        assert v._task is not None
        await v._task

    await ask()
    now[0] += 5
    v.ask()  # too soon: no second question
    assert v._task is not None and v._task.done() and up.asked == 1
    now[0] += 30
    await ask()
    assert up.asked == 2 and v.version is None


async def test_a_refused_exchange_forgets_the_version_so_a_restarted_engine_is_asked_afresh() -> None:
    from wirecheck.contracts import Exchange, ExchangeError

    sim = create_app(SimConfig(time_scale=0.001, version="0.32.0"))
    app = ProxyApp(
        TapConfig(upstream="http://upstream", ask_version=True), None, transport=StreamingASGITransport(sim)
    )
    try:
        async with httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://proxy") as c:
            await c.post("/v1/chat/completions", content=json.dumps(wire.req()).encode())
        await answered(app)
        version = app._version
        assert version is not None and version.version == "0.32.0"
        refused = Exchange("engine-x", tap="engine", error=ExchangeError("upstream_refused", "down"))
        version.stamp(refused)
        assert "server_version" not in refused.extra and version.version is None
        version._asked_at = None  # the retry wait is the test above's; here the next request asks
        version.ask()
        await answered(app)
        assert version.version == "0.32.0"
    finally:
        await app.aclose()
