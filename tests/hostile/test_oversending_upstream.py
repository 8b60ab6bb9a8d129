"""An upstream that sends bytes past its Content-Length must not hand one caller's
surplus to the next caller on a pooled connection. Every caller gets exactly its own answer, and the
store records what each got."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.support.proxy_process import proxy_process, recorded
from tests.support.servers import raw_server, read_request

SEQUENTIAL = 40
CONCURRENT = 80

#: what the faulty upstream appends after every answer: a whole second response, as if for the next caller
FAKE = b'{"n": "FAKE"}'
SURPLUS = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
    len(FAKE),
    FAKE,
)


async def over_sender(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers each request with its own number, then the surplus, and keeps the connection open."""
    while True:
        _head, body = await read_request(reader)
        n = json.loads(body)["n"]
        answer = json.dumps({"n": n}).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s%s"
            % (len(answer), answer, SURPLUS)
        )
        await writer.drain()


def test_over_sending_upstream_never_crosses_callers(tmp_path: Path) -> None:
    with raw_server(over_sender) as upstream, proxy_process(upstream, tmp_path, "--no-live-checks") as px:
        got: dict[int, object] = {}
        # sequential callers on one kept-alive client connection: the proxy reuses its upstream
        # connections between them, which is where the surplus used to wait for the next caller
        with httpx.Client(base_url=px.url, timeout=10) as client:
            for n in range(SEQUENTIAL):
                r = client.post("/v1/chat/completions", json={"n": n})
                assert r.status_code == 200
                got[n] = r.json()["n"]

        def one(n: int) -> object:
            r = httpx.post(f"{px.url}/v1/chat/completions", json={"n": n}, timeout=10)
            assert r.status_code == 200
            return r.json()["n"]

        with ThreadPoolExecutor(16) as pool:
            ns = range(SEQUENTIAL, SEQUENTIAL + CONCURRENT)
            got.update(zip(ns, pool.map(one, ns), strict=True))
    sent = SEQUENTIAL + CONCURRENT
    wrong = {n: v for n, v in got.items() if v != n}
    assert not wrong, f"{len(wrong)} of {sent} callers got another answer: {dict(list(wrong.items())[:5])}"
    exchanges = [ex for ex in recorded(px.store) if ex.request is not None]
    assert len(exchanges) == sent, f"sent {sent}, recorded {len(exchanges)}"
    for ex in exchanges:
        assert ex.response is not None and ex.error is None
        asked = json.loads(ex.request.body)["n"]
        assert json.loads(ex.response.content) == {"n": asked}, "the store recorded another caller's answer"
