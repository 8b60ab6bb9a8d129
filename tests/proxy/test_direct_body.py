"""The relay of a streamed body from the upstream's read callback to the caller's socket:
the taps' listener offers ``DirectBody`` and the lean upstream client hands each read on from its
callback. Real sockets on both sides, since neither exists in process."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gc
import hashlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any, cast

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.proxy.test_app import Lockstep, raw_upstream, recorded
from wirecheck.contracts import Chunk, Exchange, HttpRequest
from wirecheck.proxy import ProxyApp, TapConfig, _app, serve_listener
from wirecheck.proxy._app import _DirectSink, _new_chunk, _Tee
from wirecheck.proxy._histogram import _Series
from wirecheck.proxy._http import DirectBody, ListenerConfig
from wirecheck.record import Store, read_body, serve

#: every test here runs with the compiled twins of the forwarding side in use and on the Python path
pytestmark = pytest.mark.usefixtures("twin_paths")


@contextmanager
def tap(upstream: str, store: Store, **cfg: Any) -> Iterator[str]:
    with serve_listener(ProxyApp(TapConfig(upstream=upstream, **cfg), store)) as url:
        yield url


class _Calls(dict[str, int]):
    """The spy's counts, the compiled sinks' reads (each a DirectBody.send on the Python path)
    counted in."""

    def __init__(self, **counts: int) -> None:
        super().__init__(counts)
        self.sinks: list[Any] = []

    def __getitem__(self, key: str) -> int:
        extra = sum(s.calls for s in self.sinks) if key == "send" else 0
        return super().__getitem__(key) + extra


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the writes and waits of every DirectBody (a read that ends the body, with the body's
    end written with it, counts as a send)."""
    calls = _Calls(send=0, drain=0)
    send, send_end, drain = DirectBody.send, DirectBody.send_end, DirectBody.drain
    make = _app._direct_sink

    def counted_sink(*args: Any) -> Any:
        sink = make(*args)
        if not isinstance(sink, _DirectSink):  # the compiled one: it counts its own
            calls.sinks.append(sink)
        return sink

    def counted_send(self: DirectBody, data: bytes) -> bool | None:
        calls["send"] += 1
        return send(self, data)

    def counted_send_end(self: DirectBody, data: bytes) -> bool | None:
        calls["send"] += 1
        return send_end(self, data)

    async def counted_drain(self: DirectBody) -> None:
        calls["drain"] += 1
        await drain(self)

    monkeypatch.setattr(_app, "_direct_sink", counted_sink)
    monkeypatch.setattr(DirectBody, "send", counted_send)
    monkeypatch.setattr(DirectBody, "send_end", counted_send_end)
    monkeypatch.setattr(DirectBody, "drain", counted_drain)
    return calls


PIECES = [b'data: {"n": %d}\n\n' % i for i in range(5)]


def test_each_read_goes_to_the_caller_from_the_upstreams_callback(store: Store, spy: dict[str, int]) -> None:
    lock = Lockstep()  # each piece its own read, and held back by the proxy it would stall the upstream
    with serve(raw_upstream(PIECES, lockstep=lock)) as up, tap(up, store) as url, httpx.Client() as c:
        # kept alive: uvicorn ends each relayed response itself, so the next request on the
        # connection is served as usual, twice more
        got = []
        for _ in range(3):
            with c.stream("POST", f"{url}/v1/chat/completions", content=b"{}") as r:
                got.append(b"".join(lock.took(piece) for piece in r.iter_raw()))
    assert got == [b"".join(PIECES)] * 3
    assert spy["send"] == 3 * len(PIECES)  # one send per upstream read, all through DirectBody
    sinks = cast(_Calls, spy).sinks
    if _app._native_relay is not None:
        # the compiled sinks sent every one to the caller's socket themselves (the caller kept up:
        # the transport never held a byte), and the bytes above are the same
        assert sum(s.calls for s in sinks) == 3 * len(PIECES)
        assert all(s.direct == s.calls for s in sinks)
    else:
        assert not sinks


@contextmanager
def _engine_like_upstream(pieces: list[bytes]) -> Iterator[str]:
    """A raw HTTP/1.1 upstream that writes as an engine's server does: the head, each piece a write
    of its own, and the last piece with the body's end in one write (so one read of the proxy's
    holds both); kept alive, for any number of requests."""
    listener = socket.create_server(("127.0.0.1", 0))
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    framed = [b"%x\r\n%s\r\n" % (len(p), p) for p in pieces]

    def one(conn: socket.socket) -> None:
        with conn:
            buf = b""
            while True:
                while b"\r\n\r\n" not in buf:
                    more = conn.recv(65536)
                    if not more:
                        return
                    buf += more
                head_end = buf.index(b"\r\n\r\n") + 4
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in buf[:head_end].split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(buf) < head_end + length:
                    buf += conn.recv(65536)
                buf = buf[head_end + length :]
                conn.sendall(head)
                for f in framed[:-1]:
                    conn.sendall(f)
                    time.sleep(0.002)
                conn.sendall(framed[-1] + b"0\r\n\r\n")

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = listener.accept()
                threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def test_the_read_that_ends_the_body_goes_out_with_the_bodys_end(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last read of a body, which holds the body's end too, goes to the caller with the end in
    one write (the sink's ``end``): every response whole, on a connection kept alive from one to the
    next, every exchange recorded whole and as answered, not as a caller gone."""
    sinks: list[Any] = []
    make = _app._direct_sink

    def kept(*args: Any) -> Any:
        sinks.append(make(*args))
        return sinks[-1]

    monkeypatch.setattr(_app, "_direct_sink", kept)
    with _engine_like_upstream(PIECES) as up, tap(up, store) as url, httpx.Client() as c:
        for _ in range(3):
            with c.stream("POST", f"{url}/v1/chat/completions", content=b"{}") as r:
                assert b"".join(r.iter_raw()) == b"".join(PIECES)
    assert len(sinks) == 3 and all(s.ended for s in sinks)
    exs = asyncio.run(recorded(store, 3))
    assert len(exs) == 3
    for ex in exs:
        assert ex.error is None and ex.response is not None and ex.response.status == 200
        assert b"".join(c.data for c in ex.response.chunks or []) == b"".join(PIECES)


def test_a_slow_caller_pauses_the_upstream_and_loses_nothing(store: Store, spy: dict[str, int]) -> None:
    piece = bytes(range(256)) * 256  # 64 KiB
    n = 512  # 32 MiB in all, past what loopback's socket buffers on both sides can hold
    state: dict[str, float] = {}

    async def flood(scope: Any, receive: Any, send: Any) -> None:
        await read_body(receive)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        for i in range(n):
            await send({"type": "http.response.body", "body": piece, "more_body": i < n - 1})
        state["upstream_done"] = time.monotonic()

    with serve(flood) as up, tap(up, store, record_limit=64 << 20) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
            s.connect((host, int(port)))
            s.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: t\r\ncontent-length: 2\r\n"
                b"connection: close\r\n\r\n{}"
            )
            got = bytearray()
            # the caller reads nothing yet: the proxy must stop reading the upstream. A busy machine
            # only slows the upstream down, so the wait cannot fail because of the load
            time.sleep(0.5)
            stalled_upstream = "upstream_done" not in state
            while data := s.recv(16384):
                got += data
                time.sleep(0.0002)
    head, _, chunked = bytes(got).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert hashlib.sha256(_dechunk(chunked)).digest() == hashlib.sha256(piece * n).digest()
    assert stalled_upstream, "the upstream finished while the caller read nothing: the proxy buffered it all"
    assert spy["drain"] >= 1  # the caller's buffer filled, and the relay waited for it
    [ex] = asyncio.run(recorded(store, 1))
    assert ex.error is None and b"".join(c.data for c in ex.response.chunks or []) == piece * n  # type: ignore[union-attr]


def test_an_upstream_break_mid_relay_breaks_the_callers_connection(store: Store, spy: dict[str, int]) -> None:
    lock = Lockstep()
    up_app = raw_upstream([b"data: {}\n\n", b"data: {}\n\n", b"x"], fail_after=2, lockstep=lock)
    with serve(up_app) as up, tap(up, store) as url:
        got = b""
        with (
            pytest.raises(httpx.HTTPError),
            httpx.stream("POST", f"{url}/v1/chat/completions", content=b"{}") as r,
        ):
            for p in r.iter_raw():
                got += lock.took(p)
    assert got == b"data: {}\n\n" * 2 and spy["send"] == 2
    [ex] = asyncio.run(recorded(store, 1))
    assert ex.error is not None and ex.error.kind == "upstream_reset"
    assert ex.response is not None and len(ex.response.chunks or []) == 2


def test_an_upstream_silent_mid_relay_times_out(store: Store, spy: dict[str, int]) -> None:
    with (
        serve(raw_upstream([b"data: {}\n\n", b"late"], delay=0.5)) as up,
        tap(up, store, read_timeout_s=0.2) as url,
        pytest.raises(httpx.HTTPError),
        httpx.stream("POST", f"{url}/v1/chat/completions", content=b"{}") as r,
    ):
        for _ in r.iter_raw():
            pass
    [ex] = asyncio.run(recorded(store, 1))
    assert ex.error is not None and ex.error.kind == "timeout"


@pytest.mark.parametrize("direct", [True, False], ids=["direct-body", "asgi-receive"])
def test_a_caller_gone_while_the_upstream_is_silent_ends_the_exchange_at_once(
    store: Store, direct: bool
) -> None:
    """No upstream read comes to notice the caller is gone: the listener's connection_lost says so
    (or, on the ASGI path, ``receive``), and the upstream request is closed then, not at the read
    timeout."""
    released = threading.Event()
    upstream_saw: dict[str, bool] = {}

    async def silent(scope: Any, receive: Any, send: Any) -> None:
        await read_body(receive)
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": PIECES[0], "more_body": True})
        for _ in range(3000):  # silent for 30 s at most: a bound to fail by
            if released.is_set():
                break
            await asyncio.sleep(0.01)
        upstream_saw["released"] = released.is_set()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    config = ListenerConfig(direct_body=direct)
    with serve(silent) as up, serve_listener(ProxyApp(TapConfig(upstream=up), store), config=config) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: t\r\ncontent-length: 2\r\n\r\n{}")
            got = b""
            while PIECES[0] not in got:
                got += s.recv(65536)
        [ex] = asyncio.run(recorded(store, 1))  # recorded while the upstream is still silent
        released.set()
    assert ex.error is not None and ex.error.kind == "client_abort"
    assert ex.response is not None and [c.data for c in ex.response.chunks or []] == PIECES[:1]


def test_bodies_with_a_length_and_head_answers_take_the_asgi_path(store: Store, spy: dict[str, int]) -> None:
    body = b'{"object": "chat.completion"}'

    async def sized(scope: Any, receive: Any, send: Any) -> None:
        await read_body(receive)
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})

    with serve(sized) as up, tap(up, store) as url, httpx.Client() as c:
        r = c.post(f"{url}/v1/chat/completions", content=b"{}")
        h = c.head(f"{url}/v1/models")
    assert r.content == body and r.headers["content-length"] == str(len(body))
    assert h.status_code == 200 and h.content == b""
    assert spy["send"] == 0


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while True:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            return bytes(out)
        out += rest[:size]
        data = rest[size + 2 :]


def test_the_request_path_leaves_no_cyclic_garbage(store: Store) -> None:
    """The proxy tunes its GC on this (proxy/_server.py ``settle_gc``): every object of a forwarded
    exchange, streamed or not, is freed by its reference count. A reference cycle per request (the
    scope holding a DirectBody holding uvicorn's cycle holding the scope) once left every caller's
    socket and transport to the collector."""

    def post(url: str, *, stream: bool) -> bytes:
        host, port = url.removeprefix("http://").split(":")
        body = b'{"stream": true}' if stream else b"{}"
        with socket.create_connection((host, int(port))) as s:
            s.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nhost: t\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n%b" % (len(body), body)
            )
            out = b""
            while data := s.recv(65536):
                out += data
        return out

    sse = serve(raw_upstream(PIECES))
    sized = serve(raw_upstream([b'{"object": "chat.completion"}'], ctype=b"application/json"))
    with sse as up, sized as up2, tap(up, store) as url, tap(up2, store) as url2:
        for _ in range(3):  # warm: pools, lazy imports, first-use caches
            post(url, stream=True)
            post(url2, stream=False)
        store.flush()
        gc.collect()
        gc.disable()
        try:
            for _ in range(20):
                assert post(url, stream=True).endswith(b"0\r\n\r\n")
                assert b"chat.completion" in post(url2, stream=False)
            store.flush()
            time.sleep(0.2)  # the listeners' threads finish their bookkeeping
            unreachable = gc.collect()
        finally:
            gc.enable()
    assert unreachable == 0, f"{unreachable} objects in reference cycles after 40 exchanges"


def test_a_record_entry_made_without_its_init_is_a_chunk_like_any_other() -> None:
    """The tee makes each read's ``Chunk`` with ``__new__`` and two slot stores (proxy/_app.py): it
    holds only while the dataclass has exactly these two fields and no ``__post_init__``."""
    assert [f.name for f in dataclasses.fields(Chunk)] == ["t_ms", "data"]
    assert not hasattr(Chunk, "__post_init__")
    made = _new_chunk(Chunk)
    made.t_ms, made.data = 1.5, b"x"
    assert made == Chunk(1.5, b"x") and repr(made) == repr(Chunk(1.5, b"x"))


@given(
    st.lists(st.lists(st.binary(max_size=9), min_size=1, max_size=4), max_size=8),
    st.integers(min_value=0, max_value=40),
)
def test_the_record_keeps_each_piece_up_to_the_limit_whichever_path(
    reads: list[list[bytes]], limit: int
) -> None:
    """Both tees (the ASGI path's ``keep`` and the relay's ``forward``, one piece a read or several,
    and ``end`` for the last read) record each piece with its read's offset until ``limit`` bytes are
    kept, the last one cut, and count every byte forwarded."""
    expected, kept = [], 0
    for i, pieces in enumerate(reads):
        for piece in pieces:
            if kept < limit:
                expected.append((float(i * 1000), piece[: limit - kept]))
                kept += len(expected[-1][1])
    total = sum(len(p) for pieces in reads for p in pieces)
    series = _Series((0.001, 0.01))
    direct = SimpleNamespace(send=lambda data: True, send_end=lambda data: True)
    for tee in (_Tee([], 0.0, limit, series), _DirectSink([], 0.0, limit, series, direct)):  # type: ignore[arg-type]
        for i, pieces in enumerate(reads):
            batch = [(float(i), p) for p in pieces]
            if isinstance(tee, _DirectSink):
                assert (tee.end(batch) if i == len(reads) - 1 else tee.forward(batch)) is True
            else:
                tee.keep(batch)
        assert [(c.t_ms, c.data) for c in tee.chunks] == expected
        assert tee.size == total
        assert not isinstance(tee, _DirectSink) or tee.ended == bool(reads)


class _Transport:
    """What a ``_Cycle`` writes, in order."""

    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.out.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 8000), "peername": ("127.0.0.1", 50000)}.get(name, default)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.out.append(b"<close>")
        self.closed = True


def _cycle_in(paused: bool, disconnected: bool, started: bool, complete: bool, method: str) -> Any:
    from wirecheck.proxy._http import _Cycle

    transport = _Transport()

    async def drain() -> None:
        transport.out.append(b"<drained>")
        conn.write_paused = False

    conn = SimpleNamespace(
        transport=transport,
        write_paused=paused,
        drain=drain,
        response_complete=lambda: transport.out.append(b"<complete>"),
    )
    cycle = _Cycle.made(conn, {"method": method}, keep_alive=True, expect_100=False)  # type: ignore[arg-type]
    cycle.disconnected, cycle.response_started, cycle.response_complete = disconnected, started, complete
    if started:
        cycle.chunked = True
    return cycle


def _outcome(cycle: Any, run: Any) -> tuple[Any, ...]:
    try:
        asyncio.run(run())
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    return (
        raised,
        cycle.conn.transport.out,
        cycle.response_started,
        cycle.response_complete,
        cycle.chunked,
        cycle.left,
        cycle.keep_alive,
    )


_STATES = [
    (paused, disconnected, started, complete, method)
    for paused in (False, True)
    for disconnected in (False, True)
    for started in (False, True)
    for complete in (False, True)
    for method in ("POST", "HEAD")
]


@pytest.mark.parametrize("state", _STATES)
@pytest.mark.parametrize(
    "headers",
    [[(b"content-type", b"text/event-stream")], [(b"content-length", b"0")], [(b"connection", b"close")]],
)
def test_start_and_end_do_what_the_asgi_send_does_or_nothing(
    state: tuple[bool, bool, bool, bool, str], headers: Any
) -> None:
    """``DirectBody.start``/``end`` (the response's head and end as plain calls) leave the caller's
    side as the ASGI ``send`` of the same message would, or do nothing and say so, and ``send``
    then does it: the same bytes, the same state, the same refusal."""
    start = {"type": "http.response.start", "status": 200, "headers": headers}
    end = {"type": "http.response.body", "body": b"", "more_body": False}
    for message, plain in ((start, "start"), (end, "end")):
        by_send = _cycle_in(*state)

        async def asgi(c: Any = by_send, m: Any = message) -> None:
            await c.send(m)

        direct = _cycle_in(*state)

        body = DirectBody(direct)

        async def plain_call(c: Any = direct, m: Any = message, name: str = plain, d: Any = body) -> None:
            done = d.start(200, headers) if name == "start" else d.end()
            if not done:
                await c.send(m)

        assert _outcome(direct, plain_call) == _outcome(by_send, asgi)


@pytest.mark.parametrize("paused", [False, True])
@pytest.mark.parametrize("data", [b"", b"data: [DONE]\n\n"])
def test_a_body_ended_with_its_last_read_is_ended_once(paused: bool, data: bytes) -> None:
    """``send_end`` writes the last read and the body's end in one write; the response's end then
    writes nothing more, as the plain call or (the caller's buffer full) through the ASGI ``send``
    after a drain, and completes the response as ever. A caller gone after that aborts nothing:
    its connection's ``on_gone`` is let go of."""
    cycle = _cycle_in(paused, False, True, False, "POST")
    cycle.conn.on_gone = "armed"
    body = DirectBody(cycle)
    assert body.send_end(data) is (not paused)
    framed = (b"%x\r\n%s\r\n" % (len(data), data) if data else b"") + b"0\r\n\r\n"
    assert cycle.conn.transport.out == [framed]
    assert cycle.terminated and cycle.conn.on_gone is None and not cycle.response_complete

    async def end() -> None:
        if not body.end():
            await cycle.send({"type": "http.response.body", "body": b"", "more_body": False})

    asyncio.run(end())
    assert cycle.conn.transport.out == [framed, *([b"<drained>"] if paused else []), b"<complete>"]
    assert cycle.response_complete


def test_a_body_ended_for_a_caller_already_gone_writes_nothing() -> None:
    cycle = _cycle_in(False, True, True, False, "POST")
    body = DirectBody(cycle)
    assert body.send_end(b"x") is None
    assert cycle.conn.transport.out == [] and not cycle.terminated


def test_the_listeners_extensions_and_the_upstream_answer_made_without_init_are_whole() -> None:
    """The listener makes each request's ``Cut`` and ``DirectBody`` with ``__new__`` and a store to
    every slot, the upstream client its ``UpstreamResponse`` likewise (proxy/_http.py,
    proxy/_upstream.py): it holds while these are all their slots and fields, and each then holds
    what its ``__init__`` would."""
    from wirecheck.proxy._http import Cut, _Cycle
    from wirecheck.proxy._upstream import UpstreamResponse

    assert Cut.__slots__ == ("_cycle",) and DirectBody.__slots__ == ("_cycle", "_transport")
    assert [f.name for f in dataclasses.fields(UpstreamResponse)] == [
        "status",
        "headers",
        "batches",
        "aclose",
        "relay",
    ]
    assert not hasattr(UpstreamResponse, "__post_init__")
    lst = SimpleNamespace(
        config=ListenerConfig(direct_body=True),
        connections=set(),
        tasks=set(),
        state={},
        sweep=lambda: None,
        bound=None,
    )

    async def run() -> None:
        from wirecheck.proxy._http import HttpConnection

        conn = HttpConnection(lst)  # type: ignore[arg-type]
        started: list[_Cycle] = []
        conn._start = started.append  # type: ignore[method-assign]
        conn.connection_made(_Transport())  # type: ignore[arg-type]
        conn.data_received(b"POST /v1 HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\n\r\n{}")
        (cycle,) = started
        ext = cycle.scope["extensions"]
        cut, direct = ext["wirecheck.cut"], ext["wirecheck.direct_body"]
        assert type(cut) is Cut and type(direct) is DirectBody
        by_init_cut, by_init_direct = Cut(cycle), DirectBody(cycle)
        assert cut._cycle() is by_init_cut._cycle() is cycle
        assert direct._cycle() is by_init_direct._cycle() is cycle
        assert direct._transport is by_init_direct._transport is conn.transport
        assert direct.body_arrived() and direct.whole_body() == b"{}"
        # the cycle is made by ``_Cycle.made`` without ``__init__``: every slot stored
        assert all(hasattr(cycle, name) for name in _Cycle.__slots__ if name != "__weakref__")

    asyncio.run(run())


def test_the_exchange_and_its_request_made_without_init_have_every_field() -> None:
    """The tap makes each exchange and its request with ``__new__`` and a store to each field: a
    field added to the dataclasses and not stored there would be missing (an AttributeError where
    it is read), not defaulted."""
    kept: list[Exchange] = []

    class Keep:
        def put(self, ex: Exchange) -> bool:
            kept.append(ex)
            return True

    with (
        serve(raw_upstream([b"data: {}\n\n"])) as up,
        serve_listener(ProxyApp(TapConfig(upstream=up), Keep())) as url,
    ):
        assert httpx.post(f"{url}/v1/chat/completions", content=b"{}", timeout=30).status_code == 200
    (ex,) = kept
    for obj, kind in ((ex, Exchange), (ex.request, HttpRequest)):
        values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(kind)}  # none missing
        assert kind(**values) == obj
    assert ex.request.body == b"{}" and ex.tap == "caller" and ex.id.startswith("caller-")


def test_the_parts_the_compiled_sink_holds_are_the_running_cycles() -> None:
    """``DirectBody.parts`` gives the compiled sink the caller's connection and transport while the
    request cycle runs, and refuses once the cycle is over (its connection let go) or gone, rather
    than hand the sink a connection it could no longer write for."""
    cycle = _cycle_in(False, False, True, False, "POST")
    body = DirectBody(cycle)
    assert body.parts() == (cycle.conn, cycle.conn.transport)
    cycle.conn = None  # as _Cycle.run leaves it when the app has returned
    with pytest.raises(RuntimeError, match="over"):
        body.parts()
    del cycle
    gc.collect()
    with pytest.raises(RuntimeError, match="over"):
        body.parts()
