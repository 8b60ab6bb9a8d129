"""How an exchange lies in a store row: a chunked response's bytes beside the document, read back
exactly; rows of the older layout and stores of the older schema read as before."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import (
    Chunk,
    Exchange,
    ExchangeError,
    ExchangeView,
    HttpRequest,
    HttpResponse,
    InputError,
    JoinedResponse,
    build_view,
    dump_exchange,
    load_exchange,
)
from wirecheck.record import Store, open_store
from wirecheck.record._backend import MIGRATIONS
from wirecheck.record._rows import _whole_us, row_document, row_exchange
from wirecheck.record._rows import encode as _encode

#: every test here runs with the compiled twins in use and on their Python reference
pytestmark = pytest.mark.usefixtures("both_paths")

# a frame cut mid-character (the euro sign's three bytes over two chunks), an empty chunk, bytes that
# are not UTF-8 at all, and arrival offsets that need their rounding
CHUNKS = [
    Chunk(0.4, b'data: {"x": "1 \xe2\x82'),
    Chunk(1.23456789, b'\xac"}\n\n'),
    Chunk(2.0, b""),
    Chunk(3.5, b"\xff\xfe\x00 binary"),
    Chunk(40.0, b"data: [DONE]\n\n"),
]


def streamed(i: int, chunks: list[Chunk]) -> Exchange:
    return Exchange(
        id=f"s{i}",
        tap="caller",
        correlation=f"c{i}",
        started_at="2026-12-05T10:00:00.000+00:00",
        request=HttpRequest(
            headers=[("authorization", "Bearer sk-secret"), ("content-type", "application/json")],
            body=b'{"stream": true}',
        ),
        response=HttpResponse(200, [("content-type", "text/event-stream")], b"", chunks),
        error=ExchangeError("upstream_reset", "cut", 41.0),
        extra={"truncated": {"response": {"recorded": 5, "size": 9}}},
    )


def test_a_chunked_response_reads_back_byte_for_byte(tmp_path: Path) -> None:
    s = Store(tmp_path / "a.db")
    written = [streamed(0, CHUNKS), streamed(1, []), streamed(2, [Chunk(1.0, b"one")])]
    s.write_now(written)
    s.close()
    r = open_store(tmp_path / "a.db")
    try:
        back = {e.id: e for e in r.exchanges()}
        for ex in written:
            got = back[ex.id]
            assert got.response is not None and ex.response is not None
            assert [c.data for c in got.response.chunks or []] == [c.data for c in ex.response.chunks or []]
            # the interchange form is the one written before the bytes moved beside the document
            assert dump_exchange(got) == dump_exchange(ex)
            assert r.exchange_doc(ex.id) == dump_exchange(ex)
        # the credential is redacted in what is stored, the bytes are not in the document
        row = sqlite3.connect(tmp_path / "a.db").execute("SELECT doc, body FROM exchanges WHERE id = 's0'")
        doc, body = row.fetchone()
        assert "sk-secret" not in doc and "[redacted]" in doc
        assert body == b"".join(c.data for c in CHUNKS) and "chunks" not in json.loads(doc)["response"]
    finally:
        r.close()


def test_a_row_whose_chunks_do_not_add_up_is_a_clear_error(tmp_path: Path) -> None:
    s = Store(tmp_path / "b.db")
    s.write_now([streamed(0, CHUNKS)])
    s.close()
    with sqlite3.connect(tmp_path / "b.db") as conn:
        conn.execute("UPDATE exchanges SET body = substr(body, 2)")
    r = open_store(tmp_path / "b.db")
    try:
        with pytest.raises(InputError, match="do not match"):
            list(r.exchanges())
    finally:
        r.close()


def test_a_store_of_the_older_schema_reads_and_migrates(tmp_path: Path) -> None:
    old = tmp_path / "v2.db"
    conn = sqlite3.connect(old, isolation_level=None)
    for v in (1, 2):
        conn.executescript(f"BEGIN;\n{MIGRATIONS[v]}\nPRAGMA user_version={v};\nCOMMIT;")
    doc = dump_exchange(streamed(0, CHUNKS))  # the older layout: every chunk in the document
    conn.execute(
        "INSERT INTO exchanges(id, tap, started_at, doc) VALUES (?, ?, ?, ?)",
        ("s0", "caller", doc["started_at"], json.dumps(doc)),
    )
    conn.close()
    r = open_store(old)  # read-only: not migrated, no body column
    try:
        [got] = list(r.exchanges())
        assert dump_exchange(got) == doc and r.exchange_doc("s0") == doc
    finally:
        r.close()
    w = Store(old)  # a writer migrates it; the old row reads as it did, a new one in the new layout
    w.write_now([streamed(1, CHUNKS)])
    assert [dump_exchange(e) for e in w.exchanges()] == [doc, dump_exchange(streamed(1, CHUNKS))]
    w.close()


def test_stored_offsets_are_the_interchange_forms_to_the_microsecond() -> None:
    """``t_us`` is ``t_ms`` as the interchange form keeps it (three places), as an integer: the
    same integers as ``round(round(t_ms, 3) * 1000)`` everywhere, the half-microsecond offsets
    whose float product lands next to a half included."""
    offsets = [k / 1000 + 0.0005 for k in range(0, 200_000, 7)]  # decimal halves, as floats
    offsets += [(k + 0.5) / 1000 for k in range(0, 200_000, 11)]
    offsets += [k / 2048 for k in range(0, 100_000, 13)]  # exact binary halves of a microsecond
    offsets += [1e-7, 0.0, 123456.7894999, 3_600_000.0005, 86_400_000.0004999]
    ex = streamed(0, [Chunk(t, b"x") for t in offsets])
    doc, _ = row_document(ex)
    assert doc["response"]["stored_chunks"]["t_us"] == [round(round(t, 3) * 1000) for t in offsets]


_doc_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)  # past 64 bits: json writes them
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),  # lone surrogates among them: orjson refuses them
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


@given(st.dictionaries(st.text(max_size=4), _doc_values, max_size=5))
def test_a_row_document_is_written_as_json_writes_it_whatever_it_holds(doc: dict[str, object]) -> None:
    """The writer's encoding (orjson, falling back to json for what orjson refuses) reads back as
    json's own text does: the same document, whichever way it went."""
    want = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    got = _encode(doc)
    assert json.loads(got) == json.loads(want)


def test_what_orjson_refuses_is_written_by_json() -> None:
    for doc in ({"n": 2**70}, {"s": "\ud800"}):
        assert _encode(doc) == json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


@given(
    st.one_of(
        st.floats(min_value=-1e12, max_value=1e12, allow_nan=False),
        # arrival offsets on a microsecond's half, and next to it, where the short way is not taken
        st.integers(-(10**9), 10**9).map(lambda n: n / 1000.0 + 0.0005),
        st.integers(-(10**9), 10**9).map(lambda n: (n + 0.5) / 1000.0),
    )
)
def test_whole_microseconds_are_those_of_the_interchange_forms_three_places(t_ms: float) -> None:
    times = [t_ms, -t_ms, t_ms / 7]
    assert _whole_us(times) == [round(round(t, 3) * 1000) for t in times]


def _as_before(obj: dict[str, object], body: bytes) -> Exchange:
    """A row read the way it was before its response was held joined: the interchange form, with
    each chunk cut from the body and its offset in milliseconds."""
    resp = obj["response"]
    assert isinstance(resp, dict)
    stored = resp.pop("stored_chunks")
    pos, chunks = 0, []
    for t, size in zip(stored["t_us"], stored["sizes"], strict=True):
        chunks.append({"t_ms": t / 1000.0, "b64": base64.b64encode(body[pos : pos + size]).decode()})
        pos += size
    resp["chunks"] = chunks
    return load_exchange(obj)


@st.composite
def _sse_parts(draw: st.DrawFn) -> list[tuple[float, bytes]]:
    """A chat stream in the plain framing (or not quite), cut anywhere or a frame a piece."""
    frames = [
        b'data: {"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"'
        + draw(st.sampled_from([b"a", b"\xe2\x82\xac", b"\\n"]))
        + b'"},"finish_reason":null}]}'
        + draw(st.sampled_from([b"\n\n", b"\n\n", b"\r\n\r\n", b"\n"]))
        for _ in range(draw(st.integers(0, 5)))
    ]
    raw = b"".join(frames) + b"data: [DONE]\n\n"
    cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=6)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    return [(float(i), p) for i, p in enumerate(pieces)]


@given(
    st.lists(st.tuples(st.floats(0, 1e7, allow_nan=False), st.binary(max_size=12)), max_size=8) | _sse_parts()
)
def test_a_row_holds_its_chunks_joined_and_cuts_them_as_they_were(parts: list[tuple[float, bytes]]) -> None:
    """A streamed response read from a row is a ``JoinedResponse``: the same exchange as the row read
    chunk by chunk, before and after its chunks are made; the joined bytes, sizes and offsets are
    theirs, and a view built from them is the view built from the chunks."""
    ex = streamed(0, [Chunk(t, d) for t, d in parts])
    doc, body = row_document(ex)
    assert body is not None
    text = _encode(doc)
    got = row_exchange(json.loads(text), body, source="row")
    want = _as_before(json.loads(text), body)
    resp, plain = got.response, want.response
    assert isinstance(resp, JoinedResponse) and plain is not None and plain.chunks is not None
    joined = resp.joined()
    assert joined is not None
    assert joined == (body, [len(c.data) for c in plain.chunks], [c.t_ms for c in plain.chunks])
    assert resp.arrivals() == plain.arrivals() and resp.chunk_bytes() == plain.chunk_bytes()
    assert resp.content == plain.content
    assert _view_fields(build_view(got)) == _view_fields(build_view(want))
    assert got == want and want == got and resp.joined() is None  # compared by its chunks, now made
    assert resp.chunks == plain.chunks and resp.arrivals() == plain.arrivals()
    resp.chunks = [Chunk(1.0, b"x")]  # set: a response like any other
    assert resp.joined() is None and resp.content == b"x" and resp != plain


def _view_fields(v: ExchangeView) -> tuple[object, ...]:
    return (
        [(e.data, e.index, e.t_ms, e.lines) for e in v.events],
        [(a.kind, a.detail, a.event_index, a.t_ms) for a in v.sse_anomalies],
        v.kind,
        repr(v.stream),
    )


@pytest.mark.parametrize(
    "stored",
    [
        {"t_us": [1, 2], "sizes": [1.5, 2.5]},  # sizes adding up, but not whole: no cut is made of them
        {"t_us": [1, "2"], "sizes": [1, 3]},
        {"t_us": [1], "sizes": [1, 3]},
        {"t_us": [1, 2], "sizes": [-1, 5]},
        {"t_us": [1, 2], "sizes": "ab"},
        {"t_us": [10**400, 2], "sizes": [1, 3]},  # an offset past any float
        {"sizes": [4]},
    ],
)
def test_stored_chunks_that_cannot_be_cut_are_a_clear_error_when_read(stored: dict[str, object]) -> None:
    doc, body = row_document(streamed(0, [Chunk(1.0, b"abcd")]))
    doc["response"]["stored_chunks"] = stored
    with pytest.raises(InputError, match="do not match"):
        row_exchange(doc, body, source="row")


def test_the_corpus_read_back_from_a_store_finds_what_its_interchange_form_finds(tmp_path: Path) -> None:
    """Every exchange of the corpus (tests/corpus) written to a store and read back (a streamed one
    as a ``JoinedResponse``, cut at once by the view) is judged as its interchange form is (each
    chunk an object of its own, redacted alike): the same findings, case by case."""
    from tests.corpus import load_cases
    from wirecheck.contracts import CheckConfig, check_exchanges

    cases = load_cases()
    assert sum(1 for c in cases for e in c.exchanges if e.response and e.response.chunks) > 50
    for k, case in enumerate(cases):
        store = Store(tmp_path / f"{k}.db")
        store.write_now(list(case.exchanges))
        stored = list(store.exchanges())
        store.close()
        plain = [load_exchange(json.loads(json.dumps(dump_exchange(e)))) for e in case.exchanges]
        assert [isinstance(e.response, JoinedResponse) for e in stored] == [
            e.response is not None and e.response.chunks is not None for e in case.exchanges
        ]
        got = check_exchanges(stored, CheckConfig(**case.config)).to_dict()
        want = check_exchanges(plain, CheckConfig(**case.config)).to_dict()
        assert got == want, case.id
