"""A gateway that bridges APIs (a Messages or Responses caller in front of the engine's chat
completions, as LiteLLM's bridges do) is paired across the APIs and judged on meaning: a faithful
bridge raises nothing, whatever it respells; what it loses or changes is the gateway's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import apiwire as aw
from tests.support import wire
from tests.support.wire import call, completion, exchange, message, usage_counts
from wirecheck.contracts import (
    CheckConfig,
    Chunk,
    Exchange,
    HttpRequest,
    HttpResponse,
    build_view,
    check_exchanges,
    pair_taps,
)

THINKING = "I should call the weather tool."
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": wire.WEATHER["function"]["parameters"],
        },
    }
]


def at(ex: Exchange, ms: float, tap: str) -> Exchange:
    ex.tap = tap
    ex.started_at = f"2026-12-03T10:00:{ms / 1000:06.3f}+00:00"
    return ex


def api(path: str, request: dict[str, Any], response: Any, ms: float, *, status: int = 200) -> Exchange:
    """A caller-side Messages or Responses exchange at ``ms``."""
    ex = aw.api_exchange(path, request, response)
    if status != 200 and ex.response is not None:
        ex.response.status = status
    return at(ex, ms, "caller")


def chat(request: dict[str, Any], response: Any, ms: float) -> Exchange:
    """An engine-side chat completion at ``ms`` (a list of chunks is a stream)."""
    if isinstance(response, list):
        return at(wire.streamed(request, response), ms, "engine")
    return at(exchange(request, response), ms, "engine")


def chat_req(**kw: Any) -> dict[str, Any]:
    """What a bridge sends the engine for aw.messages_req(): the same question, chat's shapes."""
    body: dict[str, Any] = {
        "model": wire.K2,
        "messages": [{"role": "user", "content": "What is the weather in Tokyo?"}],
        "max_tokens": 256,
        "tools": CHAT_TOOLS,
    }
    body.update(kw)
    return body


def engine_call(args: str = aw.ARGS, finish: str = "tool_calls", **usage: Any) -> dict[str, Any]:
    counts = usage_counts(20, 12, **usage)
    return completion(message(None, tool_calls=[call(args=args)], reasoning=THINKING), finish, usage=counts)


def messages_answer(**changes: Any) -> dict[str, Any]:
    """A Messages answer to engine_call(): vLLM's header id respelled for Anthropic's id pattern."""
    body = aw.messages_body()
    body["content"][1]["id"] = "functions_get_weather_0"
    body.update(changes)
    return body


def findings(exs: list[Exchange]) -> list[tuple[str, str, str]]:
    return sorted((f.rule, str(f.fault), f.tap) for f in check_exchanges(exs, CheckConfig()).findings)


def messages(f: list[Exchange]) -> list[str]:
    return [x.message for x in check_exchanges(f, CheckConfig()).findings]


# --- faithful bridges ----------------------------------------------------------------------------


def test_a_faithful_messages_bridge_pairs_across_apis_and_raises_nothing() -> None:
    caller = api("/v1/messages", aw.messages_req(), messages_answer(), 0)
    engine = chat(chat_req(), engine_call(), 15)
    [pair] = pair_taps([build_view(caller), build_view(engine)])
    assert (pair.caller.endpoint, pair.engine.endpoint) == ("messages", "chat")
    # tool_use for chat's tool_calls, input_tokens/output_tokens, the description in another place,
    # an id respelled: translation, not change
    assert findings([caller, engine]) == []


def test_a_faithful_streamed_messages_bridge_raises_nothing() -> None:
    caller = api("/v1/messages", aw.messages_req(stream=True), aw.messages_events(), 0)
    events = wire.k2_tool_stream()
    events.insert(1, wire.chunk({"reasoning": THINKING}))
    events.append(wire.usage_chunk(20, 12))
    engine = chat(chat_req(stream=True, stream_options={"include_usage": True}), events, 12)
    assert findings([caller, engine]) == []


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": 4, "cache_read_input_tokens": 16, "output_tokens": 12},  # vLLM's own reckoning
        {"input_tokens": 20, "cache_read_input_tokens": 16, "output_tokens": 12},  # the whole prompt
    ],
)
def test_anthropic_usage_with_cache_reads_is_the_engines_usage(usage: dict[str, int]) -> None:
    caller = api("/v1/messages", aw.messages_req(), messages_answer(usage=usage), 0)
    engine = chat(chat_req(), engine_call(prompt_tokens_details={"cached_tokens": 16}), 15)
    assert findings([caller, engine]) == []


def test_a_forced_call_ending_stop_at_the_engine_is_tool_use_at_a_messages_caller() -> None:
    # vLLM ends a named tool_choice with finish_reason stop (real-vllm-cpu.md); Messages says tool_use
    forced = {"type": "tool", "name": "get_weather"}
    caller = api("/v1/messages", aw.messages_req(tool_choice=forced), messages_answer(), 0)
    named = {"type": "function", "function": {"name": "get_weather"}}
    engine = chat(chat_req(tool_choice=named), engine_call(finish="stop"), 15)
    assert findings([caller, engine]) == []


def test_a_faithful_responses_bridge_pairs_and_raises_nothing() -> None:
    caller = api("/v1/responses", aw.responses_req(max_output_tokens=256), aw.responses_body(), 0)
    engine = chat(chat_req(), engine_call(), 15)
    [pair] = pair_taps([build_view(caller), build_view(engine)])
    assert (pair.caller.endpoint, pair.engine.endpoint) == ("responses", "chat")
    assert findings([caller, engine]) == []


def test_history_ids_respelled_by_a_bridge_are_the_same_conversation() -> None:
    history = [
        {"role": "user", "content": "What is the weather in Tokyo?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "functions_get_weather_0",
                    "name": "get_weather",
                    "input": {"city": "Tokyo"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "functions_get_weather_0", "content": "sunny"}
            ],
        },
    ]
    text = completion(message("Sunny in Tokyo.", reasoning=THINKING), usage=usage_counts(30, 9))
    answer = messages_answer(
        content=[
            {"type": "thinking", "thinking": THINKING, "signature": "ab12"},
            {"type": "text", "text": "Sunny in Tokyo."},
        ],
        stop_reason="end_turn",
        usage={"input_tokens": 30, "output_tokens": 9},
    )
    caller = api("/v1/messages", aw.messages_req(messages=history), answer, 0)
    sent = chat_req(messages=wire.tool_turn("What is the weather in Tokyo?", "sunny"))
    engine = chat(sent, text, 15)
    assert findings([caller, engine]) == []
    # the result answering another call than in the caller's history is a change
    moved = json.loads(json.dumps(sent))
    moved["messages"][2]["tool_call_id"] = "functions.get_weather:7"
    assert ("gateway-request-changed", "gateway", "caller") in findings([caller, chat(moved, text, 15)])


# --- what a bridge changes -------------------------------------------------------------------------


def test_thinking_turned_off_and_dropped_by_the_bridge_is_found() -> None:
    caller = api("/v1/messages", aw.messages_req(thinking={"type": "disabled"}), messages_answer(), 0)
    faithful = chat(chat_req(reasoning_effort="none"), engine_call(), 15)
    assert findings([caller, faithful]) == []
    dropped = chat(chat_req(), engine_call(), 15)
    [msg] = messages([caller, dropped])
    assert msg.startswith("thinking was off in the caller's request and reached the engine without it")


def test_chat_template_kwargs_dropped_on_the_responses_bridge_is_found() -> None:
    ctk = {"chat_template_kwargs": {"thinking": False}}
    caller = api("/v1/responses", aw.responses_req(max_output_tokens=256, **ctk), aw.responses_body(), 0)
    assert findings([caller, chat(chat_req(**ctk), engine_call(), 15)]) == []
    assert findings([caller, chat(chat_req(), engine_call(), 15)]) == [
        ("gateway-request-changed", "gateway", "caller")
    ]


def test_arguments_the_bridge_repaired_are_found_beside_the_models_broken_ones() -> None:
    caller = api(
        "/v1/messages",
        aw.messages_req(),
        messages_answer(
            content=[messages_answer()["content"][0], {**messages_answer()["content"][1], "input": {}}]
        ),
        0,
    )
    engine = chat(chat_req(), engine_call(args='{"city": Tokyo}'), 15)
    got = check_exchanges([caller, engine], CheckConfig()).findings
    assert ("tool-call-args-invalid-json", "model", "engine") in [(f.rule, str(f.fault), f.tap) for f in got]
    [repaired] = [f for f in got if f.rule == "gateway-tool-calls-changed"]
    assert "arguments repaired" in repaired.message and str(repaired.fault) == "gateway"


def test_an_answer_replaced_by_a_500_after_retries_pairs_with_the_last_attempt() -> None:
    error = {"error": {"message": "Failed to parse tool call arguments", "type": "api_error"}}
    caller = api("/v1/messages", aw.messages_req(), error, 0, status=500)
    caller.response.chunks = [Chunk(3000.0, caller.response.body)]  # type: ignore[union-attr]
    attempts = [chat(chat_req(), engine_call(args='{"city": Tokyo}'), ms) for ms in (20, 900, 2100)]
    [pair] = pair_taps([build_view(x) for x in [caller, *attempts]])
    assert pair.engine.id == attempts[-1].id and [r.id for r in pair.retries] == [a.id for a in attempts[:2]]
    got = findings([caller, *attempts])
    assert ("gateway-status-changed", "gateway", "caller") in got
    assert ("gateway-retried", "gateway", "caller") in got


@pytest.mark.parametrize(
    ("answer", "rule"),
    [
        # the thinking block lost
        (lambda: messages_answer(content=[messages_answer()["content"][1]]), "gateway-reasoning-dropped"),
        # usage recounted
        (lambda: messages_answer(usage={"input_tokens": 99, "output_tokens": 12}), "gateway-usage-changed"),
        # tool_use turned into end_turn
        (lambda: messages_answer(stop_reason="end_turn"), "gateway-finish-reason-changed"),
    ],
)
def test_what_a_messages_bridge_loses_is_the_gateways(answer: Any, rule: str) -> None:
    caller = api("/v1/messages", aw.messages_req(), answer(), 0)
    got = findings([caller, chat(chat_req(), engine_call(), 15)])
    assert (rule, "gateway", "caller") in got and {f[1:] for f in got} == {("gateway", "caller")}


def test_two_calls_given_one_id_by_the_bridge_are_found() -> None:
    calls = [call(), call(args='{"city": "Osaka"}', id="functions.get_weather:1", idx=1)]
    engine = chat(
        chat_req(),
        completion(
            message(None, tool_calls=calls, reasoning=THINKING), "tool_calls", usage=usage_counts(20, 24)
        ),
        15,
    )
    use = messages_answer()["content"][1]
    both = [use, {**use, "input": {"city": "Osaka"}}]  # one id for both
    caller = api(
        "/v1/messages",
        aw.messages_req(),
        messages_answer(
            content=[messages_answer()["content"][0], *both], usage={"input_tokens": 20, "output_tokens": 24}
        ),
        0,
    )
    got = check_exchanges([caller, engine], CheckConfig()).findings
    [dup] = [f for f in got if f.rule == "gateway-tool-calls-changed"]
    assert "call 1" in dup.message and "cannot name its call" in dup.message


def test_a_tool_description_lost_on_the_way_is_found_and_one_moved_is_not() -> None:
    caller = api("/v1/messages", aw.messages_req(), messages_answer(), 0)
    bare = json.loads(json.dumps(CHAT_TOOLS))
    del bare[0]["function"]["description"]
    [msg] = messages([caller, chat(chat_req(tools=bare), engine_call(), 15)])
    assert msg.startswith("tool get_weather: description changed on the way to the engine")


# --- pairing -------------------------------------------------------------------------------------


def test_identical_bridged_requests_pair_by_the_time_each_caller_waited() -> None:
    callers = [api("/v1/messages", aw.messages_req(), messages_answer(), ms) for ms in (0, 400)]
    for c in callers:
        c.response.chunks = [Chunk(300.0, c.response.body)]  # type: ignore[union-attr]
    engines = [chat(chat_req(), engine_call(), ms) for ms in (420, 20)]
    pairs = pair_taps([build_view(x) for x in [*callers, *engines]])
    got = {p.caller.id: p.engine.id for p in pairs}
    assert got == {callers[0].id: engines[1].id, callers[1].id: engines[0].id}


def test_a_side_of_the_callers_own_api_wins_over_a_bridged_one() -> None:
    caller = api("/v1/responses", aw.responses_req(max_output_tokens=256), aw.responses_body(), 0)
    bridged = chat(chat_req(), engine_call(), 10)
    same = at(
        aw.api_exchange("/v1/responses", aw.responses_req(max_output_tokens=256), aw.responses_body()),
        12,
        "engine",
    )
    [pair] = pair_taps([build_view(x) for x in (caller, bridged, same)])
    assert pair.engine.id == same.id


def test_a_bridge_answer_with_other_requests_around_is_not_paired_with_them() -> None:
    caller = api("/v1/messages", aw.messages_req(), messages_answer(id="msg_0123"), 0)
    other = chat(chat_req(messages=[{"role": "user", "content": "Something else?"}]), engine_call(), 10)
    raw = HttpRequest("POST", "/v1/embeddings", [], b'{"input": "x"}')
    unrelated = at(Exchange("emb", request=raw, response=HttpResponse(200, [], b"{}")), 5, "engine")
    assert pair_taps([build_view(x) for x in (caller, other, unrelated)]) == []
