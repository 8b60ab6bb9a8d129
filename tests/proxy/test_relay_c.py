"""The compiled twin of a relayed body's reads (proxy/_relay_c.c) against the Python it stands in
for: the same upstream bytes, split anywhere, through ``_Conn`` with ``_DirectSink``, through
``_ConnC`` with the compiled sink, and through ``_ConnReader`` (its read callback compiled too),
give the caller the same bytes, the record the same chunks, and the connection the same outcome
(complete, kept or closed, the same error)."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import itertools
import resource
import time
import weakref
from array import array
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wirecheck.contracts import Chunk
from wirecheck.contracts._native import PURE_PYTHON
from wirecheck.proxy import _upstream
from wirecheck.proxy._app import _DirectSink
from wirecheck.proxy._histogram import _Series
from wirecheck.proxy._http import DirectBody

relay_c = _upstream._native_relay
pytestmark = pytest.mark.skipif(relay_c is None and PURE_PYTHON, reason="WIRECHECK_PURE_PYTHON=1")


def test_the_twin_is_built() -> None:
    """Where a C compiler was present at install, the twin is there and in use."""
    assert relay_c is not None


class _UpTransport:
    """The upstream's side: what the connection did to it."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.closing = False

    def pause_reading(self) -> None:
        self.calls.append("pause")

    def resume_reading(self) -> None:
        self.calls.append("resume")

    def close(self) -> None:
        self.calls.append("close")
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes) -> None:
        self.calls.append("write")


@dataclass
class _Caller:
    """The caller's side: its connection (``write_paused``), its request cycle and its transport.
    ``full_after``: the writes after which its buffer is over the mark (until drained)."""

    full_after: set[int]
    gone_at: int | None
    #: a read still comes after the relay stopped (the sink said stop), before it begins again
    late: bool = False
    #: the body is relayed (else taken in batches: ``UpstreamResponse.batches``)
    relaying: bool = True
    writes: list[bytes] = field(default_factory=list)
    write_paused: bool = False
    disconnected: bool = False
    closing: bool = False
    #: the body's end went out with its last read (``DirectBody.ended``), and what that let go of
    terminated: bool = False
    on_gone: Any = None

    @property
    def conn(self) -> _Caller:
        return self

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        if len(self.writes) in self.full_after:
            self.write_paused = True

    def is_closing(self) -> bool:
        return self.closing


#: the paths compared: llhttp and ``_DirectSink`` (the reference), the compiled reader and sink
#: called from Python (``_ConnC``), and the read callback compiled as well (``_ConnReader``)
PATHS = ("python", "compiled", "reader")


def _connection(path: str) -> _upstream._Conn:
    if path == "python":
        return _upstream._Conn()
    if path == "compiled":
        return _upstream._ConnC()
    conn: _upstream._Conn = _upstream._ConnReader()
    return conn


@contextlib.contextmanager
def _clock(ticks: Any) -> Any:
    """Each read's stamp from ``ticks`` (a clock of the test's own), on every path."""
    assert relay_c is not None

    def clock() -> float:
        return float(next(ticks))

    saved = _upstream.time
    _upstream.time = SimpleNamespace(monotonic=clock)  # type: ignore[assignment]
    relay_c.use_clock(clock)
    try:
        yield
    finally:
        _upstream.time = saved
        relay_c.use_clock(None)


def _drive(path: str, reads: list[bytes], *, close: bool, limit: int, caller: _Caller) -> dict[str, Any]:
    compiled = path != "python"
    conn = _connection(path)
    up = _UpTransport()
    conn.connection_made(up)  # type: ignore[arg-type]
    conn._begin(head_only=False)
    chunks: list[Chunk] = []
    series = _Series((0.001, 0.01, 1.0))
    cycle = weakref.ref(caller)
    caller.on_gone = "armed"
    direct = DirectBody.__new__(DirectBody)
    direct._cycle, direct._transport = cycle, caller  # type: ignore[assignment]
    sink: Any
    if compiled:
        assert relay_c is not None
        sink = relay_c.Sink(0.0, limit, series, caller, caller, direct.ended)  # type: ignore[arg-type]
        forward = sink
    else:
        sink = _DirectSink(chunks, 0.0, limit, series, direct)
        forward = sink.forward
    events: list[Any] = []
    begun = False
    for i, data in enumerate(reads):
        if caller.gone_at == i:  # as connection_lost leaves it: the transport closed, the cycle marked
            caller.closing = caller.disconnected = True
        if conn.closed:
            break
        conn.data_received(data)
        if caller.relaying and conn.sink is None and conn.headers_done and (not begun or conn.halted):
            begun = True
            conn.sink, conn.sink_end, conn.halted = forward, sink.end, False  # ``_Raw.open``'s relay begins
            if conn.pieces:
                conn.hand_on()
        if conn.halted and caller.late:  # relay() returned False: no sink until it is called again
            events.append(("stopped", i))
            conn.sink = conn.sink_end = None
            caller.write_paused = False
        elif conn.halted:  # the sink said stop: the task drains the caller, then relays again
            events.append(("halted", i))
            caller.write_paused = False
            conn.halted = False
            if conn.paused:
                conn.paused = False
                up.resume_reading()
            if conn.pieces:
                conn.hand_on()
    if close and not conn.closed:
        conn.connection_lost(None)
    return {
        "caller": caller.writes,
        "chunks": _record(sink.joined()) if compiled else [(c.t_ms, c.data) for c in chunks],
        "size": sink.size,
        "observed": sum(series.counts),
        "events": events,
        "upstream": up.calls,
        "state": (conn.headers_done, conn.complete, conn.keep, conn.reparse, conn.closed, conn.status),
        "headers": conn.headers,
        "framed": conn.framed,
        "error": None if conn.error is None else (type(conn.error).__name__, str(conn.error)),
        "left": conn.pieces,
        "buffered": conn.buffered,
        "ended": (sink.ended, caller.terminated, caller.on_gone),
    }


def _record(joined: tuple[bytes, list[int], list[float]]) -> list[tuple[float, bytes]]:
    """The compiled sink's record, joined, as (t_ms, bytes) pieces: the Python sinks' chunks."""
    data, sizes, times = joined
    ends = list(itertools.accumulate(sizes))
    return [(t, data[end - size : end]) for t, size, end in zip(times, sizes, ends, strict=True)]


def _hexes(n: int, upper: bool, zeros: int) -> bytes:
    text = "0" * zeros + format(n, "x")
    return (text.upper() if upper else text).encode()


@st.composite
def _chunked(draw: st.DrawFn) -> bytes:
    """A chunked body, well formed or mostly (extensions, trailers, case, leading zeros)."""
    out = []
    for data in draw(st.lists(st.binary(min_size=1, max_size=40), max_size=6)):
        line = _hexes(len(data), draw(st.booleans()), draw(st.integers(0, 3)))
        if draw(st.integers(0, 9)) == 0:
            line += draw(st.sampled_from([b";a=b", b"; q", b';x="y z"', b" ", b"\t;e"]))
        out.append(line + b"\r\n" + data + b"\r\n")
    last = b"0" * draw(st.integers(1, 2))
    if draw(st.integers(0, 5)) == 0:
        last += b";end=1"
    out.append(last + b"\r\n")
    if draw(st.integers(0, 4)) == 0:
        out.append(draw(st.sampled_from([b"x-t: 1\r\n", b"X-Sum: abc\r\nx-u: 2\r\n", b"bad trailer\r\n"])))
    out.append(b"\r\n")
    return b"".join(out)


_HEADS = [
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\ncontent-type: text/event-stream\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 500 Oops\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
    # an engine's (vLLM's, through uvicorn), which the compiled twin reads whole, and heads near it
    b"HTTP/1.1 200 OK\r\ndate: Sun, 06 Dec 2026 20:00:00 GMT\r\nserver: uvicorn\r\n"
    b"content-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 503 Service Unavailable\r\nX-Pad:  a b \t\r\nTransfer-Encoding:chunked \r\n\r\n",
    b"HTTP/1.1 200 \r\nConnection: keep-alive, Close\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nproxy-connection: close\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nconnection: upgrade\r\nupgrade: h2c\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 204 No Content\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nx: caf\xc3\xa9\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nx: 1\n\r\n",
]


@st.composite
def _stream(draw: st.DrawFn) -> tuple[list[bytes], bool]:
    """An upstream's response bytes split into reads, and whether the connection then closes."""
    body = draw(_chunked())
    mutation = draw(st.integers(0, 9))
    if mutation == 1 and body:  # a byte changed anywhere
        at = draw(st.integers(0, len(body) - 1))
        body = (
            body[:at]
            + draw(st.sampled_from([b"g", b"\r", b"\n", b";", b" ", b"\x00", b"Z"]))
            + body[at + 1 :]
        )
    elif mutation == 2:  # cut short
        body = body[: draw(st.integers(0, len(body)))]
    elif mutation == 3:  # bytes after the end
        body += draw(
            st.sampled_from([b"\r\n", b"x", b"HTTP/1.1 200 OK\r\n\r\n", b"\r\n\r\nzz", b"0\r\n\r\n"])
        )
    elif mutation == 4:  # a hostile size line
        body = (
            draw(st.sampled_from([b"f" * 17, b"1" * 15, b"fffffffffffffffff", b"7" * 40, b"-1"]))
            + b"\r\nab"
            + body
        )
    elif mutation == 5 and b"\r\n" in body:  # a line's end, any one, without its CR or LF
        at = draw(st.sampled_from([i for i in range(len(body) - 1) if body[i : i + 2] == b"\r\n"]))
        body = body[:at] + draw(st.sampled_from([b"\n", b"\r", b"\r\r\n", b"\n\r"])) + body[at + 2 :]
    data = draw(st.sampled_from(_HEADS)) + body
    # reads end anywhere, and mostly where a server's writes end: after a line (a chunk's end)
    ends = [i + 2 for i in range(len(data) - 1) if data[i : i + 2] == b"\r\n"]
    cuts = sorted(
        draw(st.sets(st.integers(1, max(1, len(data) - 1)), max_size=4))
        | set(draw(st.lists(st.sampled_from(ends), max_size=12)) if ends else [])
    )
    reads = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if data[a:b]]
    if draw(st.booleans()):  # a read after the response, on its own
        reads.append(draw(st.sampled_from([b"x", b"\r\n", b"0\r\n\r\n"])))
    return reads, draw(st.booleans())


@pytest.mark.skipif(relay_c is None, reason="the twin is not built")
@settings(max_examples=600, deadline=None)
@given(
    _stream(),
    st.integers(0, 120),
    st.builds(
        _Caller,
        full_after=st.sets(st.integers(1, 8), max_size=3),
        gone_at=st.one_of(st.none(), st.integers(0, 8)),
        late=st.booleans(),
        relaying=st.integers(0, 5).map(bool),
    ),
)
def test_the_compiled_reads_are_the_pythons(
    stream: tuple[list[bytes], bool], limit: int, caller: _Caller
) -> None:
    reads, close = stream
    got = []
    for path in PATHS:
        # each read's stamp from a clock of its own, the same on every path
        with _clock(iter(range(1, 10_000))):
            fresh = dataclasses.replace(caller, writes=[])  # the drawn one stays as drawn
            got.append(_drive(path, reads, close=close, limit=limit, caller=fresh))
    assert got[1] == got[0]
    assert got[2] == got[0]


def test_the_compiled_reader_is_made_as_any_python_object() -> None:
    """``Reader`` instances come from ``object.__new__`` (which refuses arguments nobody takes), not
    from ``PyType_GenericNew`` (which takes any): only the former lays a subclass instance's
    attributes out inline, and the connection's Python reads and writes them many times an
    exchange (about four times as slow otherwise)."""
    assert relay_c is not None
    with pytest.raises(TypeError):
        relay_c.Reader(1)  # type: ignore[call-arg]
    conn = _upstream._ConnReader()
    conn.got_bytes = True
    assert conn.got_bytes and conn.dechunk is None and conn.stamp == 0.0 and conn.halted is False


def test_a_read_of_whole_chunks_is_taken_over_and_relayed_in_one_call() -> None:
    """The compiled reader takes the body over at the first chunk boundary, and a read of several
    chunks then goes to the caller as one chunk: the pieces recorded apart, each with the read's stamp.
    The read that ends the body goes out with the body's end, in one write."""
    assert relay_c is not None
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    reads = [head + b"3\r\nabc\r\n", b"2\r\nde\r\nA\r\n0123456789\r\n", b"1\r\nf\r\n0\r\n\r\n"]
    caller = _Caller(set(), None)
    out = _drive("reader", reads, close=False, limit=100, caller=caller)
    assert out["caller"] == [b"3\r\nabc\r\n", b"c\r\nde0123456789\r\n", b"1\r\nf\r\n0\r\n\r\n"]
    assert out["ended"] == (True, True, None)
    assert [d for _, d in out["chunks"]] == [b"abc", b"de", b"0123456789", b"f"]
    assert out["state"] == (True, True, True, True, False, 200) and out["error"] is None


def test_the_compiled_sink_and_reader_hold_no_memory() -> None:
    """100k reads through the compiled reader and sink, and 20k sinks and readers made and
    dropped: the process grows by no more than the record they were asked to keep."""
    assert relay_c is not None
    caller = _Caller(set(), None)
    series = _Series((0.001, 0.01))

    def run(n: int) -> None:
        for _ in range(n // 50):
            sink = relay_c.Sink(0.0, 64, series, caller, caller)  # type: ignore[arg-type]
            dechunk = relay_c.Dechunker().feed
            conn = _upstream._ConnReader()
            conn.connection_made(_UpTransport())  # type: ignore[arg-type]
            conn.dechunk, conn.sink = relay_c.Dechunker(), sink
            for _ in range(50):
                assert dechunk(b"5\r\nhello\r\n3\r\nabc\r\n", 1.0, sink, []) is True
                sink([(1.0, b"xyz"), (2.0, b"w")])
                conn.data_received(b"5\r\nhello\r\n3\r\nabc\r\n")
                assert conn.dechunk is not None and not conn.pieces
            assert dechunk(b"0\r\n\r\n", 1.0, sink, []) == (b"0\r", 2, False, 0)
            caller.writes.clear()

    run(20_000)
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run(100_000)
    gc.collect()
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 2048, f"{grown_kb} KB more after 100k reads"


_BODIES = [
    b"5\r\nhello\r\n0\r\n\r\n",
    b"5\r\nhello\r\nA\r\n0123456789\r\n0\r\nx-t: 1\r\n\r\n",
    b"5\r\nhelloX\r\n0\r\n\r\n",  # no CRLF after the data
    b"5\r\nhello\rX\n0\r\n\r\n",  # a CR, then not an LF
    b"5\r\nhello\r\n5;e=1\r\nworld\r\n0\r\n\r\n",
    b"5\r\nhello\r\n0\r\n\r\nsurplus",
    b"5\r\nhello\r\n" + b"f" * 16 + b"\r\n",  # past 64 bits: llhttp's overflow
    b"5\r\nhello\r\n" + b"1" * 15 + b"\r\nabc",  # huge, then cut
    b"5\r\nhello\r\nzz\r\n",
    b"5\r\nhello\r\n5 \r\nworld\r\n0\r\n\r\n",
]


@pytest.mark.skipif(relay_c is None, reason="the twin is not built")
@pytest.mark.parametrize("body", _BODIES)
def test_hostile_bodies_split_at_every_byte(body: bytes) -> None:
    """The head, the first chunk (after which the compiled reader takes over), then the rest in two
    reads split at each byte, and byte by byte."""
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    first, rest = b"3\r\nabc\r\n", body
    splits = [[head, first, rest[:i], rest[i:]] for i in range(1, len(rest))]
    splits.append([head, first, *(rest[i : i + 1] for i in range(len(rest)))])
    for reads in splits:
        for close in (False, True):
            got = [_drive(path, reads, close=close, limit=8, caller=_Caller(set(), None)) for path in PATHS]
            for g in got:
                g["chunks"] = [d for _, d in g["chunks"]]  # stamps: the real clock here
            assert got[1] == got[0], reads
            assert got[2] == got[0], reads


def test_the_compiled_sink_takes_any_series_and_keeps_its_record_joined() -> None:
    """Slots are written directly only where they are a type's own; anything else by name: a series
    with just ``observe`` works as it would in Python. The record is the kept bytes joined, with each
    piece's size and arrival offset, up to the limit, and ``joined`` hands out the record so far."""
    assert relay_c is not None

    class Observed:
        def __init__(self) -> None:
            self.seen: list[float] = []

        def observe(self, value: float) -> None:
            self.seen.append(value)

    caller = _Caller(set(), None)
    added = Observed()
    sink = relay_c.Sink(1.0, 3, added, caller, caller)  # type: ignore[arg-type]
    assert sink.joined() == (b"", [], [])
    assert sink([(1.5, b"ab"), (2.0, b"cd")]) is True
    assert caller.writes == [b"4\r\nabcd\r\n"] and sink.size == 4 and len(added.seen) == 1
    assert sink.joined() == (b"abc", [2, 1], [500.0, 1000.0])
    assert sink([(2.5, b"ef"), (3.0, b"")]) is True  # past the limit: forwarded, not kept
    assert caller.writes[-1] == b"2\r\nef\r\n" and sink.size == 6
    assert sink.joined() == (b"abc", [2, 1], [500.0, 1000.0])


def test_the_compiled_sink_adds_to_the_series_buckets_in_place_and_lets_them_go() -> None:
    """A _Series' buckets and sum are arrays the sink holds while it lives and adds to in place:
    each write observes its oldest piece's wait, into the bucket ``_Series.observe`` would choose.
    Stamps far from now make the waits land in known buckets whatever the machine is doing."""
    assert relay_c is not None
    caller = _Caller(set(), None)
    series, reference = _Series((0.001, 0.01, 1.0)), _Series((0.001, 0.01, 1.0))
    counts, sums = series.counts, series.sums
    sink = relay_c.Sink(0.0, 100, series, caller, caller)  # type: ignore[arg-type]
    now = time.monotonic()
    for stamp in (now + 100.0, now - 100.0, now - 100.0, now - 0.5):
        assert sink([(stamp, b"ab")]) is True
        reference.observe(now - stamp)
    assert list(series.counts) == list(reference.counts) == [1, 0, 1, 2]
    assert series.total == pytest.approx(reference.total, abs=1.0)  # the sink read the clock later
    assert series.counts is counts and series.sums is sums  # the same arrays, added to in place
    with pytest.raises(BufferError):
        counts.append(0)  # held: the sink's view of them cannot move
    del sink
    gc.collect()
    counts.append(0)  # let go with the sink
    assert len(counts) == 5


def test_a_series_kept_otherwise_is_observed_through_its_method() -> None:
    """A series whose buckets are not arrays of the right shape (a list, a wrong length) gets each
    wait through ``observe``, as any object with that method does."""
    assert relay_c is not None

    class Listed:
        bounds = (0.001, 0.01)

        def __init__(self, counts: Any) -> None:
            self.counts, self.sums = counts, array("d", [0.0])
            self.seen: list[float] = []

        def observe(self, value: float) -> None:
            self.seen.append(value)

    caller = _Caller(set(), None)
    for counts in ([0, 0, 0], array("q", [0, 0]), array("d", [0.0, 0.0, 0.0])):
        series, before = Listed(counts), list(counts)
        sink = relay_c.Sink(0.0, 100, series, caller, caller)  # type: ignore[arg-type]
        assert sink([(time.monotonic(), b"x")]) is True
        assert len(series.seen) == 1 and list(series.counts) == before and series.sums[0] == 0.0, counts


def test_a_finalizer_that_empties_the_lists_mid_call_breaks_nothing() -> None:
    """A collection may run at any allocation inside the twin, and a finalizer then run any code:
    one that empties the batch, the record, the pieces and the histogram's buckets (which the sink
    holds, so they stay) leaves the twin with an answer or an error, never a read past a list's end."""
    assert relay_c is not None
    targets: list[list[Any]] = []

    class Bomb:
        def __del__(self) -> None:
            for target in targets:
                # the sink holds the series' buckets (an exported buffer): they cannot shrink
                with contextlib.suppress(BufferError):
                    del target[:]

    caller = _Caller(set(), None)
    old = gc.get_threshold()
    gc.set_threshold(1)
    try:
        for _ in range(50):
            series = _Series((0.001, 0.01))
            pieces: list[tuple[float, bytes]] = [(0.5, b"x")]
            batch = [(1.0, b"ab"), (2.0, b"cd"), (3.0, b"ef")]
            targets[:] = [series.counts, pieces, batch]
            sink = relay_c.Sink(0.0, 100, series, caller, caller)  # type: ignore[arg-type]
            feed = relay_c.Dechunker().feed
            calls: list[tuple[Any, tuple[Any, ...]]] = [
                (sink, (batch,)),
                (feed, (b"2\r\nab\r\n3\r\nabc\r\n", 1.0, sink, [])),
                (feed, (b"2\r\nab\r\n0\r\n\r\n", 1.0, sink, pieces)),
            ]
            for call, args in calls:
                bomb = Bomb()
                bomb.me = bomb  # type: ignore[attr-defined]  # a cycle: collected at a later allocation
                del bomb
                with contextlib.suppress(IndexError, TypeError):
                    call(*args)
            caller.writes.clear()
    finally:
        gc.set_threshold(*old)
        targets.clear()


@pytest.mark.skipif(relay_c is None, reason="the twin is not built")
@pytest.mark.parametrize(
    "second",
    [
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",  # whole again
        b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc",  # llhttp's
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    ],
)
def test_a_kept_connection_reads_its_next_response_after_a_head_read_whole(second: bytes) -> None:
    """The first response's head is read whole (the compiled paths) and llhttp only primed for its
    end; the connection, kept, reads the next response as the Python path does."""
    first = b"HTTP/1.1 200 OK\r\nserver: uvicorn\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n"
    got = []
    for path in PATHS:
        conn = _connection(path)
        conn.connection_made(_UpTransport())  # type: ignore[arg-type]
        states = []
        for reads in ([first, b"0\r\n\r\n"], [second]):
            conn._begin(head_only=False)
            for data in reads:
                conn.data_received(data)
            body = b"".join(piece for _, piece in conn.pieces)
            states.append(
                (conn.status, conn.headers, body, conn.complete, conn.keep, conn.closed, conn.error)
            )
        got.append(states)
    assert got[1] == got[0]
    assert got[2] == got[0]
    assert got[0][0][3:5] == (True, True)  # the first kept, so the second was read on it
