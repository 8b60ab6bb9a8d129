"""assemble_stream folds the plain chunk of an answer's text or of its reasoning (the stream's id and
model, one choice under way, a delta of one text field only: content, reasoning or
reasoning_content, or one piece of a begun call's arguments) without ``_take_chunk``, and reads a
chunk written as the field's first such chunk but for its text through that chunk's template: it
must build what ``_take_chunk`` builds from every chunk, for any mix of that shape and its near
misses (another id or model, usage, a fingerprint, a finish, a second choice, an index that is not
an int, a delta with more in it or another key, a call's piece with more than its arguments or of
a call not begun, a "content" key elsewhere, a frame that is not JSON, an object or short, texts
JSON escapes)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wirecheck.contracts._assembly import (
    AssembledChoice,
    AssembledStream,
    StreamAnomaly,
    _excerpt,
    _take_chunk,
    _template,
    assemble_stream,
    frame_object,
    frames_plain,
)
from wirecheck.contracts._sse import SSEEvent

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")


def _one_by_one(events: list[SSEEvent]) -> AssembledStream:
    """Every frame through frame_object and _take_chunk, as the assembler did before the text's
    own fold."""
    out = AssembledStream()
    out.events = len(events)
    plain = frames_plain(events)
    for ev in events:
        if out.first_event_ms is None:
            out.first_event_ms = ev.t_ms
        if out.done:  # as the assembler counts what comes after the end
            if ev.data.strip() == "[DONE]":
                out.done += 1
                out.anomalies.append(StreamAnomaly("done-repeated", "[DONE]", ev.index))
            else:
                out.after_done += 1
                out.anomalies.append(StreamAnomaly("data-after-done", _excerpt(ev.data), ev.index))
            continue
        if ev.data.strip() == "[DONE]":
            out.done, out.done_event = 1, ev.index
            continue
        obj = frame_object(out, ev.data, ev.index, plain=plain)
        if obj is None:
            continue
        if "error" in obj and "choices" not in obj:
            out.error_frames.append((ev.index, obj["error"]))
            continue
        _take_chunk(out, obj, ev)
    return out


# each field is the plain chunk's most of the time, so that most chunks take the fold and the near
# misses come one or two at a time
_ids = st.sampled_from(["chatcmpl-1"] * 12 + ["chatcmpl-2", None, 7])
_models = st.sampled_from(["m"] * 12 + ["other", None, ["m"]])
# texts that JSON escapes, that hold what a chunk's text around them holds, and one past a short frame
_texts = st.sampled_from(
    ["", "a", "tok ", "<think>", "x" * 300, '"', "\\", "\u00e9\u2028", '","content":"', "\ud800", "[" * 200]
)
_deltas = st.one_of(
    _texts.map(lambda t: {"content": t}),
    _texts.map(lambda t: {"content": t}),
    _texts.map(lambda t: {"content": t}),
    _texts.map(lambda t: {"reasoning": t}),
    _texts.map(lambda t: {"reasoning": t}),
    _texts.map(lambda t: {"reasoning_content": t}),
    st.just({"reasoning": None}),
    st.just({"reasoning": 5}),
    st.just({"reasoning": "r", "reasoning_content": "s"}),
    st.just({"refusal": "no"}),
    st.just({"content": None}),
    st.just({"content": 5}),
    st.just({"role": "assistant", "content": ""}),
    st.just({"content": "a", "reasoning": "r"}),
    st.just({}),
    st.just("text"),
    st.just({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}),
    # pieces of a begun call's arguments, and their near misses: another index, one not begun, a
    # bool, a type or name sent again, arguments that are not a string, a second call at index 0
    # (which takes the index from the first), a call begun at index 1
    _texts.map(lambda t: {"tool_calls": [{"index": 0, "function": {"arguments": t}}]}),
    _texts.map(lambda t: {"tool_calls": [{"index": 0, "function": {"arguments": t}}]}),
    _texts.map(lambda t: {"tool_calls": [{"index": 1, "function": {"arguments": t}}]}),
    st.sampled_from(
        [
            {"tool_calls": [{"index": True, "function": {"arguments": "x"}}]},
            {"tool_calls": [{"index": 0, "type": "function", "function": {"arguments": "x"}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": "x", "name": "g"}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": {"a": 1}}}]},
            {"tool_calls": [{"index": 0, "function": {"arguments": "x"}}, {"index": 1, "function": {}}]},
            {"tool_calls": [{"index": 0, "id": "d", "function": {"name": "g", "arguments": "y"}}]},
            {"tool_calls": [{"index": 1, "id": "e", "function": {"name": "h", "arguments": ""}}]},
            {"tool_calls": [{"index": [0], "function": {"arguments": "x"}}]},
            {"tool_calls": {"index": 0}},
        ]
    ),
)


@st.composite
def _chunks(draw: Any) -> str:
    choice: dict[str, Any] = {
        "index": draw(st.sampled_from([0] * 12 + [1, True, 0.0, "0"])),
        # a "content" key elsewhere in the chunk (the template must find the delta's)
        "logprobs": draw(st.sampled_from([None] * 6 + [{"content": "a"}, {"content": [{"token": "a"}]}])),
    }
    delta = draw(_deltas)
    if delta != {} or draw(st.booleans()):
        choice["delta"] = delta
    choice["finish_reason"] = draw(st.sampled_from([None] * 8 + ["stop", "length"]))
    obj: dict[str, Any] = {"object": "chat.completion.chunk"}
    for key, values in (("id", _ids), ("model", _models)):
        value = draw(values)
        if value is not None or draw(st.booleans()):
            obj[key] = value
    choices: Any = [choice]
    kind = draw(st.sampled_from(["one"] * 12 + ["two", "none", "not-list", "not-dict", "null", "absent"]))
    if kind == "two":
        choices = [choice, {**choice, "index": 1}]
    elif kind == "none":
        choices = []
    elif kind == "not-list":
        choices = {"0": choice}
    elif kind == "not-dict":
        choices = ["x"]
    if kind == "null":
        choices = None
    if kind != "absent":
        obj["choices"] = choices
    if draw(st.integers(0, 4)) == 0:
        obj["error"] = {"message": "boom"}
    if draw(st.integers(0, 9)) == 0:
        obj["usage"] = draw(st.sampled_from([{"completion_tokens": 1}, None, 3]))
    if draw(st.integers(0, 9)) == 0:
        obj["system_fingerprint"] = draw(st.sampled_from(["fp", None, 1]))
    if draw(st.integers(0, 9)) == 0:
        obj["created"] = draw(st.sampled_from([1, 2]))  # the same chunk written otherwise
    form = draw(st.integers(0, 39))
    if form == 0:
        return json.dumps(obj)[:-1]  # cut: not JSON
    if form == 1:
        return json.dumps([obj])  # not an object
    if form == 2:
        return json.dumps(obj, indent=1) + " " * 300  # long: the long way
    if form == 3:
        return json.dumps({"error": {"message": "boom"}})
    return json.dumps(obj, separators=(",", ":"))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_chunks(), max_size=12),
    st.sampled_from([None, 1.5]),
    st.booleans(),
    st.sampled_from(["role", "role", "no-model", "no-id", "bare"]),
)
def test_the_texts_fold_builds_what_take_chunk_builds(
    frames: list[str], t: float | None, done: bool, opening: str
) -> None:
    """Whatever the stream opens with: a role chunk with its id and model, or (as some servers and
    gateways write) no role chunk, no model or no id at all."""
    first: dict[str, Any] = {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant"}}],
    }
    if opening == "no-model":
        del first["model"]
    elif opening == "no-id":
        del first["id"]
    elif opening == "bare":
        first = {"choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None}]}
    datas = [json.dumps(first), *frames, *(["[DONE]"] if done else [])]
    events = [SSEEvent(d, index=i, t_ms=None if t is None else t + i) for i, d in enumerate(datas)]
    assert assemble_stream(events) == _one_by_one(events)
    assert assemble_stream(events, plain=False) == _one_by_one(events)


def test_a_plain_answer_takes_the_fold_and_reads_right() -> None:
    frames = [
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        *(
            {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": w}}]}
            for w in ("a", "", "b")
        ),
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    events = [SSEEvent(json.dumps(f), index=i, t_ms=float(i)) for i, f in enumerate(frames)]
    events.append(SSEEvent("[DONE]", index=len(frames), t_ms=9.0))
    got = assemble_stream(events)
    assert got == _one_by_one(events)
    assert got.choices[0].content == "ab" and got.token_events == 2 and got.token_times == [1.0, 3.0]
    assert got.frames == 5 and got.done == 1 and not got.anomalies


@pytest.mark.parametrize("drop", [(), ("model",), ("id",), ("id", "model")])
def test_a_stream_without_a_model_id_or_role_chunk_takes_the_fold(
    drop: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server or gateway that writes no model, no id or no role chunk: its chunks are as plain as
    any, and after the first (which makes the choice) only the finish goes through _take_chunk."""

    def chunk(text: str, **extra: Any) -> str:
        obj = _plain_chunk(text, **extra)
        for key in drop:
            del obj[key]
        return json.dumps(obj, separators=(",", ":"))

    datas = [chunk(f"tok{n} ") for n in range(20)] + [chunk("", finish_reason="stop"), "[DONE]"]
    events = [SSEEvent(d, index=i, t_ms=float(i)) for i, d in enumerate(datas)]
    taken = _count_take_chunk(monkeypatch)
    got = assemble_stream(events)
    assert taken == [0, 20]
    assert got == _one_by_one(events)
    assert got.choices[0].content == "".join(f"tok{n} " for n in range(20))
    assert got.token_events == 20 and got.frames == 21 and not got.anomalies


def _count_take_chunk(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The events ``_take_chunk`` is handed from now on, in order (it still folds each). The whole
    plain stream's twin is off: what is counted is how the Python loop goes (with the fold's twin)."""
    from wirecheck.contracts import _assembly

    taken: list[int] = []
    monkeypatch.setattr(_assembly, "_WHOLE", None)

    def counted(st_: AssembledStream, obj: dict[str, Any], ev: SSEEvent) -> None:
        taken.append(ev.index)
        _take_chunk(st_, obj, ev)

    monkeypatch.setattr(_assembly, "_take_chunk", counted)
    return taken


def _plain_chunk(text: str, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": None, **extra}
    return {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [choice]}


def test_a_chunk_is_read_through_its_template_only_where_its_text_is_told_with_certainty() -> None:
    """The template is the text around the delta's one ``"content":`` string, tried with another
    string in its place: a chunk with a "content" key elsewhere, or a text the key's value is not
    (a key spelled with a space before its colon), has none and is read whole."""
    choice = AssembledChoice(0)
    text = json.dumps(_plain_chunk('a "b"\\'), separators=(",", ":"))
    tpl = _template(text, json.loads(text), 'a "b"\\', choice)
    assert tpl is not None and tpl.choice is choice
    assert text == tpl.before + json.dumps('a "b"\\') + tpl.after and tpl.before.endswith('"content":')
    twice = json.dumps(_plain_chunk("a", logprobs={"content": "a"}), separators=(",", ":"))
    assert _template(twice, json.loads(twice), "a", choice) is None
    # the delta's value is the last of two keys, the first spelled otherwise: found by its reading
    odd = text.replace('{"content":', '{"content" : "x", "content":')
    tpl = _template(odd, json.loads(odd), 'a "b"\\', choice)
    assert tpl is not None and tpl.before.endswith('"x", "content":')


@given(
    st.lists(st.sampled_from(["a", "", '"', "\u00e9", "\ud800", "x" * 400, "{[", "\n"]), max_size=12),
    st.booleans(),
)
def test_chunks_alike_but_for_their_text_build_what_take_chunk_builds(texts: list[str], finish: bool) -> None:
    """Every chunk after the first is its template's (or near it: another index, a finish, text
    orjson refuses, one too long to read whole as a short frame, one after the end): read through
    the template or whole, the stream is what ``_take_chunk`` builds, the text joined in order."""
    first = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}
    frames = [json.dumps(_plain_chunk(t), separators=(",", ":")) for t in ["lead", *texts]]
    if finish:
        stop = json.dumps(_plain_chunk("", finish_reason="stop")).replace('"finish_reason": null, ', "")
        frames += [stop, json.dumps(_plain_chunk("after"), separators=(",", ":"))]  # after the finish
    datas = [json.dumps(first), *frames, "[DONE]", frames[0], frames[-1], "[DONE]"]
    events = [SSEEvent(d, index=i, t_ms=float(i)) for i, d in enumerate(datas)]
    got = assemble_stream(events)
    assert got == _one_by_one(events)
    assert got.choices[0].content == "".join(["lead", *texts]) + ("after" if finish else "")
    assert got.after_done == 2 and got.done == 2


def _vllm_chunk(delta: dict[str, Any], **extra: Any) -> str:
    """A chunk of a chat stream as vLLM writes it (vllm-wire.md), with this delta."""
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None, "token_ids": None}
    obj = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{**choice, **extra}],
    }
    return json.dumps({**obj, "kv_transfer_params": None}, separators=(",", ":"))


def _thinking_chunk(field: str, text: str, **extra: Any) -> str:
    """A chunk of a thinking model's stream: one text field."""
    return _vllm_chunk({field: text}, **extra)


@pytest.mark.parametrize("name", ["reasoning", "reasoning_content"])
def test_a_thinking_stream_folds_its_reasoning_and_its_answer_each_through_its_template(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reasoning, then the answer, then reasoning again (a model that thinks between its words):
    each field's chunks go through that field's template, and only the role chunk and the finish
    through ``_take_chunk``; the stream is what ``_take_chunk`` builds from every chunk."""
    role = json.dumps(
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    )
    thought = [_thinking_chunk(name, f"r{n} ") for n in range(12)]
    answer = [_thinking_chunk("content", f"c{n} ") for n in range(8)]
    again = [
        _thinking_chunk(
            name,
            "",
        ),
        _thinking_chunk(name, "late"),
    ]
    finish = _vllm_chunk({}, finish_reason="stop")
    datas = [role, *thought, *answer, *again, finish, "[DONE]"]
    events = [SSEEvent(d, index=i, t_ms=float(i)) for i, d in enumerate(datas)]
    taken = _count_take_chunk(monkeypatch)
    got = assemble_stream(events)
    assert taken == [0, len(datas) - 2]
    assert got == _one_by_one(events)
    choice = got.choices[0]
    assert choice.reasoning == "".join(f"r{n} " for n in range(12)) + "late"
    assert choice.content == "".join(f"c{n} " for n in range(8)) and choice.reasoning_fields == {name}
    # every chunk with text is a token, the role chunk's empty content and the empty reasoning not
    assert got.token_events == 21 and got.token_times[0] == 1.0 and got.token_times[-1] == 22.0
    assert got.frames == len(datas) - 1 and not got.anomalies


def test_a_reasoning_template_is_told_by_its_own_key() -> None:
    """``"reasoning":`` is found whole: a chunk of ``reasoning_content`` has no ``reasoning`` key in
    its text, and a ``reasoning`` key elsewhere in the chunk leaves the delta's untold."""
    choice = AssembledChoice(0)
    text = _thinking_chunk("reasoning", 'a "b"')
    tpl = _template(text, json.loads(text), 'a "b"', choice, field="reasoning")
    assert tpl is not None and tpl.field == "reasoning" and tpl.before.endswith('"reasoning":')
    assert text == tpl.before + json.dumps('a "b"') + tpl.after
    other = _thinking_chunk("reasoning_content", "a")
    assert _template(other, json.loads(other), "a", choice, field="reasoning") is None
    twice = _thinking_chunk("reasoning", "a", logprobs={"reasoning": "a"})
    assert _template(twice, json.loads(twice), "a", choice, field="reasoning") is None


def _call_chunk(index: int, arguments: str, **begin: str) -> str:
    """A chunk of a call as vLLM streams it (vllm-wire.md): the first with the call's id, type and
    name (``begin``), each after it one piece of its arguments."""
    tc: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if begin:
        tc = {
            "id": begin["id"],
            "type": "function",
            **tc,
            "function": {"name": begin["name"], "arguments": arguments},
        }
    return _vllm_chunk({"tool_calls": [tc]})


def test_an_agents_calls_fold_their_arguments_through_a_template_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two calls streamed piece by piece, empty pieces among them, then a second call sent at index
    0 (a client would merge it into the first: the assembler keeps it apart and says so): each
    call's pieces fold through that call's template, and the template of a call no longer at its
    index folds nothing more; the stream is what ``_take_chunk`` builds from every chunk."""
    role = json.dumps(
        {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    )
    datas = [role, _thinking_chunk("reasoning", "let me look")]
    datas += [_call_chunk(0, '{"', id="functions.search:0", name="search")]
    datas += [_call_chunk(0, piece) for piece in ("q", "", '": "', "tokyo", "", '"}')]
    datas += [_call_chunk(1, "", id="functions.open:1", name="open")]
    datas += [_call_chunk(1, piece) for piece in ('{"path"', ': "a"}')]
    datas += [
        _call_chunk(0, "x"),
        _call_chunk(0, '{"', id="functions.other:0", name="other"),
        _call_chunk(0, "}"),
    ]
    finish = _vllm_chunk({}, finish_reason="tool_calls")
    datas += [finish, _call_chunk(1, "late"), "[DONE]"]
    events = [SSEEvent(d, index=i, t_ms=float(i)) for i, d in enumerate(datas)]
    taken = _count_take_chunk(monkeypatch)
    got = assemble_stream(events)
    assert got == _one_by_one(events)
    # through _take_chunk: the role chunk, each call's first chunk, the second call at index 0, the
    # finish and the piece after it (the piece of the second call at index 0 is read whole: the
    # index's template, learned once, is of the first)
    assert taken == [0, 2, 9, 13, 15, 16]
    calls = got.choices[0].calls
    assert [c.name for c in calls] == ["search", "open", "other"]
    assert calls[0].arguments == '{"q": "tokyo"}x' and calls[0].deltas == 8
    assert calls[1].arguments == '{"path": "a"}late' and calls[1].deltas == 4
    assert calls[2].arguments == '{"}' and calls[2].deltas == 2
    assert [a.kind for a in got.anomalies] == ["tool-index-reuse", "output-after-finish"]
    # every chunk of a call is a token, its empty pieces too
    assert got.token_events == 15 and got.token_times == [float(i) for i in range(1, 15)] + [16.0]
