"""The rule catalogue's cases, one failing and one passing each (tests/contracts/test_rules.py runs them):
the builders, and the cases judged on one exchange. The cases that need two taps, twins or the
/v1/responses and /v1/messages framing are in rule_cases_pairs.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.support import apiwire as aw
from tests.support import wire
from tests.support.wire import (
    call,
    chunk,
    completion,
    exchange,
    message,
    per_frame,
    req,
    role_chunk,
    streamed,
    tool_req,
    tool_turn,
    usage_counts,
)
from wirecheck.contracts import CheckConfig, Exchange, ExchangeError, Finding, check_exchanges

Case = Callable[[], list[Exchange]]


def api_stream(path: str, events: list[dict[str, Any]]) -> Exchange:
    request = aw.responses_req(stream=True) if path.endswith("responses") else aw.messages_req(stream=True)
    return aw.api_exchange(path, request, events)


def run(exs: list[Exchange], **cfg: Any) -> list[Finding]:
    cfg.setdefault("direct", True)
    return check_exchanges(exs, CheckConfig(**cfg)).findings


def one(request: dict[str, Any], body: dict[str, Any], **kw: Any) -> Case:
    return lambda: [exchange(request, body, **kw)]


def sse(request: dict[str, Any], objs: list[Any], **kw: Any) -> Case:
    return lambda: [streamed(request, objs, **kw)]


def taps(caller: Exchange, engine: Exchange) -> list[Exchange]:
    caller.tap, engine.tap = "caller", "engine"
    caller.correlation = engine.correlation = f"corr-{caller.id}"
    return [caller, engine]


def tool_msg(*calls: dict[str, Any], finish: str = "tool_calls", **kw: Any) -> dict[str, Any]:
    return completion(message(None, tool_calls=list(calls)), finish, **kw)


def two_calls(*, second_index: int) -> list[dict[str, Any]]:
    """A stream of two whole calls, get_weather at index 0 and search at ``second_index``."""
    return [
        role_chunk(),
        chunk({"tool_calls": [{"index": 0, **call()}]}),
        chunk({"tool_calls": [{"index": second_index, **call("search", {"q": "x"}, idx=1)}]}),
        chunk({}, "tool_calls"),
    ]


def reasoning_only(
    reasoning: str, prompt: int, completion_tokens: int, *, reasoning_tokens: int
) -> dict[str, Any]:
    """An answer of reasoning and no content, whose usage says how many tokens were made (and how many
    of them were reasoning): what two real cases looked like."""
    details = {"reasoning_tokens": reasoning_tokens}
    usage = usage_counts(prompt, completion_tokens, completion_tokens_details=details)
    return completion(message(None, reasoning=reasoning), usage=usage)


def _stopped_by(matched: str) -> dict[str, Any]:
    """A choice that vLLM ended on the stop string ``matched`` (its ``stop_reason``)."""
    choice: dict[str, Any] = completion(message("Hello"))["choices"][0]
    return choice | {"stop_reason": matched}


OK_TOOL = one(tool_req(), tool_msg(call()))
OK_TEXT = one(req(), completion())
HISTORY = tool_turn("weather?", "sunny")
JSON_SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "w",
        "schema": {"type": "object", "properties": {"t": {"type": "number"}}, "required": ["t"]},
    },
}
REASONING = wire.text_stream("Hello", reasoning=("The ", "user"))


def buffered_pair(buffered: bool) -> list[Exchange]:
    objs = wire.text_stream("a", "b", "c", "d", "e")
    engine = per_frame(req(), objs, gap_ms=40)
    caller = per_frame(req(), objs, gap_ms=0.1 if buffered else 40)
    return taps(caller, engine)


def pair(
    c_req: dict[str, Any], c_body: Any, e_req: dict[str, Any] | None = None, e_body: Any = None, **kw: Any
) -> Case:
    """A caller/engine pair; the engine side defaults to the caller side's request and body."""

    def make() -> list[Exchange]:
        e = exchange(e_req or c_req, e_body if e_body is not None else c_body, **kw)
        c = exchange(c_req, c_body, **kw)
        return taps(c, e)

    return make


def stream_pair(
    c_objs: list[Any], e_objs: list[Any], request: dict[str, Any] | None = None, e_done: bool = True
) -> Case:
    def make() -> list[Exchange]:
        r = request or req()
        return taps(streamed(r, c_objs), streamed(r, e_objs, done=e_done))

    return make


def twins(s_objs: list[Any], p_body: dict[str, Any], request: dict[str, Any]) -> Case:
    return lambda: [streamed(request, s_objs), exchange(request, p_body)]


K2_ERR = {"error": {"message": "boom", "type": "InternalServerError", "param": None, "code": 500}}


def cut_capture() -> list[Exchange]:
    """A whole answer that the proxy recorded only in part (its record limit)."""
    [ex] = OK_TEXT()
    assert ex.response is not None
    size = len(ex.response.body)
    ex.response.body = ex.response.body[:20]
    ex.extra["truncated"] = {"response": {"recorded": 20, "size": size}}
    return [ex]


# rule id -> (failing case, passing case, fault of the failing case)
SINGLE: dict[str, tuple[Case, Case, str]] = {
    "capture-truncated": (cut_capture, OK_TEXT, "unknown"),
    # --- tools
    "tool-call-undeclared": (one(tool_req(), tool_msg(call("delete_all", "{}"))), OK_TOOL, "model"),
    "tool-call-shape": (
        one(
            tool_req(),
            tool_msg(
                {
                    "id": "x",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": {"city": "Tokyo"}},
                }
            ),
        ),
        OK_TOOL,
        "parser",
    ),
    "tool-call-args-invalid-json": (
        one(tool_req(), tool_msg(call(args='{"city": Tokyo}'))),
        OK_TOOL,
        "model",
    ),
    "tool-call-args-truncated": (
        one(tool_req(max_tokens=20), tool_msg(call(args='{"city": "To'), finish="length")),
        one(tool_req(max_tokens=20), tool_msg(call(), finish="length")),
        "caller",
    ),
    "tool-call-args-not-object": (
        one(tool_req(), tool_msg(call(args=json.dumps('{"city": "Tokyo"}')))),
        OK_TOOL,
        "model",
    ),
    "tool-call-args-schema": (
        one(tool_req(), tool_msg(call(args={"city": "Tokyo", "days": 30}))),
        one(tool_req(), tool_msg(call(args={"city": "Tokyo", "days": 3}))),
        "model",
    ),
    "tool-call-id-missing": (
        one(
            tool_req(), tool_msg({"type": "function", "function": {"name": "get_weather", "arguments": "{}"}})
        ),
        OK_TOOL,
        "parser",
    ),
    "tool-call-id-duplicate": (
        one(tool_req(), tool_msg(call(id="c1"), call("search", {"q": "x"}, id="c1"))),
        one(tool_req(), tool_msg(call(id="c1"), call("search", {"q": "x"}, id="c2"))),
        "parser",
    ),
    # a K2 model writes its ids itself, counting calls across the conversation
    "tool-call-id-reused": (
        one(tool_req(messages=HISTORY), tool_msg(call())),
        one(tool_req(messages=HISTORY), tool_msg(call(idx=1))),
        "model",
    ),
    "tool-call-id-format": (
        one(tool_req(), tool_msg(call("search", {"q": "x"}, id="search:0"))),
        one(tool_req(), tool_msg(call("search", {"q": "x"}, idx=0))),
        "model",
    ),
    "tool-choice-violated": (
        one(tool_req(tool_choice="required"), completion(message("It is sunny."))),
        one(tool_req(tool_choice="required"), tool_msg(call())),
        "model",
    ),
    "parallel-tool-calls-violated": (
        one(tool_req(parallel_tool_calls=False), tool_msg(call(), call("search", {"q": "x"}, idx=1))),
        one(tool_req(parallel_tool_calls=False), tool_msg(call())),
        "engine",
    ),
    "finish-reason-mismatch": (one(tool_req(), completion(message("hi"), "tool_calls")), OK_TOOL, "parser"),
    "stop-sequence-unrequested": (
        one(req(), completion(message("Hello")) | {"choices": [_stopped_by("###")]}),
        one(req(stop=["###"]), completion(message("Hello")) | {"choices": [_stopped_by("###")]}),
        "engine",
    ),
    "finish-reason-missing": (
        sse(req(), [role_chunk(), chunk({"content": "hi"})]),
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
    # --- markup
    "tool-markup-in-content": (
        one(
            tool_req(),
            completion(
                message(
                    '<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Tokyo"}<|tool_call_end|><|tool_calls_section_end|>'
                )
            ),
        ),
        OK_TOOL,
        "parser",
    ),
    "tool-call-in-reasoning": (
        one(
            tool_req(),
            completion(
                message(
                    "ok",
                    reasoning='Let me call <|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>',
                )
            ),
        ),
        one(tool_req(), completion(message("ok", reasoning="I will call the weather tool."))),
        "parser",  # vLLM's parsers end reasoning where a call opens: one left there was not handed over
    ),
    "reasoning-markup-in-content": (
        one(req(), completion(message("I think so.</think>Hello"))),
        OK_TEXT,
        "parser",
    ),
    "special-token-leak": (
        one(req(model=wire.K3), completion(message("Hello<|close|>message<|sep|>"), model=wire.K3)),
        one(req(model=wire.K3), completion(message("Hello"), model=wire.K3)),
        "parser",
    ),
    # --- reasoning
    "reasoning-missing": (
        one(req(chat_template_kwargs={"thinking": True}), completion(message("Hello"))),
        one(
            req(chat_template_kwargs={"thinking": True}),
            completion(message("Hello", reasoning="The user greets.")),
        ),
        "parser",
    ),
    # seen on a real vLLM 0.32: a header without :N dropped silently (usage shows the
    # tokens), and a thinking that never closed (usage: reasoning only, plus EOS)
    "answer-empty": (
        # 20 tokens written after the reasoning and none on the wire: the parser dropped them
        one(tool_req(), reasoning_only("I call tools.", 186, 24, reasoning_tokens=4)),
        one(tool_req(), completion(message("Sunny.", reasoning="I answer."))),
        "parser",
    ),
    "reasoning-unclosed": (
        one(req(), reasoning_only("Thinking forever", 17, 8, reasoning_tokens=7)),
        one(req(), completion(message("Hello", reasoning="Thinking"))),
        "model",
    ),
    "reasoning-unrequested": (
        one(req(include_reasoning=False), completion(message("Hello", reasoning="The user greets."))),
        one(req(include_reasoning=False), completion(message("Hello"))),
        "engine",
    ),
    "reasoning-shape": (
        one(req(), completion(message("Hello", reasoning={"text": "x"}))),
        one(req(), completion(message("Hello", reasoning="x", reasoning_content="x"))),
        "parser",
    ),
    # --- output
    "json-output-invalid": (
        one(req(response_format={"type": "json_object"}), completion(message("```json\n{}\n```"))),
        one(req(response_format={"type": "json_object"}), completion(message('{"a": 1}'))),
        "engine",
    ),
    "json-output-truncated": (
        one(
            req(response_format={"type": "json_object"}, max_tokens=5),
            completion(message('{"a": '), "length"),
        ),
        one(
            req(response_format={"type": "json_object"}, max_tokens=5),
            completion(message('{"a": 1}'), "length"),
        ),
        "caller",
    ),
    "json-output-schema": (
        one(req(response_format=JSON_SCHEMA), completion(message('{"t": "hot"}'))),
        one(req(response_format=JSON_SCHEMA), completion(message('{"t": 21.5}'))),
        "engine",
    ),
    "structured-output-violated": (
        one(req(structured_outputs={"choice": ["yes", "no"]}), completion(message("maybe"))),
        one(req(structured_outputs={"choice": ["yes", "no"]}), completion(message("yes"))),
        "engine",
    ),
    # --- stream framing
    "stream-malformed-frame": (
        lambda: [
            exchange(
                req(stream=True),
                wire.frames(role_chunk())[:-16] + b'\n\n{"choices":[]}\n\ndata: [DONE]\n\n',
                stream=True,
            )
        ],
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
    "stream-done-missing": (
        sse(req(), wire.text_stream("hi"), done=False),
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
    "stream-done-repeated": (
        sse(req(), [*wire.text_stream("hi"), "[DONE]"]),
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
    "stream-data-after-done": (
        lambda: [
            exchange(
                req(stream=True),
                wire.frames(*wire.text_stream("hi")) + wire.frames(chunk({"content": "x"}), done=False),
                stream=True,
            )
        ],
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
    "stream-error-frame": (
        sse(req(), [role_chunk(), chunk({"content": "He"}), K2_ERR]),
        sse(req(), wire.text_stream("He")),
        "engine",
    ),
    "stream-tool-index-gap": (
        sse(
            tool_req(),
            [role_chunk(), chunk({"tool_calls": [{"index": 1, **call()}]}), chunk({}, "tool_calls")],
        ),
        sse(tool_req(), wire.k2_tool_stream()),
        "parser",
    ),
    "stream-tool-index-reuse": (
        sse(tool_req(), two_calls(second_index=0)),
        sse(tool_req(), two_calls(second_index=1)),
        "parser",
    ),
    "stream-tool-id-repeated": (
        sse(
            tool_req(),
            [
                role_chunk(),
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city"'},
                            }
                        ]
                    }
                ),
                chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"arguments": ': "x"}'}}]}),
                chunk({}, "tool_calls"),
            ],
        ),
        sse(tool_req(), wire.k2_tool_stream()),
        "parser",
    ),
    "stream-usage-missing": (
        sse(req(stream_options={"include_usage": True}), wire.text_stream("hi")),
        sse(req(stream_options={"include_usage": True}), wire.text_stream("hi", usage=True)),
        "engine",
    ),
    "stream-output-after-finish": (
        sse(req(), [role_chunk(), chunk({}, "stop"), chunk({"content": "more"})]),
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
    "stream-inconsistent": (
        sse(req(), [role_chunk(), chunk({"content": "a"}, id="chatcmpl-other"), chunk({}, "stop")]),
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
    "stream-content-type": (
        lambda: [
            exchange(
                req(stream=True), wire.frames(*wire.text_stream("hi")), stream=True, content_type="text/plain"
            )
        ],
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
    "stream-not-streamed": (
        one(req(stream=True), completion()),
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
    # --- limits: arguments nested thousands of levels deep
    "json-limit": (
        one(tool_req(), tool_msg(call(args='{"a": ' + "[" * 5000 + "]" * 5000 + "}"))),
        OK_TOOL,
        "model",
    ),
    # --- request
    "request-malformed": (
        lambda: [exchange(b'{"model": "x", "messages": [', completion())],
        OK_TEXT,
        "caller",
    ),
    "request-orphan-tool-call-id": (
        one(
            tool_req(
                messages=[
                    {"role": "user", "content": "x"},
                    {"role": "tool", "tool_call_id": "nope", "content": "r"},
                ]
            ),
            completion(),
        ),
        one(tool_req(messages=HISTORY), completion()),
        "caller",
    ),
    "request-tool-call-unanswered": (
        one(tool_req(messages=[*HISTORY[:2], {"role": "user", "content": "and Osaka?"}]), completion()),
        one(tool_req(messages=HISTORY), completion()),
        "caller",
    ),
    "request-role-misplaced": (
        one(tool_req(messages=[{"role": "user", "content": "x", "tool_calls": [call()]}]), completion()),
        one(tool_req(messages=HISTORY), completion()),
        "caller",
    ),
    "request-guided-fields": (
        one(req(guided_json={"type": "object"}), completion()),
        one(req(structured_outputs={"json": {"type": "object"}}), completion(message("{}"))),
        "caller",
    ),
    "request-empty-tools": (one(req(tools=[]), completion()), OK_TOOL, "caller"),
    "request-tool-schema-invalid": (
        one(
            req(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "objekt"}}}]),
            completion(),
        ),
        OK_TOOL,
        "caller",
    ),
    # --- http and transport
    "http-server-error": (one(req(), K2_ERR, status=500), OK_TEXT, "engine"),
    "http-client-error": (
        one(
            req(),
            {
                "error": {
                    "message": "bad (parameter=tools, value=[])",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            },
            status=400,
        ),
        OK_TEXT,
        "caller",
    ),
    "error-body-shape": (
        one(req(), {"detail": "oops"}, status=500),
        one(req(), {"error": "Unauthorized"}, status=401),
        "engine",
    ),
    "response-malformed": (one(req(), {"id": "x", "object": "chat.completion"}), OK_TEXT, "engine"),
    "transport-error": (
        lambda: [
            exchange(
                req(stream=True),
                wire.frames(role_chunk(), done=False),
                stream=True,
                error=ExchangeError("upstream_reset", "connection reset", 12.0),
            )
        ],
        sse(req(), wire.text_stream("hi")),
        "engine",
    ),
}
