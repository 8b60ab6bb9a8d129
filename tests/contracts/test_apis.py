"""/v1/responses and /v1/messages judged by the chat contracts: the same rule ids on the
same faults, legal vLLM shapes clean, and the endpoint framing rules on broken streams."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support import apiwire as aw
from wirecheck.contracts import CheckConfig, Exchange, ExchangeError, Finding, check_exchanges

RESP, MSG = "/v1/responses", "/v1/messages"
BAD_ARGS = ('{"city": ', "Tokyo}")  # unquoted string: not JSON


def run(*exs: Exchange) -> list[Finding]:
    return check_exchanges(list(exs), CheckConfig(direct=True)).findings


def rules_of(*exs: Exchange) -> list[str]:
    return sorted({f.rule for f in run(*exs)})


def resp_stream(events: list[dict[str, Any]], **kw: Any) -> Exchange:
    return aw.api_exchange(RESP, aw.responses_req(stream=True, **kw), events)


def msg_stream(events: list[dict[str, Any]], **kw: Any) -> Exchange:
    return aw.api_exchange(MSG, aw.messages_req(stream=True, **kw), events)


LEGAL: dict[str, Callable[[], Exchange]] = {
    "responses-body": lambda: aw.api_exchange(RESP, aw.responses_req(), aw.responses_body()),
    "responses-stream": lambda: resp_stream(aw.responses_events()),
    "responses-stream-text": lambda: resp_stream(
        aw.responses_events(args_pieces=(), content=("Sunny", " today."))
    ),
    "messages-body": lambda: aw.api_exchange(MSG, aw.messages_req(), aw.messages_body()),
    "messages-stream": lambda: msg_stream(aw.messages_events()),
    "messages-stream-text": lambda: msg_stream(
        aw.messages_events(args_pieces=(), text=("Sunny", " today."), stop_reason="end_turn")
    ),
}


@pytest.mark.parametrize("name", sorted(LEGAL))
def test_legal_vllm_shapes_check_clean(name: str) -> None:
    assert run(LEGAL[name]()) == []


def test_invalid_arguments_fire_the_chat_rule_on_both_endpoints() -> None:
    for ex in (
        resp_stream(aw.responses_events(args_pieces=BAD_ARGS)),
        aw.api_exchange(RESP, aw.responses_req(), aw.responses_body(args="".join(BAD_ARGS))),
        msg_stream(aw.messages_events(args_pieces=BAD_ARGS)),
    ):
        found = [f for f in run(ex) if f.rule == "tool-call-args-invalid-json"]
        assert len(found) == 1 and str(found[0].fault) == "model", ex.request.path
        assert found[0].evidence["pointer"].endswith("/arguments")


def test_schema_undeclared_and_markup_rules_read_the_normalized_view() -> None:
    wrong_type = ('{"city": ', "7}")
    assert "tool-call-args-schema" in rules_of(resp_stream(aw.responses_events(args_pieces=wrong_type)))
    assert "tool-call-args-schema" in rules_of(msg_stream(aw.messages_events(args_pieces=wrong_type)))
    undeclared = aw.messages_body() | {
        "content": [{"type": "tool_use", "id": "functions.drop:0", "name": "drop", "input": {}}]
    }
    assert "tool-call-undeclared" in rules_of(aw.api_exchange(MSG, aw.messages_req(), undeclared))
    markup = aw.responses_events(args_pieces=(), content=("<tool_call>{}", "</tool_call>"))
    [found] = [f for f in run(resp_stream(markup)) if f.rule == "tool-markup-in-content"]
    # its pointer is into the chat view the exchange was read into, and the evidence says so
    assert found.evidence["pointer"] == "/choices/0/message/content" and found.evidence["view"] == "chat"
    merged = aw.messages_events(args_pieces=(), text=("I think </think>", "Sunny"), stop_reason="end_turn")
    assert "reasoning-markup-in-content" in rules_of(msg_stream(merged))


def test_a_stop_reason_that_hides_the_call_is_the_chat_finish_rule() -> None:
    ex = msg_stream(aw.messages_events(stop_reason="max_tokens"))
    assert "finish-reason-mismatch" not in rules_of(ex)  # length stays length with partial calls
    ex = aw.api_exchange(MSG, aw.messages_req(), aw.messages_body() | {"stop_reason": "end_turn"})
    assert "finish-reason-mismatch" in rules_of(ex)


def test_stream_and_body_of_one_request_are_twins() -> None:
    req_s, req_p = aw.responses_req(stream=True, temperature=0), aw.responses_req(temperature=0)
    good = [
        aw.api_exchange(RESP, req_s, aw.responses_events()),
        aw.api_exchange(RESP, req_p, aw.responses_body()),
    ]
    assert "stream-nonstream-mismatch" not in rules_of(*good)
    other = aw.responses_body(args='{"city": "Paris"}')
    bad = [aw.api_exchange(RESP, req_s, aw.responses_events()), aw.api_exchange(RESP, req_p, other)]
    assert "stream-nonstream-mismatch" in rules_of(*bad)


def test_responses_framing() -> None:
    ev = aw.responses_events()
    assert rules_of(resp_stream(ev[1:])) == ["api-stream-order", "api-stream-sequence"]
    # without response.completed there is no status either: as a chat stream without its finish chunk
    assert rules_of(resp_stream(ev[:-1])) == ["api-stream-order", "finish-reason-missing"]
    repeated = [e | {"sequence_number": 4} if e["sequence_number"] == 5 else e for e in ev]
    assert rules_of(resp_stream(repeated)) == ["api-stream-sequence"]
    # a dropped delta is seen twice: a gap in the numbers and a .done that repeats more than was built
    dropped = [e for e in ev if e["sequence_number"] != 4]
    assert rules_of(resp_stream(dropped)) == ["api-stream-disagrees", "api-stream-sequence"]
    done = [
        e | {"arguments": '{"city": "Paris"}'} if e["type"] == "response.function_call_arguments.done" else e
        for e in ev
    ]
    assert rules_of(resp_stream(done)) == ["api-stream-disagrees"]


def test_messages_framing() -> None:
    ev = aw.messages_events()
    gap = [e | {"index": 2} if e.get("index") == 1 else e for e in ev]
    assert rules_of(msg_stream(gap)) == ["api-block-index"]
    no_delta = [e for e in ev if e["type"] != "message_delta"]
    assert "api-stream-order" in rules_of(msg_stream(no_delta))
    wrong = [
        e | {"delta": {"type": "text_delta", "text": "x"}}
        if e.get("delta", {}).get("type") == "input_json_delta"
        else e
        for e in ev
    ]
    assert "api-stream-order" in rules_of(msg_stream(wrong))
    assert rules_of(msg_stream(ev[:-1])) == ["api-stream-order"]


def test_arguments_a_caller_closed_the_stream_on_are_judged() -> None:
    ev = aw.messages_events(args_pieces=BAD_ARGS)
    ex = msg_stream(ev[:-3])  # up to the invalid delta: no block stop, no message_stop
    ex.error = ExchangeError("client_abort", "the caller disconnected mid-response", 40.0)
    assert "tool-call-args-invalid-json" in rules_of(ex)
    # a prefix that may still become JSON is not judged
    ok = msg_stream(aw.messages_events(args_pieces=('{"city": "Osa',))[:-3])
    ok.error = ExchangeError("client_abort", "the caller disconnected mid-response", 40.0)
    assert "tool-call-args-invalid-json" not in rules_of(ok)


def test_a_messages_streams_usage_is_read_from_its_start_and_delta_events_however_written() -> None:
    from wirecheck.contracts import Chunk, build_view
    from wirecheck.contracts._translate import usage_meaning

    ev = aw.messages_events()
    want = usage_meaning(build_view(msg_stream(ev)))
    assert want is not None and want.completion is not None and want.prompt
    # the same events with every type written with an escape ("message_\u0073tart"): the text
    # deltas, which no type of a usage event can be in, are not read again; these still are
    ex = msg_stream(ev)
    assert ex.response is not None and ex.response.chunks is not None
    ex.response.chunks = [
        Chunk(c.t_ms, c.data.replace(b'"type":"message_', b'"type":"message\\u005f'))
        for c in ex.response.chunks
    ]
    assert b"message\\u005fdelta" in b"".join(c.data for c in ex.response.chunks)
    assert usage_meaning(build_view(ex)) == want
    # and a stream whose usage events are gone has none
    assert (
        usage_meaning(build_view(msg_stream([e for e in ev if not e["type"].startswith("message_")]))) is None
    )
