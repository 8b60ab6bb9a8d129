"""More faults across the three APIs: what the model writes (K2 Vendor Verifier, openai-agents' id
check), parsers that file a call under reasoning or leave it in content, an engine that ignored
structured output, a gateway that buffered a stream. One tap unless a case says otherwise.
"""

from __future__ import annotations

from typing import Any

from tests.support.wire import message

from .case import Case, case
from .wire import (
    CHAT,
    RESPONSES,
    Responses,
    Wire,
    chunk,
    completion,
    exchange,
    flat_tool,
    function_tool,
    role_chunk,
    sse,
    tool_call,
    tool_delta,
    usage,
)

K2VV = "https://github.com/MoonshotAI/K2-Vendor-Verifier/blob/main/README.md"
AGENTS_ID_CHECK = (
    "https://github.com/openai/openai-agents-python/blob/main/src/agents/run_internal/tool_planning.py"
)
KIMI_K2_PARSER = "https://github.com/vllm-project/vllm/blob/main/vllm/tool_parsers/kimi_k2_tool_parser.py"

SEARCH = function_tool("search", "Search the web", {"query": {"type": "string"}}, ["query"])
FETCH = function_tool("fetch_url", "Fetch a web page", {"url": {"type": "string", "format": "uri"}}, ["url"])
CALENDAR = function_tool(
    "create_event",
    "Create a calendar event",
    {
        "title": {"type": "string"},
        "start": {"type": "string"},
        "duration_minutes": {"type": "integer", "minimum": 5},
    },
    ["title", "start"],
)


def _req(model: str, prompt: str, **kw: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": prompt}], **kw}


def cases() -> list[Case]:
    out: list[Case] = []

    # openai-agents (0.20.0+) stops with "Model reused a completed tool call ID for a different
    # invocation". Kimi K2 writes its own ids (functions.NAME:IDX, a running index over the
    # conversation; vLLM's kimi_k2 parser keeps the header verbatim): a second turn that starts the
    # index at 0 again reuses the id of a call the history already answered.
    w = Wire("k2-reused-completed-call-id-chat", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0", tp=8)
    history = [
        {
            "role": "user",
            "content": "Search for the Rust 2027 edition release date, then search its changelog.",
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                tool_call("functions.search:0", "search", '{"query": "Rust 2027 edition release date"}')
            ],
        },
        {"role": "tool", "tool_call_id": "functions.search:0", "content": "Planned for late 2027."},
    ]
    body = completion(
        w,
        message(
            None,
            tool_calls=[
                tool_call("functions.search:0", "search", '{"query": "Rust 2027 edition changelog"}')
            ],
        ),
        "tool_calls",
        usage(240, 24),
    )
    out.append(
        case(
            w.case,
            sources=(AGENTS_ID_CHECK, KIMI_K2_PARSER),
            api="chat",
            exchanges=[exchange(w, CHAT, {"model": w.model, "messages": history, "tools": [SEARCH]}, body)],
            party="model",
            rules=("tool-call-id-*",),
            what="K2 reuses an id the history already answered",
            direct=True,
        )
    )

    w = Wire("k2-reused-completed-call-id-responses", "moonshotai/Kimi-K2.5", "0.32.0", tp=8)
    req = {
        "model": w.model,
        "tools": [flat_tool(FETCH)],
        "input": [
            {"role": "user", "content": "Fetch example.org and then example.net."},
            {
                "type": "function_call",
                "call_id": "functions.fetch_url:0",
                "name": "fetch_url",
                "arguments": '{"url": "https://example.org"}',
            },
            {
                "type": "function_call_output",
                "call_id": "functions.fetch_url:0",
                "output": "<html>org</html>",
            },
        ],
    }
    r = (
        Responses(w, req)
        .reasoning("Now the second site.")
        .call("fetch_url", '{"url": "https://example.net"}', call_id="functions.fetch_url:0")
    )
    out.append(
        case(
            w.case,
            sources=(AGENTS_ID_CHECK, KIMI_K2_PARSER),
            api="responses",
            exchanges=[exchange(w, RESPONSES, req, r.body(180, 30, 6))],
            party="model",
            rules=("tool-call-id-*",),
            what="K2 reuses a completed call_id on /v1/responses",
            direct=True,
        )
    )

    # K2 Vendor Verifier: history ids without the functions. prefix ("search:0") mislead K2 into
    # writing ids of the same malformed shape.
    w = Wire("k2-malformed-history-ids-copied", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0", tp=8)
    history = [
        {"role": "user", "content": "Search 'vLLM release notes' and then 'vLLM roadmap'."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call("search:0", "search", '{"query": "vLLM release notes"}')],
        },
        {"role": "tool", "tool_call_id": "search:0", "content": "v0.32.0 notes"},
    ]
    body = completion(
        w,
        message(None, tool_calls=[tool_call("search:1", "search", '{"query": "vLLM roadmap"}')]),
        "tool_calls",
        usage(205, 18),
    )
    out.append(
        case(
            w.case,
            sources=K2VV,
            api="chat",
            exchanges=[exchange(w, CHAT, {"model": w.model, "messages": history, "tools": [SEARCH]}, body)],
            party="model",
            rules=("tool-call-id-format",),
            what="K2 copies the malformed ids of its history",
            direct=True,
        )
    )

    # K2 Vendor Verifier: schema_accuracy counts tool calls whose JSON payload fails the schema
    # (vLLM 76.00% on K2-0905, 87.22% on K2-thinking): a required field missing, a wrong type.
    w = Wire("k2-arguments-miss-required-field", "moonshotai/Kimi-K2-Instruct-0905", "0.11.0")
    body = completion(
        w,
        message(
            None,
            tool_calls=[
                tool_call("functions.create_event:0", "create_event", '{"start": "2026-11-03T10:00"}')
            ],
        ),
        "tool_calls",
        usage(188, 20),
    )
    out.append(
        case(
            w.case,
            sources=K2VV,
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req(w.model, "Put a dentist appointment on Nov 3 at 10am.", tools=[CALENDAR]),
                    body,
                )
            ],
            party="model",
            rules=("tool-call-args-schema",),
            what="K2 leaves out a required argument",
            direct=True,
        )
    )

    w = Wire("k2-thinking-arguments-wrong-type-stream", "moonshotai/Kimi-K2-Thinking", "0.11.1rc6")
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Thirty minutes, Friday 9am."}),
        chunk(w, {"tool_calls": [tool_delta("functions.create_event:0", "create_event", '{"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, 'title": "Standup", "start": "Friday 09:00", ')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, '"duration_minutes": "30"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, "}")]}),
        chunk(w, {}, "tool_calls"),
    )
    out.append(
        case(
            w.case,
            sources=K2VV,
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req(w.model, "Schedule a 30 minute standup Friday 9am.", tools=[CALENDAR], stream=True),
                    frames,
                )
            ],
            party="model",
            rules=("tool-call-args-schema",),
            what="K2-thinking writes an integer argument as a string",
            direct=True,
        )
    )

    w = Wire("k2-arguments-not-json-stream", "moonshotai/Kimi-K2-Instruct-0905", "0.11.0")
    frames = sse(
        role_chunk(w),
        chunk(w, {"tool_calls": [tool_delta("functions.fetch_url:0", "fetch_url", '{"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, "url\": 'https://docs.vllm.ai'")]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, "}")]}),
        chunk(w, {}, "tool_calls"),
    )
    out.append(
        case(
            w.case,
            sources=K2VV,
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req(w.model, "Open the vLLM docs front page.", tools=[FETCH], stream=True),
                    frames,
                )
            ],
            party="model",
            rules=("tool-call-args-invalid-json",),
            what="K2 writes arguments that are not JSON",
            direct=True,
        )
    )

    w = Wire("k2-responses-arguments-break-schema-stream", "moonshotai/Kimi-K2.5", "0.32.0", tp=8)
    req = {
        "model": w.model,
        "input": "Book 'Retro' tomorrow 15:00 for 2 minutes.",
        "tools": [flat_tool(CALENDAR)],
        "stream": True,
    }
    r = (
        Responses(w, req)
        .start()
        .reasoning("Create it.")
        .call(
            "create_event",
            '{"title": "Retro", "start": "tomorrow 15:00", ',
            '"duration_minutes": 2}',
            call_id="functions.create_event:0",
        )
        .completed(120, 31, 3)
    )
    out.append(
        case(
            w.case,
            sources=K2VV,
            api="responses",
            exchanges=[exchange(w, RESPONSES, req, r.frames())],
            party="model",
            rules=("tool-call-args-schema",),
            what="K2 breaks a minimum in the schema on /v1/responses",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/39056 (vLLM 0.19, Qwen3.5-35B-A3B-FP8, qwen3 reasoning
    # parser + qwen3_coder): a call written inside <think> stays in reasoning and tool_calls is empty;
    # the report blames the parsers' hand-off, not the model.
    w = Wire("qwen35-call-inside-think-left-in-reasoning", "Qwen/Qwen3.5-35B-A3B-FP8", "0.19.0")
    reasoning = (
        "The answer is 204, I should finish.\n<tool_call>\n<function=Finish>\n<parameter=answer>\n204\n"
        "</parameter>\n</function>\n</tool_call>\n"
    )
    finish = function_tool("Finish", "Submit the final answer", {"answer": {"type": "string"}}, ["answer"])
    body = completion(w, message(None, reasoning=reasoning), "stop", usage(402, 61))
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/39056",
            api="chat",
            exchanges=[
                exchange(w, CHAT, _req(w.model, "What is 12 * 17? Submit with Finish.", tools=[finish]), body)
            ],
            party="parser",
            rules=("tool-call-in-reasoning", "tool-markup-*"),
            what="a call inside <think> never reaches the tool parser",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/42021 (vLLM 0.18.0, Qwen3.5-27B, qwen3 reasoning parser
    # with qwen3_coder): with enable_thinking=true the call comes back as XML in content.
    w = Wire("qwen35-thinking-call-xml-in-content", "Qwen3.5-27B", "0.18.0", tp=4)
    xml = (
        "<tool_call>\n<function=get_time>\n<parameter=timezone>\nAsia/Shanghai\n</parameter>\n</function>\n"
        "</tool_call>"
    )
    get_time = function_tool(
        "get_time", "Current time in a timezone", {"timezone": {"type": "string"}}, ["timezone"]
    )
    body = completion(w, message(xml, reasoning="Need the time in Shanghai."), "stop", usage(301, 44))
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/42021",
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model,
                        "What time is it in Shanghai?",
                        tools=[get_time],
                        chat_template_kwargs={"enable_thinking": True},
                    ),
                    body,
                )
            ],
            party="parser",
            rules=("tool-markup-in-content",),
            what="with thinking on, the Qwen3.5 call stays as XML in content",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/13038 (Qwen2.5-VL on the V1 engine): the requested
    # JSON schema is not honoured; "Guided decoding still isn't supported in V1" (a maintainer there).
    w = Wire("v1-engine-json-schema-not-enforced", "Qwen/Qwen2.5-VL-7B-Instruct", "0.7.2")
    schema = {
        "type": "object",
        "properties": {"document_type": {"type": "string"}, "total": {"type": "number"}},
        "required": ["document_type", "total"],
    }
    body = completion(
        w, message("This looks like an invoice with a total of 1,250.00 EUR."), "stop", usage(1210, 16)
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/13038",
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req(
                        w.model,
                        "Classify this scanned document and give its total.",
                        response_format={
                            "type": "json_schema",
                            "json_schema": {"name": "doc", "schema": schema},
                        },
                    ),
                    body,
                )
            ],
            party="engine",
            rules=("json-output-*",),
            what="the V1 engine ignores the requested JSON schema",
            direct=True,
        )
    )

    # https://github.com/BerriAI/litellm/issues/26102: through LiteLLM every token of an SGLang stream
    # arrives in the same millisecond (TTFT 1740 ms) where the engine spread them (TTFT 272 ms, 24 ms
    # apart). Engine frames as SGLang writes them.
    w = Wire("litellm-buffers-sglang-stream", "GLM-5.1-FP8", "0.5.10")
    words = ["Recursion", " is", " when", " a", " function", " calls", " itself", "."]

    def sg(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": w.hex("sglang-id", 32),
            "object": "chat.completion.chunk",
            "created": w.created,
            "model": "GLM-5.1-FP8",
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "matched_stop": None}
            ],
            "usage": None,
        }

    engine = sse(
        sg({"role": "assistant", "content": ""}), *[sg({"content": t}) for t in words], sg({}, "stop")
    )
    caller = sse(
        *[
            {
                "id": w.hex("sglang-id", 32),
                "created": w.created,
                "model": "glm-5.1",
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": t}}],
            }
            for t in words
        ],
        {
            "id": w.hex("sglang-id", 32),
            "created": w.created,
            "model": "glm-5.1",
            "object": "chat.completion.chunk",
            "choices": [{"finish_reason": "stop", "index": 0, "delta": {}}],
        },
    )
    corr = f"wc-{w.hex('corr', 12)}"
    out.append(
        case(
            w.case,
            sources="https://github.com/BerriAI/litellm/issues/26102",
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req("glm-5.1", "Explain recursion", stream=True),
                    caller,
                    tap="caller",
                    headers=[("content-type", "text/event-stream")],
                    times=[1740.0] * len(caller),
                    correlation=corr,
                ),
                exchange(
                    w,
                    CHAT,
                    _req("GLM-5.1-FP8", "Explain recursion", stream=True),
                    engine,
                    headers=[("content-type", "text/event-stream")],
                    first_ms=272.0,
                    gap_ms=24.0,
                    correlation=corr,
                    offset_ms=12,
                ),
            ],
            party="gateway",
            rules=("gateway-stream-buffered",),
            what="LiteLLM buffers a whole stream and releases it at once",
        )
    )
    return out
