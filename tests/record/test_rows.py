"""How an exchange lies in a store row: a chunked response's bytes beside the document, read back
exactly; rows of the older layout and stores of the older schema read as before."""

from __future__ import annotations

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
    HttpRequest,
    HttpResponse,
    InputError,
    dump_exchange,
)
from wirecheck.record import Store, open_store
from wirecheck.record._backend import MIGRATIONS
from wirecheck.record._rows import _whole_us
from wirecheck.record._store import _encode

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
    from wirecheck.record._rows import row_document

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
    assert _whole_us([Chunk(t, b"") for t in times]) == [round(round(t, 3) * 1000) for t in times]
