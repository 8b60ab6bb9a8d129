"""Chat completions through a gateway (LiteLLM's proxy, both taps recorded) and requests that break
vLLM's contract (party: caller).

Caller-side frames are LiteLLM's: ``ModelResponseStream.model_dump_json(exclude_none=True,
exclude_unset=True)`` (litellm/proxy/proxy_server.py), so nulls are gone, ``finish_reason`` leads a
choice when set, a tool call entry reads ``id, function{arguments, name}, type, index``, and the
model is the caller's alias. The engine side is vLLM's.
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
    error_body,
    exchange,
    function_tool,
    role_chunk,
    sse,
    tool_delta,
    usage,
    usage_chunk,
)

LITELLM_SSE = [("content-type", "text/event-stream; charset=utf-8"), ("x-litellm-version", "1.81.12")]


def litellm_chunk(
    w: Wire, alias: str, delta: dict[str, Any], finish: str | None = None, **top: Any
) -> dict[str, Any]:
    choice: dict[str, Any] = {}
    if finish is not None:
        choice["finish_reason"] = finish
    choice["index"] = 0
    choice["delta"] = delta
    return {
        "id": w.cid,
        "created": w.created,
        "model": alias,
        "object": "chat.completion.chunk",
        "choices": [choice],
        **top,
    }


def _req(model: str, prompt: str, **kw: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": prompt}], **kw}


def cases() -> list[Case]:
    out: list[Case] = []

    # https://github.com/BerriAI/litellm/issues/20246 (vLLM 0.19 sends delta.reasoning; LiteLLM's
    # hosted_vllm streaming path knew only reasoning_content and is_chunk_non_empty() discarded
    # reasoning-only chunks, so the caller got the answer without its reasoning; regression in
    # v1.81.1+, see https://github.com/BerriAI/litellm/pull/22568).
    w = Wire("litellm-hosted-vllm-stream-reasoning-dropped", "Qwen/Qwen3.5-9B", "0.19.0")
    alias = "qwen3.5-9b"
    reasoning = ["Thinking", " Process", ":", "\n\n", "1", ".", " The", " user", " asks", " 1", "+", "1", "."]
    engine = sse(
        role_chunk(w),
        *[chunk(w, {"reasoning": r}) for r in reasoning],
        chunk(w, {"content": "1"}),
        chunk(w, {"content": " + 1 = 2"}),
        chunk(w, {}, "stop"),
        usage_chunk(w, 14, 21, 13),
    )
    caller = sse(
        litellm_chunk(w, alias, {"content": "1", "role": "assistant"}),
        litellm_chunk(w, alias, {"content": " + 1 = 2"}),
        litellm_chunk(w, alias, {}, "stop"),
    )
    corr = f"wc-{w.hex('corr', 12)}"
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/BerriAI/litellm/issues/20246",
                "https://github.com/BerriAI/litellm/pull/22568",
            ),
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req(alias, "1+1=?", stream=True),
                    caller,
                    tap="caller",
                    headers=LITELLM_SSE,
                    first_ms=420,
                    correlation=corr,
                ),
                exchange(
                    w,
                    CHAT,
                    _req(w.model, "1+1=?", stream=True, stream_options={"include_usage": True}),
                    engine,
                    correlation=corr,
                    offset_ms=15,
                ),
            ],
            party="gateway",
            rules=("gateway-reasoning-dropped",),
            what="LiteLLM drops vLLM's delta.reasoning from the stream",
        )
    )

    # https://github.com/BerriAI/litellm/issues/20480: LiteLLM sends a streamed tool call's id (and
    # type) on every chunk, where the OpenAI stream sends them once; clients that concatenate ids
    # get "call_abccall_abc" (https://github.com/run-llama/llama_index/pull/21693).
    w = Wire("litellm-tool-call-id-on-every-chunk", "Qwen/Qwen3-32B", "0.15.1")
    alias = "qwen3-32b"
    tools = [function_tool("search", "Search the web", {"query": {"type": "string"}}, ["query"])]
    cid = w.tool_id(0)
    frags = ['{"qu', 'ery":', ' "hello world"}']
    engine = sse(
        role_chunk(w),
        chunk(w, {"tool_calls": [tool_delta(cid, "search", None)]}),
        *[chunk(w, {"tool_calls": [tool_delta(None, None, f)]}) for f in frags],
        chunk(w, {}, "tool_calls"),
        usage_chunk(w, 118, 19),
    )
    caller = sse(
        litellm_chunk(
            w,
            alias,
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": cid,
                        "function": {"arguments": "", "name": "search"},
                        "type": "function",
                        "index": 0,
                    }
                ],
            },
        ),
        *[
            litellm_chunk(
                w,
                alias,
                {"tool_calls": [{"id": cid, "function": {"arguments": f}, "type": "function", "index": 0}]},
            )
            for f in frags
        ],
        litellm_chunk(w, alias, {}, "tool_calls"),
    )
    prompt = "Search the web for hello world."
    corr = f"wc-{w.hex('corr', 12)}"
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/BerriAI/litellm/issues/20480",
                "https://github.com/run-llama/llama_index/pull/21693",
            ),
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req(alias, prompt, tools=tools, stream=True),
                    caller,
                    tap="caller",
                    headers=LITELLM_SSE,
                    first_ms=390,
                    correlation=corr,
                ),
                exchange(
                    w,
                    CHAT,
                    _req(w.model, prompt, tools=tools, stream=True, stream_options={"include_usage": True}),
                    engine,
                    correlation=corr,
                    offset_ms=12,
                ),
            ],
            party="gateway",
            rules=("stream-tool-id-repeated", "gateway-tool-calls-changed"),
            what="LiteLLM repeats the tool call id on every streamed chunk",
        )
    )

    # https://github.com/BerriAI/litellm/issues/10686: with logprobs=true and stream=true LiteLLM strips
    # finish_reason from the stream vLLM sent (Mistral-7B-Instruct-v0.3, max_tokens 30).
    w = Wire("litellm-logprobs-stream-finish-reason-stripped", "Mistral-7B-Instruct-v0.3", "0.8.5")
    lp = {
        "content": [
            {
                "token": "2",
                "logprob": -0.0009,
                "bytes": [50],
                "top_logprobs": [{"token": "2", "logprob": -0.0009, "bytes": [50]}],
            }
        ]
    }
    engine = sse(
        role_chunk(w),
        {
            **chunk(w, {"content": "2"}),
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": "2"},
                    "logprobs": lp,
                    "finish_reason": None,
                    "token_ids": None,
                }
            ],
        },
        chunk(w, {}, "stop"),
    )
    caller = sse(
        litellm_chunk(w, "mistral-7b", {"content": "2", "role": "assistant"}),
        {**litellm_chunk(w, "mistral-7b", {}), "choices": [{"index": 0, "delta": {}, "logprobs": lp}]},
    )
    prompt = "What is 1+1? Give your answer as a single character:__"
    kw = {"max_tokens": 30, "logprobs": True, "top_logprobs": 1, "stream": True}
    out.append(
        case(
            w.case,
            sources="https://github.com/BerriAI/litellm/issues/10686",
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    _req("mistral-7b", prompt, **kw),
                    caller,
                    tap="caller",
                    headers=LITELLM_SSE,
                    first_ms=350,
                ),
                exchange(w, CHAT, _req(w.model, prompt, **kw), engine, offset_ms=20),
            ],
            party="gateway",
            rules=("gateway-finish-reason-changed", "finish-reason-missing"),
            what="LiteLLM loses finish_reason on streams that carry logprobs",
        )
    )

    # https://github.com/langchain-ai/langchain/issues/34751: an agent replays its history with
    # Responses-style content blocks ({"type": "output_text"}) on chat completions; vLLM (gpt-oss-120b,
    # behind LiteLLM's hosted_vllm provider) refuses them with a validation error that LiteLLM relays.
    w = Wire("caller-output-text-blocks-in-chat-history", "openai/gpt-oss-120b", "0.14.0")
    history = [
        {"role": "user", "content": "Tell me a fun fact about octopuses."},
        {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "They have three hearts.", "annotations": []}],
        },
        {"role": "user", "content": "Another one, please."},
    ]
    detail = (
        "3 validation errors for ValidatorIterator\n0.ChatCompletionContentPartTextParam.type\n  Input should "
        "be 'text' [type=literal_error, input_value='output_text', input_type=str]"
    )
    engine_body = error_body(detail, 400, "BadRequestError")
    caller_body = {
        "error": {
            "message": f"litellm.BadRequestError: Hosted_vllmException - {detail}. Received Model "
            "Group=gpt-oss-120b\nAvailable Model Group Fallbacks=None",
            "type": None,
            "param": None,
            "code": "400",
        }
    }
    out.append(
        case(
            w.case,
            sources="https://github.com/langchain-ai/langchain/issues/34751",
            api="chat",
            exchanges=[
                exchange(
                    w,
                    CHAT,
                    {"model": "gpt-oss-120b", "messages": history},
                    caller_body,
                    tap="caller",
                    status=400,
                    headers=[("content-type", "application/json")],
                ),
                exchange(
                    w, CHAT, {"model": w.model, "messages": history}, engine_body, status=400, offset_ms=18
                ),
            ],
            party="caller",
            rules=("http-client-error", "request-*"),
            what="Responses-style content blocks in a chat history are refused",
        )
    )

    # https://github.com/evalstate/fast-agent/issues/781: an agent without tools sends "tools": [] to a
    # self-hosted vLLM and gets "`tools` must not be an empty array", the validation added by
    # https://github.com/vllm-project/vllm/pull/39780 (matching OpenAI).
    w = Wire("caller-empty-tools-array-chat", "openai/gpt-oss-120b", "0.20.0")
    req = _req(w.model, "Give me three names for a sourdough starter.", tools=[])
    msg = "`tools` must not be an empty array. Either provide at least one tool or omit the field entirely. (parameter=tools)"
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/evalstate/fast-agent/issues/781",
                "https://github.com/vllm-project/vllm/pull/39780",
            ),
            api="chat",
            exchanges=[exchange(w, CHAT, req, error_body(msg, 400, "BadRequestError", "tools"), status=400)],
            party="caller",
            rules=("request-empty-tools", "http-client-error"),
            what="an agent sends an empty tools list; chat completions rejects it",
            direct=True,
        )
    )

    # https://github.com/vllm-project/vllm/issues/53975: legacy top-level guided_json on
    # 0.26.1rc1.dev1177 (gemma-4): HTTP 200 with unconstrained free-form text, no warning to the client
    # (the guided_* fields were removed in v0.12.0).
    w = Wire("caller-legacy-guided-json-ignored", "gemma-4", "0.26.1rc1.dev1177+ga9a17e709", tp=2)
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["city", "population"],
    }
    req = _req(
        w.model, "Name the largest city in Norway and its population.", guided_json=schema, temperature=0
    )
    body = completion(
        w,
        message("The largest city in Norway is Oslo, with about 717,000 inhabitants."),
        "stop",
        usage(24, 19),
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/vllm-project/vllm/issues/53975",
            api="chat",
            exchanges=[exchange(w, CHAT, req, body)],
            party="caller",
            rules=("request-guided-fields",),
            what="a removed guided_json field is ignored with 200 and free text",
            direct=True,
        )
    )

    # https://github.com/dottxt-ai/outlines/issues/1887: outlines.from_vllm() still sends guided_json in
    # extra_body to a vLLM 0.23.0 server (Qwen/Qwen3-4B-AWQ); the schema is not enforced and the model
    # answers in prose (fixed in https://github.com/dottxt-ai/outlines/pull/1888).
    w = Wire("caller-outlines-guided-json-stream", "Qwen/Qwen3-4B-AWQ", "0.23.0")
    schema = {
        "type": "object",
        "properties": {"time": {"type": "string"}, "days": {"type": "array", "items": {"type": "string"}}},
        "required": ["time", "days"],
    }
    req = _req(
        w.model,
        "Set a recurring alarm at 5:30 every Monday.",
        guided_json=schema,
        max_tokens=256,
        temperature=0,
        stream=True,
    )
    frames = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "The user wants an alarm plan."}),
        chunk(w, {"content": "Sure! Here is the plan:"}),
        chunk(w, {"content": " **5:30 AM, every Monday**."}),
        chunk(w, {}, "stop", fingerprint=True),
    )
    out.append(
        case(
            w.case,
            sources=(
                "https://github.com/dottxt-ai/outlines/issues/1887",
                "https://github.com/dottxt-ai/outlines/pull/1888",
            ),
            api="chat",
            exchanges=[exchange(w, CHAT, req, frames)],
            party="caller",
            rules=("request-guided-fields",),
            what="a client library still sends the removed guided_json; the stream is unconstrained",
            direct=True,
        )
    )
    return out
