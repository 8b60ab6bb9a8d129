"""Chat completions: vLLM's tool and reasoning parsers getting the model's output wrong (party: parser),
and the engine failing under it (party: engine). One tap, straight in front of vLLM (``direct``).

Each case's comment names the report; the frames are what that vLLM version's parser sent for the
model output the report shows.
"""

from __future__ import annotations

from typing import Any

from tests.support.wire import message

from .case import Case, case
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

WEATHER = function_tool("get_weather", "Current weather for a city", {"city": {"type": "string"}}, ["city"])
BASH = function_tool("bash", "Run a shell command", {"command": {"type": "string"}}, ["command"])
READ_FILE = function_tool("read_file", "Read a file", {"path": {"type": "string"}}, ["path"])


def _req(model: str, prompt: str, tools: list[dict[str, Any]] | None, **kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": prompt}]}
    if tools is not None:
        body["tools"] = tools
    body.update(kw)
    return body


def cases() -> list[Case]:
    out: list[Case] = []

    # https://github.com/MoonshotAI/Kimi-K2/issues/89 (kimi-k2-thinking, stream=True: the section
    # token <|tool_calls_section_begin|> arrives in the reasoning deltas) and the vLLM fix
    # https://github.com/vllm-project/vllm/pull/28543 (KimiK2ToolParser lacked section-level state).
    # The call itself was parsed: the token is the parser's leak, not a call written inside thinking.
    w = Wire("kimi-k2-section-token-in-reasoning", "moonshotai/Kimi-K2-Thinking", "0.11.0")
    req = _req(w.model, "Is it raining in Hangzhou right now?", [WEATHER], stream=True)
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "The user asks about rain in Hangzhou."}),
        chunk(w, {"reasoning": " I will check the current weather."}),
        chunk(w, {"reasoning": "<|tool_calls_section_begin|>"}),
        chunk(w, {"tool_calls": [tool_delta("functions.get_weather:0", "get_weather", '{"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, 'city": "Hangzhou"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, "}")]}),
        chunk(w, {}, "tool_calls"),
    )
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/MoonshotAI/Kimi-K2/issues/89",
                "https://github.com/vllm-project/vllm/pull/28543",
            ),
            api="chat",
            exchanges=[exchange(w, CHAT, req, frames)],
            party="parser",
            rules=("tool-call-in-reasoning", "special-token-leak", "tool-markup-*"),
            what="K2 streaming leaks the tool-calls section token into reasoning while parsing the call",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/pull/31207: streamed content carried the tool call markers
    # ("<|tool_call_begin|> functions.get_weather:0 ...") when the parser left the tool section and
    # returned its buffered text as content, next to the call it had already streamed.
    w = Wire("kimi-k2-exit-section-buffer-as-content", "moonshotai/Kimi-K2-Instruct-0905", "0.12.0")
    req = _req(w.model, "What's the weather like in Tokyo today?", [WEATHER], stream=True)
    leaked = (
        "<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": "Tokyo"}<|tool_call_end|>'
    )
    frames = sse(
        role_chunk(w),
        chunk(w, {"tool_calls": [tool_delta("functions.get_weather:0", "get_weather", '{"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, 'city": "Tokyo"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, "}")]}),
        chunk(w, {"content": leaked}),
        chunk(w, {}, "tool_calls"),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/pull/31207",
            api="chat",
            exchanges=[exchange(w, CHAT, req, frames)],
            party="parser",
            rules=("tool-markup-in-content", "special-token-leak"),
            what="K2 parser returns its buffered tool section as content on leaving the section",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/pull/38579, item #38353: "Content before
    # <|tool_calls_section_begin|> lost" in streaming; the non-streamed answer to the same request
    # keeps it. Recorded as a stream and its non-streamed twin, greedy as the PR's replay tests run.
    w = Wire("kimi-k25-content-before-section-lost", "moonshotai/Kimi-K2.5", "0.18.0")
    prompt = "Compare the weather in Oslo and Bergen for my trip."
    calls = [
        tool_call("functions.get_weather:0", "get_weather", '{"city": "Oslo"}'),
        tool_call("functions.get_weather:1", "get_weather", '{"city": "Bergen"}'),
    ]
    plain = completion(
        w,
        message("I'll check both cities.", tool_calls=calls, reasoning="Two lookups, one per city."),
        "tool_calls",
        usage(96, 58, 9),
    )
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Two lookups, one per city."}),
        chunk(w, {"tool_calls": [tool_delta("functions.get_weather:0", "get_weather", '{"city": "Oslo"}')]}),
        chunk(
            w,
            {
                "tool_calls": [
                    tool_delta("functions.get_weather:1", "get_weather", '{"city": "Bergen"}', index=1)
                ]
            },
        ),
        chunk(w, {}, "tool_calls"),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/pull/38579",
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req(w.model, prompt, [WEATHER], stream=True, temperature=0),
                    frames,
                    suffix="-stream",
                ),
                exchange(
                    w,
                    CHAT,
                    _req(w.model, prompt, [WEATHER], temperature=0),
                    plain,
                    suffix="-plain",
                    offset_ms=2500,
                ),
            ],
            party="parser",
            rules=("stream-nonstream-mismatch",),
            what="K2.5 streaming drops the text written before the tool section; non-streamed keeps it",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/pull/38579, item #38274: with speculative decoding one
    # delta carries <|tool_call_end|> and the next <|tool_call_begin|>, and the first call's last
    # argument fragment is lost. The non-streamed twin parses the same output whole.
    w = Wire("kimi-k25-specdec-bundled-delta-truncates-args", "moonshotai/Kimi-K2.5", "0.18.0")
    prompt = "Read both config files: app.yaml and db.yaml."
    plain = completion(
        w,
        message(
            None,
            tool_calls=[
                tool_call("functions.read_file:0", "read_file", '{"path": "app.yaml"}'),
                tool_call("functions.read_file:1", "read_file", '{"path": "db.yaml"}'),
            ],
        ),
        "tool_calls",
        usage(140, 41),
    )
    frames = sse(
        role_chunk(w),
        chunk(w, {"tool_calls": [tool_delta("functions.read_file:0", "read_file", '{"path": ')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, '"app.yaml"')]}),
        chunk(
            w,
            {
                "tool_calls": [
                    tool_delta("functions.read_file:1", "read_file", '{"path": "db.yaml"}', index=1)
                ]
            },
        ),
        chunk(w, {}, "tool_calls"),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/pull/38579",
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req(w.model, prompt, [READ_FILE], stream=True, temperature=0),
                    frames,
                    suffix="-stream",
                ),
                exchange(
                    w,
                    CHAT,
                    _req(w.model, prompt, [READ_FILE], temperature=0),
                    plain,
                    suffix="-plain",
                    offset_ms=3100,
                ),
            ],
            party="parser",
            rules=("stream-nonstream-mismatch", "tool-call-args-*"),
            what="K2 streaming under speculative decoding cuts the first call's closing brace",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/pull/38579, item #38441: the non-streaming regex ".+" does
    # not cross a newline inside the model's call header, so the call is dropped silently: an empty
    # message ending with "stop" although 61 tokens were generated.
    w = Wire("kimi-k25-newline-in-header-call-dropped", "moonshotai/Kimi-K2.5", "0.18.0")
    req = _req(w.model, "Run the unit tests of the payments service.", [BASH])
    body = completion(
        w, message(None, reasoning="Run pytest in services/payments."), "stop", usage(212, 61, 8)
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/pull/38579",
            api="chat",
            exchanges=[exchange(w, CHAT, req, body)],
            party="parser",
            rules=("answer-empty", "tool-call-*", "reasoning-*"),
            what="K2 non-streaming parser drops a call whose header holds a newline: empty answer, stop",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/51412: with tools configured, the Kimi K3 streaming
    # tool parser leaks the end-of-turn marker <|close|>message<|sep|> into content when generation
    # ends without <|close|>response<|sep|>; the non-streaming path strips it.
    w = Wire("kimi-k3-close-message-marker-streamed", "moonshotai/Kimi-K3", "0.27.0")
    prompt = "Say hello to the team in one sentence."
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "A short greeting."}),
        chunk(w, {"content": "Hello team, great to work"}),
        chunk(w, {"content": " with all of you!"}),
        chunk(w, {"content": "<|close|>message<|sep|>"}),
        chunk(w, {}, "stop", fingerprint=True),
    )
    plain = completion(
        w,
        message("Hello team, great to work with all of you!", reasoning="A short greeting."),
        "stop",
        usage(57, 19, 4),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/51412",
            api="chat",
            exchanges=[
                exchange(w, CHAT, _req(w.model, prompt, [READ_FILE], stream=True), frames, suffix="-stream"),
                exchange(w, CHAT, _req(w.model, prompt, [READ_FILE]), plain, suffix="-plain", offset_ms=1900),
            ],
            party="parser",
            rules=("special-token-leak", "stream-nonstream-mismatch"),
            what="K3 streaming tool parser leaks <|close|>message<|sep|> into content",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/54273 (defect 1): the model leaves the think channel
    # by opening the tools channel directly, without <|close|>think<|sep|>; is_reasoning_end() never
    # turns true, so the whole call stays in reasoning and the tool parser never sees it.
    w = Wire("kimi-k3-think-skipped-close-call-dropped", "moonshotai/Kimi-K3", "0.26.1rc1")
    req = _req(w.model, "Open src/main.rs and tell me what it does.", [READ_FILE])
    raw_call = (
        'I need to read the file first.<|open|>tools<|sep|><|open|>call tool="read_file" index="1"<|sep|>'
        '<|open|>argument key="path" type="string"<|sep|>src/main.rs<|close|>argument<|sep|>'
        "<|close|>call<|sep|><|close|>tools<|sep|>"
    )
    body = completion(w, message(None, reasoning=raw_call), "stop", usage(301, 48, 48))
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/54273",
            api="chat",
            exchanges=[exchange(w, CHAT, req, body)],
            party="parser",
            rules=("tool-call-in-reasoning", "tool-markup-*", "reasoning-*"),
            what="K3 reasoning parser misses a think channel left without its close marker: the call is lost",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/32587 (vLLM 0.13.0, --tool-call-parser openai,
    # streaming): delta.tool_calls[0].function.name arrives as 'query_dataset<|channel|>commentary'.
    w = Wire("gptoss-channel-token-in-streamed-tool-name", "RedHatAI/gpt-oss-20b", "0.13.0")
    tools = [
        function_tool("describe_datasets", "List the datasets", {}, []),
        function_tool(
            "query_dataset",
            "Query one dataset",
            {"dataset": {"type": "string"}, "sql": {"type": "string"}},
            ["dataset", "sql"],
        ),
    ]
    req = _req(w.model, "How many rows does the orders dataset have?", tools, stream=True)
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Query the orders dataset with a count."}),
        chunk(w, {"tool_calls": [tool_delta(w.tool_id(0), "query_dataset<|channel|>commentary", None)]}),
        chunk(
            w,
            {
                "tool_calls": [
                    tool_delta(None, None, '{"dataset": "orders", "sql": "SELECT COUNT(*) FROM orders"}')
                ]
            },
        ),
        chunk(w, {}, "tool_calls"),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/32587",
            api="chat",
            exchanges=[exchange(w, CHAT, req, frames)],
            party="parser",
            rules=("special-token-leak", "tool-call-undeclared", "tool-markup-*"),
            what="gpt-oss streaming: the harmony channel token is glued to the tool name",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/28297 (Qwen3-VL-32B-Instruct, hermes tool parser and
    # qwen3 reasoning parser, v0.11.0, streaming with usage): the <tool_call> JSON streams as content
    # token by token and no tool_calls delta comes.
    w = Wire("qwen3vl-hermes-call-streamed-as-content", "Qwen/Qwen3-VL-32B-Instruct", "0.11.0")
    tools = [
        function_tool("search_docs", "Search the knowledge base", {"query": {"type": "string"}}, ["query"])
    ]
    req = _req(
        w.model,
        "Find our refund policy for damaged items.",
        tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces = [
        "<tool_call>",
        "\n",
        '{"',
        "name",
        '":',
        ' "',
        "search",
        "_docs",
        '",',
        ' "',
        "arguments",
        '":',
        ' {"',
        "query",
        '":',
        ' "',
        "refund",
        " policy",
        " damaged",
        '"}}',
        "\n",
        "</tool_call>",
    ]
    frames = sse(
        role_chunk(w),
        *[chunk(w, {"content": p}) for p in pieces],
        chunk(w, {}, "stop"),
        usage_chunk(w, 388, 24),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/28297",
            api="chat",
            exchanges=[exchange(w, CHAT, req, frames)],
            party="parser",
            rules=("tool-markup-in-content",),
            what="hermes streaming leaves a Qwen3-VL call in content",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/49216 and the report on
    # https://github.com/vllm-project/vllm/pull/45413 (the streaming parser engine and new Qwen3
    # parser): tool_choice=required with VLLM_ENFORCE_STRICT_TOOL_CALLING=false ends the stream with
    # an error frame from partial_json_parser ("pop from empty list"); usage on every chunk.
    w = Wire("qwen36-required-nonstrict-parser-error-frame", "qwen3.6-35b-a3b", "0.29.0")
    tools = [
        function_tool("lookup_order", "Look up an order", {"order_id": {"type": "string"}}, ["order_id"])
    ]
    req = _req(
        w.model,
        "Where is order 88123?",
        tools,
        stream=True,
        tool_choice="required",
        stream_options={"include_usage": True, "continuous_usage_stats": True},
    )
    pieces = ["The", " user", " wants", " order", " status", ";", " call", " the", " tool", "."]
    objs = [chunk(w, {"reasoning": p}, usage=usage(265, n)) for n, p in enumerate(pieces, 1)]
    err = '{"error": {"message": "pop from empty list", "type": "InternalServerError", "param": null, "code": 500}}'
    frames = sse(role_chunk(w, usage=usage(265, 0)), *objs, err)
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/vllm-project/vllm/issues/49216",
                "https://github.com/vllm-project/vllm/pull/45413",
            ),
            api="chat",
            exchanges=[exchange(w, CHAT, req, frames)],
            party="parser",
            rules=("stream-error-frame",),
            what="the Qwen3 streaming parser crashes on tool_choice=required without strict calling",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/25253: Magistral-Small-2509 with --reasoning-parser
    # mistral and tool_choice=required answers 500 with no explanation; auto, or no reasoning parser,
    # works. An unhandled exception: starlette's plain-text 500.
    w = Wire("magistral-reasoning-parser-required-500", "mistralai/Magistral-Small-2509", "0.10.2")
    tools = [
        function_tool(
            "get_stock_price", "Latest price of a ticker", {"ticker": {"type": "string"}}, ["ticker"]
        )
    ]
    req = _req(w.model, "What's NVDA trading at?", tools, tool_choice="required")
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/25253",
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    req,
                    b"Internal Server Error",
                    status=500,
                    headers=[("content-type", "text/plain; charset=utf-8"), ("server", "uvicorn")],
                )
            ],
            party="parser",
            rules=("http-server-error", "error-body-shape"),
            what="the mistral reasoning parser fails tool_choice=required with a bare 500",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/pull/46875: Gemma 4 with tool_choice="none",
    # enable_thinking=False and tools in the request returned parsed tool calls anyway.
    w = Wire("gemma4-tool-choice-none-returns-calls", "google/gemma-4-31b-it", "0.24.0")
    tools = [
        function_tool("create_ticket", "Open a support ticket", {"title": {"type": "string"}}, ["title"])
    ]
    req = _req(
        w.model,
        "Summarise the outage report in two sentences.",
        tools,
        tool_choice="none",
        chat_template_kwargs={"enable_thinking": False},
    )
    body = completion(
        w,
        message(
            None, tool_calls=[tool_call(w.tool_id(0), "create_ticket", '{"title": "Outage report summary"}')]
        ),
        "tool_calls",
        usage(174, 22),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/pull/46875",
            api="chat",
            exchanges=[exchange(w, CHAT, req, body)],
            party="parser",
            rules=("tool-choice-violated",),
            what="Gemma 4 parser returns parsed calls although tool_choice is none",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/36632 (vllm/vllm-openai:v0.17.0, MiniMax-M2.5,
    # --reasoning-parser minimax_m2): reasoning absent from the chat stream; non-streamed (and
    # /v1/responses) carry it. Recorded as a stream and its non-streamed twin.
    w = Wire("minimax-m25-stream-reasoning-missing", "lukealonso/MiniMax-M2.5-NVFP4", "0.17.0")
    prompt = "hello"
    frames = sse(
        role_chunk(w),
        chunk(w, {"content": "Hello!"}),
        chunk(w, {"content": " How can I help you today?"}),
        chunk(w, {}, "stop"),
    )
    plain = completion(
        w,
        message("Hello! How can I help you today?", reasoning="The user greets me; greet back briefly."),
        "stop",
        usage(38, 31, 14),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/36632",
            api="chat",
            exchanges=[
                exchange(w, CHAT, _req(w.model, prompt, None, stream=True), frames, suffix="-stream"),
                exchange(w, CHAT, _req(w.model, prompt, None), plain, suffix="-plain", offset_ms=1400),
            ],
            party="parser",
            rules=("stream-nonstream-mismatch", "reasoning-missing"),
            what="minimax_m2 reasoning parser drops reasoning when streaming only",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/30651 (Devstral-Small-2, --tool-call-parser mistral):
    # the parser's json.loads raises "Expecting value: line 1 column 1 (char 0)" mid-stream; vLLM's
    # stream generator turns the ValueError into an in-band error frame typed BadRequestError.
    w = Wire(
        "devstral-mistral-parser-jsondecode-frame", "mistralai/Devstral-Small-2-24B-Instruct-2512", "0.12.0"
    )
    tools = [
        function_tool(
            "create_file",
            "Create a file",
            {"filePath": {"type": "string"}, "content": {"type": "string"}},
            ["filePath", "content"],
        )
    ]
    req = _req(w.model, "Create a file blabla.txt in the workspace with a test sentence.", tools, stream=True)
    err = '{"error": {"message": "Expecting value: line 1 column 1 (char 0)", "type": "BadRequestError", "param": null, "code": 400}}'
    frames = sse(role_chunk(w), err)
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/30651",
            api="chat",
            exchanges=[exchange(w, CHAT, req, frames)],
            party="parser",
            rules=("stream-error-frame",),
            what="the mistral tool parser's JSON error ends the stream as an error frame",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/37397 (vllm-openai v0.17.1, Kimi-K2.5, kimi_k2 tool and
    # reasoning parsers): with chat_template_kwargs thinking=true the stream carries only delta.content
    # and no delta.reasoning.
    w = Wire("kimi-k25-stream-reasoning-returned-as-content", "moonshotai/Kimi-K2.5", "0.17.1", tp=4)
    req = _req(w.model, "What is a mutex?", None, stream=True, chat_template_kwargs={"thinking": True})
    frames = sse(
        role_chunk(w),
        chunk(w, {"content": " A"}),
        chunk(w, {"content": " mutex is a lock that lets one thread at a time into a critical section."}),
        chunk(w, {}, "stop"),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/37397",
            api="chat",
            exchanges=[exchange(w, CHAT, req, frames)],
            party="parser",
            rules=("reasoning-missing",),
            what="K2.5 with thinking on streams no reasoning through the kimi_k2 parser",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/27194: EngineDeadError under a high-concurrency
    # benchmark; the chat stream generator reports it in-band and ends with [DONE].
    w = Wire("engine-dead-midstream-error-frame", "Qwen/Qwen3-30B-A3B-Instruct-2507", "0.11.0")
    req = _req(w.model, "Write a haiku about load balancers.", None, stream=True)
    err = (
        '{"error": {"message": "EngineCore encountered an issue. See stack trace (above) for the root cause.", '
        '"type": "InternalServerError", "param": null, "code": 500}}'
    )
    frames = sse(role_chunk(w), chunk(w, {"content": "Requests"}), chunk(w, {"content": " flow like"}), err)
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/27194",
            api="chat",
            exchanges=[exchange(w, CHAT, req, frames)],
            party="engine",
            rules=("stream-error-frame",),
            what="the engine core dies mid-stream; vLLM reports it in-band",
            direct=True,
        )
    )
    return out
