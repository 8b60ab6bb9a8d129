"""The stored path keeps the query string, as docs/exchange-format.md says (ASGI
servers hand the query apart from ``raw_path``), with credential values redacted by the policy."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.support import wire
from wirecheck.proxy import ProxyApp, TapConfig, serve_listener, to_har
from wirecheck.record import Store, serve
from wirecheck.sim import SimConfig, create_app


def test_the_recorded_path_keeps_its_query_with_credentials_redacted(tmp_path: Path) -> None:
    store = Store(tmp_path / "wc.db", writer=True)
    sent = "/v1/chat/completions?trace=abc&key=s3cr3t-q&x=%2Fy&flag"
    try:
        with (
            serve(create_app(SimConfig(time_scale=0.001))) as sim,
            serve_listener(ProxyApp(TapConfig(upstream=sim), store)) as tap,
        ):
            r = httpx.post(tap + sent, json=wire.tool_req(), timeout=20)
            assert r.status_code == 200
            assert httpx.get(tap + "/v1/models", timeout=20).status_code == 200
        deadline = time.monotonic() + 20
        store.flush()
        while store.count() < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            store.flush()
        paths = sorted(ex.request.path for ex in store.exchanges())
    finally:
        store.close()
    # 2 sent, 2 recorded: every byte of the query kept but the credential's value
    assert paths == ["/v1/chat/completions?trace=abc&key=[redacted]&x=%2Fy&flag", "/v1/models"]
    store = Store(tmp_path / "wc.db")
    try:
        urls = sorted(e["request"]["url"] for e in to_har(store.exchanges())["log"]["entries"])
    finally:
        store.close()
    assert urls[0].endswith("/v1/chat/completions?trace=abc&key=[redacted]&x=%2Fy&flag")
