"""Chat completions shapes that are legal and must stay clean: no error, no warning.

Each comes from the documentation or source that makes it legal (vLLM 0.32's serving code and
parsers, the OpenAI API reference, LiteLLM's and nginx's documented behaviour), written as the server
sends it.
"""

from __future__ import annotations

from typing import Any

from tests.support.wire import message

from .case import Case, case
from .chat_gateway import LITELLM_SSE, litellm_chunk
from .wire import (
    CHAT,
    Wire,
    chunk,
    completion,
    exchange,
    function_tool,
    role_chunk,
    sse,
    tool_call,
    tool_delta,
    usage,
    usage_chunk,
)

VLLM_TOOLS = "https://docs.vllm.ai/en/latest/features/tool_calling.html"
VLLM_REASONING = "https://docs.vllm.ai/en/latest/features/reasoning_outputs.html"
VLLM_SERVING = (
    "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/openai/chat_completion/serving.py"
)
OPENAI_STREAMING = "https://platform.openai.com/docs/api-reference/chat-streaming"
OPENAI_CHAT = "https://platform.openai.com/docs/api-reference/chat/create"

FLIGHTS = function_tool(
    "search_flights",
    "Find flights between two airports",
    {"origin": {"type": "string"}, "destination": {"type": "string"}, "date": {"type": "string"}},
    ["origin", "destination"],
)
HOTEL = function_tool(
    "book_hotel", "Book a hotel", {"city": {"type": "string"}, "nights": {"type": "integer"}}, ["city"]
)


def _req(model: str, prompt: str, **kw: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": prompt}], **kw}


def _legal(w: Wire, sources: str | tuple[str, ...], what: str, exchanges: list[Any], **cfg: Any) -> Case:
    return case(
        w.case,
        sources=sources,
        api="chat",
        exchanges=exchanges,
        party=None,
        what=what,
        **({"direct": True} | cfg),
    )


def cases() -> list[Case]:
    out: list[Case] = []

    w = Wire("legal-k2-nonstream-tool-call", "moonshotai/Kimi-K2-Thinking", "0.32.0", tp=8)
    body = completion(
        w,
        message(
            None,
            tool_calls=[
                tool_call(
                    "functions.search_flights:0", "search_flights", '{"origin": "HEL", "destination": "NRT"}'
                )
            ],
            reasoning="Flights HEL to NRT.",
        ),
        "tool_calls",
        usage(180, 42, 11),
    )
    out.append(
        _legal(
            w,
            VLLM_TOOLS,
            "a K2 tool call, not streamed",
            [exchange(w, CHAT, _req(w.model, "Flights from Helsinki to Tokyo?", tools=[FLIGHTS]), body)],
        )
    )

    w = Wire("legal-k2-stream-reasoning-then-content-usage", "moonshotai/Kimi-K2-Thinking", "0.32.0", tp=8)
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Short answer."}),
        chunk(w, {"content": "Helsinki"}),
        chunk(w, {"content": " is the capital."}),
        chunk(w, {}, "stop"),
        usage_chunk(w, 12, 20, 4),
    )
    out.append(
        _legal(
            w,
            VLLM_REASONING,
            "reasoning, then content, then the usage-only chunk",
            [
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model,
                        "What is the capital of Finland?",
                        stream=True,
                        stream_options={"include_usage": True},
                    ),
                    frames,
                )
            ],
        )
    )

    # the finish chunk may carry the last text when the engine's last step held both
    w = Wire("legal-text-on-finish-chunk", "moonshotai/Kimi-K2.5", "0.32.0")
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Count."}),
        chunk(w, {"content": "One, two,"}),
        chunk(w, {"content": " three."}, "stop", fingerprint=True),
    )
    out.append(
        _legal(
            w,
            VLLM_SERVING,
            "the last token arrives on the finish chunk",
            [exchange(w, CHAT, _req(w.model, "Count to three.", stream=True), frames)],
        )
    )

    # stream_options.continuous_usage_stats: cumulative usage on every chunk
    w = Wire("legal-continuous-usage-stats", "Qwen/Qwen3-8B", "0.32.0")
    objs = [chunk(w, {"content": p}, usage=usage(31, i + 1)) for i, p in enumerate(["Blue", " whale", "."])]
    frames = sse(
        role_chunk(w, usage=usage(31, 0)),
        *objs,
        chunk(w, {}, "stop", usage=usage(31, 3)),
        usage_chunk(w, 31, 3),
    )
    out.append(
        _legal(
            w,
            "https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html",
            "usage on every chunk with continuous_usage_stats",
            [
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model,
                        "Largest animal ever? One phrase.",
                        stream=True,
                        stream_options={"include_usage": True, "continuous_usage_stats": True},
                    ),
                    frames,
                )
            ],
        )
    )

    # parallel_tool_calls: false -> vLLM keeps the first call (maybe_filter_parallel_tool_calls)
    w = Wire("legal-parallel-tool-calls-false-keeps-one", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0")
    body = completion(
        w,
        message(
            None,
            tool_calls=[tool_call("functions.book_hotel:0", "book_hotel", '{"city": "Kyoto", "nights": 2}')],
        ),
        "tool_calls",
        usage(210, 55),
    )
    out.append(
        _legal(
            w,
            "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/serve/utils/tool_calls_utils.py",
            "parallel_tool_calls false: the second call vanishes legally",
            [
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model,
                        "Book two nights in Kyoto and two in Osaka.",
                        tools=[HOTEL],
                        parallel_tool_calls=False,
                    ),
                    body,
                )
            ],
        )
    )

    # a named tool_choice is constrained decoding: finish_reason stop, content ""
    w = Wire("legal-named-tool-choice-finish-stop", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0")
    body = completion(
        w,
        message(
            "",
            tool_calls=[
                tool_call(
                    "functions.search_flights:0",
                    "search_flights",
                    '{"origin": "OSL", "destination": "LIS", "date": "2026-10-03"}',
                )
            ],
        ),
        "stop",
        usage(160, 30),
    )
    out.append(
        _legal(
            w,
            VLLM_TOOLS,
            "named tool_choice ends with finish_reason stop",
            [
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model,
                        "Oslo to Lisbon on October 3rd.",
                        tools=[FLIGHTS],
                        tool_choice={"type": "function", "function": {"name": "search_flights"}},
                    ),
                    body,
                )
            ],
        )
    )

    w = Wire("legal-required-tool-choice-stream", "moonshotai/Kimi-K2.5", "0.32.0")
    frames = sse(
        role_chunk(w),
        chunk(w, {"tool_calls": [tool_delta("functions.book_hotel:0", "book_hotel", '{"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, 'city": "Porto"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, "}")]}),
        chunk(w, {}, "tool_calls", fingerprint=True),
    )
    out.append(
        _legal(
            w,
            VLLM_TOOLS,
            "tool_choice required, streamed",
            [
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model, "I need a room in Porto.", tools=[HOTEL], tool_choice="required", stream=True
                    ),
                    frames,
                )
            ],
        )
    )

    # thinking turned off per request: no reasoning is expected
    w = Wire("legal-k25-thinking-off-by-template-kwargs", "moonshotai/Kimi-K2.5", "0.32.0")
    body = completion(w, message("Paris."), "stop", usage(22, 3))
    out.append(
        _legal(
            w,
            VLLM_REASONING,
            "chat_template_kwargs thinking false: content only",
            [
                exchange(
                    w,
                    CHAT,
                    _req(w.model, "Capital of France, one word.", chat_template_kwargs={"thinking": False}),
                    body,
                )
            ],
        )
    )

    w = Wire("legal-qwen3-enable-thinking-false-stream", "Qwen/Qwen3-32B", "0.32.0")
    frames = sse(role_chunk(w), chunk(w, {"content": "42"}), chunk(w, {}, "stop", fingerprint=True))
    out.append(
        _legal(
            w,
            VLLM_REASONING,
            "enable_thinking false: no reasoning when streamed",
            [
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model,
                        "Six times seven?",
                        stream=True,
                        chat_template_kwargs={"enable_thinking": False},
                    ),
                    frames,
                )
            ],
        )
    )

    # hermes: the name first without an arguments key, content null
    w = Wire("legal-hermes-name-first-no-arguments", "NousResearch/Hermes-3-Llama-3.1-8B", "0.32.0")
    cid = w.tool_id(0)
    frames = sse(
        role_chunk(w),
        chunk(w, {"content": None, "tool_calls": [tool_delta(cid, "search_flights", None)]}),
        chunk(w, {"content": None, "tool_calls": [tool_delta(None, None, '{"origin": "AMS", ')]}),
        chunk(w, {"content": None, "tool_calls": [tool_delta(None, None, '"destination": "JFK"}')]}),
        chunk(w, {}, "tool_calls"),
    )
    out.append(
        _legal(
            w,
            "https://github.com/vllm-project/vllm/blob/main/vllm/tool_parsers/hermes_tool_parser.py",
            "hermes streams the name before any arguments",
            [
                exchange(
                    w,
                    CHAT,
                    _req(w.model, "Amsterdam to New York flights?", tools=[FLIGHTS], stream=True),
                    frames,
                )
            ],
        )
    )

    # Kimi K3 streams each call whole once it closes; ids are vLLM's own
    w = Wire("legal-k3-whole-call-deltas", "moonshotai/Kimi-K3", "0.32.0")
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Two bookings."}),
        chunk(w, {"tool_calls": [tool_delta(w.tool_id(0), "book_hotel", '{"city": "Rome", "nights": 1}')]}),
        chunk(
            w,
            {
                "tool_calls": [
                    tool_delta(w.tool_id(1), "book_hotel", '{"city": "Milan", "nights": 2}', index=1)
                ]
            },
        ),
        chunk(w, {}, "tool_calls", fingerprint=True),
    )
    out.append(
        _legal(
            w,
            "https://github.com/vllm-project/vllm/blob/main/vllm/tool_parsers/kimi_k3_tool_parser.py",
            "K3 whole-call deltas, two calls",
            [
                exchange(
                    w,
                    CHAT,
                    _req(w.model, "One night in Rome, two in Milan.", tools=[HOTEL], stream=True),
                    frames,
                )
            ],
        )
    )

    # --sse-keep-alive-interval: ": keep-alive" comments while the engine is idle
    w = Wire("legal-sse-keep-alive-comments", "moonshotai/Kimi-K2-Thinking", "0.32.0")
    frames = sse(
        role_chunk(w),
        ": keep-alive",
        chunk(w, {"reasoning": "Long think."}),
        ": keep-alive",
        chunk(w, {"content": "Done."}),
        chunk(w, {}, "stop", fingerprint=True),
    )
    out.append(
        _legal(
            w,
            "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/serve/utils/sse_keep_alive.py",
            "SSE keep-alive comments between frames",
            [
                exchange(
                    w, CHAT, _req(w.model, "Think hard, then say done.", stream=True), frames, gap_ms=15000
                )
            ],
        )
    )

    # n=2: two choices interleaved, each with its own finish chunk
    w = Wire("legal-n2-two-choices-streamed", "meta-llama/Llama-3.1-8B-Instruct", "0.32.0")
    frames = sse(
        role_chunk(w, index=0),
        role_chunk(w, index=1),
        chunk(w, {"content": "Maple"}, index=0),
        chunk(w, {"content": "Birch"}, index=1),
        chunk(w, {}, "stop", index=0),
        chunk(w, {}, "stop", index=1),
    )
    out.append(
        _legal(
            w,
            OPENAI_CHAT,
            "n=2 streamed: two choices",
            [exchange(w, CHAT, _req(w.model, "Name a tree, one word.", n=2, stream=True), frames)],
        )
    )

    w = Wire("legal-max-tokens-cut-plain-text", "meta-llama/Llama-3.1-8B-Instruct", "0.32.0")
    body = completion(w, message("The history of the printing press begins in"), "length", usage(19, 8))
    out.append(
        _legal(
            w,
            OPENAI_CHAT,
            "max_tokens cut: finish_reason length",
            [
                exchange(
                    w, CHAT, _req(w.model, "Tell me the history of the printing press.", max_tokens=8), body
                )
            ],
        )
    )

    w = Wire("legal-json-schema-response-format", "Qwen/Qwen3-8B", "0.32.0")
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
        "required": ["name", "age"],
        "additionalProperties": False,
    }
    body = completion(
        w, message('{"name": "Ada Lovelace", "age": 36}', reasoning="Ada died at 36."), "stop", usage(64, 22)
    )
    out.append(
        _legal(
            w,
            "https://docs.vllm.ai/en/latest/features/structured_outputs.html",
            "json_schema response_format answered with matching JSON",
            [
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model,
                        "Ada Lovelace's name and age at death as JSON.",
                        response_format={
                            "type": "json_schema",
                            "json_schema": {"name": "person", "schema": schema, "strict": True},
                        },
                    ),
                    body,
                )
            ],
        )
    )

    w = Wire("legal-structured-outputs-choice", "Qwen/Qwen3-8B", "0.32.0")
    body = completion(w, message("positive"), "stop", usage(40, 2))
    out.append(
        _legal(
            w,
            "https://docs.vllm.ai/en/latest/features/structured_outputs.html",
            "structured_outputs choice answered with one of the choices",
            [
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model,
                        "Sentiment of: 'I love this phone'.",
                        structured_outputs={"choice": ["positive", "negative"]},
                    ),
                    body,
                )
            ],
        )
    )

    w = Wire("legal-tool-choice-none-text-answer", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0")
    body = completion(
        w, message("I can search flights if you want; Madrid is 2 hours from Paris."), "stop", usage(150, 18)
    )
    out.append(
        _legal(
            w,
            OPENAI_CHAT,
            "tool_choice none with tools: a text answer",
            [
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model, "How far is Madrid from Paris by plane?", tools=[FLIGHTS], tool_choice="none"
                    ),
                    body,
                )
            ],
        )
    )

    # a multi-turn K2 conversation: the history's calls are answered; the next id counts on
    w = Wire("legal-k2-second-turn-after-tool-result", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0")
    history = [
        {"role": "user", "content": "Find flights Berlin to Vienna, then a hotel there."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                tool_call(
                    "functions.search_flights:0", "search_flights", '{"origin": "BER", "destination": "VIE"}'
                )
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "functions.search_flights:0",
            "content": '{"flights": ["OS 232 09:40"]}',
        },
    ]
    body = completion(
        w,
        message(
            None,
            tool_calls=[tool_call("functions.book_hotel:1", "book_hotel", '{"city": "Vienna", "nights": 1}')],
        ),
        "tool_calls",
        usage(260, 25),
    )
    out.append(
        _legal(
            w,
            VLLM_TOOLS,
            "second turn after a tool result; the new id counts on",
            [exchange(w, CHAT, {"model": w.model, "messages": history, "tools": [FLIGHTS, HOTEL]}, body)],
        )
    )

    # clients still send reasoning_content in the history (vLLM reads it again: PR #42664)
    w = Wire("legal-history-with-reasoning-content", "Qwen/Qwen3-32B", "0.32.0")
    history = [
        {"role": "user", "content": "Is 97 prime?"},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "No divisor up to 9."},
        {"role": "user", "content": "And 91?"},
    ]
    body = completion(w, message("No, 91 = 7 x 13.", reasoning="Try 7."), "stop", usage(58, 17, 4))
    out.append(
        _legal(
            w,
            ("https://github.com/vllm-project/vllm/pull/42664", VLLM_REASONING),
            "reasoning_content in the history is accepted",
            [exchange(w, CHAT, {"model": w.model, "messages": history}, body)],
        )
    )

    # a matched stop string: finish_reason stop, the string in stop_reason
    w = Wire("legal-stop-string-in-stop-reason", "meta-llama/Llama-3.1-8B-Instruct", "0.32.0")
    body = completion(w, message("1. Eggs\n2. Milk\n"), "stop", usage(30, 9), stop_reason="3.")
    out.append(
        _legal(
            w,
            OPENAI_CHAT,
            "stop sequence: the matched string in stop_reason",
            [exchange(w, CHAT, _req(w.model, "Shopping list, two items.", stop=["3."]), body)],
        )
    )

    w = Wire("legal-gptoss-reasoning-effort-low", "openai/gpt-oss-20b", "0.32.0")
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Simple sum."}),
        chunk(w, {"content": "12"}),
        chunk(w, {}, "stop", fingerprint=True),
    )
    out.append(
        _legal(
            w,
            VLLM_REASONING,
            "reasoning_effort low on a reasoning model",
            [exchange(w, CHAT, _req(w.model, "5 + 7 = ?", reasoning_effort="low", stream=True), frames)],
        )
    )

    # LiteLLM in front: same id, alias model, reasoning_content (its documented field), usage chunk
    # carrying choices [{index 0, delta {}}] when the caller asked for usage
    w = Wire("legal-litellm-faithful-stream-with-usage", "meta-llama/Llama-3.1-8B-Instruct", "0.32.0")
    alias = "llama-8b"
    engine = sse(
        role_chunk(w),
        chunk(w, {"content": "Hi"}),
        chunk(w, {"content": " there!"}),
        chunk(w, {}, "stop"),
        usage_chunk(w, 9, 3),
    )
    caller = sse(
        litellm_chunk(w, alias, {"content": "Hi", "role": "assistant"}),
        litellm_chunk(w, alias, {"content": " there!"}),
        litellm_chunk(w, alias, {}, "stop"),
        litellm_chunk(w, alias, {}, usage=usage(9, 3)),
    )
    corr = f"wc-{w.hex('corr', 12)}"
    out.append(
        _legal(
            w,
            "https://docs.litellm.ai/docs/completion/usage",
            "a faithful LiteLLM relay, usage included",
            [
                exchange(
                    w,
                    CHAT,
                    _req(alias, "Say hi.", stream=True, stream_options={"include_usage": True}),
                    caller,
                    tap="caller",
                    headers=LITELLM_SSE,
                    first_ms=400,
                    correlation=corr,
                ),
                exchange(
                    w,
                    CHAT,
                    _req(w.model, "Say hi.", stream=True, stream_options={"include_usage": True}),
                    engine,
                    correlation=corr,
                    offset_ms=14,
                ),
            ],
            direct=False,
        )
    )

    # nginx with proxy_buffering off passes every frame as it came
    w = Wire("legal-nginx-unbuffered-relay", "moonshotai/Kimi-K2-Thinking", "0.32.0")
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Greet."}),
        chunk(w, {"content": "Hello"}),
        chunk(w, {"content": "!"}),
        chunk(w, {}, "stop", fingerprint=True),
    )
    req = _req(w.model, "Greet me.", stream=True)
    out.append(
        _legal(
            w,
            "https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_buffering",
            "nginx relays the stream unchanged",
            [
                exchange(
                    w,
                    CHAT,
                    req,
                    frames,
                    tap="caller",
                    first_ms=182,
                    headers=[
                        ("content-type", "text/event-stream; charset=utf-8"),
                        ("server", "nginx/1.22.1"),
                    ],
                ),
                exchange(w, CHAT, req, frames, offset_ms=1),
            ],
            direct=False,
        )
    )
    return out
