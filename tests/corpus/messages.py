"""/v1/messages: vLLM's Anthropic endpoint and its faults, and the legal shapes of the Messages API.
One tap in front of vLLM unless a case says otherwise (the bridges are in ``bridges``).
"""

from __future__ import annotations

from typing import Any

from .case import Case, case
from .wire import (
    MESSAGES,
    Messages,
    Wire,
    anthropic_error,
    anthropic_tool,
    exchange,
    function_tool,
)

VLLM_ANTHROPIC = "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/anthropic/serving.py"
ANTHROPIC_STREAMING = "https://docs.anthropic.com/en/docs/build-with-claude/streaming"
ANTHROPIC_TOOLS = "https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use"
K2VV = "https://github.com/MoonshotAI/K2-Vendor-Verifier/blob/main/README.md"

WRITE = anthropic_tool(
    function_tool(
        "Write",
        "Write a file",
        {"file_path": {"type": "string"}, "content": {"type": "string"}},
        ["file_path", "content"],
    )
)
BASH = anthropic_tool(
    function_tool(
        "Bash",
        "Run a shell command",
        {"command": {"type": "string"}, "timeout": {"type": "integer"}},
        ["command"],
    )
)
LOOKUP = anthropic_tool(
    function_tool("lookup_customer", "Find a customer", {"email": {"type": "string"}}, ["email"])
)


def _req(model: str, prompt: str, **kw: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": kw.pop("max_tokens", 1024),
        "messages": [{"role": "user", "content": prompt}],
        **kw,
    }


def _legal(w: Wire, sources: str | tuple[str, ...], what: str, exchanges: list[Any], **cfg: Any) -> Case:
    return case(
        w.case,
        sources=sources,
        api="messages",
        exchanges=exchanges,
        party=None,
        what=what,
        **({"direct": True} | cfg),
    )


def cases() -> list[Case]:
    out: list[Case] = []

    # https://github.com/vllm-project/vllm/issues/42362 (Kimi-K2.6, vLLM 0.20.2, Claude Code): the engine
    # core died; POST /v1/messages?beta=true answers 500 with EngineDeadError's message.
    w = Wire("messages-engine-dead-500", "moonshotai/Kimi-K2.6", "0.20.2", tp=8)
    req = _req(w.model, "Refactor utils.py into two modules.", tools=[WRITE, BASH], stream=True)
    body = anthropic_error(
        "EngineCore encountered an issue. See stack trace (above) for the root cause.", "InternalServerError"
    )
    ex = exchange(w, MESSAGES, req, body, status=500)
    ex.request.path = "/v1/messages?beta=true"
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/42362",
            api="messages",
            exchanges=[ex],
            party="engine",
            rules=("http-server-error",),
            what="the engine is dead: 500 on /v1/messages",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/45367, fixed by https://github.com/vllm-project/vllm/pull/45376:
    # message_start was serialised with exclude_unset, dropping message.type and message.role; Claude Code
    # rejected every stream while the server logged 200.
    w = Wire(
        "messages-message-start-without-type-role",
        "RedHatAI/diffusiongemma-26B-A4B-it-NVFP4",
        "0.22.1rc1.dev408",
    )
    req = _req(w.model, "Write hello.txt containing hello.", tools=[WRITE], stream=True)
    m = (
        Messages(w, 64)
        .start()
        .tool(w.tool_id(0), "Write", '{"file_path": "hello.txt", ', '"content": "hello"}')
    )
    m.stop("tool_use", 23)
    start = m.events[0]["message"]
    del start["type"], start["role"]
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/vllm-project/vllm/issues/45367",
                "https://github.com/vllm-project/vllm/pull/45376",
            ),
            api="messages",
            exchanges=[exchange(w, MESSAGES, req, m.frames())],
            party="engine",
            rules=("api-stream-order",),
            what="message_start lacks message.type and message.role",
            direct=True,
        )
    )

    # https://github.com/vllm-project/agentic-api/pull/296: "vLLM 0.29.0 also labels complete named
    # calls end_turn": a forced tool_choice {type: tool} ends with stop_reason end_turn although the
    # answer is a complete tool_use block (the chat layer reports "stop" for named calls).
    w = Wire("messages-named-tool-call-labelled-end-turn", "Qwen/Qwen3-30B-A3B-Instruct-2507", "0.29.0")
    req = _req(
        w.model,
        "Look up jane@example.com.",
        tools=[LOOKUP],
        tool_choice={"type": "tool", "name": "lookup_customer"},
        stream=True,
    )
    m = (
        Messages(w, 120)
        .start()
        .tool(w.tool_id(0), "lookup_customer", '{"email": "jane@example.com"}')
        .stop("end_turn", 15)
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/agentic-api/pull/296",
            api="messages",
            exchanges=[exchange(w, MESSAGES, req, m.frames())],
            party="engine",
            rules=("api-*", "finish-reason-*"),
            what="a forced tool call ends with end_turn instead of tool_use",
            direct=True,
        )
    )

    # K2 Vendor Verifier: tool calls whose JSON payload breaks the schema are the model's (vLLM's
    # schema_accuracy 87.22% on K2-thinking). On non-streamed /v1/messages vLLM json.loads the
    # arguments to build tool_use.input, so arguments that are not JSON come back as HTTP 400.
    w = Wire("messages-k2-invalid-arguments-400", "moonshotai/Kimi-K2-Thinking", "0.32.0", tp=8)
    req = _req(w.model, "List the files in /var/log with sizes.", tools=[BASH])
    body = {
        "type": "error",
        "error": {
            "type": "BadRequestError",
            "message": "Expecting ',' delimiter: line 1 column 23 (char 22)",
        },
    }
    out.append(
        case(
            w.case,
            sources=(K2VV, VLLM_ANTHROPIC),
            api="messages",
            exchanges=[exchange(w, MESSAGES, req, body, status=400)],
            party="model",
            rules=("http-client-error",),
            what="the model's arguments are not JSON: vLLM's Messages converter answers 400",
            direct=True,
        )
    )

    w = Wire("messages-k2-arguments-break-schema-stream", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0", tp=8)
    req = _req(w.model, "Tail the nginx error log for 30 seconds.", tools=[BASH], stream=True)
    m = (
        Messages(w, 151)
        .start()
        .text("Running it now.")
        .tool("functions.Bash:0", "Bash", '{"cmd": "tail -f /var/log/nginx/error.log", ', '"timeout": "30s"}')
        .stop("tool_use", 33)
    )
    out.append(
        case(
            w.case,
            sources=K2VV,
            api="messages",
            exchanges=[exchange(w, MESSAGES, req, m.frames())],
            party="model",
            rules=("tool-call-args-schema",),
            what="K2 writes arguments that break the tool's schema",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/46863 (vLLM 0.23.0, Llama-4-Scout FP8 with
    # --tool-call-parser llama4_pythonic, Claude Code on /v1/messages): the checkpoint writes JSON tool
    # calls, the pythonic parser finds none, and the call reaches the client as text.
    w = Wire(
        "messages-llama4-json-call-left-as-text",
        "RedHatAI/Llama-4-Scout-17B-16E-Instruct-FP8-dynamic",
        "0.23.0",
        tp=4,
    )
    req = _req(w.model, "Run echo hello in the shell.", tools=[BASH])
    m = Messages(w, 2210).text(
        '{"type": "function", "name": "Bash", "parameters": {"command": "echo hello", "timeout": 12000}}'
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/46863",
            api="messages",
            exchanges=[exchange(w, MESSAGES, req, m.body("end_turn", 27))],
            party="parser",
            rules=("tool-markup-in-content", "tool-*"),
            what="the pythonic parser misses a JSON call: Claude Code gets text",
            direct=True,
        )
    )

    # https://github.com/intel/llm-scaler/issues/341 (vLLM 0.14 build, Qwen3-Coder-30B-A3B, Claude Code):
    # the history's thinking block (a legal Anthropic input block) fails vLLM's request model
    # ("Input should be 'text', 'image', 'tool_use' or 'tool_result'"): 400 in vLLM's own error shape.
    w = Wire("messages-thinking-block-in-history-rejected", "Qwen/Qwen3-Coder-30B-A3B-Instruct", "0.14.0")
    req = {
        "model": w.model,
        "max_tokens": 4096,
        "tools": [BASH],
        "stream": True,
        "messages": [
            {"role": "user", "content": "What is in README.md?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "I should read the file.", "signature": ""},
                    {"type": "text", "text": "Reading it."},
                    {
                        "type": "tool_use",
                        "id": "1uyIS8TwH1h2G8NGva9wV8hMgFC3GSRl",
                        "name": "Bash",
                        "input": {"command": "cat README.md"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "1uyIS8TwH1h2G8NGva9wV8hMgFC3GSRl",
                        "content": "# Project",
                    }
                ],
            },
        ],
    }
    msg = (
        "2 validation errors:\n  {'type': 'string_type', 'loc': ('body', 'messages', 1, 'content', 'str'), "
        "'msg': 'Input should be a valid string'}\n  {'type': 'literal_error', 'loc': ('body', 'messages', 1, "
        "'content', 'list[AnthropicContentBlock]', 0, 'type'), 'msg': \"Input should be 'text', 'image', "
        "'tool_use' or 'tool_result'\", 'input': 'thinking'}"
    )
    body = {"error": {"message": msg, "type": "BadRequestError", "param": None, "code": 400}}
    out.append(
        case(
            w.case,
            sources="https://github.com/intel/llm-scaler/issues/341",
            api="messages",
            exchanges=[exchange(w, MESSAGES, req, body, status=400)],
            party="engine",
            rules=("http-client-error",),
            what="vLLM's Messages endpoint refuses a legal thinking block in the history",
            direct=True,
        )
    )

    # vLLM's AnthropicThinkingConfigEnabled declares budget_tokens >= 1024, as Anthropic documents it:
    # a smaller budget is refused with a 400 before generation, in vLLM's own error shape.
    w = Wire("messages-thinking-budget-below-minimum", "Qwen/Qwen3-32B", "0.32.0")
    req = _req(w.model, "Is 1001 divisible by 7?", thinking={"type": "enabled", "budget_tokens": 512})
    msg = (
        "1 validation error:\n  {'type': 'greater_than_equal', 'loc': ('body', 'thinking', 'enabled', "
        "'budget_tokens'), 'msg': 'Input should be greater than or equal to 1024', 'input': 512}"
    )
    body = {"error": {"message": msg, "type": "Bad Request", "param": None, "code": 400}}
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/vllm-project/vllm/blob/main/vllm/entrypoints/anthropic/protocol.py",
                "https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking",
            ),
            api="messages",
            exchanges=[exchange(w, MESSAGES, req, body, status=400)],
            party="caller",
            rules=("http-client-error", "request-*"),
            what="a thinking budget under 1024 tokens is refused",
            direct=True,
        )
    )

    # --- legal shapes -------------------------------------------------------------------------------

    w = Wire("legal-messages-thinking-then-tool-use-stream", "moonshotai/Kimi-K2-Thinking", "0.32.0", tp=8)
    req = _req(w.model, "Create notes.md with today's agenda.", tools=[WRITE], stream=True)
    m = (
        Messages(w, 210)
        .start()
        .thinking("Write the ", "agenda file.")
        .tool("functions.Write:0", "Write", '{"file_path": "notes.md", ', '"content": "- standup"}')
        .stop("tool_use", 41)
    )
    out.append(
        _legal(
            w,
            VLLM_ANTHROPIC,
            "thinking with its signature, then tool_use",
            [exchange(w, MESSAGES, req, m.frames())],
        )
    )

    w = Wire("legal-messages-text-nonstream", "Qwen/Qwen3-32B", "0.32.0")
    req = _req(w.model, "One word for a baby kangaroo?")
    m = Messages(w, 17).thinking("Joey.").text("Joey.")
    out.append(
        _legal(
            w,
            ANTHROPIC_STREAMING,
            "thinking and text, not streamed",
            [exchange(w, MESSAGES, req, m.body("end_turn", 9))],
        )
    )

    # a matched stop sequence: stop_reason stop_sequence with the sequence echoed (vLLM PR #45807)
    w = Wire("legal-messages-stop-sequence", "meta-llama/Llama-3.1-8B-Instruct", "0.32.0")
    req = _req(w.model, "Count from one upwards in words.", stop_sequences=["five"], stream=True)
    m = Messages(w, 18).start().text("one two three ", "four ").stop("stop_sequence", 8, "five")
    out.append(
        _legal(
            w,
            ("https://github.com/vllm-project/vllm/pull/45807", VLLM_ANTHROPIC),
            "stop_sequence with the sequence echoed",
            [exchange(w, MESSAGES, req, m.frames())],
        )
    )

    w = Wire("legal-messages-tool-choice-any", "moonshotai/Kimi-K2.5", "0.32.0")
    req = _req(w.model, "Find bob@example.org in the CRM.", tools=[LOOKUP], tool_choice={"type": "any"})
    m = Messages(w, 99).tool("functions.lookup_customer:0", "lookup_customer", '{"email": "bob@example.org"}')
    out.append(
        _legal(
            w,
            ANTHROPIC_TOOLS,
            "tool_choice any answered with tool_use",
            [exchange(w, MESSAGES, req, m.body("tool_use", 18))],
        )
    )

    # a named tool_choice: 0.32 reports tool_use for the complete forced call
    w = Wire("legal-messages-named-tool-choice-stream", "moonshotai/Kimi-K2.5", "0.32.0")
    req = _req(
        w.model,
        "Check the customer carol@example.net.",
        tools=[LOOKUP],
        tool_choice={"type": "tool", "name": "lookup_customer"},
        stream=True,
    )
    m = (
        Messages(w, 101)
        .start()
        .tool("functions.lookup_customer:0", "lookup_customer", '{"email": ', '"carol@example.net"}')
        .stop("tool_use", 19)
    )
    out.append(
        _legal(
            w,
            VLLM_ANTHROPIC,
            "a forced named tool ends with tool_use",
            [exchange(w, MESSAGES, req, m.frames())],
        )
    )

    w = Wire("legal-messages-max-tokens-stop", "meta-llama/Llama-3.1-8B-Instruct", "0.32.0")
    req = _req(w.model, "Write an essay on bridges.", max_tokens=6, stream=True)
    m = Messages(w, 15).start().text("Bridges connect", " people and").stop("max_tokens", 6)
    out.append(_legal(w, ANTHROPIC_STREAMING, "max_tokens reached", [exchange(w, MESSAGES, req, m.frames())]))

    w = Wire("legal-messages-output-config-json", "Qwen/Qwen3-8B", "0.32.0")
    schema = {
        "type": "object",
        "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
        "required": ["title", "year"],
        "additionalProperties": False,
    }
    req = _req(
        w.model,
        "First Harry Potter book, title and year.",
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )
    m = Messages(w, 33).text('{"title": "Harry Potter and the Philosopher\'s Stone", "year": 1997}')
    out.append(
        _legal(
            w,
            "https://docs.anthropic.com/en/docs/build-with-claude/structured-outputs",
            "output_config.format answered with matching JSON",
            [exchange(w, MESSAGES, req, m.body("end_turn", 21))],
        )
    )

    w = Wire("legal-messages-tool-result-turn", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0")
    req = {
        "model": w.model,
        "max_tokens": 512,
        "tools": [LOOKUP],
        "messages": [
            {"role": "user", "content": "Is dave@example.com a customer?"},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "functions.lookup_customer:0",
                        "name": "lookup_customer",
                        "input": {"email": "dave@example.com"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "functions.lookup_customer:0",
                        "content": '{"found": true, "plan": "pro"}',
                    }
                ],
            },
        ],
    }
    m = Messages(w, 160).text("Yes, Dave is a customer on the pro plan.")
    out.append(
        _legal(
            w,
            ANTHROPIC_TOOLS,
            "a tool_result round trip",
            [exchange(w, MESSAGES, req, m.body("end_turn", 12))],
        )
    )

    w = Wire("legal-messages-thinking-disabled", "Qwen/Qwen3-32B", "0.32.0")
    req = _req(w.model, "Capital of Chile?", thinking={"type": "disabled"}, stream=True)
    m = Messages(w, 12).start().text("Santiago.").stop("end_turn", 3)
    out.append(
        _legal(
            w,
            VLLM_ANTHROPIC,
            "thinking disabled: no thinking block",
            [exchange(w, MESSAGES, req, m.frames())],
        )
    )

    w = Wire("legal-messages-disable-parallel-tool-use", "moonshotai/Kimi-K2.5", "0.32.0")
    req = _req(
        w.model,
        "Look up erin@example.com and frank@example.com.",
        tools=[LOOKUP],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
        stream=True,
    )
    m = (
        Messages(w, 115)
        .start()
        .thinking("One at a time.")
        .tool("functions.lookup_customer:0", "lookup_customer", '{"email": "erin@example.com"}')
        .stop("tool_use", 24)
    )
    out.append(
        _legal(
            w,
            ANTHROPIC_TOOLS,
            "disable_parallel_tool_use: one tool_use",
            [exchange(w, MESSAGES, req, m.frames())],
        )
    )

    w = Wire("legal-messages-thinking-budget-stream", "Qwen/Qwen3-32B", "0.32.0")
    req = _req(w.model, "Is 221 prime?", thinking={"type": "enabled", "budget_tokens": 2048}, stream=True)
    m = Messages(w, 14).start().thinking("221 = 13 x 17.").text("No: 221 = 13 x 17.").stop("end_turn", 30)
    out.append(
        _legal(
            w,
            ANTHROPIC_STREAMING,
            "thinking with a budget, then text",
            [exchange(w, MESSAGES, req, m.frames())],
        )
    )
    return out
