"""``free_port``: a port nothing holds, drawn where no outgoing connection takes its source port
(below the kernel's ephemeral range), so that a server started on it a moment later finds it free."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from wirecheck.record import _serve, free_port


def test_a_free_port_is_below_the_ephemeral_range_and_can_be_listened_on() -> None:
    low = _serve._ephemeral_low()
    if low is None:
        pytest.skip("the kernel does not say its ephemeral range here (not Linux)")
    ports = {free_port() for _ in range(20)}
    assert all(_serve._FLOOR <= p < low for p in ports), ports
    assert len(ports) > 1  # drawn, not one port handed to every caller
    for port in list(ports)[:3]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))
            s.listen()


def test_a_port_that_is_held_is_not_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        low = taken + 1
        drawn: list[int] = []

        class Draw:
            """The held port twice, then the ports from the floor up."""

            def randrange(self, lo: int, hi: int) -> int:
                drawn.append(taken if len(drawn) < 2 else lo + len(drawn))
                return drawn[-1]

        monkeypatch.setattr(_serve, "_ephemeral_low", lambda: low)
        monkeypatch.setattr(_serve, "_DRAW", Draw())
        port = free_port()
        assert drawn[:2] == [taken, taken] and port == drawn[-1] and len(drawn) >= 3
        assert port != taken and _serve._FLOOR <= port < low


@pytest.mark.parametrize("low", [None, 21000])
def test_without_room_below_the_range_the_os_picks(monkeypatch: pytest.MonkeyPatch, low: Any) -> None:
    """No range told (not Linux), or too little room under it: a bind to port 0, as before."""
    monkeypatch.setattr(_serve, "_ephemeral_low", lambda: low)
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def test_a_served_app_holds_its_drawn_port_from_the_draw_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` binds the socket it draws and hands that socket to the server: between the draw
    and the server's start no other process can take the port (a parallel test's server once did,
    and the server then never started). The app answers on it, and the port is free again after."""
    import httpx

    given: list[socket.socket] = []
    drawn = _serve._drawn

    def drawing() -> socket.socket:
        sock = drawn()
        given.append(sock)
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(sock.getsockname())  # held already, before uvicorn runs
        return sock

    monkeypatch.setattr(_serve, "_drawn", drawing)
    with _serve.serve(_ok, log_level="error") as url:
        assert url == f"http://127.0.0.1:{given[0].getsockname()[1]}"
        assert httpx.get(url).text == "ok"
    assert given[0].fileno() == -1  # closed with the server


def test_a_port_asked_for_that_is_held_is_a_clear_error_at_once() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(OSError), _serve.serve(_ok, held.getsockname()[1], log_level="error"):
            pytest.fail("served on a port another socket listens on")
