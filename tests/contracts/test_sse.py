from itertools import accumulate

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wirecheck.contracts import SSEDecoder, SSEEvent, decode_sse
from wirecheck.contracts._json import plain_numbers
from wirecheck.contracts._sse import decode_parts

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")


def events_of(data: bytes) -> list[tuple[str, str | None, str | None]]:
    evs, _ = decode_sse(data)
    return [(e.data, e.event, e.id) for e in evs]


def test_lf_crlf_and_cr_line_ends_are_the_same() -> None:
    lf = b"data: a\n\ndata: b\n\n"
    assert events_of(lf) == [("a", None, None), ("b", None, None)]
    assert events_of(lf.replace(b"\n", b"\r\n")) == events_of(lf)
    assert events_of(lf.replace(b"\n", b"\r")) == events_of(lf)


def test_space_after_colon_is_optional_and_only_one_is_dropped() -> None:
    assert events_of(b"data:x\n\n") == [("x", None, None)]
    assert events_of(b"data:  x\n\n") == [(" x", None, None)]


def test_several_data_lines_join_with_lf() -> None:
    assert events_of(b'data: {"a":\ndata: 1}\n\n') == [('{"a":\n1}', None, None)]


def test_comments_are_not_events_but_are_counted() -> None:
    evs, dec = decode_sse(b": keep-alive\n\ndata: x\n\n: ping\n\n")
    assert [e.data for e in evs] == ["x"]
    assert dec.comments == 2
    assert [a.kind for a in dec.anomalies] == ["comment", "comment"]


def test_leading_bom_is_dropped_once() -> None:
    assert events_of(b"\xef\xbb\xbfdata: x\n\n") == [("x", None, None)]
    # a BOM later on is data (not dropped): only the very first one is special
    assert events_of(b"data: x\n\n\xef\xbb\xbfdata: y\n\n")[0] == ("x", None, None)


def test_event_id_retry_fields() -> None:
    evs, _ = decode_sse(b"event: message\nid: 7\nretry: 100\ndata: x\n\ndata: y\n\n")
    assert (evs[0].event, evs[0].id, evs[0].retry) == ("message", "7", 100)
    assert evs[1].id == "7"  # the last event id persists
    assert evs[1].event is None


def test_id_with_nul_is_ignored() -> None:
    evs, _ = decode_sse(b"id: a\x00b\ndata: x\n\n")
    assert evs[0].id is None


def test_empty_data_buffer_dispatches_nothing() -> None:
    assert events_of(b"event: x\n\n\n\n") == []


def test_field_without_colon_and_unknown_field_are_reported() -> None:
    evs, dec = decode_sse(b'data\n\n{"id":"x"}\n\n')
    assert [e.data for e in evs] == [""]
    assert [a.kind for a in dec.anomalies] == ["unknown-field"]


def test_unterminated_last_event_is_not_dispatched_but_reported() -> None:
    evs, dec = decode_sse(b"data: a\n\ndata: [DONE]\n")
    assert [e.data for e in evs] == ["a"]
    assert dec.anomalies[-1].kind == "unterminated-event"
    assert dec.anomalies[-1].detail == "[DONE]"
    _, dec2 = decode_sse(b"data: a\n\ndata: [DO")
    assert dec2.anomalies[-1].kind == "unterminated-event"


def test_invalid_utf8_is_replaced_and_reported() -> None:
    evs, dec = decode_sse(b"data: \xff\xfe\n\n")
    assert evs[0].data == "\ufffd\ufffd"
    assert dec.anomalies[0].kind == "invalid-utf8"


def test_utf8_split_mid_character_is_fine() -> None:
    data = "data: 東京\n\n".encode()
    dec = SSEDecoder()
    out = []
    for i in range(len(data)):
        out += dec.feed(data[i : i + 1])
    out += dec.close()
    assert [e.data for e in out] == ["東京"]
    assert dec.anomalies == []


def test_crlf_split_between_feeds_is_one_line_end() -> None:
    dec = SSEDecoder()
    out = dec.feed(b"data: a\r") + dec.feed(b"\n\r") + dec.feed(b"\ndata: b\r\n\r\n") + dec.close()
    assert [e.data for e in out] == ["a", "b"]


def test_event_time_is_the_arrival_of_its_last_byte() -> None:
    dec = SSEDecoder()
    assert dec.feed(b"data: a", 1.0) == []
    evs = dec.feed(b"\n\n", 5.0)
    assert evs[0].t_ms == 5.0


# --- any split gives the same events (property) ---------------------------------------------------

_line_end = st.sampled_from(["\n", "\r\n", "\r"])
_value = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=12)


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    parts = []
    if draw(st.booleans()):
        parts.append("\ufeff")
    for _ in range(draw(st.integers(0, 6))):
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["data: ", "data:", "event: ", "id: ", ": ", "retry: ", "x-odd: "]))
            parts.append(kind + draw(_value) + draw(_line_end))
        parts.append(draw(_line_end))
    return "".join(parts).encode()


@given(sse_streams(), st.data())
def test_any_split_gives_the_same_events(stream: bytes, data: st.DataObject) -> None:
    whole, dec_whole = decode_sse(stream)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    split, dec_split = decode_sse(pieces)
    assert [(e.data, e.event, e.id, e.retry) for e in split] == [
        (e.data, e.event, e.id, e.retry) for e in whole
    ]
    assert [a.kind for a in dec_split.anomalies] == [a.kind for a in dec_whole.anomalies]


def test_retry_takes_ascii_digits_only() -> None:
    evs, _ = decode_sse("retry: \u00b2\ndata: x\n\n".encode())
    assert evs[0].retry is None


# --- a recorded stream decoded at once reads as fed piece by piece (property) ---------------------

_frame = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=16).map(lambda t: "data: " + t),
    st.sampled_from(
        ["data: [DONE]", 'data: {"a":1}', "data:", "data:x", "", ": hi", "event: e", "\ufeffdata: b"]
    ),
)


_name = st.one_of(
    st.sampled_from(["response.output_text.delta", "content_block_delta", "", " x", "a:b"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"), max_size=8),
)


@st.composite
def recorded_streams(draw: st.DrawFn) -> list[tuple[bytes, float | None]]:
    """Mostly the plain framing (``data: X`` and a blank line), sometimes anything the decoder
    reads; cut into pieces anywhere (mid-character too), each with an arrival offset."""
    framing = draw(st.integers(0, 2))
    if framing == 0:  # the plain framing throughout
        frames, ends = _frame.filter(lambda f: f.startswith("data: ")), st.just("\n\n")
    elif framing == 1:  # the named framing of /v1/responses and /v1/messages throughout
        frames = st.tuples(_name, _frame.filter(lambda f: f.startswith("data: "))).map(
            lambda p: f"event: {p[0]}\n{p[1]}"
        )
        ends = st.just("\n\n")
    else:
        frames, ends = _frame, st.sampled_from(["\n\n", "\n\n", "\n", "\r\n\r\n", "\n\n\n", ""])
    written = [(draw(frames) + draw(ends)).encode() for _ in range(draw(st.integers(0, 6)))]
    raw = b"".join(written)
    if draw(st.booleans()):
        raw += draw(st.sampled_from([b"\xff", b"\xe2\x82", b"data: \xc3\x28\n\n"]))
    if draw(st.booleans()):  # a piece a frame as written, as a tap reads a server's
        cuts = list(accumulate(len(w) for w in written))
    else:
        cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=8)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    return [(p, None if draw(st.booleans()) and i == 0 else float(i)) for i, p in enumerate(pieces)]


def _cut_at_once(pieces: list[tuple[bytes, float | None]]) -> tuple[list[SSEEvent], SSEDecoder]:
    """A recorded stream given as (bytes, arrival offset) pieces, cut at once."""
    return decode_parts([p for p, _ in pieces], [t for _, t in pieces])


def _fields(events: list[SSEEvent]) -> list[tuple[object, ...]]:
    return [(e.data, e.event, e.id, e.retry, e.index, e.t_ms, e.lines) for e in events]


@given(recorded_streams())
def test_a_recorded_stream_at_once_reads_as_fed(pieces: list[tuple[bytes, float | None]]) -> None:
    fed = SSEDecoder()
    expected = [e for data, t in pieces for e in fed.feed(data, t)] + fed.close()
    events, decoder = _cut_at_once(pieces)
    assert _fields(events) == _fields(expected)
    assert events == expected  # every field, whichever way each event was made
    assert [(a.kind, a.detail, a.event_index, a.t_ms) for a in decoder.anomalies] == [
        (a.kind, a.detail, a.event_index, a.t_ms) for a in fed.anomalies
    ]
    assert (decoder.events_seen, decoder.comments) == (fed.events_seen, fed.comments)
    if decoder.plain_numbers is not None:  # cut at once: asked of the bytes what is asked of the texts
        assert decoder.plain_numbers == plain_numbers([e.data for e in events])


def test_a_plain_stream_says_whether_its_events_hold_a_long_run_of_digits() -> None:
    for number, plain in (("123456789012345678", True), ("1234567890123456789", False)):
        pieces = [(b'data: {"n": 1}\n\ndata: {"n": ', 1.0), (number.encode() + b"}\n\n", 2.0)]
        events, decoder = _cut_at_once(pieces)
        assert decoder.plain_numbers is plain == plain_numbers([e.data for e in events])


def test_a_plain_stream_gets_the_arrival_of_each_blank_line() -> None:
    pieces = [(b"data: a\n", 1.0), (b"\ndata: b\n\nda", 2.0), (b"ta: \xc3", 3.0), (b"\xa9\n\n", 4.0)]
    events, _ = _cut_at_once(pieces)
    assert [(e.data, e.t_ms) for e in events] == [("a", 2.0), ("b", 2.0), ("\u00e9", 4.0)]
