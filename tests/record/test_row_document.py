"""The store's row document is the one the general interchange path wrote: held, for exchanges of
every shape (headers repeated and in other cases, credentials in headers and query strings, bodies
and chunks that are not UTF-8, errors, extra keys), against a reference that is that path as it
was: the redacted copy (``Redaction.exchange``), its interchange form, the chunks cut out."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import (
    DEFAULT_REDACTION,
    Chunk,
    Exchange,
    ExchangeError,
    HttpRequest,
    HttpResponse,
    Redaction,
    dump_exchange,
)
from wirecheck.record._rows import STORED_CHUNKS, _each_us, _whole_us, row_document
from wirecheck.record._rows import encode as _encode

#: every test here runs with the compiled twins in use and on their Python reference
pytestmark = pytest.mark.usefixtures("both_paths")

# ---- the reference: the general path as it was -------------------------------------------------


def _headers(headers: list[tuple[str, str]]) -> Any:
    names = [k.lower() for k, _ in headers]
    if len(set(names)) == len(names):
        return dict(headers)
    return [[k, v] for k, v in headers]


def _body(body: bytes, into: dict[str, Any]) -> None:
    if body:
        try:
            into["body_text"] = body.decode("utf-8")
        except UnicodeDecodeError:
            into["body_b64"] = base64.b64encode(body).decode()


def reference_dump(ex: Exchange, redaction: Redaction = DEFAULT_REDACTION) -> dict[str, Any]:
    ex = redaction.exchange(ex)
    out: dict[str, Any] = {"v": 1, "id": ex.id, "tap": ex.tap}
    if ex.correlation is not None:
        out["correlation"] = ex.correlation
    if ex.started_at is not None:
        out["started_at"] = ex.started_at
    req: dict[str, Any] = {
        "method": ex.request.method,
        "path": ex.request.path,
        "headers": _headers(ex.request.headers),
    }
    _body(ex.request.body, req)
    out["request"] = req
    if ex.response is not None:
        resp: dict[str, Any] = {"status": ex.response.status, "headers": _headers(ex.response.headers)}
        if ex.response.chunks is not None:
            chunks = []
            for c in ex.response.chunks:
                item: dict[str, Any] = {"t_ms": round(c.t_ms, 3)}
                try:
                    item["text"] = c.data.decode("utf-8")
                except UnicodeDecodeError:
                    item["b64"] = base64.b64encode(c.data).decode()
                chunks.append(item)
            resp["chunks"] = chunks
        else:
            _body(ex.response.body, resp)
        out["response"] = resp
    if ex.error is not None:
        err: dict[str, Any] = {"kind": ex.error.kind}
        if ex.error.message:
            err["message"] = ex.error.message
        if ex.error.t_ms is not None:
            err["t_ms"] = ex.error.t_ms
        out["error"] = err
    out.update(ex.extra)
    return out


def reference_row(ex: Exchange) -> tuple[dict[str, Any], bytes | None]:
    resp = ex.response
    if resp is None or resp.chunks is None:
        return reference_dump(ex), None
    doc = reference_dump(ex.with_parts(ex.request, HttpResponse(resp.status, resp.headers, resp.body, [])))
    stored = doc["response"]
    del stored["chunks"]
    stored[STORED_CHUNKS] = {
        "t_us": [round(round(c.t_ms, 3) * 1000) for c in resp.chunks],
        "sizes": [len(c.data) for c in resp.chunks],
    }
    return doc, b"".join(c.data for c in resp.chunks)


# ---- exchanges of every shape -------------------------------------------------------------------

_names = st.sampled_from(
    [
        "content-type",
        "Content-Type",  # the same name in another case: a list of pairs
        "authorization",
        "Authorization",
        "x-api-key",
        "X-Foo-Api-Key",  # a credential by its ending
        "set-cookie",
        "x-tenant",
        "x-wirecheck-id",
        "ΣΑΣ-token",  # final sigma: lower() depends on the letters around it
        "İd",  # lower() makes two characters of one
        " Authorization ",
    ]
) | st.text(max_size=6)
_headers_st = st.lists(st.tuples(_names, st.text(max_size=8)), max_size=7)
_paths = st.sampled_from(
    [
        "/v1/chat/completions",
        "/v1/chat/completions?api_key=sk-1&x=2",
        "http://user:pw@upstream:8000/v1/messages?key=k",
        "/p?code=c&sig=&=x&&",
    ]
) | st.text(min_size=1, max_size=12)
_bytes = st.binary(max_size=24) | st.text(max_size=12).map(lambda s: s.encode("utf-8", "surrogatepass"))
# arrival offsets: any float, and those on and next to a microsecond's half, where rounding is
# decided by the decimal way
_offsets = (
    st.floats(min_value=-1e7, max_value=1e13, allow_nan=False, allow_infinity=False)
    | st.integers(0, 10**10).map(lambda n: n / 1000.0 + 0.0005)
    | st.tuples(
        st.integers(0, 10**8), st.sampled_from([0.0, 2.0**-16, -(2.0**-16), 2.0**-17, 1e-9, -1e-9])
    ).map(lambda p: (p[0] + 0.5 + p[1]) / 1000.0)
)
_chunks = st.lists(st.builds(Chunk, _offsets, _bytes), max_size=8)
_extra = st.dictionaries(
    st.text(max_size=6).filter(
        lambda k: k not in {"v", "id", "tap", "correlation", "started_at", "request", "response", "error"}
    ),
    st.none() | st.integers() | st.text(max_size=6) | st.lists(st.integers(), max_size=3),
    max_size=3,
)
_responses = st.none() | st.builds(
    HttpResponse, st.integers(100, 599), _headers_st, _bytes, st.none() | _chunks
)
_errors = st.none() | st.builds(
    ExchangeError, st.text(min_size=1, max_size=8), st.text(max_size=8), st.none() | st.floats(0, 1e6)
)
exchanges = st.builds(
    Exchange,
    id=st.text(min_size=1, max_size=8),
    tap=st.sampled_from(["caller", "engine"]),
    request=st.builds(HttpRequest, st.sampled_from(["POST", "GET"]), _paths, _headers_st, _bytes),
    response=_responses,
    correlation=st.none() | st.text(max_size=8),
    started_at=st.none() | st.just("2026-12-05T10:00:00+00:00"),
    error=_errors,
    extra=_extra,
)


@given(exchanges)
def test_the_row_document_is_the_general_paths_to_the_byte(ex: Exchange) -> None:
    doc, body = row_document(ex)
    want, want_body = reference_row(ex)
    assert doc == want and body == want_body
    assert _encode(doc) == _encode(want)  # the same keys in the same order: the same stored text


@given(exchanges, st.sampled_from([DEFAULT_REDACTION, DEFAULT_REDACTION.extended(["x-tenant", "x"])]))
def test_the_interchange_form_is_redacted_as_the_redacted_copy_is(ex: Exchange, policy: Redaction) -> None:
    assert dump_exchange(ex, redaction=policy) == reference_dump(ex, policy)
    cut = dump_exchange(ex, redaction=policy, chunks=False)
    if ex.response is not None and ex.response.chunks is not None:
        assert "chunks" not in cut["response"] and not {"body_text", "body_b64"} & set(cut["response"])
    else:
        assert cut == reference_dump(ex, policy)


@given(_headers_st)
def test_a_header_object_is_the_redacted_list_where_it_can_hold_it(headers: list[tuple[str, str]]) -> None:
    got = DEFAULT_REDACTION.header_object(headers)
    redacted = DEFAULT_REDACTION.header_list(headers)
    assert (got == dict(redacted)) if isinstance(_headers(redacted), dict) else got is None


@given(st.lists(_offsets, max_size=30))
def test_whole_microseconds_of_a_list_are_each_ones_the_decimal_way(times: list[float]) -> None:
    want = [round(round(t, 3) * 1000) for t in times]
    assert _whole_us(times) == want
    assert _each_us(times) == want
