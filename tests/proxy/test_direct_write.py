"""The compiled sink's own writes to the caller's socket (proxy/_relay_c.c, ``Sink(fd=...)``).

Given the socket, the sink sends each chunk itself while the caller's transport holds nothing unsent,
and hands the transport only what the socket did not take: the caller gets the same bytes in the
same order either way. These tests use a real socket pair and a transport stand-in that says what it
holds; the whole proxy (uvloop's transports) is covered by the relay and e2e tests, which run with
the direct writes on."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Iterator
from typing import Any

import pytest

from wirecheck.contracts._native import PURE_PYTHON
from wirecheck.proxy import _upstream
from wirecheck.proxy._histogram import _Series
from wirecheck.proxy._http import ListenerConfig, _plain_fd

relay_c = _upstream._native_relay
pytestmark = pytest.mark.skipif(relay_c is None and PURE_PYTHON, reason="WIRECHECK_PURE_PYTHON=1")


class _Transport:
    """The caller's transport and connection in one: what it was given, what it says it holds."""

    def __init__(self, held: int = 0) -> None:
        self.writes: list[bytes] = []
        self.held = held
        self.asked = 0
        self.closing = False
        self.write_paused = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        self.asked += 1
        return self.held


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _read_all(sock: socket.socket) -> bytes:
    out = b""
    while True:
        try:
            got = sock.recv(1 << 20)
        except BlockingIOError:
            return out
        if not got:
            return out
        out += got


def _sink(t: _Transport, fd: int) -> Any:
    assert relay_c is not None
    return relay_c.Sink(0.0, 1 << 30, _Series((1.0,)), t, t, None, fd=fd)


def test_with_nothing_held_each_chunk_goes_to_the_socket_from_the_sink(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    t = _Transport()
    sink = _sink(t, a.fileno())
    assert sink([(1.0, b"ab"), (1.0, b"cd")]) is True
    assert sink([(2.0, b"ef")]) is True
    assert sink.end([(3.0, b"gh")]) is True
    assert _read_all(b) == b"4\r\nabcd\r\n2\r\nef\r\n2\r\ngh\r\n0\r\n\r\n"
    assert t.writes == [] and sink.direct == 3
    assert t.asked == 1  # once, before the first write: the head went through the transport
    assert sink.joined()[0] == b"abcdefgh" and sink.size == 8 and sink.ended


def test_while_the_transport_holds_bytes_the_chunks_go_through_it(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    t = _Transport(held=10)
    sink = _sink(t, a.fileno())
    assert sink([(1.0, b"ab")]) is True
    assert sink([(1.0, b"cd")]) is True
    assert t.writes == [b"2\r\nab\r\n", b"2\r\ncd\r\n"] and _read_all(b) == b"" and sink.direct == 0
    t.held = 0  # drained: the sink writes itself again, and stops asking
    assert sink([(2.0, b"ef")]) is True
    assert sink([(2.0, b"gh")]) is True
    assert _read_all(b) == b"2\r\nef\r\n2\r\ngh\r\n" and sink.direct == 2 and t.asked == 3


def test_what_the_socket_does_not_take_follows_through_the_transport_in_order(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """A write past the socket's buffer: the socket takes a part, the transport gets the rest (after
    which the sink asks it again before writing itself); nothing is lost or sent twice."""
    a, b = pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    t = _Transport()
    sink = _sink(t, a.fileno())
    big = bytes(range(256)) * 4096  # 1 MiB: more than the socket pair holds
    assert sink([(1.0, big)]) is True
    chunk = b"%x\r\n" % len(big) + big + b"\r\n"
    on_socket = _read_all(b)
    assert 0 < len(on_socket) < len(chunk) and sink.direct == 0
    assert len(t.writes) == 1 and on_socket + t.writes[0] == chunk
    t.held = len(t.writes[0])  # the transport still sends its part: the next chunk queues behind it
    assert sink([(2.0, b"x")]) is True
    assert t.writes[-1] == b"1\r\nx\r\n" and _read_all(b) == b""


def test_a_socket_that_fails_hands_the_whole_chunk_to_the_transport(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """The caller went away (a reset, a broken pipe): the transport is given the chunk and meets the
    error itself, as it would have with no write of the sink's own."""
    a, b = pair
    b.close()
    t = _Transport()
    sink = _sink(t, a.fileno())
    assert sink([(1.0, b"ab")]) is True
    assert t.writes == [b"2\r\nab\r\n"] and sink.direct == 0


def test_a_closing_transport_gets_nothing_and_neither_does_its_socket(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Asked before every write: once the transport closes, its descriptor may be closed and given to
    another connection, so nothing is written to it."""
    a, b = pair
    t = _Transport()
    t.closing = True
    sink = _sink(t, a.fileno())
    assert sink([(1.0, b"ab")]) is False
    assert t.writes == [] and _read_all(b) == b"" and sink.size == 0


def test_a_transport_that_cannot_say_what_it_holds_is_always_written_through(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair

    class Opaque(_Transport):
        def get_write_buffer_size(self) -> int:
            raise AttributeError("no such method")

    t = Opaque()
    sink = _sink(t, a.fileno())
    assert sink([(1.0, b"ab")]) is True
    assert sink([(1.0, b"cd")]) is True
    assert t.writes == [b"2\r\nab\r\n", b"2\r\ncd\r\n"] and _read_all(b) == b"" and sink.direct == 0


def test_a_read_of_more_pieces_than_one_gather_is_written_through_the_transport(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    a, b = pair
    t = _Transport()
    sink = _sink(t, a.fileno())
    batch = [(1.0, b"p")] * 100
    assert sink(batch) is True
    assert t.writes == [b"64\r\n" + b"p" * 100 + b"\r\n"] and _read_all(b) == b""
    assert sink([(2.0, b"q")]) is True  # asked again (held nothing): written by the sink
    assert _read_all(b) == b"1\r\nq\r\n" and sink.direct == 1


def test_no_descriptor_means_the_transport_writes_everything() -> None:
    t = _Transport()
    sink = _sink(t, -1)
    assert sink([(1.0, b"ab")]) is True
    assert t.writes == [b"2\r\nab\r\n"] and t.asked == 0 and sink.direct == 0


@pytest.mark.parametrize("loop_kind", ["asyncio", "uvloop"])
def test_only_a_plain_stream_sockets_transport_gives_its_descriptor(loop_kind: str) -> None:
    """A TLS transport's socket carries ciphertext: bytes written there would bypass the encryption.
    Only the transports known to hold back nothing but what they count give their socket (asyncio's
    and uvloop's, the loop the proxy runs on)."""
    uvloop = pytest.importorskip("uvloop") if loop_kind == "uvloop" else None

    async def main() -> tuple[int, int, int, int]:
        loop = asyncio.get_running_loop()
        made: asyncio.Future[asyncio.BaseTransport] = loop.create_future()

        class P(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                if not made.done():
                    made.set_result(transport)

        server = await loop.create_server(P, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        plain = await made
        fd = _plain_fd(plain)
        expected = plain.get_extra_info("socket").fileno()
        writer.close()
        server.close()

        class Other(asyncio.Transport):
            pass

        # a TLS transport over a plain one (made, never connected): not one of the plain kinds
        tls = asyncio.sslproto.SSLProtocol(
            loop, asyncio.Protocol(), ssl.create_default_context(), None
        )._app_transport
        try:
            return fd, expected, _plain_fd(Other()), _plain_fd(tls)
        finally:
            tls.abort()

    fd, expected, other, tls = asyncio.run(main(), loop_factory=uvloop.new_event_loop if uvloop else None)
    assert fd == expected >= 0
    assert other == -1 and tls == -1


def test_the_switch_turns_the_descriptor_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WIRECHECK_DIRECT_WRITE", "0")
    assert ListenerConfig().direct_write is False
    monkeypatch.setenv("WIRECHECK_DIRECT_WRITE", "1")
    assert ListenerConfig().direct_write is True
