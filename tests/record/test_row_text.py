"""The row's document text written in one pass by the compiled twin (record/_rows_c.c ``row_text``)
against its Python reference (``row_text_py``: ``row_document`` less the end time, encoded): the
same text to the byte, the same body and path wherever the twin answers, None (the reference
writes the row) for every exchange it leaves, and no crash or leak on odd input."""

from __future__ import annotations

import gc
import math
import tracemalloc
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.record.test_row_document import exchanges, reference_row
from wirecheck.contracts import (
    DEFAULT_REDACTION,
    Chunk,
    Exchange,
    ExchangeError,
    HttpRequest,
    HttpResponse,
    JoinedResponse,
    native,
)
from wirecheck.contracts._native import PURE_PYTHON
from wirecheck.record._rows import _VERDICTS, chunk_columns, encode, row_text, row_text_py

#: the store's path runs with the twins in use and on their Python reference
pytestmark = pytest.mark.usefixtures("both_paths")

twin = native("wirecheck.record._rows_c")
needs_twin = pytest.mark.skipif(twin is None, reason="the compiled twin is off or not built")


def _twin(ex: Any) -> tuple[str, bytes | None, str] | None:
    assert twin is not None
    return twin.row_text(ex, _VERDICTS, DEFAULT_REDACTION.target, orjson.dumps)


# ---- exchanges of the shape the proxy records, with odd strings, numbers and keys ------------------

#: ASCII names, some the same but for case (written as pairs), some credentials; each tested once
#: by the policy first, as the proxy's first exchange does (the twin leaves a name not yet tested)
_NAMES = [
    "host",
    "Host",
    "content-type",
    "content-length",
    "authorization",
    "x-api-key",
    "X-Foo-Api-Key",
    "set-cookie",
    "x-wirecheck-correlation",
    " authorization ",
    "x-\u0001odd",
    'quote"name\\',
]
for _name in _NAMES:
    DEFAULT_REDACTION.is_secret_header(_name)

_text = st.text(max_size=10) | st.sampled_from(['"', "\\", "\x00\x1f\x7f", "é\u2028😀", "\ud800", "</"])
_headers = st.lists(st.tuples(st.sampled_from(_NAMES), _text), max_size=8)
_body = (
    st.binary(max_size=20)
    | st.text(max_size=20).map(lambda s: s.encode("utf-8", "surrogatepass"))
    | st.just(b'{"model": "m", "messages": [{"role": "user", "content": "hi\\n\\u00e9"}]}')
)
_paths = st.sampled_from(
    ["/v1/chat/completions", "/v1/x?api_key=k&a=1", "http://u:p@h/x", "/a://b"]
) | st.text(min_size=1, max_size=8)
_offsets = (
    st.floats(min_value=0.0, max_value=1e6) | st.floats() | st.integers(0, 10**7).map(lambda n: n / 1000.0)
)
_chunks = st.lists(st.builds(Chunk, _offsets, st.binary(max_size=12)), max_size=6)
_values = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.sampled_from([1e16, 0.1, -0.0, 1e-7, 123.4])
    | _text
    | st.lists(st.integers(), max_size=2)
)
_extra = st.dictionaries(
    st.sampled_from(["_ended_mono", "stall_ms", "server_version", "id", "error", "x"]) | _text,
    _values,
    max_size=4,
)
plain = st.builds(
    Exchange,
    id=_text,
    tap=st.sampled_from(["caller", "engine", "t\u00e9"]),
    request=st.builds(HttpRequest, st.sampled_from(["POST", "GET"]), _paths, _headers, _body),
    response=st.none()
    | st.builds(HttpResponse, st.integers(-(2**64), 2**64), _headers, _body, st.none() | _chunks),
    correlation=st.none() | _text,
    started_at=st.none() | st.just("2026-12-05T10:00:00.000001Z"),
    error=st.none() | st.just(ExchangeError("client_abort", "gone", 1.5)),
    extra=_extra,
)


@needs_twin
@given(plain | exchanges)
def test_the_twin_writes_the_references_text_or_leaves_it(ex: Exchange) -> None:
    got = _twin(ex)
    try:
        want: Any = row_text_py(ex)
    except (ValueError, OverflowError):  # an offset NaN or infinite: the twin leaves it to raise so
        want = None
    if got is not None:
        assert got == want
        assert type(got[0]) is str and type(got[2]) is str
        assert got[1] is None or type(got[1]) is bytes


@given(plain | exchanges)
def test_the_row_text_is_the_reference_documents(ex: Exchange) -> None:
    try:
        text, body, path = row_text(ex)
    except (ValueError, OverflowError):  # an offset NaN or infinite, as the reference raises
        with pytest.raises((ValueError, OverflowError)):
            reference_row(ex)
        return
    doc, want_body = reference_row(ex)
    doc.pop("_ended_mono", None)
    assert text == encode(doc) and body == want_body and path == doc["request"]["path"]


def _held_joined(ex: Exchange) -> Exchange:
    """``ex`` with its response's chunks held joined, as the compiled relay records them and a row
    is read back: the bytes, each chunk's size, each one's offset."""
    resp = ex.response
    if resp is None or resp.chunks is None:
        return ex
    chunks = resp.chunks
    joined = (b"".join([c.data for c in chunks]), [len(c.data) for c in chunks], [c.t_ms for c in chunks])
    return ex.with_parts(ex.request, JoinedResponse(resp.status, resp.headers, resp.body, joined))


@given(plain | exchanges)
def test_a_response_held_joined_is_written_as_its_chunks_are(ex: Exchange) -> None:
    """The same row, text and body, from a response held joined as from its chunks: the reference
    and the twin alike, and without cutting the joined response into chunks."""
    held = _held_joined(ex)
    try:
        want: Any = row_text_py(ex)
    except (ValueError, OverflowError):  # an offset NaN or infinite: so from the joined form too
        with pytest.raises((ValueError, OverflowError)):
            row_text_py(held)
        return
    assert row_text_py(held) == want
    assert row_text(held) == want
    if held.response is not None:
        assert held.response.joined() is not None or held.response is ex.response


def _proxy_exchange(i: int) -> Exchange:
    body = b'{"model": "bench", "stream": true, "messages": [{"role": "user", "content": "hi"}]}'
    return Exchange(
        id=f"caller-{i:016x}",
        request=HttpRequest(
            "POST",
            "/v1/chat/completions",
            [("host", "bench"), ("content-type", "application/json"), ("content-length", str(len(body)))],
            body,
        ),
        response=HttpResponse(
            200,
            [("content-type", "text/event-stream")],
            b"",
            [Chunk(5.25 * (k + 1), b"data: {}\n\n") for k in range(20)],
        ),
        correlation=f"c{i}",
        started_at="2026-12-05T10:00:00.000001Z",
        extra={"_ended_mono": 12.5, "stall_ms": 21.5, "server_version": "v1"},
    )


@needs_twin
def test_the_twin_answers_for_what_the_proxy_records() -> None:
    # a silent hand-back for every row would keep the text right and the cost where it was
    ex = _proxy_exchange(1)
    row_text_py(ex)  # the names tested by the policy, as the first exchange does
    got = _twin(ex)
    assert got is not None and got == row_text_py(ex)
    held = _held_joined(ex)  # as the compiled relay records it
    assert _twin(held) == got


def _stamped(t0_ns: int, offsets_ns: list[int]) -> list[float]:
    """Offsets in ms as the compiled relay records them: monotonic stamps read to the nanosecond
    (seconds as a float), less the exchange's start, times 1000."""
    t0 = t0_ns / 1e9
    return [((t0_ns + k) / 1e9 - t0) * 1000.0 for k in offsets_ns]


@needs_twin
@given(
    st.integers(10**12, 10**15),
    st.lists(st.integers(0, 10**11) | st.integers(0, 10**8).map(lambda k: k * 1000 + 500), max_size=30),
)
def test_the_twin_writes_offsets_stamped_to_the_nanosecond(t0_ns: int, offsets_ns: list[int]) -> None:
    # about one such offset in a thousand lies on a half microsecond, where the two roundings of
    # the fast path cannot tell and the decimal way decides: the twin takes that step itself
    ex = _proxy_exchange(3)
    row_text_py(ex)  # the names tested by the policy
    times = sorted(_stamped(t0_ns, offsets_ns))
    held = ex.with_parts(
        ex.request,
        JoinedResponse(
            200, [("content-type", "text/event-stream")], b"", (b"x" * len(times), [1] * len(times), times)
        ),
    )
    got = _twin(held)
    assert got is not None and got == row_text_py(held)
    # the same, recorded as chunks (the Python sink's record)
    chunks = [Chunk(t, b"x") for t in times]
    as_chunks = HttpResponse(200, [("content-type", "text/event-stream")], b"", chunks)
    assert _twin(ex.with_parts(ex.request, as_chunks)) == got
    assert twin is not None and twin.chunk_columns(chunks) == chunk_columns(chunks)


@needs_twin
def test_the_twin_answers_for_offsets_on_a_half_microsecond() -> None:
    # offsets the proxy recorded (to the nanosecond: about one in a thousand lies on a half
    # microsecond); each once made its whole row go to the reference, a stream of 20 chunks in fifty
    ex = _proxy_exchange(4)
    row_text_py(ex)
    times = [0.0005, 5.448500000056811, 10.743388993432745, 66.38050000037765, 113.3685000022524]
    held = ex.with_parts(
        ex.request,
        JoinedResponse(200, [("content-type", "text/event-stream")], b"", (b"abcde", [1] * 5, times)),
    )
    got = _twin(held)
    assert got is not None and got == row_text_py(held)
    assert '"t_us":[1,5449,10743,66381,113369]' in got[0]


@needs_twin
def test_the_twin_leaves_what_it_does_not_write() -> None:
    ex = _proxy_exchange(2)
    row_text_py(ex)
    cases: list[Any] = [
        Exchange("x", error=ExchangeError("timeout")),  # an error
        Exchange("x", request=HttpRequest(body=b"\xff")),  # a body that is not UTF-8
        Exchange("x", request=HttpRequest(headers=[("never-seen-before-name", "v")])),
        Exchange("x", request=HttpRequest(headers=[("É", "v")])),  # a name that is not ASCII
        Exchange("x", request=HttpRequest(headers=[["host", "v"]])),  # type: ignore[list-item]
        Exchange("x", extra={"id": "y"}),  # a key of the document's own
        Exchange("x", extra={"n": 2**64}),  # past 64 bits
        Exchange("x", extra={"l": [1]}),  # a container
        Exchange("x", extra={1: 2}),  # type: ignore[dict-item]
        Exchange("x\ud800"),  # a lone surrogate
        Exchange("x", response=HttpResponse(True)),  # a status that is a bool
        Exchange("x", response=HttpResponse(200, chunks=[Chunk(math.nan, b"")])),
        # held joined, but not as the relay and the store hold it: sizes that do not add up to the
        # bytes, a size that is no int, an offset that is no float, one list longer, no tuple
        Exchange("x", response=JoinedResponse(200, [], b"", (b"abc", [1, 1], [1.0, 2.0]))),
        Exchange("x", response=JoinedResponse(200, [], b"", (b"abc", [1, 2.0], [1.0, 2.0]))),  # type: ignore[list-item]
        Exchange("x", response=JoinedResponse(200, [], b"", (b"abc", [1, 2], [1.0, 2]))),
        Exchange("x", response=JoinedResponse(200, [], b"", (b"abc", [3], [1.0, 2.0]))),
        Exchange("x", response=JoinedResponse(200, [], b"", [b"abc", [3], [1.0]])),  # type: ignore[arg-type]
        Exchange("x", response=JoinedResponse(200, [], b"", (b"abc", [-1, 4], [1.0, 2.0]))),
        Exchange(1),  # type: ignore[arg-type]
        "not an exchange",
        None,
    ]

    class Sub(Exchange):
        pass

    cases.append(Sub("x"))
    unset = Exchange.__new__(Exchange)
    cases.append(unset)
    for case in cases:
        assert _twin(case) is None, case
    assert twin is not None
    assert twin.row_text(ex, {"host": 1}, DEFAULT_REDACTION.target, orjson.dumps) is None
    with pytest.raises(TypeError):
        twin.row_text(ex)  # type: ignore[call-arg]


@needs_twin
def test_a_target_that_fails_raises_as_the_reference_does() -> None:
    assert twin is not None

    def broken(path: str) -> str:
        raise ValueError(path)

    ex = Exchange("x", request=HttpRequest(path="/a?b=c"))
    with pytest.raises(ValueError):
        twin.row_text(ex, _VERDICTS, broken, orjson.dumps)
    assert twin.row_text(ex, _VERDICTS, lambda p: 5, orjson.dumps) is None


@needs_twin
def test_the_twin_holds_no_memory_it_made() -> None:
    big = _proxy_exchange(3)
    big.request.body = b'"\n' * 5000  # past the buffer on the stack, escaped
    odd = Exchange("x", request=HttpRequest(body=b"\xff"), extra={"id": 1})
    for ex in (big, odd, _proxy_exchange(4)):
        row_text_py(ex)
    for _ in range(200):
        _twin(big), _twin(odd)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(100_000 if not PURE_PYTHON else 1):
            _twin(big)
            _twin(odd)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert after - before < 64 * 1024
