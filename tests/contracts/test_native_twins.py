"""The checker's compiled twins against their pure-Python references, on any input: the plain SSE
cut (``_sse_c.cut_plain`` in ``decode_joined``), the fold of template-alike text chunks
(``_assembly_c.fold_text`` in ``assemble_stream``), the assembly of a plain stream whole
(``_assembly_c.assemble_plain``), the markup search and the depth bound of a
parsed document (``_json_c.deeper`` in bounded loads). Each twin hands back what it does not read
exactly as the reference does, so the reference's answer is the twin's on every input."""

from __future__ import annotations

import gc
import json
import re
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wirecheck.contracts import _assembly, _json, _markup, _sse
from wirecheck.contracts._assembly import TEMPLATE_MAX, _template
from wirecheck.contracts._assembly import AssembledChoice as Choice
from wirecheck.contracts._native import PURE_PYTHON, native
from wirecheck.contracts._sse import SSEDecoder, SSEEvent, decode_joined

pytestmark = pytest.mark.skipif(PURE_PYTHON, reason="the twins are turned off (WIRECHECK_PURE_PYTHON)")


def test_the_twins_are_built_and_in_use() -> None:
    """A C compiler was at hand at install time (CI's and this machine's): a silent fallback to
    the reference would hide a broken build."""
    for name in (
        "wirecheck.contracts._sse_c",
        "wirecheck.contracts._assembly_c",
        "wirecheck.contracts._markup_c",
        "wirecheck.contracts._json_c",
    ):
        assert native(name) is not None, name
    assert _sse._C is not None and _assembly._C is not None and _markup._C is not None
    assert _assembly._WHOLE is not None
    assert _json._C is not None
    assert _markup.find_markup is not _markup._find_markup


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        return ("ok", fn())
    except Exception as exc:  # the reference's own error on odd input is the twin's too
        return ("raised", type(exc))


def _decoded(raw: bytes, sizes: list[Any], times: list[Any], *, twin: bool) -> Any:
    saved = _sse._C
    _sse._C = saved if twin else None
    try:
        events, dec = decode_joined(raw, sizes, times)
    finally:
        _sse._C = saved
    fields = [(e.data, e.event, e.id, e.retry, e.index, e.t_ms, e.lines, type(e)) for e in events]
    anomalies = [(a.kind, a.detail, a.event_index, a.t_ms) for a in dec.anomalies]
    return fields, anomalies, dec.events_seen, dec.comments, dec.plain_numbers, dec._started, dec._buf


# --- the plain cut --------------------------------------------------------------------------------

_texts = st.one_of(
    st.text(max_size=24),  # any code point, lone surrogates included (written with surrogatepass)
    st.sampled_from(['{"a":1}', "[DONE]", "", " ", "1234567890123456789", "123456789012345678", "東京"]),
    st.text(st.sampled_from("0123456789 a"), max_size=45),
)
#: what may end a frame: mostly the plain framing's blank line, sometimes a near miss
_ends = st.sampled_from(["\n\n"] * 8 + ["\n", "\r\n\r\n", "\n\n\n", "\r\n", "\n\r\n", "", "\n\ndata:"])
_heads = st.sampled_from(
    ["data: "] * 8 + ["data:", ": c\ndata: ", "event: e\ndata: ", "data: a\ndata: ", "id: 1\n"]
)


#: the named framing of /v1/responses and /v1/messages streams (``_sse_c.cut_named``): mostly its own
#: heads, sometimes a near miss
_named_heads = st.sampled_from(
    ["event: response.output_text.delta\ndata: ", "event: content_block_delta\ndata: ", "event: e\ndata: "]
    * 3
    + ["event: \ndata: ", "event:  x\ndata: ", "event: 東\ndata: ", "event: a:b\ndata: "]
    + ["event:e\ndata: ", "event: e\ndata:", "event: e\n\ndata: ", "event: e\ndata: a\ndata: ", "data: "]
    + ["event: e\nid: 1\ndata: ", "event: e\r\ndata: ", "event: 1234567890123456789\ndata: "]
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[Any], list[Any]]:
    written = []
    heads = _named_heads if draw(st.booleans()) else _heads
    for _ in range(draw(st.integers(0, 7))):
        text = draw(heads) + draw(_texts) + draw(_ends)
        written.append(text.encode("utf-8", "surrogatepass"))
    raw = b"".join(written)
    if draw(st.integers(0, 5)) == 0:  # not UTF-8, or cut mid-character
        raw += draw(
            st.sampled_from([b"\xff\n\n", b"data: \xe2\x82\n\n", b"data: \xc3\x28\n\n", b"\xef\xbb\xbf"])
        )
    how = draw(st.integers(0, 9))
    if how < 5:  # a piece a frame as written, as a tap reads a server's
        sizes: list[Any] = [len(w) for w in written] + (
            [len(raw) - sum(map(len, written))] if len(raw) > sum(map(len, written)) else []
        )
    else:  # cut anywhere, empty pieces too
        cuts = sorted(draw(st.lists(st.integers(0, len(raw)), max_size=10)))
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    if not sizes:
        sizes = [len(raw)]
    times: list[Any] = [draw(st.sampled_from([None, float(i), i * 2.5])) for i in range(len(sizes))]
    odd = draw(st.integers(0, 19))
    if odd == 0 and sizes:  # sizes that are not ints, or do not cover the stream
        k = draw(st.integers(0, len(sizes) - 1))
        sizes[k] = draw(st.sampled_from([float(sizes[k]), True, -1, 0, sizes[k] + 3, 2**70]))
    elif odd == 1:
        times = times[: draw(st.integers(0, len(times)))]
    elif odd == 2:
        sizes = sizes[:-1]
    return raw, sizes, times


@settings(max_examples=1500, deadline=None)
@given(streams())
def test_the_plain_cut_reads_any_stream_as_the_reference_does(
    stream: tuple[bytes, list[Any], list[Any]],
) -> None:
    raw, sizes, times = stream
    got = _outcome(lambda: _decoded(raw, list(sizes), list(times), twin=True))
    assert got == _outcome(lambda: _decoded(raw, list(sizes), list(times), twin=False))


def test_the_plain_cut_takes_the_plain_framing_and_hands_back_the_rest() -> None:
    cut = _sse._C.cut_plain  # type: ignore[union-attr]
    raw = b'data: {"n": 12345678901234567890}\n\ndata: [DONE]\n\n'
    events, digits = cut(raw, [len(raw)], [4.0], SSEEvent)
    assert [(e.data, e.index, e.t_ms) for e in events] == [
        ('{"n": 12345678901234567890}', 0, 4.0),
        ("[DONE]", 1, 4.0),
    ]
    assert digits is True
    for other in (
        b"data: a\r\n\r\n",
        b": c\n\ndata: a\n\n",
        b"data: a\n\n\n",
        b"data: \xff\n\n",
        b"data: a\n",
        b"",
    ):
        assert cut(other, [len(other)], [None], SSEEvent) is None
    # not the event class, or arguments of another type: the reference decides
    assert cut(raw, [len(raw)], [None], SSEDecoder) is None
    assert cut(raw, (len(raw),), [None], SSEEvent) is None
    assert cut(bytearray(raw), [len(raw)], [None], SSEEvent) is None


def test_the_named_cut_takes_the_named_framing_and_hands_back_the_rest() -> None:
    cut = _sse._C.cut_named  # type: ignore[union-attr]
    raw = (
        b'event: response.created\ndata: {"n": 12345678901234567890}\n\n'
        b'event: response.output_text.delta\ndata: {"d": "\xc3\xa9"}\n\n'
        b"event: response.output_text.delta\ndata: \n\n"
    )
    events, digits, chars = cut(raw, [60, len(raw) - 60], [1.0, 2.0], SSEEvent)
    assert [(e.data, e.event, e.id, e.retry, e.index, e.t_ms, e.lines) for e in events] == [
        ('{"n": 12345678901234567890}', "response.created", None, None, 0, 1.0, 2),
        ('{"d": "\u00e9"}', "response.output_text.delta", None, None, 1, 2.0, 2),
        ("", "response.output_text.delta", None, None, 2, 2.0, 2),
    ]
    assert digits is True and chars == sum(len(e.data) for e in events)
    assert events[1].event is events[2].event  # a name repeated is one str
    for other in (
        b"event: a\r\ndata: b\n\n",
        b"event: a\ndata: b\n",
        b"event: a\ndata: b\n\n\n",
        b"event: a\n\ndata: b\n\n",
        b"event: a\ndata: b\ndata: c\n\n",
        b"event: a\ndata: b\n\ndata: c\n\n",
        b"event: a\ndata: \xff\n\n",
        b"event: \xff\ndata: b\n\n",
        b"event:a\ndata: b\n\n",
        b"data: b\n\n",
        b"",
    ):
        assert cut(other, [len(other)], [None], SSEEvent) is None, other
    assert cut(raw, [len(raw)], [None], SSEDecoder) is None
    assert cut(raw, (len(raw),), [None], SSEEvent) is None
    assert cut(raw, [len(raw) - 1], [None], SSEEvent) is None  # sizes short of the stream
    events, _, _ = cut(raw, [len(raw)], [4.0], SSEEvent)
    assert [gc.is_tracked(e) for e in events] == [False] * 3


def test_a_huge_named_stream_is_cut_as_the_reference_cuts_it() -> None:
    # the digit test's bound counts the texts' characters: past it in bytes only, then in both
    for per_frame, plain in ((2500, True), (5000, False)):
        frame = b'event: response.output_text.delta\ndata: {"delta":"' + "é".encode() * per_frame + b'"}\n\n'
        raw = frame * 300
        sizes, times = [len(frame)] * 300, [float(i) for i in range(300)]
        assert _decoded(raw, sizes, times, twin=True) == _decoded(raw, sizes, times, twin=False)
        assert _decoded(raw, sizes, times, twin=True)[4] is plain


def test_the_plain_cut_leaves_the_cyclic_gc_only_events_that_can_hold_a_container() -> None:
    """An event of numbers and text can be in no reference cycle: the GC does not walk it. An
    offset of any other type (a caller's own list of times) is a value the event holds, so that
    event stays tracked, and a cycle through it is still collected."""
    cut = _sse._C.cut_plain  # type: ignore[union-attr]
    raw = b"data: a\n\ndata: b\n\ndata: c\n\n"
    for offset in (4.0, None, 4):
        events, _ = cut(raw, [len(raw)], [offset], SSEEvent)
        assert [gc.is_tracked(e) for e in events] == [False] * 3

    class Box:
        events: list[SSEEvent]

    box = Box()
    events, _ = cut(raw, [len(raw)], [box], SSEEvent)
    assert [gc.is_tracked(e) for e in events] == [True] * 3
    box.events = events  # a cycle: the events hold the box, the box holds them
    ref = weakref.ref(box)
    del events, box
    gc.collect()
    assert ref() is None


def test_a_huge_plain_stream_is_cut_as_the_reference_cuts_it() -> None:
    frame = b'data: {"choices":[{"delta":{"content":"' + b"x" * 5000 + b'"}}]}\n\n'
    raw = frame * 300  # 1.5 MB: past the digit test's bound
    sizes, times = [len(frame)] * 300, [float(i) for i in range(300)]
    assert _decoded(raw, sizes, times, twin=True) == _decoded(raw, sizes, times, twin=False)
    assert _decoded(raw, sizes, times, twin=True)[4] is False  # over PLAIN_MAX: asked frame by frame


# --- the template fold ----------------------------------------------------------------------------


def _fold_reference(  # noqa: PLR0917 - the twin's own arguments
    events: list[SSEEvent], start: int, before: str, after: str, least: int, most: int
) -> tuple[int, str, int, list[float]] | None:
    """assemble_stream's template branch, event by event from ``start``: what it folds."""
    end, pieces, tokens, times = start, [], 0, []
    for ev in events[start:]:
        data = ev.data
        if not (data.startswith(before) and data.endswith(after) and least <= len(data) <= most):
            break
        try:
            content = orjson.loads(data[len(before) : -len(after)])
        except orjson.JSONDecodeError:
            break
        if content.__class__ is not str:
            break
        pieces.append(content)
        if content:
            tokens += 1
            if ev.t_ms is not None:
                times.append(ev.t_ms)
        end += 1
    return None if end == start else (end, "".join(pieces), tokens, times)


#: the bits a chunk's string is made of: JSON's escapes, good and bad, raw characters orjson
#: refuses (controls, lone surrogates, a quote), whitespace that orjson reads around a string
_bits = st.one_of(
    st.text(max_size=6),
    st.sampled_from(
        [
            "\\n",
            "\\t",
            '\\"',
            "\\\\",
            "\\/",
            "\\b",
            "\\f",
            "\\r",
            "\\u00e9",
            "\\u00E9",
            "\\u0000",
            "\\ud83d\\ude00",
            "\\uD83D\\uDE00",
            "\\ud800",
            "\\udc00",
            "\\ud83dx",
            "\\ud83d\\u0041",
            "\\u12",
            "\\x",
            "\\",
            '"',
            "\x01",
            "\x7f",
            "\ud800",
            "東",
            "\U0001f600",
        ]
    ),
)


@st.composite
def chunk_texts(draw: st.DrawFn) -> str:
    body = "".join(draw(st.lists(_bits, max_size=8)))
    text = '"' + body + '"'
    form = draw(st.integers(0, 12))
    if form == 0:
        return " " + text
    if form == 1:
        return text + "\n"
    if form == 2:
        return body  # no quotes
    if form == 3:
        return draw(st.sampled_from(["1", "null", "[]", '"a","b"', '"a"x']))
    return text


def _tpl() -> tuple[str, str]:
    chunk = {
        "id": "c",
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
    }
    text = json.dumps(chunk, separators=(",", ":"))
    tpl = _template(text, json.loads(text), "x", Choice(0))
    assert tpl is not None
    return tpl.before, tpl.after


@settings(max_examples=1500, deadline=None)
@given(st.lists(chunk_texts(), max_size=8), st.integers(0, 3), st.sampled_from([None, 1.5]), st.data())
def test_the_fold_reads_each_chunk_as_orjson_does(
    texts: list[str], start: int, t: float | None, data: st.DataObject
) -> None:
    before, after = _tpl()
    datas = [before + s + after for s in texts]
    if datas and data.draw(st.booleans()):  # a frame of another shape among them
        datas.insert(
            data.draw(st.integers(0, len(datas))), data.draw(st.sampled_from(["[DONE]", "{}", before]))
        )
    events = [
        SSEEvent(d, index=i, t_ms=None if t is None or i % 3 == 2 else t + i) for i, d in enumerate(datas)
    ]
    least = len(before) + len(after) + 2
    most = data.draw(st.sampled_from([TEMPLATE_MAX, least + 8]))
    got = _assembly._C.fold_text(events, start, before, after, least, most, SSEEvent)  # type: ignore[union-attr]
    want = _fold_reference(events, start, before, after, least, most)
    if got == want:
        return
    # the twin stops short of the reference only at a string with whitespace around it, which
    # orjson reads and the twin hands back (the reference then reads that chunk itself)
    end = start if got is None else got[0]
    assert want is not None and end < want[0]
    middle = events[end].data[len(before) : -len(after)]
    assert middle != middle.strip(" \t\n\r")
    if got is not None:
        assert got == _fold_reference(events[:end], start, before, after, least, most)


def test_the_fold_hands_back_what_it_does_not_take() -> None:
    before, after = _tpl()
    fold = _assembly._C.fold_text  # type: ignore[union-attr]
    events = [
        SSEEvent(before + '"a\\nb"' + after, t_ms=1.0),
        SSEEvent(before + '""' + after, t_ms=2.0),
        SSEEvent("[DONE]"),
    ]
    assert fold(events, 0, before, after, 1, TEMPLATE_MAX, SSEEvent) == (2, "a\nb", 1, [1.0])
    assert fold(events, 2, before, after, 1, TEMPLATE_MAX, SSEEvent) is None
    assert fold(events, 3, before, after, 1, TEMPLATE_MAX, SSEEvent) is None
    assert fold(events, 99, before, after, 1, TEMPLATE_MAX, SSEEvent) is None
    assert fold(tuple(events), 0, before, after, 1, TEMPLATE_MAX, SSEEvent) is None
    assert fold(events, 0, before, "", 1, TEMPLATE_MAX, SSEEvent) is None
    assert fold([object()], 0, before, after, 1, TEMPLATE_MAX, SSEEvent) is None
    assert fold([SSEEvent(b"x")], 0, before, after, 1, TEMPLATE_MAX, SSEEvent) is None  # type: ignore[arg-type]
    # an event of another class, or with a slot unset, ends the run: the reference reads it (and
    # raises on the unset one, as it always did)
    unset = object.__new__(SSEEvent)
    unset.data = before + '"a"' + after
    assert fold([events[0], unset], 0, before, after, 1, TEMPLATE_MAX, SSEEvent) == (1, "a\nb", 1, [1.0])
    assert fold([unset], 0, before, after, 1, TEMPLATE_MAX, SSEEvent) is None
    assert fold([SSEEvent(before + '"a"' + after)], 0, before, after, 1, TEMPLATE_MAX, SSEDecoder) is None

    class Other(SSEEvent):
        pass

    assert fold([Other(before + '"a"' + after)], 0, before, after, 1, TEMPLATE_MAX, SSEEvent) is None
    # texts of every width, joined into one string of the widest
    wide = [
        SSEEvent(before + json.dumps(t, ensure_ascii=False) + after)
        for t in ("a", "é", "東", "\U0001f600", "b")
    ]
    assert fold(wide, 0, before, after, 1, TEMPLATE_MAX, SSEEvent) == (5, "aé東\U0001f600b", 5, [])


def test_a_long_string_with_escapes_folds_as_orjson_reads_it() -> None:
    before, after = _tpl()
    text = json.dumps('\n\u00e9\U0001f600"' * 20_000)
    events = [SSEEvent(before + text + after, t_ms=3.0)]
    got = _assembly._C.fold_text(events, 0, before, after, 1, TEMPLATE_MAX, SSEEvent)  # type: ignore[union-attr]
    assert got == (1, orjson.loads(text), 1, [3.0])


# --- a plain stream whole ------------------------------------------------------------------------


#: a delta's text: short, any code point, the escapes orjson reads, the template's own probe
_piece = st.one_of(
    st.text(max_size=5),
    st.sampled_from(["", "tok ", '"', "\\", "\n", "東", "\U0001f600", orjson.loads(_assembly._PROBE)]),
)


@st.composite
def _deltas(draw: st.DrawFn) -> Any:
    text = draw(_piece)
    return draw(
        st.sampled_from(
            [
                {"content": text},
                {"content": text},
                {"reasoning": text},
                {"reasoning_content": text},
                {"role": "assistant", "content": ""},
                {"role": "assistant"},
                {},
                {"content": None},
                {"reasoning": text, "reasoning_content": text},
                {"reasoning": "a", "reasoning_content": "b"},
                {"reasoning": None},
                {"content": text, "reasoning": "r"},
                {"role": 5, "content": text},
                {"content": 5},
                {"reasoning": ["x"]},
                {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]},
                {"tool_calls": None, "content": text},
                {"refusal": "no"},
                {"audio": None},
                {"own": 1},
                None,
                [],
            ]
        )
    )


@st.composite
def _chunk_frames(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 24))
    if kind == 0:
        return draw(
            st.sampled_from(["[DONE]", " [DONE]", "not json", "[1]", "5", "", '{"error": {"message": "x"}}'])
        )
    choice: dict[str, Any] = {"index": draw(st.sampled_from([0, 0, 0, 0, 1, True, "0", -1]))}
    if draw(st.integers(0, 9)) == 0:
        del choice["index"]
    delta = draw(_deltas())
    if delta is not None or draw(st.booleans()):
        choice["delta"] = delta
    choice["logprobs"] = None
    choice["finish_reason"] = draw(st.sampled_from([None] * 6 + ["stop", "length", 5]))
    if draw(st.integers(0, 4)) == 0:
        choice["stop_reason"] = draw(st.sampled_from([None, "</s>", 7]))
    chunk: dict[str, Any] = {
        "id": draw(st.sampled_from(["chatcmpl-1"] * 6 + ["chatcmpl-2", 5])),
        "object": "chat.completion.chunk",
        "created": 1,
        "model": draw(st.sampled_from(["m"] * 6 + ["other", None])),
    }
    for key in ("id", "model"):
        if draw(st.integers(0, 12)) == 0:
            del chunk[key]
    many = draw(st.integers(0, 12))
    chunk["choices"] = [] if many == 0 else [choice, {**choice, "index": 1}] if many == 1 else [choice]
    if many == 2:
        chunk["choices"] = {"0": choice}
    usage = draw(st.integers(0, 10))
    if usage == 0:
        chunk["usage"] = {"prompt_tokens": 1, "completion_tokens": 2}
    elif usage == 1:
        chunk["usage"] = None
    elif usage == 2:
        chunk["usage"] = 5
    if draw(st.integers(0, 10)) == 0:
        chunk["system_fingerprint"] = draw(st.sampled_from(["fp", None, 3]))
    if draw(st.integers(0, 15)) == 0:  # past the short read: the bounded one
        chunk["pad"] = "x" * 300
    text = json.dumps(chunk, separators=draw(st.sampled_from([(",", ":"), (", ", ": ")])))
    return text if draw(st.integers(0, 30)) else text[:-1]


def _plain_stream(frames: list[str], times: list[float | None]) -> list[SSEEvent]:
    return [SSEEvent(f, index=i, t_ms=t) for i, (f, t) in enumerate(zip(frames, times, strict=True))]


def _whole_args(events: Any) -> list[Any]:
    """``assemble_plain``'s arguments as ``assemble_stream`` passes them."""
    return [
        events,
        SSEEvent,
        _assembly.AssembledStream,
        Choice,
        orjson.loads,
        _assembly._BOUNDED,
        2 * _json.MAX_DEPTH,
        TEMPLATE_MAX,
        _assembly._PROBE,
        orjson.loads(_assembly._PROBE),
    ]


def _whole(events: list[SSEEvent]) -> Any:
    return _assembly._C.assemble_plain(*_whole_args(events))  # type: ignore[union-attr]


@st.composite
def _served(draw: st.DrawFn) -> list[str]:
    """A stream as a server writes one (its role, text chunks of its fields, the finish, perhaps
    usage, [DONE]), with a frame of any shape put in or in place of one now and then."""
    n = draw(st.sampled_from([1, 1, 1, 2]))
    sep = draw(st.sampled_from([(",", ":"), (", ", ": ")]))

    def one(delta: dict[str, Any], fr: Any = None, **more: Any) -> str:
        choices = [
            {"index": i, "delta": delta, "logprobs": None, "finish_reason": fr, **more} for i in range(n)
        ]
        body = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": choices,
        }
        return json.dumps(body, separators=sep)

    fields = st.sampled_from(["content", "content", "reasoning", "reasoning_content"])
    frames = [one({"role": "assistant", "content": ""})]
    frames += [one({draw(fields): draw(_piece)}) for _ in range(draw(st.integers(0, 6)))]
    end = draw(st.sampled_from([{}, {}, {"content": ""}, {"reasoning": "last"}, {"content": "x"}]))
    stop = draw(st.sampled_from([{}, {"stop_reason": 9}]))
    frames.append(one(end, draw(st.sampled_from(["stop", "length"])), **stop))
    if draw(st.booleans()):
        usage = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [],
        }
        frames.append(json.dumps({**usage, "usage": {"completion_tokens": 2}}, separators=sep))
    frames.append("[DONE]")
    odd = draw(st.integers(0, 3))
    if odd:
        at = draw(st.integers(0, len(frames)))
        frames[at : at + (odd == 1)] = [draw(_chunk_frames())]
    return frames


@settings(max_examples=2500, deadline=None)
@given(st.one_of(_served(), st.lists(_chunk_frames(), max_size=9)), st.data())
def test_a_plain_stream_whole_is_the_stream_the_reference_assembles(
    frames: list[str], data: st.DataObject
) -> None:
    times = [data.draw(st.sampled_from([None, float(i), i * 2.5])) for i in range(len(frames))]
    events = _plain_stream(frames, times)
    if not _assembly.frames_plain(events):
        return
    want = _outcome(lambda: _assembly.assemble_stream(tuple(events), plain=True))  # type: ignore[arg-type]
    got = _outcome(lambda: _whole(events))
    if got == ("ok", None):
        return  # handed back: the reference reads it
    assert got == want
    assert _outcome(lambda: _assembly.assemble_stream(events, plain=True)) == want


def _vllm(*deltas: dict[str, Any], finish: str = "stop", n: int = 1, usage: bool = False) -> list[str]:
    def one(delta: dict[str, Any], fr: str | None = None) -> str:
        choices = [{"index": i, "delta": delta, "logprobs": None, "finish_reason": fr} for i in range(n)]
        body = {
            "id": "chatcmpl-9",
            "object": "chat.completion.chunk",
            "created": 7,
            "model": "k",
            "choices": choices,
        }
        return json.dumps(body, separators=(",", ":"))

    frames = [one({"role": "assistant", "content": ""}), *(one(d) for d in deltas), one({}, finish)]
    if usage:
        tail = {
            "id": "chatcmpl-9",
            "object": "chat.completion.chunk",
            "created": 7,
            "model": "k",
            "choices": [],
        }
        frames.append(json.dumps({**tail, "usage": {"prompt_tokens": 3, "completion_tokens": 4}}))
    return [*frames, "[DONE]"]


@pytest.mark.parametrize(
    "frames",
    [
        _vllm(*({"content": f"tok{i} "} for i in range(18))),
        _vllm({"reasoning": "think "}, {"reasoning": "more"}, {"content": "answer"}, {"content": "!"}),
        _vllm({"reasoning_content": "a"}, {"reasoning_content": "b"}, {"content": "c"}),
        _vllm({"content": "a"}, {"content": ""}, {"content": "b"}, n=2),
        _vllm({"content": "x" * 400}, {"content": "y" * 400}, usage=True),
        _vllm({"content": "a\\u00e9\\n"}, {"content": '"q"'}, finish="length"),
        _vllm(),
        ["[DONE]"],
        [],
    ],
)
def test_the_streams_servers_send_are_assembled_whole_as_the_reference_does(frames: list[str]) -> None:
    events = _plain_stream(frames, [float(i) for i in range(len(frames))])
    got = _whole(events)
    assert got is not None
    assert got == _assembly.assemble_stream(tuple(events), plain=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "frames",
    [
        [*_vllm({"content": "a"}), "data after"],  # after [DONE]
        [*_vllm({"content": "a"}), "[DONE]"],  # [DONE] twice
        _vllm({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": ""}}]}),
        [*_vllm({"content": "a", "reasoning": "b"}, {"content": "c"})[:2], '{"error": {"message": "x"}}'],
        _vllm({"reasoning": "a", "reasoning_content": "b"}),
        [*_vllm({"content": "a"})[:2], _vllm({"content": "b"})[1].replace("chatcmpl-9", "chatcmpl-8")],
        [*_vllm({"content": "a"})[:-1], _vllm({"content": "late"})[1]],  # output after the finish
        _vllm({"refusal": "no"}),
        ["not json"],
    ],
)
def test_a_stream_with_anything_else_in_it_is_handed_back(frames: list[str]) -> None:
    assert _whole(_plain_stream(frames, [None] * len(frames))) is None


def test_the_whole_stream_hands_back_what_it_cannot_take() -> None:
    events = _plain_stream(_vllm({"content": "a"}), [1.0, 2.0, 3.0, 4.0])
    args = _whole_args(events)
    whole = _assembly._C.assemble_plain  # type: ignore[union-attr]
    assert whole(*args) is not None
    assert whole(tuple(events), *args[1:]) is None  # not a list
    assert whole(*args[:1], SSEDecoder, *args[2:]) is None  # not the event class
    assert whole([*events, object()], *args[1:]) is None
    assert whole([SSEEvent(b"x")], *args[1:]) is None  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        whole(*args[:9])
    # a read that raises, at any frame: handed back, as the reference says what it is
    assert whole(events, *args[1:4], _raises, *args[5:]) is None
    # a read that changes the list it is reading: handed back, and nothing crashes
    changing = list(events)

    def shrinks(text: str) -> Any:
        if len(changing) > 2:
            changing.pop()
        return orjson.loads(text)

    assert whole(changing, *args[1:4], shrinks, *args[5:]) is None


def _raises(text: str) -> Any:
    raise RuntimeError(text)


# --- the markup search ----------------------------------------------------------------------------

_PATTERNS = [_markup.TOOL_MARKUP, _markup.REASONING_MARKUP, _markup.SPECIAL_TOKENS]
#: pieces of every family's markup, near misses of them and plain text
_markup_bits = st.one_of(
    st.text(max_size=8),
    st.sampled_from(
        [
            "<",
            "<|",
            "|>",
            "</think>",
            "<think>",
            "<|tool_calls_section_begin|>",
            "<tool_call>",
            "<|open|>tools",
            "<|im_end|>",
            "to=functions.",
            "to=function",
            "[e~[",
            "]~",
            "<|close|>",
            "message<|sep|>",
            "functions.f:0",
            "東",
            "\ud800",
            " ",
        ]
    ),
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_markup_bits, max_size=12), st.sampled_from(range(3)))
def test_the_markup_search_finds_what_the_reference_finds(bits: list[str], which: int) -> None:
    pattern, text = _PATTERNS[which], "".join(bits)
    assert _markup.find_markup(pattern, text) == _markup._find_markup(pattern, text)


def test_the_markup_search_hands_back_what_is_not_text() -> None:
    find = _markup.find_markup
    for pattern in _PATTERNS:
        assert find(pattern, None) is None and find(pattern, "") is None
        for odd in (b"<think>", 0, ["<"]):
            twin = _outcome(partial(find, pattern, odd))
            assert twin == _outcome(partial(_markup._find_markup, pattern, odd))
    # a pattern without needles (or one never compiled with them) is searched as it is
    plain = re.compile("x+")
    assert find(plain, "axxb") == (1, "axxb") == _markup._find_markup(plain, "axxb")
    # needles of another shape: the reference decides
    twin = _markup._C.find_markup  # type: ignore[union-attr]
    odd_needles = {id(plain): ["x"]}
    assert twin(odd_needles, _markup._find_markup, plain, "axx") == (1, "axx")
    long = "a" * 100 + "</think>" + "b" * 100
    assert (
        find(_markup.REASONING_MARKUP, long)
        == (100, long[80:148])
        == _markup._find_markup(_markup.REASONING_MARKUP, long)
    )


def test_a_finalizer_that_empties_the_lists_mid_call_breaks_nothing() -> None:
    """A collection may run at any allocation inside a twin, and a finalizer then run any code:
    one that empties the lists the twin reads leaves it with an answer or a hand-back, never a
    read past their end (the twins re-read the lists' lengths and hold what they read)."""
    before, after = _tpl()
    frame = b'data: {"a":1}\n\n'
    targets: list[list[Any]] = []

    class Bomb:
        def __del__(self) -> None:
            for target in targets:
                target.clear()

    old = gc.get_threshold()
    gc.set_threshold(1)
    try:
        for _ in range(30):
            sizes, times = [len(frame)] * 20, [1.0] * 20
            events = [SSEEvent(before + '"a"' + after, t_ms=1.0) for _ in range(20)]
            targets[:] = [sizes, times, events]
            bomb = Bomb()
            bomb.me = bomb  # type: ignore[attr-defined]  # a cycle: collected at a later allocation
            del bomb
            cut = _sse._C.cut_plain(frame * 20, sizes, times, SSEEvent)  # type: ignore[union-attr]
            assert cut is None or len(cut[0]) == 20
            bomb = Bomb()
            bomb.me = bomb  # type: ignore[attr-defined]
            del bomb
            got = _assembly._C.fold_text(events, 0, before, after, 1, TEMPLATE_MAX, SSEEvent)  # type: ignore[union-attr]
            assert got is None or got[1] == "a" * got[0]
    finally:
        gc.set_threshold(*old)
        targets.clear()


# documents whose strings hold what the depth scan must step over: brackets, quotes, escapes of
# each kind, a backslash before a quote, text past ASCII
_strings = st.sampled_from(["", "[", "{", "]", '"', "\\", '\\"', "\u00e9[", "a]b}", "\u2028", "x" * 40])
_documents = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | _strings,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_strings, inner, max_size=3),
    max_leaves=30,
)


@given(_documents, st.integers(min_value=0, max_value=12), st.sampled_from(["str", "bytes", "bytearray"]))
def test_the_depth_read_off_a_text_is_the_walk_of_its_value(doc: Any, bound: int, form: str) -> None:
    """For any document bounded loads reads, the text's nesting counted outside its strings is the
    depth the walk of the value finds, as text, bytes or a bytearray, written spaced or compact."""
    twin = native("wirecheck.contracts._json_c")
    assert twin is not None
    for text in (json.dumps(doc), json.dumps(doc, indent=1, ensure_ascii=False), orjson.dumps(doc).decode()):
        given_text: Any = (
            text if form == "str" else text.encode() if form == "bytes" else bytearray(text.encode())
        )
        assert twin.deeper(given_text, bound) is _json.depth_exceeds(json.loads(text), bound)


def test_the_depth_scan_hands_back_what_its_text_cannot_tell() -> None:
    """Bytes with a NUL (UTF-16 or UTF-32, which json reads) and texts of other types: None, and
    bounded loads walks the value; a bound that is not an int is refused."""
    twin = native("wirecheck.contracts._json_c")
    assert twin is not None
    deep = "[" * 200 + "]" * 200
    assert twin.deeper(deep, 128) is True and twin.deeper(deep, 200) is False
    assert twin.deeper(deep.encode("utf-16"), 128) is None and twin.deeper(memoryview(b"[]"), 0) is None
    with pytest.raises(_json.JsonLimitError, match="deeper than the limit"):
        _json.loads(deep.encode("utf-16"))
    with pytest.raises(_json.JsonLimitError, match="deeper than the limit"):
        _json.loads('{"a": "' + "[" * 300 + '", "b": ' + deep + "}")
    assert _json.loads('["' + "[" * 300 + '"]') == ["[" * 300]
    with pytest.raises(TypeError):
        twin.deeper("[]", 1.5)
