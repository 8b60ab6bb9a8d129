"""Across the conversation: the answer's call ids against the history's, every call of the history
answered, and turns that carry only what their role can. Legal shapes of each (K2 ids repeating in
separate conversations, results out of order, a continued stored response) stay clean."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import apiwire as aw
from tests.support import wire
from tests.support.wire import call, completion, exchange, message, tool_req, tool_turn
from wirecheck.contracts import CheckConfig, Exchange, Finding, check_exchanges

RESP, MSG = "/v1/responses", "/v1/messages"
HERMES = "NousResearch/Hermes-4-70B"
MINTED = "chatcmpl-tool-9f1c2a7b3d4e5f60"


def run(*exs: Exchange) -> list[Finding]:
    return check_exchanges(list(exs), CheckConfig(direct=True)).findings


def found(*exs: Exchange) -> dict[str, str]:
    return {f.rule: str(f.fault) for f in run(*exs) if f.severity != "info"}


def answer(*calls: dict[str, Any], model: str = wire.K2) -> dict[str, Any]:
    return completion(message(None, tool_calls=list(calls)), "tool_calls", model=model)


# --- ids across turns ----------------------------------------------------------------------------------


def test_a_k2_model_that_restarts_its_index_reuses_an_id() -> None:
    ex = exchange(tool_req(messages=tool_turn("weather?", "sunny")), answer(call()))
    [f] = [f for f in run(ex) if f.rule == "tool-call-id-reused"]
    assert str(f.fault) == "model" and "functions.get_weather:0" in f.message
    # the running index goes on: :1 after one call in the history
    ok = exchange(tool_req(messages=tool_turn("weather?", "sunny")), answer(call(idx=1)))
    assert found(ok) == {}


def test_k2_ids_repeat_legally_across_separate_conversations() -> None:
    first = exchange(tool_req(), answer(call()))
    second = exchange(tool_req(messages=[{"role": "user", "content": "Weather in Osaka?"}]), answer(call()))
    assert found(first, second) == {}


def test_a_minted_id_repeated_is_the_parsers() -> None:
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [call(id=MINTED)]},
        {"role": "tool", "tool_call_id": MINTED, "content": "sunny"},
    ]
    ex = exchange(tool_req(model=HERMES, messages=history), answer(call(id=MINTED), model=HERMES))
    assert found(ex) == {"tool-call-id-reused": "parser"}


def test_reused_ids_are_found_on_responses_and_messages() -> None:
    # openai-agents sends the history as function_call / function_call_output items
    items = [
        {"role": "user", "content": "Weather in Tokyo?"},
        {
            "type": "function_call",
            "call_id": aw.CALL_ID,
            "name": "get_weather",
            "arguments": aw.ARGS,
            "id": "fc_0",
        },
        {"type": "function_call_output", "call_id": aw.CALL_ID, "output": "sunny"},
    ]
    resp = aw.api_exchange(RESP, aw.responses_req(input=items), aw.responses_body())
    assert found(resp) == {"tool-call-id-reused": "model"}
    next_id = aw.responses_body()
    next_id["output"][-1]["call_id"] = "functions.get_weather:1"
    assert found(aw.api_exchange(RESP, aw.responses_req(input=items), next_id)) == {}
    msgs = aw.messages_req(messages=_anthropic_history(aw.CALL_ID))
    assert found(aw.api_exchange(MSG, msgs, aw.messages_body())) == {"tool-call-id-reused": "model"}


def test_a_continued_stored_response_shows_only_results() -> None:
    """With previous_response_id the calls are on the server: a result alone is no orphan, and its
    id still counts as used."""
    items = [{"type": "function_call_output", "call_id": aw.CALL_ID, "output": "sunny"}]
    req = aw.responses_req(input=items, previous_response_id="resp_0123")
    assert found(aw.api_exchange(RESP, req, aw.response_object([aw.message_item("Sunny.")]))) == {}
    assert found(aw.api_exchange(RESP, req, aw.responses_body())) == {"tool-call-id-reused": "model"}
    # without it, the same input answers a call nobody made
    bare = aw.responses_req(input=items)
    assert "request-orphan-tool-call-id" in found(
        aw.api_exchange(RESP, bare, aw.response_object([aw.message_item("Sunny.")]))
    )


# --- every call answered, roles kept --------------------------------------------------------------------


def _two_calls(*after: dict[str, Any]) -> list[dict[str, Any]]:
    calls = [call(), call("search", {"q": "x"}, idx=1)]
    return [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *after,
    ]


def _result(tid: str, content: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": tid, "content": content}


LEGAL_HISTORIES = {
    "results in another order than the calls": _two_calls(
        _result("functions.search:1"), _result("functions.get_weather:0")
    ),
    "a system turn between call and result": _two_calls(
        {"role": "system", "content": "Reminder: be brief."},
        _result("functions.get_weather:0"),
        _result("functions.search:1"),
    ),
    "results then the next question": _two_calls(
        _result("functions.get_weather:0"),
        _result("functions.search:1"),
        {"role": "user", "content": "and Osaka?"},
    ),
}


@pytest.mark.parametrize("name", sorted(LEGAL_HISTORIES))
def test_legal_histories_check_clean(name: str) -> None:
    ex = exchange(tool_req(messages=LEGAL_HISTORIES[name]), completion(message("Sunny.")))
    assert found(ex) == {}


def test_a_call_left_without_its_result_is_the_callers() -> None:
    history = _two_calls(_result("functions.get_weather:0"), {"role": "user", "content": "and Osaka?"})
    [f] = [
        f
        for f in run(exchange(tool_req(messages=history), completion()))
        if f.rule == "request-tool-call-unanswered"
    ]
    assert str(f.fault) == "caller" and "functions.search:1" in f.message
    # the history may end on the call: still unanswered
    ended = _two_calls(_result("functions.get_weather:0"))
    assert "request-tool-call-unanswered" in found(exchange(tool_req(messages=ended), completion()))


def test_a_tool_result_in_an_assistant_turn_answers_nothing() -> None:
    """vLLM flattens it into text (``Tool result: ...``): the call is unanswered and the turn misplaced."""
    msgs = _anthropic_history(aw.CALL_ID)
    msgs[2]["role"] = "assistant"
    got = found(aw.api_exchange(MSG, aw.messages_req(messages=msgs), aw.text_message("Sunny.")))
    assert got == {"request-role-misplaced": "caller", "request-tool-call-unanswered": "caller"}, got
    assert (
        found(
            aw.api_exchange(
                MSG, aw.messages_req(messages=_anthropic_history(aw.CALL_ID)), aw.text_message("Sunny.")
            )
        )
        == {}
    )


def test_tool_calls_on_a_user_turn_are_misplaced() -> None:
    history = [{"role": "user", "content": "x", "tool_calls": [call()]}, _result("functions.get_weather:0")]
    assert "request-role-misplaced" in found(exchange(tool_req(messages=history), completion()))


# --- builders ---------------------------------------------------------------------------------------------


def _anthropic_history(call_id: str) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Weather in Tokyo?"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": call_id, "name": "get_weather", "input": {"city": "Tokyo"}}
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": "sunny"}]},
    ]
