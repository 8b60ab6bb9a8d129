"""The live view's own process: the admin listener hands each view connection to it, so
viewers cost the request path nothing; and whatever cannot be handed is still served, by the proxy."""

from __future__ import annotations

import os
import signal
import socket
import time

import httpx
import pytest

from tests.proxy.test_liveview import _ask, _events, watched
from wirecheck.proxy import _viewproc
from wirecheck.record import Store

#: a bound to fail by, not a speed asked for: the admin listener answers at once, but the suite's
#: workers, the real vLLM servers starting beside them and their installs can leave its thread
#: without a core for seconds (one answer of 401 took over 10 s in a clean-clone run)
WITHIN_S = 60


def _state(admin: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.get(f"{admin}/wirecheck/state", headers=headers, timeout=WITHIN_S)


def _raw(admin: str, data: bytes, *, until: int, timeout: float = 30) -> bytes:
    """Send ``data`` on one connection; read until ``until`` responses have come, or the server closed
    it. A server that neither answers nor closes within ``timeout`` (a bound to fail by) raises."""
    host, port = admin.removeprefix("http://").split(":")
    got = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        deadline = time.monotonic() + timeout
        while got.count(b"HTTP/1.1 ") < until and time.monotonic() < deadline:
            piece = s.recv(65536)
            if not piece:
                break
            got += piece
    return got


def test_view_requests_are_answered_by_a_process_of_their_own(store: Store) -> None:
    with watched(store, "model.invalid_json", process=True) as (u, _):
        assert u.process is not None
        first = _state(u.admin)
        assert first.status_code == 200, first.text
        assert first.headers["connection"] == "close"  # one request per handed connection
        body = first.json()
        child = body["viewers"]["pid"]
        assert child != os.getpid()
        # the proxy's own health, asked for across the process boundary
        assert body["health"]["taps"][0]["tap"] == "caller" and body["health"]["status"] == "ok"
        _ask(u.proxy)
        got = _events(
            f"{u.admin}/wirecheck/events?kind=exchange",
            headers={"last-event-id": "0-0"},
            until=lambda ev: len(ev) == 1,
        )
        assert got[0]["data"]["status"] == 200
        assert _state(u.admin).json()["viewers"]["pid"] == child  # the same process, started once
        page = httpx.get(f"{u.admin}/wirecheck/", timeout=10)
        assert page.status_code == 200 and "wirecheck live view" in page.text
        assert u.process.handed == 4 and u.process.served_here == 0 and u.process.starts == 1


def test_a_dead_view_process_is_replaced_and_the_proxy_serves_the_view_meanwhile(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    with watched(store, process=True) as (u, _):
        assert u.process is not None
        old = _state(u.admin).json()["viewers"]["pid"]
        monkeypatch.setattr(_viewproc, "RESPAWN_S", 3600.0)  # not yet: the proxy serves meanwhile
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while u.process._proc is not None and u.process._proc.is_alive():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        meanwhile = _state(u.admin)
        assert meanwhile.status_code == 200 and meanwhile.json()["viewers"]["pid"] == os.getpid()
        monkeypatch.setattr(_viewproc, "RESPAWN_S", 0.0)  # now it may start again
        again = _state(u.admin)
        assert again.status_code == 200
        assert again.json()["viewers"]["pid"] not in (old, os.getpid()) and u.process.starts == 2


def test_a_request_pipelined_behind_a_view_request_is_answered_too(store: Store) -> None:
    with watched(store, process=True) as (u, _):
        two = (
            b"GET /wirecheck/state HTTP/1.1\r\nhost: localhost\r\n\r\n"
            b"GET /wirecheck/health HTTP/1.1\r\nhost: localhost\r\n\r\n"
        )
        got = _raw(u.admin, two, until=2)
        assert got.count(b"HTTP/1.1 200") == 2, got[:400]
        assert b'"viewers"' in got and b'"in_flight"' in got
        assert u.process is not None and u.process.handed == 0  # a pipelined queue stays here whole


@pytest.mark.parametrize(
    "framing",
    [b"content-length: 5\r\n\r\nhello", b"transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"],
)
def test_a_view_request_with_a_body_is_answered_at_once(store: Store, framing: bytes) -> None:
    """The body was read by the admin listener; the view process answers the request it is handed."""
    with watched(store, process=True) as (u, _):
        # one answer, then the view process closes the connection: it waited for no body
        got = _raw(u.admin, b"GET /wirecheck/state HTTP/1.1\r\nhost: localhost\r\n" + framing, until=2)
        assert got.startswith(b"HTTP/1.1 200") and b'"viewers"' in got, got[:300]
        assert got.count(b"HTTP/1.1 ") == 1
        assert u.process is not None and u.process.handed == 1


def test_a_handed_connection_is_never_a_way_past_the_admin_token(store: Store) -> None:
    with watched(store, process=True, token="s3cret") as (u, _):
        assert _state(u.admin).status_code == 401
        ok = _state(u.admin, headers={"authorization": "Bearer s3cret"})
        assert ok.status_code == 200 and ok.json()["viewers"]["pid"] != os.getpid()
        # the handed connection carries that one request: the view process closes it after the
        # answer, so no later request on it (one without the token) is ever read there
        one = b"GET /wirecheck/state HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer s3cret\r\n\r\n"
        got = _raw(u.admin, one, until=2)
        assert got.startswith(b"HTTP/1.1 200") and b"connection: close" in got.lower()
        assert got.count(b"HTTP/1.1 ") == 1  # closed after it (_raw raises on a time-out)
        assert u.process is not None and u.process.handed >= 2


def test_the_view_can_stay_in_the_proxys_process(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_viewproc.VIEW_PROCESS_ENV, "0")
    with watched(store, process=True) as (u, _):
        r = _state(u.admin)
        assert r.status_code == 200 and r.json()["viewers"]["pid"] == os.getpid()
        assert u.process is not None and u.process.handed == 0 and u.process.starts == 0
