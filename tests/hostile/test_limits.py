"""Bounded memory and time. A response far past the record limit is forwarded
whole, recorded only in part (marked, and reported), and the proxy's memory stays bounded; a huge
request head is a 431; callers that trickle a head or a body get a 408; silent connections are closed."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path

import httpx

from tests.support.proxy_process import proxy_process, recorded
from tests.support.servers import raw_server, read_request, run_wirecheck

MIB = 1024 * 1024
BIG = 80 * MIB  # streamed through the proxy
RECORD_LIMIT = 4 * MIB
PIECE = b"x" * MIB


async def big_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers every request with BIG bytes, Content-Length framed, sent a MiB at a time."""
    while True:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\n\r\n" % BIG)
        for _ in range(BIG // MIB):
            writer.write(PIECE)
            await writer.drain()


def _raw(url: str, payload: bytes, wait_s: float) -> bytes:
    """Sends ``payload`` on a raw connection, then reads whatever comes within ``wait_s``."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=wait_s) as s:
        if payload:
            s.sendall(payload)
        got = b""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                data = s.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                break
            if not data:
                return got + b"<closed>"
            got += data
        return got


def test_memory_header_size_and_slow_callers_are_bounded(tmp_path: Path) -> None:
    args = ["--no-live-checks", "--record-limit", "4MiB", "--request-timeout", "1", "--idle-timeout", "1"]
    with raw_server(big_answer) as upstream, proxy_process(upstream, tmp_path, *args) as px:
        base = px.rss_mb()
        peak = [base]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], px.rss_mb())
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        received = 0
        try:
            with httpx.stream("POST", f"{px.url}/v1/big", content=b"{}", timeout=60) as r:
                assert r.status_code == 200
                for piece in r.iter_raw():
                    received += len(piece)
        finally:
            stop.set()
            sampler.join()
        assert received == BIG, "the proxy must forward the whole body, however large"
        grew = peak[0] - base
        # the old proxy kept every chunk: 80 MB and more; now only the 4 MiB record (and buffers)
        assert grew < 40, f"proxy RSS grew {grew:.0f} MB (from {base:.0f}) while streaming {BIG // MIB} MiB"

        # a 1 MiB request head: refused with 431, not buffered
        head = b"GET /v1/models HTTP/1.1\r\nhost: a\r\nx-junk: " + b"a" * MIB + b"\r\n\r\n"
        assert _raw(px.url, head, 5).startswith(b"HTTP/1.1 431 ")
        # half a head, then nothing: 408 after the request timeout (1 s)
        t0 = time.monotonic()
        got = _raw(px.url, b"POST /v1/chat/completions HTTP/1.1\r\nhost: a\r\n", 5)
        assert got.startswith(b"HTTP/1.1 408 ") and b"request head did not arrive" in got, got[:200]
        assert time.monotonic() - t0 < 4
        # a whole head and half the body: 408 with the proxy's JSON error
        got = _raw(
            px.url, b"POST /v1/chat/completions HTTP/1.1\r\nhost: a\r\ncontent-length: 100\r\n\r\n{", 5
        )
        assert got.startswith(b"HTTP/1.1 408 ") and b"request body did not arrive" in got, got[:300]
        # a connection that never says anything is closed after the idle timeout (1 s)
        t0 = time.monotonic()
        assert _raw(px.url, b"", 5).endswith(b"<closed>")
        assert time.monotonic() - t0 < 4
        after = px.rss_mb()
    exchanges = recorded(px.store)
    big = [ex for ex in exchanges if ex.request.path == "/v1/big"]
    assert len(big) == 1 and big[0].response is not None
    assert len(big[0].response.content) == RECORD_LIMIT
    assert big[0].extra["truncated"] == {"response": {"recorded": RECORD_LIMIT, "size": BIG}}
    slow_body = [ex for ex in exchanges if ex.response is not None and ex.response.status == 408]
    assert len(slow_body) == 1 and slow_body[0].error is not None
    check = run_wirecheck("check", str(px.store), "--format", "json", timeout=120)
    res = json.loads(check.stdout)
    assert res["summary"]["by_rule"].get("capture-truncated") == 1, res["summary"]
    print(f"streamed {BIG // MIB} MiB, RSS {base:.0f} -> peak {peak[0]:.0f} -> {after:.0f} MB")
