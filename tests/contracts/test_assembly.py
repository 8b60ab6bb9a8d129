"""Stream assembly: the accumulation real clients use, checked against the OpenAI SDK itself."""

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from tests.support import wire
from wirecheck.contracts import assemble_stream, decode_sse

# run whole with the compiled twins and again with the pure-Python reference (conftest.py)
pytestmark = pytest.mark.usefixtures("both_paths")


def assemble(objs: list[Any], pieces: list[bytes] | None = None) -> Any:
    data = wire.frames(*objs)
    evs, _ = decode_sse(pieces or data)
    return assemble_stream(evs)


def sdk_snapshot(objs: list[dict[str, Any]]) -> Any:
    state = ChatCompletionStreamState()
    for o in objs:
        if o.get("choices") or "usage" in o:
            state.handle_chunk(ChatCompletionChunk.model_validate(o))
    return state.current_completion_snapshot


def test_k2_stream_assembles_to_the_reference_call() -> None:
    st_ = assemble(wire.k2_tool_stream())
    ch = st_.choices[0]
    assert [(c.id, c.name, c.arguments) for c in ch.calls] == [
        ("functions.get_weather:0", "get_weather", '{"city": "Tokyo"}')
    ]
    assert ch.finish_reason == "tool_calls"
    assert st_.done == 1
    assert st_.anomalies == []


def test_reasoning_then_content_and_usage() -> None:
    st_ = assemble(wire.text_stream("Hel", "lo", reasoning=("The ", "user"), usage=True))
    ch = st_.choices[0]
    assert (ch.reasoning, ch.content, ch.reasoning_fields) == ("The user", "Hello", {"reasoning"})
    assert st_.usage == {"prompt_tokens": 12, "total_tokens": 32, "completion_tokens": 20}
    assert st_.usage_only_chunks == 1


def test_both_reasoning_names_with_one_value_count_once() -> None:
    # vLLM 0.11-0.15 sent reasoning and reasoning_content with the same value
    st_ = assemble(
        [
            wire.role_chunk(),
            wire.chunk({"reasoning": "ab", "reasoning_content": "ab"}),
            wire.chunk({}, "stop"),
        ]
    )
    assert st_.choices[0].reasoning == "ab"
    assert st_.anomalies == []


def test_id_repeated_on_every_delta_is_recorded_with_what_a_client_holds() -> None:
    objs = [
        wire.role_chunk(),
        wire.chunk({"tool_calls": [wire.call_delta(args='{"city"', id="c1")]}),
        wire.chunk({"tool_calls": [{"index": 0, "id": "c1", "function": {"arguments": ': "x"}'}}]}),
        wire.chunk({}, "tool_calls"),
    ]
    st_ = assemble(objs)
    [a] = st_.anomaly("tool-id-repeated")
    assert "c1c1" in a.detail
    assert st_.choices[0].calls[0].id == "c1"  # the intended id is kept for the other rules
    # ...and the SDK really does concatenate it
    assert sdk_snapshot(objs).choices[0].message.tool_calls[0].id == "c1c1"


def test_two_calls_at_one_index_are_split_and_recorded() -> None:
    objs = [
        wire.role_chunk(),
        wire.chunk({"tool_calls": [wire.call_delta(args='{"city": "A"}', id="a")]}),
        wire.chunk({"tool_calls": [wire.call_delta("search", '{"q": "B"}', id="b")]}),
        wire.chunk({}, "tool_calls"),
    ]
    st_ = assemble(objs)
    assert [c.name for c in st_.choices[0].calls] == ["get_weather", "search"]
    assert len(st_.anomaly("tool-index-reuse")) == 1


def test_index_gap_is_recorded() -> None:
    objs = [
        wire.role_chunk(),
        wire.chunk({"tool_calls": [wire.call_delta(args="{}", id="a", index=1)]}),
        wire.chunk({}, "tool_calls"),
    ]
    assert len(assemble(objs).anomaly("tool-index-gap")) == 1


def test_done_twice_and_data_after_done() -> None:
    data = wire.frames(*wire.text_stream("a")) + b"data: [DONE]\n\ndata: {}\n\n"
    st_ = assemble_stream(decode_sse(data)[0])
    assert st_.done == 2
    assert st_.after_done == 1


def test_error_frame_is_kept_apart() -> None:
    st_ = assemble(
        [
            wire.role_chunk(),
            {"error": {"message": "boom", "type": "InternalServerError", "param": None, "code": 500}},
        ]
    )
    assert st_.error_frames[0][1]["message"] == "boom"


# --- agreement with the OpenAI SDK's own accumulator (property) -----------------------------------

_args = st.dictionaries(
    st.sampled_from(["city", "q", "days", "unit"]),
    st.one_of(st.text(max_size=8), st.integers(-5, 50)),
    max_size=3,
)


@st.composite
def legal_streams(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Legal vLLM streams: K2-style fragments, hermes name-first, or K3 whole calls; with text."""
    objs: list[dict[str, Any]] = [wire.role_chunk()]
    for piece in draw(st.lists(st.text(min_size=1, max_size=6), max_size=4)):
        objs.append(wire.chunk({"reasoning": piece}))
    for piece in draw(st.lists(st.text(min_size=1, max_size=6), max_size=4)):
        objs.append(wire.chunk({"content": piece}))
    style = draw(st.sampled_from(["k2", "hermes", "k3"]))
    n = draw(st.integers(0, 3))
    for i in range(n):
        name = draw(st.sampled_from(["get_weather", "search"]))
        args = json.dumps(draw(_args))
        cid = f"functions.{name}:{i}" if style == "k2" else f"chatcmpl-tool-{i:016x}"
        if style == "k3":
            objs.append(wire.chunk({"tool_calls": [wire.call_delta(name, args, id=cid, index=i)]}))
            continue
        # K2 sends the first fragment with the name, hermes the name alone
        head = wire.call_delta(name, args[:1] if style == "k2" else None, id=cid, index=i)
        if style == "k2":
            args = args[1:]
        cuts = sorted(draw(st.lists(st.integers(0, len(args)), max_size=4)))
        frags = [args[a:b] for a, b in zip([0, *cuts], [*cuts, len(args)], strict=True)]
        if style == "hermes" and draw(st.booleans()):
            # one chunk may hold two entries with the same index
            objs.append(
                wire.chunk(
                    {"content": None, "tool_calls": [head, {"index": i, "function": {"arguments": frags[0]}}]}
                )
            )
            frags = frags[1:]
        else:
            objs.append(wire.chunk({"tool_calls": [head]}))
        for f in frags:
            objs.append(wire.chunk({"tool_calls": [{"index": i, "function": {"arguments": f}}]}))
    objs.append(wire.chunk({}, "tool_calls" if n else "stop"))
    return objs


@given(legal_streams(), st.data())
def test_assembly_matches_the_sdk_and_ignores_the_split(
    objs: list[dict[str, Any]], data: st.DataObject
) -> None:
    raw = wire.frames(*objs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=10)))
    pieces = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    ours = assemble(objs, pieces)
    assert ours.anomalies == []
    ch = ours.choices[0]
    sdk = sdk_snapshot(objs).choices[0].message
    assert (ch.content or None) == (sdk.content or None)
    sdk_calls = sdk.tool_calls or []
    assert [(c.id, c.name, c.arguments) for c in ch.calls] == [
        (t.id, t.function.name, t.function.arguments) for t in sdk_calls
    ]
    reasoning = (sdk.model_extra or {}).get("reasoning")
    assert (ch.reasoning or None) == (reasoning or None)
