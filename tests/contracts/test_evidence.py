"""Parser, model or engine from the evidence an exchange carries, and the legal shapes that must stay
as their rule decides: the error's own text, the twin with one output, token accounting, markup in
a value."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support import apiwire as aw
from tests.support import wire
from tests.support.wire import call, chunk, completion, exchange, message, req, role_chunk, streamed, tool_req
from wirecheck.contracts import CheckConfig, ExchangeError, check_exchanges
from wirecheck.contracts._evidence import error_origin, wire_tokens
from wirecheck.contracts._view import build_view


def faults(*exs: Any, rule: str | None = None) -> set[tuple[str, str]]:
    got = check_exchanges(list(exs), CheckConfig(direct=True)).findings
    return {(f.rule, str(f.fault)) for f in got if rule is None or f.rule == rule}


def frame(message: str, kind: str = "BadRequestError", code: int = 400) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# --- the error's text ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsing", "origin"),
    [
        # vLLM 0.32's engine failures
        ("EngineCore encountered an issue. See stack trace (above) for the root cause.", True, "engine"),
        ("Internal server error", True, "engine"),
        ("Request failed; please retry", True, "engine"),
        # texts the parsers raise (tool_parsers/, reasoning/, parser/ in vLLM 0.32)
        ("Malformed IFM XML argument tags.", False, "parser"),
        ("No valid tool calls extracted.", False, "parser"),
        (
            "DeepSeek-V3 Tool parser could not locate tool call start/end tokens in the tokenizer!",
            False,
            "parser",
        ),
        ("Tool 'search' has not been passed in `tools`.", False, "parser"),
        # Python's own, where the parsers had output to parse
        ("pop from empty list", True, "parser"),
        ("Expecting value: line 1 column 1 (char 0)", True, "parser"),
        ("list index out of range", True, "parser"),
        ("'NoneType' object has no attribute 'group'", True, "parser"),
        # the same Python text with nothing for a parser to do says nothing
        ("list index out of range", False, None),
        ("something else went wrong", True, None),
    ],
)
def test_an_error_text_says_where_it_was_raised(text: str, parsing: bool, origin: str | None) -> None:
    assert error_origin(text, parsing=parsing) == origin


def test_a_parser_exception_in_a_chat_stream_is_the_parsers_and_an_engine_failure_the_engines() -> None:
    head = [role_chunk(), chunk({"content": "Let me"})]
    crash = streamed(tool_req(), [*head, frame("pop from empty list", "InternalServerError", 500)])
    assert faults(crash, rule="stream-error-frame") == {("stream-error-frame", "parser")}
    dead = frame(
        "EngineCore encountered an issue. See stack trace (above) for the root cause.",
        "InternalServerError",
        500,
    )
    assert faults(streamed(tool_req(), [*head, dead]), rule="stream-error-frame") == {
        ("stream-error-frame", "engine")
    }
    # no tools and no reasoning: Python's text alone is not the parser's
    plain = streamed(req(), [*head, frame("list index out of range", "InternalServerError", 500)])
    assert faults(plain, rule="stream-error-frame") == {("stream-error-frame", "engine")}


def test_a_bare_500_with_tools_is_an_exception_no_handler_took_in_the_parser() -> None:
    bare = exchange(
        tool_req(), b"Internal Server Error", status=500, content_type="text/plain; charset=utf-8"
    )
    assert faults(bare, rule="http-server-error") == {("http-server-error", "parser")}
    shaped = exchange(tool_req(), frame("Internal server error", "InternalServerError", 500), status=500)
    assert faults(shaped, rule="http-server-error") == {("http-server-error", "engine")}


def test_a_parser_json_error_as_a_400_is_the_parsers_but_messages_own_json_loads_the_models() -> None:
    chat400 = exchange(tool_req(), frame("Expecting ',' delimiter: line 1 column 14 (char 13)"), status=400)
    assert faults(chat400, rule="http-client-error") == {("http-client-error", "parser")}
    msg400 = aw.api_exchange(
        "/v1/messages", aw.messages_req(), frame("Expecting value: line 1 column 10 (char 9)")
    )
    msg400.response.status = 400  # type: ignore[union-attr]
    assert faults(msg400, rule="http-client-error") == {("http-client-error", "model")}


def test_a_responses_stream_cut_inside_a_call_is_the_parsers_and_one_cut_before_the_engines() -> None:
    reset = ExchangeError(
        "upstream_reset", "peer closed connection without sending complete message body", 90.0
    )
    events = aw.responses_events()
    inside = aw.api_exchange("/v1/responses", aw.responses_req(stream=True), events[: len(events) - 4])
    inside.error = reset
    assert faults(inside, rule="transport-error") == {("transport-error", "parser")}
    before = aw.api_exchange("/v1/responses", aw.responses_req(stream=True), events[:3])
    before.error = reset
    assert faults(before, rule="transport-error") == {("transport-error", "engine")}


# --- the twin ------------------------------------------------------------------------------------


def twins(
    streamed_args: str,
    plain_args: str,
    *,
    reasoning: tuple[str, str] = ("Call it.", "Call it."),
    used: tuple[int | None, int] = (20, 20),
) -> list[Any]:
    """A streamed answer (with usage when ``used[0]`` is given) and its non-streamed twin."""
    rq = tool_req()
    objs = wire.k2_tool_stream(args=streamed_args)
    objs.insert(1, chunk({"reasoning": reasoning[0]}))
    srq = dict(rq)
    if used[0] is not None:
        objs.append(wire.usage_chunk(12, used[0]))
        srq["stream_options"] = {"include_usage": True}
    plain = completion(
        message(None, tool_calls=[call(args=plain_args)], reasoning=reasoning[1]),
        "tool_calls",
        usage=wire.usage_counts(12, used[1]),
    )
    return [streamed(srq, objs), exchange(rq, plain)]


def test_broken_arguments_only_in_the_stream_of_one_output_are_the_streaming_parsers() -> None:
    got = faults(*twins('{"city": Tokyo}', '{"city": "Tokyo"}'), rule="tool-call-args-invalid-json")
    assert got == {("tool-call-args-invalid-json", "parser")}


def test_broken_arguments_on_both_sides_stay_the_models() -> None:
    got = faults(*twins('{"city": Tokyo}', '{"city": Tokyo}'), rule="tool-call-args-invalid-json")
    assert got == {("tool-call-args-invalid-json", "model")}


@pytest.mark.parametrize(
    "other",
    [
        {"reasoning": ("Hm.", "Call it.")},  # other reasoning: another sample
        {"used": (24, 20)},  # as long a reasoning, another count of tokens: it diverged after it
        {"used": (None, 20)},  # a stream without usage leaves nothing to tell
    ],
)
def test_without_evidence_of_one_output_twins_decide_nothing(other: dict[str, Any]) -> None:
    got = faults(*twins('{"city": Tokyo}', '{"city": "Tokyo"}', **other), rule="tool-call-args-invalid-json")
    assert got == {("tool-call-args-invalid-json", "model")}


def test_coerced_non_streamed_arguments_leave_the_streamed_schema_fault_the_models() -> None:
    # vLLM 0.32 coerces non-streamed values to the schema's types, streamed ones stay as written
    # (real-vllm-cpu.md): the model wrote 3 for a string
    rq = req(tools=[wire.function_tool("get_weather", None, {"city": {"type": "string"}}, ["city"])])
    objs = wire.k2_tool_stream(args='{"city": 3}')
    objs.insert(1, chunk({"reasoning": "Call it."}))
    plain = completion(
        message(None, tool_calls=[call(args='{"city": "3"}')], reasoning="Call it."), "tool_calls"
    )
    got = check_exchanges([streamed(rq, objs), exchange(rq, plain)], CheckConfig(direct=True)).findings
    assert {(f.rule, str(f.fault)) for f in got} == {("tool-call-args-schema", "model")}


def test_reasoning_only_on_one_side_of_the_same_answer_is_the_parsers() -> None:
    rq = req()
    text = wire.text_stream("Hello! How can I help?")
    plain = completion(message("Hello! How can I help?", reasoning="Greet back."))
    got = faults(streamed(rq, text), exchange(rq, plain))
    assert got == {("stream-nonstream-mismatch", "parser")}
    # other answers: another sample, no evidence
    assert faults(streamed(rq, wire.text_stream("Hi there.")), exchange(rq, plain)) == set()


# --- token accounting ----------------------------------------------------------------------------


def _stopped_by(text: str, stop: str, used: int) -> dict[str, Any]:
    body = completion(message(text), usage=wire.usage_counts(9, used))
    body["choices"][0]["stop_reason"] = stop
    return body


def test_tokens_the_wire_cannot_hold_were_dropped_by_the_parser() -> None:
    dropped = completion(
        message("Let me check.", reasoning="Call the tool."), usage=wire.usage_counts(90, 240)
    )
    [f] = check_exchanges([exchange(tool_req(), dropped)], CheckConfig(direct=True)).findings
    assert (f.rule, str(f.fault)) == ("output-tokens-vanished", "parser")
    assert "bounds" in f.message and "tokenizer is not available" in f.message


@pytest.mark.parametrize(
    ("body", "request_kw"),
    [
        # every byte a token, and the markup allowance: still within the bound
        (completion(message("x" * 30, reasoning="y" * 20), usage=wire.usage_counts(9, 70)), {}),
        # cut by the token limit: the parser may hold back a partial call; not judged
        (completion(message("Let me", reasoning="Call."), "length", usage=wire.usage_counts(9, 300)), {}),
        # reasoning hidden by the request: its tokens are not on the wire by design
        (completion(message("Sunny."), usage=wire.usage_counts(9, 300)), {"include_reasoning": False}),
        # the stop string is generated, then cut from the answer (stop_reason names it)
        (_stopped_by("Done", "<END-OF-THE-ANSWER><END-OF-THE-ANSWER>", 40), {}),
    ],
)
def test_what_reached_the_wire_accounts_for_usage_in_legal_shapes(
    body: dict[str, Any], request_kw: dict[str, Any]
) -> None:
    assert faults(exchange(req(**request_kw), body), rule="output-tokens-vanished") == set()


def test_a_finish_chunk_that_carries_text_counts_that_text() -> None:
    # under load vLLM's finish chunk carries the last tokens' text (real-vllm-cpu.md)
    objs = [
        role_chunk(),
        chunk({"content": "Hello"}),
        chunk({"content": " there, all of you."}, "stop"),
        wire.usage_chunk(9, 30),
    ]
    view = build_view(streamed(req(stream_options={"include_usage": True}), objs))
    t = wire_tokens(view)
    assert t is not None and t.vanished == 0 and t.most >= len("Hello there, all of you.")


def test_a_dropped_call_explained_by_another_finding_is_said_once() -> None:
    # the K2 parser drops a header without :N: empty answer, stop; usage shows what was written
    body = completion(
        message(None, reasoning="Run pytest."),
        usage=wire.usage_counts(200, 61, completion_tokens_details={"reasoning_tokens": 4}),
    )
    got = check_exchanges([exchange(tool_req(), body)], CheckConfig(direct=True)).findings
    assert [(f.rule, str(f.fault)) for f in got] == [("answer-empty", "parser")]


# --- markup in a value ---------------------------------------------------------------------------


def test_a_tool_name_with_a_template_token_is_the_parsers_and_an_invented_one_the_models() -> None:
    glued = completion(
        message(None, tool_calls=[call(name="get_weather<|channel|>commentary")]), "tool_calls"
    )
    assert faults(exchange(tool_req(), glued), rule="tool-call-undeclared") == {
        ("tool-call-undeclared", "parser")
    }
    invented = completion(message(None, tool_calls=[call(name="get_weather_v2")]), "tool_calls")
    assert faults(exchange(tool_req(), invented), rule="tool-call-undeclared") == {
        ("tool-call-undeclared", "model")
    }


def test_calls_parsed_out_under_tool_choice_none_are_the_parsers() -> None:
    body = completion(message(None, tool_calls=[call()]), "tool_calls")
    got = faults(exchange(tool_req(tool_choice="none"), body), rule="tool-choice-violated")
    assert got == {("tool-choice-violated", "parser")}
    # a text answer under tool_choice required is the model's (constrained decoding off)
    text = faults(
        exchange(tool_req(tool_choice="required"), completion(message("No."))), rule="tool-choice-violated"
    )
    assert text == {("tool-choice-violated", "model")}


def test_the_evidence_a_finding_was_settled_by_is_kept_with_it() -> None:
    crash = streamed(tool_req(), [role_chunk(), frame("pop from empty list", "InternalServerError", 500)])
    [f] = [
        x
        for x in check_exchanges([crash], CheckConfig(direct=True)).findings
        if x.rule == "stream-error-frame"
    ]
    assert f.evidence["decided_by"]["was"] == "engine" and "parsed" in f.evidence["decided_by"]["why"]
    assert json.dumps(f.to_dict())  # the report outputs carry it as it is


# --- think markup where no reasoning parser was meant to split ----------------------------------

DEEPSEEK = "deepseek-ai/DeepSeek-V3.1"


@pytest.mark.parametrize(
    ("model", "extra", "fault"),
    [
        # DeepSeek V3.1 thinks only when asked: its reasoning parser is the identity one otherwise
        (DEEPSEEK, {}, "model"),
        (DEEPSEEK, {"chat_template_kwargs": {"thinking": True}}, "parser"),
        # Kimi K2 thinks unasked: turned off by the request, or left on
        (wire.K2, {"chat_template_kwargs": {"thinking": False}}, "model"),
        (wire.K2, {"reasoning_effort": "none"}, "model"),
        (wire.K2, {}, "parser"),
        # Qwen3-Coder has no reasoning parser at all
        ("Qwen/Qwen3-Coder-30B-A3B-Instruct", {}, "model"),
        # a model the family table does not know: the parser's, as the rule says
        ("acme/unknown-7b", {}, "parser"),
    ],
)
def test_think_markup_in_content_is_the_models_where_thinking_was_off(
    model: str, extra: dict[str, Any], fault: str
) -> None:
    ex = exchange(req(model=model, **extra), completion(message("<think>I wonder</think>Hello"), model=model))
    assert faults(ex, rule="reasoning-markup-in-content") == {("reasoning-markup-in-content", fault)}


def test_text_after_the_calls_that_only_the_stream_shows_is_no_twin_evidence() -> None:
    """deepseek_v31 on the real 0.32 server: the model writes ``</think>`` after its calls with
    thinking off; the non-streamed parser keeps only the text before the calls, the streamed one
    sends the rest. The markup is the model's: the twin's silence does not make it the parser's."""
    rq = tool_req(model=DEEPSEEK)
    objs = [
        role_chunk(DEEPSEEK),
        chunk({"content": "I call tools."}, model=DEEPSEEK),
        chunk({"tool_calls": [{**call(id="chatcmpl-tool-0123456789abcdef"), "index": 0}]}, model=DEEPSEEK),
        chunk({"content": "</think>"}, model=DEEPSEEK),
        chunk({}, "tool_calls", model=DEEPSEEK),
        wire.usage_chunk(12, 20, model=DEEPSEEK),
    ]
    plain = completion(
        message("I call tools.", tool_calls=[call(id="chatcmpl-tool-0123456789abcdef")]),
        "tool_calls",
        usage=wire.usage_counts(12, 20),
        model=DEEPSEEK,
    )
    got = faults(streamed({**rq, "stream_options": {"include_usage": True}}, objs), exchange(rq, plain))
    assert got == {("reasoning-markup-in-content", "model")}


@pytest.mark.parametrize(
    ("model", "thinking", "fault"),
    [
        # vLLM's Messages serving turns "disabled" into reasoning_effort none; "enabled" only sets a
        # token budget, so DeepSeek V3.1 still does not think
        (wire.K2, {"type": "disabled"}, "model"),
        (wire.K2, {"type": "enabled", "budget_tokens": 1024}, "parser"),
        (DEEPSEEK, {"type": "enabled", "budget_tokens": 1024}, "model"),
    ],
)
def test_messages_thinking_decides_whose_think_markup_it_is(
    model: str, thinking: dict[str, Any], fault: str
) -> None:
    rq = aw.messages_req(model=model, thinking=thinking, max_tokens=2048)
    body = {**aw.text_message("<think>I wonder</think>Hello"), "model": model}
    got = faults(aw.api_exchange("/v1/messages", rq, body), rule="reasoning-markup-in-content")
    assert got == {("reasoning-markup-in-content", fault)}
