"""The proxy's own HTTP/1.1 upstream client, against raw servers that frame bodies every legal way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import pytest

from tests.support.servers import read_request, until_closed
from wirecheck.proxy._upstream import (
    UpstreamBroken,
    UpstreamTimeout,
    UpstreamUnreachable,
    _Raw,
    make_upstream,
)

#: every test here runs with the compiled twin of the head lines in use and on the Python path
pytestmark = pytest.mark.usefixtures("both_head_paths")

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], object]


@asynccontextmanager
async def raw_server(
    reply: bytes | Callable[[int], bytes], *, close: bool = False, stall: float = 0.0
) -> AsyncIterator[tuple[str, list[bytes]]]:
    seen: list[bytes] = []
    count = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        while True:
            head, body = await read_request(reader)
            seen.append(head + body)
            count += 1
            if stall:
                await asyncio.sleep(stall)
            writer.write(reply(count) if callable(reply) else reply)
            await writer.drain()
            if close:
                break

    server = await asyncio.start_server(until_closed(handle), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", seen


async def roundtrip(
    url: str, method: str = "POST", body: bytes = b"{}", read_s: float = 5.0
) -> tuple[int, list[tuple[bytes, bytes]], list[bytes], object]:
    up = make_upstream(urlsplit(url), transport=None, connect_s=2, read_s=read_s)
    resp = await up.open(method, "/v1/x?a=1", [(b"content-type", b"application/json")], body)
    pieces = [p async for p in resp.body]
    await resp.aclose()
    return resp.status, resp.headers, pieces, up


async def test_chunked_with_extensions_and_trailers_keeps_the_connection() -> None:
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    async with raw_server(reply) as (url, seen):
        up = make_upstream(urlsplit(url), transport=None, connect_s=2, read_s=5)
        for _ in range(3):
            resp = await up.open("POST", "/v1/x", [], b"{}")
            assert [p async for p in resp.body] == [b"hello", b" world"]
            await resp.aclose()
        assert len(up.idle) == 1  # one connection, reused
        await up.aclose()
    assert (
        seen[0].startswith(b"POST /v1/x HTTP/1.1\r\nhost: 127.0.0.1:") and b"content-length: 2\r\n" in seen[0]
    )


async def test_content_length_close_delimited_head_and_204() -> None:
    async with raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc") as (url, _):
        status, _, pieces, up = await roundtrip(url)
        assert (status, b"".join(pieces)) == (200, b"abc")
        await up.aclose()  # type: ignore[attr-defined]
    async with raw_server(b"HTTP/1.1 200 OK\r\n\r\nuntil the end", close=True) as (url, _):
        _, _, pieces, up = await roundtrip(url)
        assert b"".join(pieces) == b"until the end"
        await up.aclose()  # type: ignore[attr-defined]
    async with raw_server(b"HTTP/1.1 204 No Content\r\n\r\n") as (url, _):
        status, _, pieces, up = await roundtrip(url)
        assert (status, pieces) == (204, [])
        await up.aclose()  # type: ignore[attr-defined]


async def test_a_stale_keep_alive_connection_is_retried_once_on_a_fresh_one() -> None:
    async with raw_server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", close=True) as (url, seen):
        up = make_upstream(urlsplit(url), transport=None, connect_s=2, read_s=5)
        for _ in range(2):
            resp = await up.open("POST", "/", [], b"{}")
            assert b"".join([p async for p in resp.body]) == b"ok"
            await resp.aclose()
            await asyncio.sleep(0.05)  # the server has closed the kept connection meanwhile
        await up.aclose()
    assert len(seen) == 2


async def test_errors_map_to_refused_timeout_and_broken() -> None:
    from wirecheck.record import free_port

    with pytest.raises(UpstreamUnreachable):
        await roundtrip(f"http://127.0.0.1:{free_port()}")
    async with raw_server(b"HTTP/1.1 200 OK\r\n\r\n", stall=1.0) as (url, _):
        with pytest.raises(UpstreamTimeout):
            await roundtrip(url, read_s=0.2)
    async with raw_server(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", close=True) as (
        url,
        _,
    ):
        with pytest.raises(UpstreamBroken):
            await roundtrip(url)
    async with raw_server(b"garbage\r\n\r\n") as (url, _):
        with pytest.raises(UpstreamUnreachable, match="not an HTTP response"):
            await roundtrip(url)


async def test_surplus_bytes_close_the_connection_whenever_they_come() -> None:
    # bytes past Content-Length, in the same read or arriving while the connection
    # waits in the pool, never reach the next request: the connection is closed instead
    surplus = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nFAKE"
    for late in (False, True):
        count = 0

        async def handle(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter, late: bool = late
        ) -> None:
            nonlocal count
            while True:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
                count += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n%02d" % count)
                if late:
                    await writer.drain()
                    await asyncio.sleep(0.05)
                writer.write(surplus)
                await writer.drain()

        server = await asyncio.start_server(until_closed(handle), "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with server:
            up = make_upstream(urlsplit(url), transport=None, connect_s=2, read_s=5)
            got = []
            for _ in range(4):
                resp = await up.open("POST", "/v1/x", [], b"{}")
                got.append(b"".join([p async for p in resp.body]))
                await resp.aclose()
                await asyncio.sleep(0.1)  # the late surplus arrives while the connection is idle
            await up.aclose()
        assert got == [b"01", b"02", b"03", b"04"], (late, got)


async def test_a_trickled_head_times_out_from_the_request_and_a_paced_body_does_not() -> None:
    """The head must be whole within ``read_s`` of the request, however its bytes are spread; the
    body's bound is per read, so a stream paced under ``read_s`` runs as long as it lasts. The
    pace is a tenth of ``read_s``: a loaded machine that holds this process up for most of a
    second between two reads does not make it a timeout."""
    read_s = 1.0

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        for byte in b"HTTP/1.1 200 OK\r\nx-slow: " + b"a" * 100:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(read_s / 10)

    async def paced(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(12):  # 12 x read_s / 10: past read_s in all, never between two reads
            await asyncio.sleep(read_s / 10)
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    for handler in (trickle, paced):
        server = await asyncio.start_server(until_closed(handler), "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with server:
            up = make_upstream(urlsplit(url), transport=None, connect_s=2, read_s=read_s)
            if handler is trickle:
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                with pytest.raises(UpstreamTimeout, match="no response headers"):
                    await up.open("POST", "/v1/x", [], b"{}")
                # well before the trickle (10 s) would end: not read_s per byte
                assert loop.time() - t0 < 100 * read_s / 10
            else:
                resp = await up.open("POST", "/v1/x", [], b"{}")
                assert b"".join([p async for p in resp.body]) == b"x" * 12
                await resp.aclose()
            await up.aclose()


async def test_a_kept_alive_connection_reads_each_kind_of_answer_in_turn() -> None:
    """A reused connection keeps its parser after a message it read to the end (a HEAD answer
    excepted: llhttp never saw its end): every kind of answer, in any order, reads right on one
    connection, with one parser across the answers that were whole and a new one after a HEAD."""
    answers = {
        "chunked": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n",
        "length": b"HTTP/1.1 201 Created\r\ncontent-length: 3\r\n\r\nxyz",
        "empty": b"HTTP/1.1 204 No Content\r\n\r\n",
        "continue": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok",
        "head": b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n",
    }
    expected = {"chunked": (200, [b"ab", b"c"]), "length": (201, [b"xyz"]), "empty": (204, [])}
    expected |= {"continue": (200, [b"ok"]), "head": (200, [])}
    order = ["chunked", "length", "head", "empty", "chunked", "continue", "head", "head", "length"]
    async with raw_server(lambda n: answers[order[n - 1]]) as (url, seen):
        up = make_upstream(urlsplit(url), transport=None, connect_s=2, read_s=5)
        conns, parsers = set(), []
        for kind in order:
            resp = await up.open("HEAD" if kind == "head" else "POST", "/v1/x", [], b"{}")
            assert (resp.status, [p async for p in resp.body]) == expected[kind], kind
            await resp.aclose()
            assert isinstance(up, _Raw) and len(up.idle) == 1
            conns.add(id(up.idle[0]))
            parsers.append(up.idle[0].parser)
        await up.aclose()
    assert len(seen) == len(order) and len(conns) == 1
    # a new parser only for the answer after each HEAD
    renewed = [parsers[i] is not parsers[i - 1] for i in range(1, len(order))]
    assert renewed == [order[i - 1] == "head" for i in range(1, len(order))]
