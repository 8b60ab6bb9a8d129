"""Request parameters change what the answer must hold, and differently per endpoint: each is judged
as vLLM 0.32 applies it (entrypoints/openai/chat_completion and responses protocol.py and
serving.py, entrypoints/anthropic/serving.py). Every case names a legal variant that stays clean."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support import apiwire as aw
from tests.support import wire
from tests.support.wire import (
    call,
    chunk,
    completion,
    exchange,
    message,
    req,
    role_chunk,
    streamed,
    tool_req,
    usage_counts,
)
from wirecheck.contracts import CheckConfig, Exchange, Finding, check_exchanges

RESP, MSG = "/v1/responses", "/v1/messages"
CODER = "Qwen/Qwen3-Coder-30B-A3B-Instruct"
DEEPSEEK = "deepseek-ai/DeepSeek-V3.1"
UNKNOWN = "acme/house-model-7b"


def run(*exs: Exchange) -> list[Finding]:
    return check_exchanges(list(exs), CheckConfig(direct=True)).findings


def hits(ex: Exchange, rule_id: str) -> list[Finding]:
    return [f for f in run(ex) if f.rule == rule_id]


def clean(ex: Exchange) -> list[tuple[str, str]]:
    return [(f.rule, f.message) for f in run(ex) if f.severity != "info"]


def body(path: str, request: dict[str, Any], response: dict[str, Any] | list[dict[str, Any]]) -> Exchange:
    return aw.api_exchange(path, request, response)


# --- tools: [] and tool_choice without tools, per endpoint ------------------------------------------


def test_an_empty_tools_list_is_the_callers_on_chat_only() -> None:
    [f] = hits(exchange(req(tools=[]), completion()), "request-empty-tools")
    assert str(f.fault) == "caller"
    # openai-agents sends tools: [] (and tool_choice auto) on every Responses request without tools
    agents = aw.responses_req(tools=[], tool_choice="auto", parallel_tool_calls=False)
    assert clean(body(RESP, agents, aw.response_object([aw.message_item("Hi")]))) == []
    assert clean(body(MSG, aw.messages_req(tools=[]), aw.text_message("Hi"))) == []


@pytest.mark.parametrize(
    ("path", "sent", "rejected"),
    [
        ("chat", req(tool_choice="auto"), True),  # vLLM: "When using `tool_choice`, `tools` must be set."
        ("chat", req(tool_choice="none"), False),
        (RESP, aw.responses_req(tools=[], tool_choice="required"), True),
        (RESP, aw.responses_req(tools=[], tool_choice={"type": "function", "name": "get_weather"}), True),
        (RESP, aw.responses_req(tools=[], tool_choice="none"), False),
        (MSG, aw.messages_req(tools=None, tool_choice={"type": "any"}), True),
        (MSG, aw.messages_req(tools=None, tool_choice={"type": "auto"}), False),
    ],
)
def test_tool_choice_without_tools(path: str, sent: dict[str, Any], rejected: bool) -> None:
    request = {k: v for k, v in sent.items() if v is not None}
    if path == "chat":
        ex = exchange(request, completion())
    elif path == RESP:
        ex = body(RESP, request, aw.response_object([aw.message_item("Hi")]))
    else:
        ex = body(MSG, request, aw.text_message("Hi"))
    assert bool(hits(ex, "request-empty-tools")) == rejected


# --- reasoning: what turns it on and off -------------------------------------------------------------


def _plain(model: str = wire.K2, **kw: Any) -> Exchange:
    return exchange(req(model=model, **kw), completion(message("Hello"), model=model))


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
        (wire.K2, {"reasoning_effort": "high"}, True),
        (wire.K2, {"reasoning_effort": "none"}, False),
        (wire.K2, {"reasoning_effort": "high", "include_reasoning": False}, False),
        (wire.K2, {"chat_template_kwargs": {"thinking": True}, "include_reasoning": False}, False),
        # the caller's kwargs win over the effort (build_chat_params sets enable_thinking only when absent)
        (wire.K2, {"reasoning_effort": "high", "chat_template_kwargs": {"enable_thinking": False}}, False),
        (DEEPSEEK, {"reasoning_effort": "low"}, True),
        # a family without a reasoning parser never sends the field; a model the family table does
        # not know is taken at the request's word
        (CODER, {"reasoning_effort": "high"}, False),
        (CODER, {"chat_template_kwargs": {"enable_thinking": True}}, False),
        (UNKNOWN, {"reasoning_effort": "high"}, True),
        (UNKNOWN, {"chat_template_kwargs": {"thinking": True}}, True),
    ],
)
def test_reasoning_is_expected_as_the_request_and_the_model_make_it(
    model: str, params: dict[str, Any], expected: bool
) -> None:
    assert bool(hits(_plain(model, **params), "reasoning-missing")) == expected


def test_responses_and_messages_turn_reasoning_on_and_off_their_own_way() -> None:
    no_reasoning = aw.response_object([aw.message_item("Hello")])
    assert hits(body(RESP, aw.responses_req(reasoning={"effort": "high"}), no_reasoning), "reasoning-missing")
    assert not hits(
        body(RESP, aw.responses_req(reasoning={"effort": "high"}, include_reasoning=False), no_reasoning),
        "reasoning-missing",
    )
    no_thinking = aw.text_message("Hello")
    enabled = {"type": "enabled", "budget_tokens": 2048}
    assert hits(body(MSG, aw.messages_req(thinking=enabled), no_thinking), "reasoning-missing")
    assert hits(
        body(MSG, aw.messages_req(output_config={"effort": "high"}), no_thinking), "reasoning-missing"
    )
    # thinking enabled only sets a budget: a family that does not think unasked is not told to
    deepseek = aw.messages_req(model=DEEPSEEK, thinking=enabled)
    assert not hits(body(MSG, deepseek, no_thinking | {"model": DEEPSEEK}), "reasoning-missing")
    disabled = aw.messages_req(thinking={"type": "disabled"}, output_config={"effort": "high"})
    assert not hits(body(MSG, disabled, no_thinking), "reasoning-missing")


def test_reasoning_sent_although_include_reasoning_is_false_is_the_servers() -> None:
    [f] = hits(_with_reasoning(include_reasoning=False), "reasoning-unrequested")
    assert str(f.fault) == "engine"
    resp = aw.responses_req(include_reasoning=False)
    assert hits(body(RESP, resp, aw.responses_body()), "reasoning-unrequested")
    legal = aw.response_object([aw.call_item()])
    assert clean(body(RESP, resp, legal)) == []


def _with_reasoning(**kw: Any) -> Exchange:
    return exchange(req(**kw), completion(message("Hello", reasoning="The user greets.")))


# --- tool_choice forms ---------------------------------------------------------------------------


def test_a_call_written_under_tool_choice_none_is_the_models() -> None:
    markup = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{}"
    )
    ex = exchange(tool_req(tool_choice="none"), completion(message(markup)))
    found = {f.rule: str(f.fault) for f in run(ex)}
    assert found.get("tool-choice-violated") == "model"
    assert "tool-markup-in-content" not in found
    # under auto the same text is the parser's
    auto = {f.rule: str(f.fault) for f in run(exchange(tool_req(), completion(message(markup))))}
    assert auto.get("tool-markup-in-content") == "parser"


def test_messages_forced_tool_choice_answers_with_tool_use() -> None:
    named = aw.messages_req(tool_choice={"type": "tool", "name": "get_weather"})
    assert clean(body(MSG, named, aw.messages_body())) == []
    # vLLM reports tool_use for any complete call, forced or not
    ended = aw.messages_body() | {"stop_reason": "end_turn"}
    [f] = hits(body(MSG, named, ended), "finish-reason-mismatch")
    assert f.severity == "error"
    text = aw.text_message("Sunny")
    assert hits(body(MSG, aw.messages_req(tool_choice={"type": "any"}), text), "tool-choice-violated")


def test_parallel_tool_calls_false_keeps_one_call() -> None:
    two = aw.messages_body()
    two["content"].append(two["content"][-1] | {"id": "functions.get_weather:1", "input": {"city": "Osaka"}})
    only = aw.messages_req(tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    [f] = hits(body(MSG, only, two), "parallel-tool-calls-violated")
    assert str(f.fault) == "engine"  # vLLM keeps the first call itself
    assert clean(body(MSG, only, aw.messages_body())) == []
    # chat, streamed: the dropped call leaves no trace, and none is expected
    ex = streamed(tool_req(parallel_tool_calls=False), wire.k2_tool_stream())
    assert clean(ex) == []


# --- limits: max_tokens, max_completion_tokens, stop sequences ----------------------------------------


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    cut = completion(
        message(None, tool_calls=[call(args='{"city": "To')]),
        "tool_calls",
        usage=usage_counts(12, 10),
    )
    [f] = hits(exchange(tool_req(max_completion_tokens=10, max_tokens=1000), cut), "tool-call-args-truncated")
    assert str(f.fault) == "caller" and "max_tokens=10" in f.message


def test_a_stop_sequence_that_cut_a_call_is_the_callers() -> None:
    # a streamed answer may end mid-arguments on a stop string; vLLM then keeps stop_sequence
    events = aw.messages_events(
        args_pieces=('{"city": "To',), stop_reason="stop_sequence", stop_sequence="###"
    )
    ex = aw.api_exchange(MSG, aw.messages_req(stream=True, stop_sequences=["###"]), events)
    found = {f.rule: str(f.fault) for f in run(ex)}
    assert found == {"tool-call-args-truncated": "caller"}, found
    # a complete call with stop_sequence: vLLM would have said tool_use
    whole = aw.messages_events(stop_reason="stop_sequence", stop_sequence="###")
    ex = aw.api_exchange(MSG, aw.messages_req(stream=True, stop_sequences=["###"]), whole)
    assert hits(ex, "finish-reason-mismatch")


def test_a_stop_sequence_the_request_never_set_is_a_warning() -> None:
    events = aw.messages_events(
        args_pieces=(), text=("Sunny",), stop_reason="stop_sequence", stop_sequence="###"
    )
    [f] = hits(aw.api_exchange(MSG, aw.messages_req(stream=True), events), "stop-sequence-unrequested")
    assert f.severity == "warning"


# --- n > 1, stream_options, structured output -------------------------------------------------------


def test_several_choices_are_legal_streamed_and_not() -> None:
    two = completion(message("Hello"))
    two["choices"].append(two["choices"][0] | {"index": 1, "message": message("Hi")})
    assert clean(exchange(req(n=2), two)) == []
    objs = [
        role_chunk(),
        chunk({"role": "assistant", "content": ""}, index=1),
        chunk({"content": "Hel"}),
        chunk({"content": "Hi"}, index=1),
        chunk({"content": "lo"}),
        chunk({}, "stop", index=1),
        chunk({}, "stop"),
        wire.usage_chunk(),
    ]
    assert clean(streamed(req(n=2, stream_options={"include_usage": True}), objs)) == []


def test_continuous_usage_on_every_chunk_is_legal() -> None:
    usage = usage_counts(12, 1)
    objs = [
        role_chunk(),
        chunk({"content": "Hi"}, usage=usage),
        chunk({}, "stop", usage=usage),
        wire.usage_chunk(),
    ]
    so = {"include_usage": True, "continuous_usage_stats": True}
    assert clean(streamed(req(stream_options=so), objs)) == []


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_structured_output_is_judged_on_every_endpoint() -> None:
    bad, good = '{"town": "Tokyo"}', '{"city": "Tokyo"}'
    resp = aw.responses_req(tools=[], text={"format": {"type": "json_schema", "name": "w", "schema": SCHEMA}})
    assert hits(body(RESP, resp, aw.response_object([aw.message_item(bad)])), "json-output-schema")
    assert clean(body(RESP, resp, aw.response_object([aw.message_item(good)]))) == []
    # Anthropic structured output: output_config.format, the schema under "schema" (vLLM honours it)
    msg = aw.messages_req(tools=None, output_config={"format": {"type": "json_schema", "schema": SCHEMA}})
    msg = {k: v for k, v in msg.items() if v is not None}
    [f] = hits(body(MSG, msg, aw.text_message(bad)), "json-output-schema")
    assert str(f.fault) == "engine"  # vLLM decodes under the schema
    assert clean(body(MSG, msg, aw.text_message(good))) == []
    assert hits(body(MSG, msg, aw.text_message("Sure! Tokyo.")), "json-output-invalid")
    regex = aw.responses_req(tools=[], structured_outputs={"regex": "[0-9]+"})
    assert hits(
        body(RESP, regex, aw.response_object([aw.message_item("twelve")])), "structured-output-violated"
    )
    assert clean(body(RESP, regex, aw.response_object([aw.message_item("12")]))) == []


# --- a server older than the API its clients speak -----------------------------------------------------


def _rejected(request: dict[str, Any], value: str) -> Exchange:
    """vLLM's 400 for a request its pydantic model cannot read, naming the ``value`` it rejected."""
    msg = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'messages', 1, 'content', 0, 'type'), "
        f"'msg': \"Input should be 'text', 'image', 'tool_use' or 'tool_result'\", 'input': '{value}'}}"
    )
    err = {"error": {"message": msg, "type": "BadRequestError", "param": None, "code": 400}}
    return _status(MSG, request, err, 400)


def _status(path: str, request: dict[str, Any], response: dict[str, Any], status: int) -> Exchange:
    ex = aw.api_exchange(path, request, response)
    assert ex.response is not None
    ex.response.status = status
    return ex


def test_a_legal_block_the_server_cannot_read_is_the_servers() -> None:
    thinking = {"type": "thinking", "thinking": "Read the file.", "signature": ""}
    history = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": [thinking, {"type": "text", "text": "Checking."}]},
        {"role": "user", "content": "Go on."},
    ]
    [f] = hits(_rejected(aw.messages_req(messages=history), "thinking"), "http-client-error")
    assert str(f.fault) == "engine" and "thinking" in f.message
    # a block type no API defines is the caller's
    history[1]["content"][0] = {"type": "scratchpad", "text": "x"}
    [g] = hits(_rejected(aw.messages_req(messages=history), "scratchpad"), "http-client-error")
    assert str(g.fault) == "caller"


def test_an_explicit_null_the_api_allows_is_refused_by_the_server() -> None:
    """OpenAI accepts ``"id": null`` on an input item (SDKs send it); vLLM 0.27 refused it (vllm #54224)."""
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "A river in Spain?"}]},
        {
            "type": "message",
            "role": "assistant",
            "id": None,
            "content": [{"type": "output_text", "text": "Ebro."}],
        },
    ]
    msg = (
        "1 validation error for ResponsesRequest\ninput.list[...].1.ResponseOutputMessage.id\n  Input should be "
        "a valid string [type=string_type, input_value=None, input_type=NoneType]"
    )
    err = {"error": {"message": msg, "type": "BadRequestError", "param": None, "code": 400}}
    [f] = hits(_status(RESP, aw.responses_req(input=items), err, 400), "http-client-error")
    assert str(f.fault) == "engine" and "null id" in f.message
    # a null where the API wants a value is the caller's
    items[0]["content"] = None
    msg = msg.replace("1.ResponseOutputMessage.id", "0.Message.content").replace("valid string", "valid list")
    err = {"error": {"message": msg, "type": "BadRequestError", "param": None, "code": 400}}
    [g] = hits(_status(RESP, aw.responses_req(input=items), err, 400), "http-client-error")
    assert str(g.fault) == "caller"
