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
