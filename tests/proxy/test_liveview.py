"""The live view over real loopback sockets: the simulator behind the proxy, the checker's
step run in process, headless Chromium on the page, httpx on the event stream."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import wire
from tests.support.chromium import LivePage
from tests.support.servers import dual_tap, port_open, running, sim_behind_gateway, stop
from wirecheck.contracts import Exchange, HttpRequest
from wirecheck.proxy import AdminApp, ListenerConfig, ProxyApp, TapConfig, check_pending, serve_listener
from wirecheck.proxy._liveview import LiveView, LiveViewConfig
from wirecheck.proxy._viewproc import ViewProcess
from wirecheck.record import Store, free_port, serve
from wirecheck.sim import SimConfig, create_app, parse_faults

#: model output that would run script if a page ever wrote it as HTML
HOSTILE = '<img src=x onerror="window.__pwned=1"></script><script>window.__pwned=2</script>'


@dataclass(frozen=True)
class Served:
    proxy: str  # the tap callers send to
    admin: str  # the admin listener, where the live view is mounted
    process: ViewProcess | None = None  # what hands view connections to the view process


@contextmanager
def watched(
    store: Store, faults: str = "", *, process: bool = False, token: str | None = None, **view: Any
) -> Iterator[tuple[Served, LiveView]]:
    """Simulator -> proxy (recording into ``store``), and the admin listener with the live view
    mounted. ``process``: as ``wirecheck proxy`` mounts it, handing each view connection to the view
    process (``ViewProcess``; the LiveView yielded is then its in-process fallback); else the view
    is served in this process, where its counters can be read."""
    sim = create_app(SimConfig(time_scale=0.001, faults=parse_faults(faults)))
    with serve(sim) as sim_url:
        app = ProxyApp(TapConfig(upstream=sim_url), store)
        admin = AdminApp([app], store, token=token)
        cfg = LiveViewConfig(**view)
        mounted: LiveView | ViewProcess
        if process:
            mounted = ViewProcess(
                store, taps=["caller"], health=admin.health_info, max_head=64 * 1024, config=cfg
            )
            lv = mounted.fallback
        else:
            mounted = lv = LiveView(store.url, taps=["caller"], health=admin.health_info, config=cfg)
        admin.mount(mounted.cfg.prefix, mounted)
        try:
            admin_cfg = ListenerConfig(idle_timeout_s=5.0, handoff=True)
            with serve_listener(app) as url, serve_listener(admin, config=admin_cfg) as admin_url:
                yield Served(url, admin_url, mounted if isinstance(mounted, ViewProcess) else None), lv
        finally:
            mounted.close()


def _ask(url: str, city: str = "Osaka", **kw: Any) -> None:
    body = wire.req(
        stream=True,
        tools=[wire.WEATHER],
        messages=[{"role": "user", "content": f"What is the weather in {city}?"}],
        **kw,
    )
    r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200


def _retry_with(url: str, args_text: str) -> None:
    """A tool call that failed, so the simulated model calls it again with the same argument text."""
    body = wire.req(
        stream=True,
        tools=[wire.WEATHER],
        messages=wire.tool_turn("Weather in Osaka?", "error: upstream timeout", args=args_text),
    )
    assert httpx.post(f"{url}/v1/chat/completions", json=body, timeout=30).status_code == 200


def _check(store: Store, n: int) -> None:
    """What the live-check worker does, in process: check whatever the writer has stored."""
    deadline = time.monotonic() + 10
    while store.count() < n:
        assert time.monotonic() < deadline, "the exchanges were never stored"
        time.sleep(0.01)
    check_pending(store, settle_s=0)


def _events(
    url: str, *, until: Callable[[list[dict[str, Any]]], bool], headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """SSE events from ``url`` ({"id", "event", "data"}) until ``until(events)``; then the connection
    is dropped by the client, as a browser that goes away does."""
    out: list[dict[str, Any]] = []
    cur: dict[str, Any] = {}
    # bounds to fail by: the first view request may start the view's process
    with httpx.stream("GET", url, headers=headers or {}, timeout=httpx.Timeout(60, read=30)) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if not line:
                if "event" in cur:
                    cur["data"] = json.loads(cur["data"])
                    out.append(cur)
                    if until(out):
                        break
                cur = {}
            elif not line.startswith(":"):
                key, _, value = line.partition(":")
                cur[key] = value[1:] if value.startswith(" ") else value
    return out


# --- the page in a real browser -----------------------------------------------------------------


def test_findings_injected_by_simulator_faults_appear_on_the_page(store: Store) -> None:
    with (
        watched(store, "model.invalid_json,model.undeclared_tool", process=True) as (u, _),
        LivePage(f"{u.admin}/wirecheck/") as page,
    ):
        page.wait_for("document.getElementById('stream').dataset.state === 'open'")
        _ask(u.proxy, "Osaka")
        _check(store, 1)
        stored = {f["rule"] for f in store.findings()}
        assert "tool-call-args-invalid-json" in stored, stored
        # a bound to fail by: how soon they show is the view's poll interval, not a figure to time here
        page.wait_for(
            "[...document.querySelectorAll('#findings tr.finding')].map(r => r.dataset.rule).join(' ')"
            f" .split(' ').filter(Boolean).length >= {len(store.findings())}",
            timeout=30,
        )
        shown = page.js("[...document.querySelectorAll('#findings tr.finding')].map(r => r.dataset.rule)")
        assert isinstance(shown, list) and set(shown) == stored
        # the counts and the exchange row came with them
        assert "tool-call-args-invalid-json" in str(page.js("document.getElementById('by-rule').textContent"))
        assert page.js("document.querySelectorAll('#exchanges tr.exchange').length") == 1
        page.wait_for("document.getElementById('pairing').textContent.includes('caller')", timeout=30)
        assert "store: ok" in str(page.js("document.getElementById('health').textContent"))


def test_with_a_token_the_page_opens_in_a_plain_browser(store: Store) -> None:
    """EventSource sends no Authorization header: the page is opened once with ``?token=``, which
    becomes an HttpOnly cookie, and the stream opens on that alone."""
    with (
        watched(store, process=True, token="s3cret-view") as (u, _),
        LivePage(f"{u.admin}/wirecheck/?token=s3cret-view") as page,
    ):
        page.wait_for("document.getElementById('stream').dataset.state === 'open'")
        _ask(u.proxy, "Osaka")
        page.wait_for("document.querySelectorAll('#exchanges tr.exchange').length === 1", timeout=10)
        # the token left the address bar, and the page's script cannot read the cookie
        assert page.js("location.href") == f"{u.admin}/wirecheck/"
        assert page.js("document.cookie") == ""


def test_a_hostile_string_in_a_tool_argument_renders_as_text(store: Store) -> None:
    with (
        watched(store, "model.invalid_json", process=True) as (u, _),
        LivePage(f"{u.admin}/wirecheck/view") as page,
    ):
        page.wait_for("document.getElementById('stream').dataset.state === 'open'")
        _retry_with(u.proxy, json.dumps({"city": HOSTILE}))
        _check(store, 1)
        [found] = store.findings(rule="tool-call-args-invalid-json")
        assert "<img src=x onerror=" in found["evidence"]["excerpt"]
        page.wait_for("document.querySelector('#findings tr.finding .excerpt') !== null")
        excerpt = str(page.js("document.querySelector('#findings tr.finding .excerpt').textContent"))
        assert "<img src=x onerror=" in excerpt and "</script><script>" in excerpt
        # the finding's link opens its exchange: the request body with the hostile text in it
        page.js("document.querySelector('#findings a[data-exchange]').click()")
        page.wait_for("document.querySelector('#detail .req-body') !== null")
        body = str(page.js("document.querySelector('#detail .req-body').textContent"))
        assert json.loads(body)["messages"][1]["tool_calls"][0]["function"]["arguments"] == json.dumps(
            {"city": HOSTILE}
        )
        assert page.js("document.querySelectorAll('#detail .chunks tr').length > 3")
        # nothing became markup and nothing ran
        assert page.js("document.querySelectorAll('img').length") == 0
        assert page.js("document.querySelectorAll('script').length") == 1  # the page's own
        assert page.js("typeof window.__pwned") == "undefined"


# --- the event stream ---------------------------------------------------------------------------


def test_a_reconnect_with_last_event_id_loses_nothing(store: Store) -> None:
    with watched(store, "model.invalid_json", process=True) as (u, _):
        for city in ("Osaka", "Kyoto", "Nara"):
            _ask(u.proxy, city)
        _check(store, 3)
        first = _events(
            f"{u.admin}/wirecheck/events?kind=finding",
            headers={"last-event-id": "0-0"},
            until=lambda ev: len(ev) == 2,
        )
        # the stream is gone; more traffic is checked while nobody listens
        for city in ("Kobe", "Sapporo", "Sendai"):
            _ask(u.proxy, city)
        _check(store, 6)
        total = len(store.findings())
        assert total >= 6
        rest = _events(
            f"{u.admin}/wirecheck/events?kind=finding",
            headers={"last-event-id": first[-1]["id"]},
            until=lambda ev: len(ev) == total - 2,
        )
    seqs = [e["data"]["seq"] for e in first + rest]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) == total
    stored = store.findings()
    assert [(e["data"]["exchange_id"], e["data"]["rule"]) for e in first + rest] == [
        (f["exchange_id"], f["rule"]) for f in stored
    ]


def test_events_carry_exchanges_then_their_findings_with_the_model(store: Store) -> None:
    with watched(store, "model.invalid_json") as (u, _):
        _ask(u.proxy)
        _check(store, 1)
        got = _events(
            f"{u.admin}/wirecheck/events", headers={"last-event-id": "0-0"}, until=lambda ev: len(ev) >= 2
        )
    assert [e["event"] for e in got] == ["exchange", "finding"]
    ex, finding = got[0]["data"], got[1]["data"]
    assert finding["exchange_id"] == ex["id"] and ex["status"] == 200
    assert ex["model"] == finding["model"] == wire.K2
    assert [e["id"] for e in got] == ["1-0", "1-1"]


@pytest.mark.parametrize(
    ("query", "shows"),
    [
        ("tap=engine", set()),
        ("fault=model", set()),
        ("severity=error", {"finding"}),
        ("rule=tool-call-args-invalid-json", {"finding"}),
        ("model=moonshotai/Kimi-K2-Thinking", {"exchange", "finding"}),
        ("model=other", set()),
        ("kind=exchange", {"exchange"}),
    ],
)
def test_filters_select_what_the_stream_carries(store: Store, query: str, shows: set[str]) -> None:
    with watched(store, "model.invalid_json") as (u, _):
        _ask(u.proxy)
        _check(store, 1)
        seen: set[str] = set()
        # a second without a byte: every stored row has been read (viewers poll every 0.2 s)
        with (
            httpx.stream(
                "GET",
                f"{u.admin}/wirecheck/events?{query}",
                headers={"last-event-id": "0-0"},
                timeout=httpx.Timeout(5, read=1.0),
            ) as r,
            contextlib.suppress(httpx.ReadTimeout),
        ):
            assert r.status_code == 200
            for line in r.iter_lines():
                if line.startswith("event:"):
                    seen.add(line.split(":", 1)[1].strip())
    # (fault is "unknown" with one tap: the engine tap is missing, so the model is not blamed)
    assert seen == shows


@pytest.mark.parametrize(
    ("query", "headers", "says"),
    [
        ("fault=nobody", {}, "fault 'nobody'"),
        ("severity=fatal", {}, "severity 'fatal'"),
        ("rule=no-such-rule", {}, "not a wirecheck rule"),
        ("tap=%3Cscript%3E", {}, "not a tap name"),
        ("kind=both", {}, "kind 'both'"),
        ("backlog=-1", {}, "backlog must be"),
        ("colour=red", {}, "unknown parameter 'colour'"),
        ("", {"last-event-id": "yesterday"}, "Last-Event-ID"),
    ],
)
def test_bad_filters_get_a_400_that_names_them(
    store: Store, query: str, headers: dict[str, str], says: str
) -> None:
    with watched(store) as (u, lv):
        r = httpx.get(f"{u.admin}/wirecheck/events?{query}", headers=headers, timeout=5)
        assert lv.stats.viewers == 0
    assert r.status_code == 400 and r.headers["content-type"] == "application/json"
    assert says in r.json()["error"]["message"]


def test_viewers_past_the_limit_are_refused_and_counted(store: Store) -> None:
    with watched(store, max_viewers=2) as (u, lv), httpx.Client(timeout=5) as client:
        streams = [client.stream("GET", f"{u.admin}/wirecheck/events") for _ in range(2)]
        opened = [s.__enter__() for s in streams]
        try:
            assert [r.status_code for r in opened] == [200, 200]
            r = client.get(f"{u.admin}/wirecheck/events")
            assert r.status_code == 503 and "limit" in r.json()["error"]["message"]
            state = client.get(f"{u.admin}/wirecheck/state").json()
            assert state["viewers"]["open"] == 2 and state["viewers"]["refused"] == 1
        finally:
            for s in streams:
                s.__exit__(None, None, None)
        deadline = time.monotonic() + 5
        while lv.stats.viewers:  # the server notices the closed connections
            assert time.monotonic() < deadline
            time.sleep(0.02)


def test_a_stalled_viewer_is_dropped_and_the_proxy_keeps_forwarding(store: Store) -> None:
    # more than the socket buffers and the server's write buffer hold: 2000 stored exchanges with long
    # paths (~4 MB of events), written straight into the store
    store.write_now(
        Exchange(
            id=f"old-{i}",
            tap="caller",
            request=HttpRequest("POST", "/v1/chat/completions?pad=" + "x" * 2000, [], b"{}"),
        )
        for i in range(2000)
    )
    # the viewer is dropped once a write to it has waited 5 s: the forwards below must all be answered
    # before that, while it stalls (a request path that waited on the viewer would be answered after)
    with watched(store, send_timeout_s=5.0, batch=500) as (u, lv):
        stalled = socket.socket()
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", int(u.admin.rsplit(":", 1)[1])))
        try:
            # asks for everything from the start and never reads a byte
            stalled.sendall(
                b"GET /wirecheck/events?kind=exchange HTTP/1.1\r\nhost: localhost\r\nlast-event-id: 0-0\r\n\r\n"
            )
            deadline = time.monotonic() + 30  # a bound to fail by: the viewer is dropped 5 s into the stall
            while lv.stats.viewers == 0:  # connected: the view writes until the buffers are full
                assert time.monotonic() < deadline, "the viewer never connected"
                time.sleep(0.01)
            assert lv.stats.dropped == 0
            for city in ("Lisbon", "Porto", "Faro"):
                _ask(u.proxy, city)  # meanwhile, the request path answers as ever
            assert lv.stats.dropped == 0, "a forward was answered only after the stalled viewer was dropped"
            while lv.stats.dropped == 0:
                assert time.monotonic() < deadline, "the stalled viewer was never dropped"
                time.sleep(0.02)
        finally:
            stalled.close()
        assert lv.stats.dropped == 1 and lv.stats.viewers == 0
        # a viewer that does read gets all of it
        got = _events(
            f"{u.admin}/wirecheck/events?kind=exchange",
            headers={"last-event-id": "0-0"},
            until=lambda ev: len(ev) == 2000,
        )
    assert [e["data"]["id"] for e in got] == [f"old-{i}" for i in range(2000)]


def test_the_state_and_an_exchange_from_the_store(store: Store) -> None:
    with watched(store, "model.invalid_json") as (u, _):
        _ask(u.proxy)
        _check(store, 1)
        state = httpx.get(f"{u.admin}/wirecheck/state", timeout=5).json()
        [ex] = list(store.exchanges())
        one = httpx.get(f"{u.admin}/wirecheck/exchange/{ex.id}", timeout=5)
        missing = httpx.get(f"{u.admin}/wirecheck/exchange/nope", timeout=5)
        health = httpx.get(f"{u.admin}/wirecheck/health", timeout=5)
        unknown = httpx.get(f"{u.admin}/wirecheck/nothing-here", timeout=5)
        posted = httpx.post(f"{u.admin}/wirecheck/events", timeout=5)
    assert (
        state["store_ok"]
        and state["exchanges"] == 1
        and state["gaps"] == {"count": 0, "dropped": 0, "last": []}
    )
    assert state["pairing"]["taps"] == {"caller": {"exchanges": 1, "paired": 0, "unpaired": 1}}
    assert {c["rule"] for c in state["finding_counts"]} == {f["rule"] for f in store.findings()}
    body = one.json()
    assert body["exchange"]["id"] == ex.id and body["exchange"]["response"]["chunks"]
    assert [f["rule"] for f in body["findings"]] == [f["rule"] for f in store.findings(exchange_id=ex.id)]
    assert missing.status_code == 404
    assert health.json()["tap"] == "caller"  # the proxy's own endpoints are still its own
    assert unknown.status_code == 404 and unknown.json()["error"]["type"] == "not_found"
    assert posted.status_code == 405 and posted.json()["error"]["code"] == 405


def test_the_proxy_process_streams_the_live_checkers_findings_and_stops_with_viewers_open(
    tmp_path: Path,
) -> None:
    """``wirecheck proxy`` as deployed (dual tap, the checker in its worker process): a viewer sees
    the checker's findings as it stores them, both taps paired, and SIGTERM still stops the proxy
    while the viewer's stream is open."""
    sp, gp, cp, ep, ap = free_port(), free_port(), free_port(), free_port(), free_port()
    with (
        sim_behind_gateway(sp, gp, ep),
        running(
            *dual_tap(
                gp,
                cp,
                engine_upstream=f"http://127.0.0.1:{sp}",
                engine=ep,
                store=str(tmp_path / "wc.db"),
                admin=ap,
            ),
            ready=port_open(cp, ep, ap),
        ) as proxy,
    ):
        try:
            base = f"http://127.0.0.1:{ap}/wirecheck"  # the admin listener
            # the first view request starts the view's process: a bound to fail by, not a speed
            assert "wirecheck live view" in httpx.get(f"{base}/", timeout=60).text
            with httpx.stream("GET", f"{base}/events?kind=finding", timeout=httpx.Timeout(10, read=5)) as r:
                assert r.status_code == 200
                for i in range(3):
                    httpx.post(
                        f"http://127.0.0.1:{cp}/v1/chat/completions",
                        json=wire.tool_req(messages=[{"role": "user", "content": f"Weather in Kyoto {i}?"}]),
                        timeout=10,
                    ).raise_for_status()
                seen: set[tuple[str, str, str]] = set()
                for line in r.iter_lines():
                    if line.startswith("data:"):
                        f = json.loads(line[5:])
                        seen.add((f["rule"], f["fault"], f["tap"]))
                    if {
                        ("tool-call-undeclared", "model", "engine"),
                        ("gateway-reasoning-dropped", "gateway", "caller"),
                    } <= seen:
                        break
            # (leaving the loop above closed that stream) a viewer that stays connected
            with httpx.stream("GET", f"{base}/events", timeout=httpx.Timeout(10, read=5)) as r:
                pieces = r.iter_raw()
                assert b"wirecheck live view" in next(pieces)
                state = httpx.get(f"{base}/state", timeout=5).json()
                assert state["viewers"]["open"] == 1, state["viewers"]
                # served by the view's own process, not by the proxy that forwards
                assert state["viewers"]["pid"] != proxy.pid
                assert state["health"]["taps"][0]["tap"] in ("caller", "engine")
                assert state["pairing"]["taps"]["caller"]["paired"] == 3
                assert state["pairing"]["taps"]["engine"]["paired"] == 3
                # SIGTERM must still stop the proxy, and flush, while the viewer is connected
                _out, err = stop(proxy)
        finally:
            if proxy.poll() is None:
                proxy.kill()
                proxy.wait(timeout=10)
    assert proxy.returncode == 0, err


def test_a_postgresql_store_streams_and_resumes_alike(pg_url: str) -> None:
    # the read side is spelled per backend (the request body's model): the same events from both
    store = Store(pg_url, writer=True)
    try:
        with watched(store, "model.invalid_json") as (u, _):
            for city in ("Osaka", "Kyoto"):
                _ask(u.proxy, city)
            _check(store, 2)
            total = 2 + len(store.findings())
            first = _events(
                f"{u.admin}/wirecheck/events", headers={"last-event-id": "0-0"}, until=lambda ev: len(ev) == 2
            )
            rest = _events(
                f"{u.admin}/wirecheck/events",
                headers={"last-event-id": first[-1]["id"]},
                until=lambda ev: len(ev) == total - 2,
            )
            state = httpx.get(f"{u.admin}/wirecheck/state", timeout=5).json()
    finally:
        store.close()
    got = first + rest
    assert [e["event"] for e in got].count("exchange") == 2 and len(got) == total
    assert {e["data"]["model"] for e in got} == {wire.K2}
    assert state["store_ok"] and state["exchanges"] == 2
