"""The load side of ``proxy_overhead.py``: the paced SSE upstream, the live-view viewers and the
streaming client. Each runs as a ``--role`` of ``proxy_overhead.py`` in its own process (or, for the
client, in the bench process itself), so that the proxy's CPU and latency are not mixed with theirs.

Raw asyncio on both ends, no HTTP library: the upstream and the client must cost far less than the
proxies they frame, or the benchmark measures itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import signal
import time
from typing import Any, cast

# --- the paced SSE upstream (--role upstream) ----------------------------------------------------


#: the upstream's stream shapes (``--upstream-shape``): ``vllm`` as vLLM streams a chat completion
#: (shared/reference/vllm-wire.md: a role chunk first, content chunks, a last chunk with an empty delta
#: and the finish_reason; what a conforming engine sends, which the live checker finds nothing in);
#: ``bare``, content chunks only and no finish_reason, which every exchange gets an error finding for
#: (``finish-reason-missing``): the live checker's path for a finding, on every exchange;
#: ``thinking``, a thinking model's answer (the first half of its chunks ``reasoning``, then the
#: content); ``tool-call``, one call streamed as vLLM streams it (its id, type and name with the
#: first piece of its arguments, then a piece a chunk, finish_reason ``tool_calls``) to a tool the
#: request declares (``request_body``), its arguments valid against the tool's schema. The last
#: two are conforming too: nothing to find
SHAPES = ("vllm", "bare", "thinking", "tool-call")

#: the tool the ``tool-call`` shape's requests declare and its streams call (``live_checker.py``'s
#: tool-call streams too)
TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
    },
}


def _frame(delta: str, finish: str = "null") -> bytes:
    return (
        b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        + delta.encode()
        + b',"finish_reason":'
        + finish.encode()
        + b"}]}\n\n"
    )


def stream_events(events: int, shape: str = "vllm") -> list[bytes]:
    """The ``events`` SSE frames of one stream in this shape, before ``[DONE]``."""
    token = _frame('{"content":"tok"}')
    if shape == "bare" or events < 2:
        return [token] * events
    if shape == "tool-call" and events >= 4:
        piece = _frame('{"tool_calls":[{"index":0,"function":{"arguments":"tok "}}]}')
        first = '{"tool_calls":[{"id":"functions.search:0","type":"function","index":0,"function":{"name":"search","arguments":"{\\"q\\": \\""}}]}'
        last = _frame('{"tool_calls":[{"index":0,"function":{"arguments":"\\"}"}}]}')
        return [
            _frame('{"role":"assistant","content":""}'),
            _frame(first),
            *[piece] * (events - 4),
            last,
            _frame("{}", '"tool_calls"'),
        ]
    if shape == "thinking":
        thought = (events - 2) // 2
        tokens = [_frame('{"reasoning":"tok"}')] * thought + [token] * (events - 2 - thought)
        return [_frame('{"role":"assistant","content":""}'), *tokens, _frame("{}", '"stop"')]
    return [_frame('{"role":"assistant","content":""}'), *[token] * (events - 2), _frame("{}", '"stop"')]


def request_body(shape: str = "vllm") -> bytes:
    """The request the callers send for streams of this shape: one short prompt, streamed; the
    ``tool-call`` shape's declares the tool its streams call."""
    req: dict[str, Any] = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    if shape == "tool-call":
        req["tools"] = [TOOL]
    return json.dumps(req).encode()


async def upstream(port: int, events: int, interval_ms: float, shape: str = "vllm") -> None:
    """``events`` chat chunks per request (``stream_events``), one every ``interval_ms``, then
    ``[DONE]``; forever."""
    chunks = [b"%x\r\n%s\r\n" % (len(frame), frame) for frame in stream_events(events, shape)]
    done = b"data: [DONE]\n\n"
    done_chunk = b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                for chunk in chunks:
                    await asyncio.sleep(interval_ms / 1000)
                    writer.write(chunk)
                    await writer.drain()
                writer.write(done_chunk)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


# --- the bare Python relay (--role relay) ---------------------------------------------------------


class _Side(asyncio.Protocol):
    """One end of a relayed connection: what it reads is written to its peer as it comes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.early: list[bytes] = []  # the caller's bytes that came before the upstream was open

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not asyncio's subclasses

    def data_received(self, data: bytes) -> None:
        peer = self.peer
        if peer is not None and peer.transport is not None:
            peer.transport.write(data)
        else:
            self.early.append(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def pause_writing(self) -> None:  # the peer reads no faster than this end writes
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


async def relay(port: int, upstream_port: int) -> None:
    """A bare byte relay on ``port`` to the upstream, on the loop the proxy uses (uvloop where
    installed): each caller connection gets an upstream connection of its own, and the bytes go
    each way as read, with no parsing, recording or checking. It frames what any Python proxy on
    that loop spends per event before doing anything of its own (the socket calls, the loop, one
    Python callback and one write per read); it opens an upstream connection per caller where
    nginx and wirecheck keep theirs alive, so its per-exchange socket work is a little more."""
    loop = asyncio.get_running_loop()
    opening: set[asyncio.Task[None]] = set()

    def caller() -> _Side:
        side = _Side()

        async def open_upstream() -> None:
            try:
                _, up = await loop.create_connection(_Side, "127.0.0.1", upstream_port)
            except OSError:
                if side.transport is not None:
                    side.transport.close()
                return
            up.peer, side.peer = side, up
            assert up.transport is not None
            for data in side.early:
                up.transport.write(data)
            side.early.clear()
            if side.transport is None or side.transport.is_closing():
                up.transport.close()

        task = loop.create_task(open_upstream())
        opening.add(task)
        task.add_done_callback(opening.discard)
        return side

    server = await loop.create_server(caller, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


# --- live-view viewers (--role viewers) ----------------------------------------------------------


async def viewers(port: int, n: int) -> None:
    """``n`` event-stream readers on the proxy's live view, until SIGTERM; then prints how many
    events they received (JSON on stdout)."""
    received = [0] * n
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    connected = [asyncio.Event() for _ in range(n)]

    async def viewer(i: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"GET /wirecheck/events?backlog=0 HTTP/1.1\r\nhost: localhost\r\naccept: text/event-stream\r\n\r\n"
        )
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                connected[i].set()
                received[i] += data.count(b"\nevent: ")

    tasks = [asyncio.ensure_future(viewer(i)) for i in range(n)]
    await asyncio.gather(*(c.wait() for c in connected))
    print("ready", flush=True)  # every viewer has its stream open
    await stop.wait()
    for t in tasks:
        t.cancel()
    print(json.dumps({"viewers": n, "events": sum(received), "per_viewer": received}), flush=True)


# --- the client (--role client, or in the bench process) -----------------------------------------


class Caller:
    """One caller's connection. ``keep_alive``: one connection for its streams one after another, as
    an SDK's pool keeps it (HTTP/1.1 keep-alive; a response ends with the chunked body's last chunk);
    else a connection a stream (``connection: close``)."""

    def __init__(self, port: int, keep_alive: bool = False) -> None:
        self.port = port
        self.keep_alive = keep_alive
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None

    async def stream(self, body: bytes) -> tuple[float, list[float]] | None:
        """One streamed request: (time to the first SSE event, the gaps between events), or None
        when the connection failed or brought no event."""
        t0 = time.perf_counter()
        if self.writer is None:
            try:
                self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                return None
        reader, writer = self.reader, self.writer
        assert reader is not None
        close = b"" if self.keep_alive else b"connection: close\r\n"
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n%s\r\n%s" % (len(body), close, body)
        )
        arrivals: list[float] = []
        buf = b""
        done = whole = False
        try:
            await writer.drain()
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                now = time.perf_counter()
                buf += data
                done = done or b"[DONE]" in buf
                n = buf.count(b"\n\n")
                if n:
                    arrivals.extend([now - t0] * n)
                    buf = buf[buf.rfind(b"\n\n") + 2 :]
                if done and (not self.keep_alive or buf.endswith(b"0\r\n\r\n")):
                    whole = True
                    break
        except ConnectionError:
            self.close()
            return None
        if not self.keep_alive or not whole:
            self.close()
        if not arrivals:
            return None
        return arrivals[0], [b - a for a, b in itertools.pairwise(arrivals)]


async def level(
    port: int,
    streams: int,
    duration_s: float,
    stream_s: float,
    keep_alive: bool = False,
    *,
    shape: str = "vllm",
) -> dict[str, Any]:
    """``streams`` workers keep one stream each in flight for ``duration_s``, back to back, their
    starts spread over one stream's length (as independent callers are, not in lockstep); with
    ``keep_alive`` each worker keeps its connection from one stream to the next (``Caller``); each
    sends the request of the upstream's ``shape`` (``request_body``)."""
    body = request_body(shape)
    ttft: list[float] = []
    gaps: list[float] = []
    events = 0
    failed = 0
    t0 = time.perf_counter()
    end = t0 + duration_s

    async def worker(i: int) -> None:
        nonlocal events, failed
        await asyncio.sleep(stream_s * i / streams)
        caller = Caller(port, keep_alive)
        try:
            while time.perf_counter() < end:
                r = await caller.stream(body)
                if r is None:
                    failed += 1
                    continue
                ttft.append(r[0])
                gaps.extend(r[1])
                events += len(r[1]) + 1
        finally:
            caller.close()

    await asyncio.gather(*(worker(i) for i in range(streams)))
    elapsed = time.perf_counter() - t0
    return {
        "ttft": ttft,
        "gaps": gaps,
        "events": events,
        "elapsed_s": elapsed,
        "events_per_s": events / elapsed,
        "failed": failed,
    }
