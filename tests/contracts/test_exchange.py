"""The exchange JSONL interchange format (docs/exchange-format.md)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from wirecheck.contracts import (
    FORMAT_VERSION,
    Chunk,
    Exchange,
    ExchangeError,
    HttpRequest,
    HttpResponse,
    InputError,
    dump_exchange,
    load_exchange,
    read_exchanges,
    write_exchanges,
)


def roundtrip(ex: Exchange) -> Exchange:
    buf = io.StringIO()
    write_exchanges([ex], buf)
    buf.seek(0)
    [back] = list(read_exchanges(buf))
    return back


@given(
    st.binary(max_size=64),
    st.lists(st.tuples(st.floats(0, 1e6, allow_nan=False), st.binary(max_size=16)), max_size=5),
    st.lists(st.tuples(st.sampled_from(["a", "A", "x-y"]), st.text(max_size=5)), max_size=3),
)
def test_bytes_survive_a_roundtrip_exactly(
    body: bytes, chunks: list[tuple[float, bytes]], headers: list[tuple[str, str]]
) -> None:
    ex = Exchange(
        id="e1",
        tap="engine",
        request=HttpRequest("POST", "/v1/chat/completions", headers, body),
        response=HttpResponse(200, headers, b"", [Chunk(round(t, 3), d) for t, d in chunks]),
        error=ExchangeError("upstream_reset", "reset", 3.5),
    )
    back = roundtrip(ex)
    assert back.request.body == body
    assert back.request.headers == ex.request.headers
    assert back.response is not None and back.response.chunks == ex.response.chunks  # type: ignore[union-attr]
    assert back.error == ex.error


def test_body_as_json_value_text_or_base64() -> None:
    base = {"id": "1", "request": {"method": "POST", "path": "/v1/chat/completions"}}
    as_json = load_exchange({**base, "request": {**base["request"], "body": {"a": 1}}})
    as_text = load_exchange({**base, "request": {**base["request"], "body_text": '{"a":1}'}})
    as_b64 = load_exchange(
        {**base, "request": {**base["request"], "body_b64": base64.b64encode(b'{"a":1}').decode()}}
    )
    assert (
        json.loads(as_json.request.body)
        == json.loads(as_text.request.body)
        == json.loads(as_b64.request.body)
    )


def test_unknown_keys_are_kept() -> None:
    ex = load_exchange({"id": "1", "request": {}, "x_team": {"k": 1}})
    assert dump_exchange(ex)["x_team"] == {"k": 1}


def test_every_line_carries_the_version() -> None:
    ex = load_exchange({"id": "1", "request": {}})
    assert dump_exchange(ex)["v"] == FORMAT_VERSION


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "1"', "not JSON"),
        ("[1, 2]", "an exchange is a JSON object"),
        ('{"request": {}}', "missing key 'id'"),
        ('{"id": "1", "request": {}, "v": 99}', "newer than this wirecheck reads"),
        ('{"id": "1", "request": {"body": 1, "body_text": "x"}}', "give one of body"),
        ('{"id": "1", "request": {}, "response": {"status": "200"}}', "response.status: expected int"),
        (
            '{"id": "1", "request": {}, "response": {"status": 200, "chunks": [{"t_ms": 1}]}}',
            "needs text or b64",
        ),
        ('{"id": "1", "request": {"body_b64": "***"}}', "not base64"),
    ],
)
def test_bad_input_names_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    f = tmp_path / "cap.jsonl"
    f.write_text('{"id": "ok", "request": {}}\n\n' + line + "\n")
    with pytest.raises(InputError) as info:
        list(read_exchanges(f))
    assert info.value.line == 3
    assert str(f) in str(info.value)
    assert message in str(info.value)


def test_missing_file_and_non_utf8_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot open"):
        list(read_exchanges(tmp_path / "nope.jsonl"))
    bad = tmp_path / "bin.jsonl"
    bad.write_bytes(b'{"id": "1", "request": {}}\n\xff\xfe\n')
    with pytest.raises(InputError, match="not UTF-8"):
        list(read_exchanges(bad))


def test_numeric_started_at_is_read_as_epoch_seconds() -> None:
    ex = load_exchange({"id": "1", "request": {}, "started_at": 0})
    assert ex.started_at == "1970-01-01T00:00:00+00:00"


def test_with_parts_copies_every_other_field() -> None:
    """``Exchange.with_parts`` builds its copy field by field: a field added to Exchange must be added
    there too, or every writer would drop it."""
    import dataclasses

    ex = Exchange(
        "x1",
        "engine",
        HttpRequest("GET", "/v1/models", [("a", "b")], b"q"),
        HttpResponse(201, [("c", "d")], b"r", [Chunk(1.0, b"s")]),
        "corr",
        "2026-01-01T00:00:00Z",
        ExchangeError("timeout", "m", 2.0),
        {"k": 1},
    )
    assert all(getattr(ex, f.name) != f.default for f in dataclasses.fields(Exchange))  # none at default
    request, response = HttpRequest("POST", "/other"), None
    copy = ex.with_parts(request, response)
    assert copy == dataclasses.replace(ex, request=request, response=response)
    assert copy.request is request and copy.response is None and copy.extra is ex.extra


_NAME_CHARS = st.sampled_from(list("content-typeCONTENT-TYPExXkK\u212a\u0130i\u0307\u00e9\u00c9\u1e9e\u00df"))


@example([("\u0130x", "v")], "i\u0307x")  # the name longer than the header's own when lowered
@example([("\u212a", "v")], "K")  # the Kelvin sign lowers to ASCII
@given(
    st.lists(st.tuples(st.text(_NAME_CHARS, max_size=14), st.text(max_size=3)), max_size=6),
    st.sampled_from(["content-type", "Content-Encoding", "x", "K", "\u0130x", "i\u0307x", "\u00c9tag", ""]),
)
def test_a_header_is_found_by_its_name_in_any_case(headers: list[tuple[str, str]], name: str) -> None:
    # what a scan lowering every name finds: the first whose lower case is the name's, whatever
    # characters change their length when lowered (U+0130) or lower to ASCII (the Kelvin sign)
    want = next((v for k, v in headers if k.lower() == name.lower()), None)
    assert HttpRequest(headers=headers).header(name) == want
