"""Reading a store row back: the plain shape the store writes is read without ``load_exchange``'s
checks (``_plain_row``, the plainest of it by a compiled twin), and a streamed response's stored
chunks by a compiled twin (``record/_rows_c.c``). Both are held to the general reading, which stays the reference, for
documents as the store writes them and for every near miss of them."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tests.support.leaks import grown_by
from wirecheck.contracts import (
    Chunk,
    Exchange,
    ExchangeError,
    HttpRequest,
    HttpResponse,
    InputError,
    json_loads,
)
from wirecheck.contracts._native import PURE_PYTHON, native
from wirecheck.record._rows import (
    _joined,
    _joined_py,
    _plain_row,
    _plain_row_py,
    _read_row,
    plain_row_text,
    row_document,
    row_exchange,
)

#: every test here runs with the twins and on their Python references (tests/record/conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")

_TWIN = "wirecheck.record._rows_c"
_text = st.text(max_size=6)
_headers = st.lists(st.tuples(st.sampled_from(["a", "A", "content-type", "x"]), _text), max_size=3)


@st.composite
def _exchanges(draw: st.DrawFn) -> Exchange:
    """Exchanges as a tap records them: streamed or not, with or without a response, an error,
    a correlation id, a start time, keys of their own."""
    request = HttpRequest(
        method=draw(st.sampled_from(["POST", "get", "PUT"])),
        path=draw(st.sampled_from(["/v1/chat/completions", "/x?y=1"])),
        headers=draw(_headers),
        body=draw(st.binary(max_size=8) | _text.map(str.encode)),
    )
    response = None
    if draw(st.booleans()):
        chunks = None
        if draw(st.booleans()):
            chunks = [
                Chunk(t, d)
                for t, d in draw(st.lists(st.tuples(st.floats(0, 1e6), st.binary(max_size=5)), max_size=4))
            ]
        body = b"" if chunks is not None else draw(st.binary(max_size=8))
        response = HttpResponse(draw(st.sampled_from([200, 500])), draw(_headers), body, chunks)
    return Exchange(
        id=draw(st.sampled_from(["e1", "caller-00000001"])),
        tap=draw(st.sampled_from(["caller", "engine"])),
        request=request,
        response=response,
        correlation=draw(st.none() | st.just("c1")),
        started_at=draw(st.none() | st.just("2026-12-05T10:00:00.000+00:00")),
        error=draw(st.none() | st.just(ExchangeError("upstream_reset", "cut", 4.0))),
        extra=draw(st.sampled_from([{}, {"mine": 1}])),
    )


#: what a near miss puts in place of a value of the plain shape
_odd = st.sampled_from(
    [None, True, 1, 1.5, "", "x", [], {}, [1, "a"], {"a": 1}, 2**70, 2**64 + 1, -(2**63) - 1, 2**1100, -1]
)


def _paths(obj: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a parsed document (dict keys and list indices)."""
    out = [at]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*at, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*at, i))
    return out


@st.composite
def _rows_written(draw: st.DrawFn) -> tuple[Any, bytes | None]:
    """A row's document and body as the store writes them, or one of them changed in one place
    (a value replaced, a key removed or added)."""
    doc, body = row_document(draw(_exchanges()))
    doc = copy.deepcopy(doc)
    if draw(st.booleans()):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            doc = draw(_odd)
        else:
            *up, last = path
            parent = doc
            for k in up:
                parent = parent[k]
            how = draw(st.sampled_from(["replace", "remove", "add"]))
            if how == "replace" or (how == "remove" and isinstance(parent, list)):
                parent[last] = draw(_odd)
            elif how == "remove":
                del parent[last]
            elif isinstance(parent, dict):
                parent[draw(st.sampled_from(["v", "error", "body", "body_b64", "chunks", "extra"]))] = draw(
                    _odd
                )
    if draw(st.integers(0, 9)) == 0:
        body = None if body is not None else b"x"
    return doc, body


def _general(doc: Any, body: bytes | None) -> Exchange | BaseException:
    try:
        return _read_row(copy.deepcopy(doc), body, source="row")
    except (InputError, OverflowError) as exc:
        return exc


def _slots(ex: Exchange) -> list[Any]:
    """Every field of the exchange and of its parts, read (a slot left unset raises)."""
    parts: list[Any] = [ex, ex.request, *([ex.response] if ex.response is not None else [])]
    return [(type(p), [getattr(p, f.name) for f in dataclasses.fields(p)]) for p in parts]


@given(_rows_written())
def test_a_plain_row_reads_as_the_general_reading_reads_it(row: tuple[Any, bytes | None]) -> None:
    doc, body = row
    want = _general(doc, body)
    got = _plain_row(copy.deepcopy(doc), body)
    if got is None:  # not the plain shape: row_exchange reads it the general way
        return
    assert isinstance(want, Exchange), "the plain reading took a row the general one refuses"
    assert _slots(got) == _slots(want)
    assert type(got.response) is type(want.response)
    if got.response is not None and want.response is not None:
        assert got.response.joined() == want.response.joined()
        assert got.response.arrivals() == want.response.arrivals()
        assert got.response.content == want.response.content
    assert got == want


@given(_rows_written())
def test_a_plain_rows_text_reads_by_orjson_alone_as_by_the_general_reading(
    row: tuple[Any, bytes | None],
) -> None:
    """Read by orjson without the test for runs of 19 digits (integers past 64 bits, which orjson
    reads as floats): a text it reads as the plain shape is the exchange the store's general
    reading (``json_loads``, then ``row_exchange``) makes of it; any other is left to that."""
    doc, body = row
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    got = plain_row_text(text, body)
    if got is None:
        return
    want = _general(json_loads(text), body)
    assert isinstance(want, Exchange)
    assert _slots(got) == _slots(want) and got == want


@given(_exchanges())
def test_every_row_the_store_writes_without_an_error_or_keys_of_its_own_is_plain(ex: Exchange) -> None:
    """(whose bodies are UTF-8: others are written as base64, and read the general way)"""
    ex.error, ex.extra = None, {}
    for part in (ex.request, ex.response):
        if part is not None:
            try:
                part.body.decode("utf-8")
            except UnicodeDecodeError:
                part.body = b"?"
    doc, body = row_document(ex)
    got = _plain_row(copy.deepcopy(doc), body)
    assert got is not None
    assert got == row_exchange(doc, body, source="row") == _general(doc, body)


_numbers = st.one_of(
    st.integers(-3, 300),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.just(2**1100),  # past a float: the division raises OverflowError
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["1", None, [1]]),
)


@st.composite
def _stored(draw: st.DrawFn) -> tuple[dict[str, Any], bytes]:
    """Stored chunks as written (sizes adding up to the body), or any near miss of them."""
    sizes = draw(st.lists(st.integers(0, 6), max_size=6))
    data = draw(st.binary(min_size=sum(sizes), max_size=sum(sizes)))
    times = draw(
        st.lists(st.integers(0, 10**12) | st.floats(0, 1e9), min_size=len(sizes), max_size=len(sizes))
    )
    stored: dict[str, Any] = {"t_us": times, "sizes": sizes}
    how = draw(st.sampled_from(["as written", "a size", "a time", "a list", "a key", "the bytes"]))
    if how == "a size" and sizes:
        sizes[draw(st.integers(0, len(sizes) - 1))] = draw(_numbers)
    elif how == "a time" and times:
        times[draw(st.integers(0, len(times) - 1))] = draw(_numbers)
    elif how == "a list":
        key = draw(st.sampled_from(["t_us", "sizes"]))
        stored[key] = draw(
            st.sampled_from([tuple(stored[key]), stored[key][:-1], [*stored[key], 1], "ab", None])
        )
    elif how == "a key":
        del stored[draw(st.sampled_from(["t_us", "sizes"]))]
    elif how == "the bytes":
        data = draw(st.binary(max_size=8))
    return stored, data


def _outcome(f: Any, stored: dict[str, Any], data: bytes) -> Any:
    try:
        return f(copy.deepcopy(stored), data)
    except OverflowError:
        return OverflowError


@given(_stored())
@example(({"t_us": [float("nan")], "sizes": [0]}, b""))  # NaN read both ways: never equal to itself
def test_stored_chunks_are_read_by_the_twin_as_by_the_reference(case: tuple[dict[str, Any], bytes]) -> None:
    stored, data = case
    want, got = _outcome(_joined_py, stored, data), _outcome(_joined, stored, data)
    # by their text: a time that is NaN reads as NaN both ways, and two NaNs are never equal
    assert repr(got) == repr(want)
    if isinstance(got, tuple):
        assert got[0] is data and [type(t) for t in got[2]] == [float] * len(got[2])
        assert list(map(type, got[1])) == list(map(type, want[1]))


def test_the_twin_is_built_and_in_use_where_it_can_be() -> None:
    """A silent fallback would hide a twin that no longer builds: where the install had a compiler
    (it has here, CI's included) and pure Python is not asked for, it is in use."""
    if PURE_PYTHON:
        assert native(_TWIN) is None
    else:
        assert native(_TWIN) is not None


@pytest.mark.skipif(native(_TWIN) is None, reason="the compiled twin is not built here")
def test_the_twin_holds_no_memory_across_calls() -> None:
    """Refcounts right on every path: 100k calls of each kind (read, refused, handed back) leave
    the traced memory where it was."""
    twin = native(_TWIN)
    assert twin is not None
    cases = [
        ([1000, 2000], [1, 2], b"abc"),  # read
        ([1000, 2000], [1, 5], b"abc"),  # do not add up
        ([1000, 2**1100], [1, 2], b"abc"),  # a time past a float
        ([1000, "x"], [1, 2], b"abc"),  # not a number
        ([1000], [True], b"a"),  # a bool: handed to the reference
    ]

    def run() -> None:
        for _ in range(20_000):
            for times, sizes, data in cases:
                twin.joined(times, sizes, data)

    assert grown_by(run) < 64 * 1024


@pytest.mark.skipif(native(_TWIN) is None, reason="the compiled twin is not built here")
@given(_rows_written())
@example(({"v": 1, "id": "e", "tap": "caller", "request": {"method": "post\u00df"}}, None))
def test_a_plain_row_is_made_by_the_twin_as_by_the_reference(row: tuple[Any, bytes | None]) -> None:
    """What the twin makes of a document is what the reference makes of it, slot for slot; what
    it does not take (None) the reference reads."""
    twin = native(_TWIN)
    assert twin is not None
    doc, body = row
    got = twin.plain_row(copy.deepcopy(doc), body)
    if got is None:
        return
    want = _plain_row_py(copy.deepcopy(doc), body)
    assert want is not None, "the twin took a document the reference does not"
    assert _slots(got) == _slots(want) and type(got.response) is type(want.response)
    if got.response is not None and want.response is not None:
        assert got.response.joined() == want.response.joined()
        assert got.response.content == want.response.content
    assert got == want and got.extra == {} and got.extra is not want.extra


@pytest.mark.skipif(native(_TWIN) is None, reason="the compiled twin is not built here")
def test_the_twin_takes_the_rows_the_store_writes() -> None:
    streamed = Exchange(
        "e1",
        "caller",
        HttpRequest("POST", "/v1/chat/completions", [("content-type", "application/json")], b"{}"),
        HttpResponse(200, [("content-type", "text/event-stream")], b"", [Chunk(1.5, b"data: x\n\n")]),
        "c1",
        "2026-12-07T10:00:00.000001+00:00",
    )
    answered = Exchange("e2", "engine", HttpRequest(), HttpResponse(200, [], b'{"a": 1}'))
    twin = native(_TWIN)
    assert twin is not None
    for ex in (streamed, answered, Exchange("e3", "caller", HttpRequest())):
        doc, body = row_document(ex)
        got = twin.plain_row(copy.deepcopy(doc), body)
        assert got is not None and got == ex == _plain_row_py(doc, body)
    assert twin.plain_row([], None) is None
    assert twin.plain_row({"id": "e"}, bytearray(b"x")) is None
    with pytest.raises(TypeError):
        twin.plain_row({})


@pytest.mark.skipif(native(_TWIN) is None, reason="the compiled twin is not built here")
def test_the_row_twin_holds_no_memory_across_calls() -> None:
    twin = native(_TWIN)
    assert twin is not None
    ex = Exchange(
        "e1",
        "caller",
        HttpRequest("POST", "/v1/chat/completions", [("a", "b")], b"{}"),
        HttpResponse(200, [("c", "d")], b"", [Chunk(1.5, b"xy"), Chunk(2.0, b"z")]),
    )
    doc, body = row_document(ex)
    bad = copy.deepcopy(doc)
    bad["response"]["headers"] = [["a", 1]]
    cases = [(doc, body), (bad, body), (doc, None), ({**doc, "v": 2}, body)]

    def run() -> None:
        for _ in range(20_000):
            for d, b in cases:
                twin.plain_row(d, b)

    assert grown_by(run) < 64 * 1024
