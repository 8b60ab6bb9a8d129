"""The listeners' HTTP/1.1 server side (proxy/_http.py) over a real socket: framing, keep-alive,
pipelining, what an app that fails gets the caller, and the headers it leaves as the app sent them."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from wirecheck.proxy import ListenerConfig, serve_listener
from wirecheck.proxy._http import DIRECT_BODY
from wirecheck.record import read_body

#: every test here runs with the compiled twins of the forwarding side in use and on the Python path
pytestmark = pytest.mark.usefixtures("twin_paths")


async def echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers with the method, path and body it got; ``/stream`` in three pieces without a length,
    ``/fail`` raises before answering, ``/break`` raises mid-answer."""
    if scope["type"] != "http":
        return
    body = await read_body(receive)
    if scope["path"] == "/fail":
        raise RuntimeError("boom")
    out = b"%s %s %s" % (scope["method"].encode(), scope["raw_path"], body)
    if scope["path"] in ("/stream", "/break"):
        await send({"type": "http.response.start", "status": 200, "headers": [(b"x-app", b"1")]})
        for piece in (b"one", b"two", b"three"):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
            if scope["path"] == "/break":
                raise RuntimeError("mid-answer")
        await send({"type": "http.response.body", "body": b""})
        return
    headers = [(b"content-length", str(len(out)).encode()), (b"x-app", b"1")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


@contextmanager
def connected(app: Any = echo, **cfg: Any) -> Iterator[socket.socket]:
    with serve_listener(app, config=ListenerConfig(**cfg)) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as s:
            yield s


def read_all(s: socket.socket) -> bytes:
    got = b""
    while piece := s.recv(65536):
        got += piece
    return got


def test_keep_alive_and_pipelined_requests_are_answered_in_order() -> None:
    with connected() as s:
        s.sendall(
            b"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nhi"
            b"GET /b?q=1 HTTP/1.1\r\nhost: x\r\n\r\n"
            b"GET /c HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
        got = read_all(s)
    assert got.count(b"HTTP/1.1 200 OK\r\n") == 3
    assert got.index(b"POST /a hi") < got.index(b"GET /b ") < got.index(b"GET /c ")
    # the app's headers only: no server or date header is added to what it sent
    head = got.split(b"\r\n\r\n", 1)[0].lower()
    assert b"server:" not in head and b"date:" not in head and b"x-app: 1" in head


def test_a_body_without_a_length_is_chunked_and_head_gets_no_body() -> None:
    with connected() as s:
        s.sendall(
            b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\nHEAD /stream HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
        got = read_all(s)
    first, second = got.split(b"HTTP/1.1 200 OK\r\n")[1:]
    assert b"transfer-encoding: chunked" in first
    assert first.endswith(b"\r\n\r\n3\r\none\r\n3\r\ntwo\r\n5\r\nthree\r\n0\r\n\r\n")
    assert second.endswith(b"\r\n\r\n")  # HEAD: the head alone


def test_expect_100_continue_is_answered_when_the_app_reads() -> None:
    with connected() as s:
        head = b"POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n"
        s.sendall(head)
        assert s.recv(64) == b"HTTP/1.1 100 Continue\r\n\r\n"  # nothing else before the body
        s.sendall(b"ok")
        got = read_all(s)
    assert got.startswith(b"HTTP/1.1 200 OK") and got.endswith(b"POST /x ok")


def test_an_app_that_fails_gets_a_500_before_it_answers_and_a_broken_answer_after() -> None:
    with connected() as s:
        s.sendall(b"GET /fail HTTP/1.1\r\nhost: x\r\n\r\n")
        assert read_all(s).startswith(b"HTTP/1.1 500 ")
    with connected() as s:
        s.sendall(b"GET /break HTTP/1.1\r\nhost: x\r\n\r\n")
        got = read_all(s)
    assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"3\r\none\r\n")  # no last chunk: broken


def test_a_bad_head_is_a_400_and_a_head_past_the_bound_a_431_and_the_connection_closes() -> None:
    with connected() as s:
        s.sendall(b"NOT HTTP\r\n\r\n")
        got = read_all(s)
    assert got.startswith(b"HTTP/1.1 400 ") and b"connection: close" in got
    # past the bound, whether the head arrives in pieces or whole in one read
    for pieces in (
        [b"GET / HTTP/1.1\r\nhost: x\r\nx-pad: ", b"a" * 8192],
        [b"GET / HTTP/1.1\r\nx-pad: " + b"a" * 8192 + b"\r\n\r\n"],
    ):
        with connected(max_head=4096) as s:
            for piece in pieces:
                s.sendall(piece)
            got = s.recv(65536)  # then the proxy shuts its side (see the lingering tests below)
        assert got.startswith(b"HTTP/1.1 431 ") and b"connection: close" in got


def test_an_idle_connection_is_closed() -> None:
    with connected(idle_timeout_s=0.2) as s:
        s.sendall(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\n")
        assert read_all(s).startswith(b"HTTP/1.1 200 ")  # answered, then closed once idle


async def whole(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``echo`` reading a body that has all arrived through ``DirectBody.whole_body``, else ``receive``."""
    if scope["type"] != "http":
        return
    direct = scope["extensions"][DIRECT_BODY]
    body = direct.whole_body() if direct.body_arrived() else await read_body(receive)
    out = b"%s %s" % (b"whole" if direct.body_arrived() else b"read", body)
    headers = [(b"content-length", str(len(out)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


def test_a_body_that_has_all_arrived_is_handed_over_as_receive_hands_it() -> None:
    """``DirectBody.whole_body`` (the taps' path for a body that came with its head) writes the same
    bytes as ``receive`` would: the 100 Continue a caller asked for, then the answer; and a body
    that trickles in still goes through ``receive``."""
    for app in (echo, whole):
        with connected(app, direct_body=True) as s:
            s.sendall(
                b"POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nexpect: 100-continue\r\n\r\nok"
                b"POST /y HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\nconnection: close\r\n\r\nabc"
            )
            got = read_all(s)
        assert got.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")
        assert got.count(b"HTTP/1.1 200 OK\r\n") == 2
        assert got.endswith(b"whole abc" if app is whole else b"POST /y abc")
    with connected(whole, direct_body=True) as s:
        s.sendall(b"POST /x HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\nconnection: close\r\n\r\nab")
        s.sendall(b"cd")
        assert read_all(s).endswith((b"read abcd", b"whole abcd"))


def test_a_response_header_http_cannot_carry_is_refused_every_time() -> None:
    """The listener searches each response header name once for characters HTTP refuses, and
    keeps the names found good: a bad name is refused however often it comes (nothing of the head
    is written), and a good name kept still has its value searched every time."""
    headers = {
        "/good": [(b"x-fine", b"1")],
        "/name": [(b"x bad", b"1")],
        "/value": [(b"x-fine", b"a\r\nx-injected: 1")],
        "/array": [(bytearray(b"x-fine"), b"1"), (bytearray(b"x bad"), b"1")],
    }

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        head = [(b"content-length", b"2"), *headers[scope["path"]]]
        await send({"type": "http.response.start", "status": 200, "headers": head})
        await send({"type": "http.response.body", "body": b"ok"})

    for path in ["/good", "/name", "/good", "/name", "/value", "/good", "/value", "/array"]:
        with connected(app) as s:
            s.sendall(b"GET %s HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n" % path.encode())
            got = read_all(s)
        if path == "/good":
            assert got.startswith(b"HTTP/1.1 200 OK\r\n") and b"x-fine: 1\r\n" in got, path
        else:  # the app fails once its response began: the connection closes, nothing written
            assert got == b"", path


def test_whole_requests_need_no_parser_and_the_rest_of_the_connection_goes_to_it(monkeypatch: Any) -> None:
    from wirecheck.proxy import _http

    made: list[object] = []
    real = _http.httptools.HttpRequestParser

    def counted(protocol: object) -> Any:
        made.append(protocol)
        return real(protocol)

    monkeypatch.setattr(_http.httptools, "HttpRequestParser", counted)
    with connected() as s:
        s.sendall(b"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\nhi")
        assert s.recv(65536).endswith(b"POST /a hi")
        s.sendall(b"GET /b?q=1 HTTP/1.1\r\nHost: x\r\nX-Pad: \t a \r\n\r\n")
        assert s.recv(65536).endswith(b"GET /b ")
        # the compiled twin takes both whole; without it the parser reads every request
        assert len(made) == (0 if _http._twin is not None else 1)
        # a chunked body is the parser's, and so is the connection from then on
        s.sendall(b"POST /c HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n")
        assert s.recv(65536).endswith(b"POST /c ok")
        s.sendall(b"POST /d HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\nconnection: close\r\n\r\nend")
        got = read_all(s)
    assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"POST /d end")
    assert len(made) == 1


@pytest.mark.parametrize(
    "after",
    [b"GET /b HTTP/1.1\r\nhost: x\r\n\r\n", b"NOT HTTP\r\n\r\n"],
)
def test_what_follows_a_request_that_says_close_is_ignored(after: bytes) -> None:
    with connected() as s:
        s.sendall(b"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi")
        s.sendall(after)  # in the same read or the next: either way the parser's leniency ignores it
        got = read_all(s)
    assert got.count(b"HTTP/1.1 ") == 1 and got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"POST /a hi")


CLOSING = b"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\nhi"


def test_a_caller_that_keeps_sending_after_close_still_gets_the_whole_answer_then_its_end() -> None:
    # what the caller sends after an answer that ends the connection is read and dropped: closed with
    # it unread, the socket would answer with a reset, which can take the answer from the caller
    with connected() as s:
        s.sendall(CLOSING)
        for _ in range(64):
            s.sendall(b"x" * 4096)
        got = read_all(s)  # the end comes while this side is still open: the proxy shut its own
    assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"POST /a hi") and got.count(b"HTTP/1.1 ") == 1
    # a refusal too: the 400's answer, whole, whatever follows the bad head
    with connected() as s:
        s.sendall(b"NOT HTTP\r\n\r\n")
        for _ in range(64):
            s.sendall(b"y" * 4096)
        got = read_all(s)
    assert got.startswith(b"HTTP/1.1 400 ") and got.endswith(b"invalid HTTP request\n")


def _ends_within(s: socket.socket, piece: bytes, seconds: float) -> bool:
    """Whether the proxy ends the connection (a send refused) while ``piece`` is sent again and again
    for up to ``seconds`` after the answer."""
    import time

    until = time.monotonic() + seconds
    while time.monotonic() < until:
        try:
            s.sendall(piece)
        except OSError:
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize(
    ("cfg", "piece"),
    [
        ({"linger_bytes": 8192}, b"z" * 4096),  # the bytes' bound, long before the time's
        ({"linger_s": 0.05, "head_timeout_s": 0.2}, b"z"),  # the time's: a byte at a time
    ],
    ids=["bytes", "time"],
)
def test_lingering_after_an_answer_is_bounded(cfg: dict[str, Any], piece: bytes) -> None:
    with connected(**cfg) as s:
        s.sendall(CLOSING)
        got = read_all(s)
        assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"POST /a hi")
        assert _ends_within(s, piece, 20.0)


def test_a_listener_that_stops_does_not_wait_out_a_caller_holding_a_lingering_connection() -> None:
    # the answer under way when the listener stops ends its connection (and lingers); a caller that
    # keeps the connection open after reading it must not hold the stop until the linger bound
    import asyncio

    from wirecheck.proxy._loop import run_loop
    from wirecheck.proxy._server import Listener

    async def main() -> bytes:
        release = asyncio.Event()

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await release.wait()
            await send({"type": "http.response.body", "body": b"done"})

        listener = Listener(app, ListenerConfig(linger_s=3600.0), lifespan=False)
        await listener.start("127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        try:
            writer.write(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n")
            await reader.readuntil(b"\r\n\r\n")  # the answer has begun
            stopping = asyncio.ensure_future(listener.stop())  # no grace bound: it waits for all
            await asyncio.sleep(0.1)
            release.set()
            got = await asyncio.wait_for(reader.read(), 30)  # the answer's rest, then the end
            await asyncio.wait_for(stopping, 30)
            return got
        finally:
            writer.close()

    got = run_loop(main())
    assert got.endswith(b"4\r\ndone\r\n0\r\n\r\n")


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_the_scope_names_this_end_of_the_connection_and_leaves_the_peer_out(host: str) -> None:
    # a listener on one address gives that address without asking each socket; one on a wildcard
    # asks the socket, which names the address the caller reached. The peer's address is not
    # asked for at all: no app of wirecheck reads it
    import asyncio

    from wirecheck.proxy._loop import run_loop
    from wirecheck.proxy._server import Listener

    seen: list[dict[str, Any]] = []

    async def main() -> tuple[Listener, int]:
        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            seen.append(scope)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"ok"})

        listener = Listener(app, ListenerConfig(), lifespan=False)
        await listener.start(host, 0)
        port = listener.port
        try:
            for _ in range(2):  # the same on each connection
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                assert (await asyncio.wait_for(reader.read(), 30)).endswith(b"0\r\n\r\n")
                writer.close()
        finally:
            await listener.stop()
        return listener, port

    listener, port = run_loop(main())
    assert listener.bound == (None if host == "0.0.0.0" else ("127.0.0.1", port))
    assert [s["server"] for s in seen] == [("127.0.0.1", port)] * 2
    assert [s["client"] for s in seen] == [None, None]


def test_a_tap_takes_an_absolute_target_that_names_its_own_listener() -> None:
    # the address the tap compares an absolute-form target with is its listener's own
    from wirecheck.proxy import ProxyApp, TapConfig

    with _upstream_echo() as upstream, serve_listener(ProxyApp(TapConfig(upstream=upstream))) as url:
        port = int(url.rsplit(":", 1)[1])
        for name, status in ((f"127.0.0.1:{port}", b"200"), ("evil.example", b"403")):
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(
                    f"GET http://{name}/v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".encode()
                )
                got = b""
                while chunk := s.recv(65536):
                    got += chunk
            assert got.split(b" ", 2)[1] == status, got[:200]


@contextmanager
def _upstream_echo() -> Iterator[str]:
    """An upstream that answers every request with a small JSON body."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b'{"ok": true}'
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body})

    with serve_listener(app) as url:
        yield url
