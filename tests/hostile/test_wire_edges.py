"""The taps' edges on the wire, against a real ``wirecheck proxy`` process: the 64 KiB head bounds
hold on the whole head whatever the reads (a head that arrives in one read included, and the
upstream's response head too), an absolute-form target for another host is refused, a websocket
upgrade gets a clear 501, the upstream's ``date`` and ``server`` reach the caller once each, and an
upstream that resets mid-answer costs the log one line, not a traceback."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from tests.support.proxy_process import proxy_process, recorded
from tests.support.servers import raw_server, read_request

KIB = 1024


async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """By path: ``/bighead`` answers with a 100 KB head in one write, ``/reset`` sends part of a
    chunked body and resets the connection; anything else is a small answer with the upstream's own
    ``date`` and ``server``."""
    while True:
        head, _ = await read_request(reader)
        path = head.split(b" ", 2)[1]
        if path == b"/bighead":
            junk = b"".join(b"x-junk-%d: %s\r\n" % (i, b"j" * 1000) for i in range(100))
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n" + junk + b"\r\nok")
        elif path == b"/reset":
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
            await writer.drain()
            await asyncio.sleep(0.2)
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            writer.transport.abort()  # RST: the upstream resets mid-answer
            return
        else:
            body = b"upstream saw " + path
            writer.write(
                b"HTTP/1.1 200 OK\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\nserver: the-upstream\r\n"
                b"content-length: %d\r\n\r\n%s" % (len(body), body)
            )
        await writer.drain()


def _exchange(url: str, data: bytes, timeout: float = 10) -> bytes:
    """Sends ``data`` on one connection and reads until the server closes it (or ``timeout``)."""
    host, port = url.removeprefix("http://").split(":")
    got = b""
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                piece = s.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not piece:
                break
            got += piece
    return got


def _headers(response: bytes) -> list[bytes]:
    return [line.split(b":", 1)[0].lower() for line in response.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]]


def test_heads_targets_upgrades_and_resets_at_the_taps(tmp_path: Path) -> None:
    with raw_server(upstream) as up, proxy_process(up, tmp_path, "--no-live-checks") as px:
        # 80 KiB of head in one read: over the 64 KiB bound, refused whole (it used to pass, the
        # bound being counted per read and reset when the head completed within the read)
        head = b"GET /v1/models HTTP/1.1\r\nhost: a\r\n" + b"".join(
            b"x-h%d: %s\r\n" % (i, b"v" * 1000) for i in range(80)
        )
        got = _exchange(px.url, head + b"\r\n", timeout=10)
        assert got.startswith(b"HTTP/1.1 431 "), got[:200]
        # a 64 KiB-bounded head is fine: 60 KiB passes
        head = b"GET /fine HTTP/1.1\r\nhost: a\r\nconnection: close\r\n" + b"".join(
            b"x-h%d: %s\r\n" % (i, b"v" * 1000) for i in range(60)
        )
        assert _exchange(px.url, head + b"\r\n").startswith(b"HTTP/1.1 200 ")

        # the upstream's 100 KB response head is not forwarded: a clear 502
        got = _exchange(px.url, b"GET /bighead HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 502 "), got[:300]
        assert b"response head over 65536 bytes" in got and b"x-junk" not in got

        # an absolute-form target for another host: 403, nothing sent upstream
        got = _exchange(
            px.url, b"GET http://elsewhere.example/x HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n"
        )
        assert got.startswith(b"HTTP/1.1 403 ") and b"only to its configured upstream" in got, got[:300]
        # the upstream's own name is fine
        own = up.removeprefix("http://").encode()
        got = _exchange(px.url, b"GET http://%s/mine HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n" % own)
        assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(b"upstream saw /mine"), got[-200:]

        # a websocket upgrade: a clear 501, not a 500
        got = _exchange(
            px.url,
            b"GET /v1/realtime HTTP/1.1\r\nhost: a\r\nconnection: Upgrade\r\nupgrade: websocket\r\n"
            b"sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        )
        assert got.startswith(b"HTTP/1.1 501 ") and b"websocket" in got, got[:300]

        # one date and one server, the upstream's
        got = _exchange(px.url, b"GET /plain HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
        names = _headers(got)
        assert names.count(b"date") == 1 and names.count(b"server") == 1, got[:400]
        assert b"server: the-upstream" in got and b"Thu, 01 Jan 2026" in got

        # an upstream reset mid-answer: the caller sees the cut, the log one line
        for _ in range(3):
            got = _exchange(px.url, b"GET /reset HTTP/1.1\r\nhost: a\r\n\r\n")
            assert got.startswith(b"HTTP/1.1 200 ") and b"hello" in got and not got.endswith(b"0\r\n\r\n")
    exchanges = recorded(px.store)
    by_path = {ex.request.path: ex for ex in exchanges}
    assert "/fine" in by_path and not any("x-h79" in str(ex.request.headers) for ex in exchanges)
    assert by_path["/bighead"].error is not None and by_path["/bighead"].error.kind == "upstream_refused"
    assert by_path["/v1/realtime"].response is not None and by_path["/v1/realtime"].response.status == 501
    resets = [ex for ex in exchanges if ex.request.path == "/reset"]
    assert len(resets) == 3 and all(
        ex.error is not None and ex.error.kind == "upstream_reset" for ex in resets
    )
    assert "Traceback" not in px.stderr, px.stderr[-3000:]
    reset_lines = [line for line in px.stderr.splitlines() if "upstream reset" in line]
    assert len(reset_lines) == 3, px.stderr[-3000:]
