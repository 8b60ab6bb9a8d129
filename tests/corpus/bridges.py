"""LiteLLM's bridges in front of a chat engine: the caller speaks Messages or Responses, LiteLLM speaks
chat completions to vLLM; both taps recorded.

The caller-side Messages frames are what LiteLLM 1.108's ``AnthropicStreamWrapper`` yields (run on
chat chunks here once to read its shape): ``event:`` and ``data:`` lines, ``json.dumps`` spacing, keys
``type, index, content_block|delta``, a ``msg_<uuid>`` id, a thinking block opened with an empty
signature and no ``signature_delta``. The engine side is vLLM's chat stream.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from .case import Case, case
from .wire import (
    CHAT,
    MESSAGES,
    RESPONSES,
    Wire,
    chunk,
    exchange,
    flat_tool,
    function_tool,
    role_chunk,
    sse,
    tool_delta,
    usage_chunk,
)

LITELLM_SSE = [("content-type", "text/event-stream"), ("x-litellm-version", "1.85.0")]
NOTES = function_tool(
    "save_note", "Save a note", {"title": {"type": "string"}, "body": {"type": "string"}}, ["title", "body"]
)


def _msg_id(w: Wire) -> str:
    return f"msg_{uuid.UUID(w.hex('litellm-msg', 32))}"


class LiteLLMMessages:
    """Caller-side Messages events as LiteLLM's adapter writes them."""

    def __init__(self, w: Wire, alias: str) -> None:
        self.events: list[dict[str, Any]] = [
            {
                "type": "message_start",
                "message": {
                    "id": _msg_id(w),
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": alias,
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": 0,
                        "output_tokens": 0,
                        "cache_creation_input_tokens": 0,
                        "cache_read_input_tokens": 0,
                    },
                },
            }
        ]
        self.index = 0

    def block(self, start: dict[str, Any], deltas: list[dict[str, Any]]) -> LiteLLMMessages:
        self.events.append({"type": "content_block_start", "index": self.index, "content_block": start})
        self.events += [{"type": "content_block_delta", "index": self.index, "delta": d} for d in deltas]
        self.events.append({"type": "content_block_stop", "index": self.index})
        self.index += 1
        return self

    def thinking(self, *pieces: str) -> LiteLLMMessages:
        return self.block(
            {"type": "thinking", "thinking": "", "signature": ""},
            [{"type": "thinking_delta", "thinking": p} for p in pieces],
        )

    def text(self, *pieces: str) -> LiteLLMMessages:
        return self.block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces])

    def tool(self, call_id: str, name: str, *pieces: str) -> LiteLLMMessages:
        return self.block(
            {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": p} for p in pieces],
        )

    def stop(self, reason: str, input_tokens: int, output_tokens: int) -> list[bytes]:
        self.events.append(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason},
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
            }
        )
        self.events.append({"type": "message_stop"})
        return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in self.events]


def _anthropic_req(alias: str, prompt: str, **kw: Any) -> dict[str, Any]:
    return {
        "model": alias,
        "max_tokens": kw.pop("max_tokens", 1024),
        "messages": [{"role": "user", "content": prompt}],
        **kw,
    }


def _chat_req(model: str, prompt: str, **kw: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": kw.pop("max_tokens", 1024),
        "stream": True,
        "stream_options": {"include_usage": True},
        **kw,
    }


Side = tuple[dict[str, Any], list[bytes]]


def _pair(w: Wire, caller_path: str, caller: Side, engine: Side) -> list[Any]:
    """The caller side (LiteLLM's, on ``caller_path``) and the engine side (vLLM's chat), each a
    request and its frames."""
    (caller_req, caller_frames), (engine_req, engine_frames) = caller, engine
    return [
        exchange(w, caller_path, caller_req, caller_frames, tap="caller", headers=LITELLM_SSE, first_ms=460),
        exchange(w, CHAT, engine_req, engine_frames, offset_ms=22),
    ]


def cases() -> list[Case]:
    out: list[Case] = []

    # https://github.com/BerriAI/litellm/issues/29286 (LiteLLM v1.85.0 in front of vLLM v0.21.0 serving
    # DeepSeek V4 Pro): vLLM's chunks carry delta.content with an empty "tool_calls": []; LiteLLM's
    # /v1/messages stream turns them into empty input_json_delta events instead of text_delta, and
    # Claude Code shows no text. /v1/chat/completions through the same proxy streams fine.
    w = Wire("litellm-messages-bridge-empty-input-json-delta", "deepseek-ai/DeepSeek-V4-Pro", "0.21.0", tp=8)
    alias = "deepseek-v4-pro"
    pieces = ["The", " build", " passed", "."]
    engine = sse(
        role_chunk(w),
        *[chunk(w, {"content": p, "tool_calls": []}) for p in pieces],
        chunk(w, {}, "stop"),
        usage_chunk(w, 52, 5),
    )
    caller = LiteLLMMessages(w, alias).block(
        {"type": "tool_use", "id": f"toolu_{w.hex('toolu', 24)}", "name": "", "input": {}},
        [{"type": "input_json_delta", "partial_json": ""} for _ in pieces],
    )
    frames = caller.stop("end_turn", 52, 5)
    prompt = "Did the last CI build pass? One sentence."
    out.append(
        case(
            w.case,
            sources="https://github.com/BerriAI/litellm/issues/29286",
            api="messages",
            exchanges=_pair(
                w,
                MESSAGES,
                (_anthropic_req(alias, prompt, stream=True), frames),
                (_chat_req(w.model, prompt), engine),
            ),
            party="gateway",
            rules=("gateway-*", "api-*", "tool-call-shape", "finish-reason-mismatch"),
            what="LiteLLM's Messages bridge turns text into empty input_json_delta events",
        )
    )

    # https://github.com/BerriAI/litellm/pull/34589: the Anthropic adapter mapped thinking
    # {"type": "disabled"} to no reasoning_effort at all, so a thinking model still reasoned; the caller
    # asked for no thinking and got a thinking block.
    w = Wire("litellm-messages-bridge-thinking-disabled-dropped", "zai-org/GLM-4.7", "0.27.0", tp=4)
    alias = "glm-4.7"
    prompt = "Classify this ticket as bug or feature: 'Add dark mode'."
    engine = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "It asks for something new."}),
        chunk(w, {"reasoning": " A feature."}),
        chunk(w, {"content": "feature"}),
        chunk(w, {}, "stop"),
        usage_chunk(w, 40, 19, 13),
    )
    frames = (
        LiteLLMMessages(w, alias)
        .thinking("It asks for something new.", " A feature.")
        .text("feature")
        .stop("end_turn", 40, 19)
    )
    out.append(
        case(
            w.case,
            sources="https://github.com/BerriAI/litellm/pull/34589",
            api="messages",
            exchanges=_pair(
                w,
                MESSAGES,
                (_anthropic_req(alias, prompt, stream=True, thinking={"type": "disabled"}), frames),
                (_chat_req(w.model, prompt), engine),
            ),
            party="gateway",
            rules=("gateway-request-changed", "gateway-*"),
            what="LiteLLM drops thinking disabled on its way to the chat engine",
        )
    )

    # https://github.com/BerriAI/litellm/pull/34589: stop_sequences were copied through verbatim
    # instead of being translated to stop; vLLM accepts and ignores the unknown field, so the answer
    # runs past the caller's stop sequence.
    w = Wire(
        "litellm-messages-bridge-stop-sequences-not-translated", "Qwen/Qwen3-30B-A3B-Instruct-2507", "0.27.0"
    )
    alias = "qwen3-30b"
    prompt = "Reply 'ok' then END then anything else."
    engine = sse(
        role_chunk(w),
        chunk(w, {"content": "ok END and a"}),
        chunk(w, {"content": " little more text"}),
        chunk(w, {}, "stop"),
        usage_chunk(w, 21, 8),
    )
    frames = LiteLLMMessages(w, alias).text("ok END and a", " little more text").stop("end_turn", 21, 8)
    out.append(
        case(
            w.case,
            sources="https://github.com/BerriAI/litellm/pull/34589",
            api="messages",
            exchanges=_pair(
                w,
                MESSAGES,
                (_anthropic_req(alias, prompt, stream=True, stop_sequences=["END"]), frames),
                (_chat_req(w.model, prompt, stop_sequences=["END"]), engine),
            ),
            party="gateway",
            rules=("gateway-request-changed", "gateway-*"),
            what="LiteLLM passes stop_sequences to the chat engine untranslated",
        )
    )

    # https://github.com/BerriAI/litellm/issues/20246 (a comment of 2026-04-20: "Only working with chat
    # completions but not with responses API"): through LiteLLM's Responses bridge, vLLM's streamed
    # reasoning does not reach the caller as a reasoning item.
    w = Wire("litellm-responses-bridge-reasoning-dropped", "Qwen/Qwen3.5-9B", "0.20.0")
    alias = "qwen3.5-9b"
    prompt = "2+3=?"
    engine = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Add two and three."}),
        chunk(w, {"content": "5"}),
        chunk(w, {}, "stop"),
        usage_chunk(w, 12, 9, 6),
    )
    caller = _litellm_responses(w, alias, prompt, text="5")
    out.append(
        case(
            w.case,
            sources="https://github.com/BerriAI/litellm/issues/20246",
            api="responses",
            exchanges=_pair(
                w,
                RESPONSES,
                ({"model": alias, "input": prompt, "stream": True}, caller),
                (_chat_req(w.model, prompt), engine),
            ),
            party="gateway",
            rules=("gateway-reasoning-dropped", "gateway-*"),
            what="LiteLLM's Responses bridge loses vLLM's reasoning",
        )
    )

    # --- faithful bridges: legal ----------------------------------------------------------------------

    w = Wire("legal-litellm-messages-bridge-thinking-text-tool", "moonshotai/Kimi-K2.5", "0.32.0", tp=8)
    alias = "kimi-k2.5"
    prompt = "Save a note titled 'Groceries' listing milk and eggs."
    engine = sse(
        role_chunk(w),
        chunk(w, {"reasoning": "Save it."}),
        chunk(w, {"content": "Saving it."}),
        chunk(
            w, {"tool_calls": [tool_delta("functions.save_note:0", "save_note", '{"title": "Groceries", ')]}
        ),
        chunk(w, {"tool_calls": [tool_delta(None, None, '"body": "milk, eggs"}')]}),
        chunk(w, {}, "tool_calls"),
        usage_chunk(w, 130, 34, 3),
    )
    frames = (
        LiteLLMMessages(w, alias)
        .thinking("Save it.")
        .text("Saving it.")
        .tool("functions.save_note:0", "save_note", '{"title": "Groceries", ', '"body": "milk, eggs"}')
        .stop("tool_use", 130, 34)
    )
    tools = [
        {"name": "save_note", "description": "Save a note", "input_schema": NOTES["function"]["parameters"]}
    ]
    out.append(
        case(
            w.case,
            sources="https://docs.litellm.ai/docs/anthropic_unified",
            api="messages",
            exchanges=_pair(
                w,
                MESSAGES,
                (_anthropic_req(alias, prompt, stream=True, tools=tools), frames),
                (_chat_req(w.model, prompt, tools=[NOTES]), engine),
            ),
            party=None,
            what="a faithful Messages bridge: thinking, text and a tool_use",
        )
    )

    w = Wire("legal-litellm-responses-bridge-text", "meta-llama/Llama-3.1-8B-Instruct", "0.32.0")
    alias = "llama-8b"
    prompt = "Name a primary colour."
    engine = sse(
        role_chunk(w),
        chunk(w, {"content": "Red"}),
        chunk(w, {"content": "."}),
        chunk(w, {}, "stop"),
        usage_chunk(w, 13, 2),
    )
    out.append(
        case(
            w.case,
            sources="https://docs.litellm.ai/docs/response_api",
            api="responses",
            exchanges=_pair(
                w,
                RESPONSES,
                (
                    {"model": alias, "input": prompt, "stream": True},
                    _litellm_responses(w, alias, prompt, text="Red.", usage=(13, 2)),
                ),
                (_chat_req(w.model, prompt), engine),
            ),
            party=None,
            what="a faithful Responses bridge: text",
        )
    )

    w = Wire("legal-litellm-responses-bridge-function-call", "moonshotai/Kimi-K2-Instruct-0905", "0.32.0")
    alias = "kimi-k2"
    prompt = "Save a note titled 'Call mum' with body 'Sunday'."
    engine = sse(
        role_chunk(w),
        chunk(w, {"tool_calls": [tool_delta("functions.save_note:0", "save_note", '{"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, 'title": "Call mum", "body": "Sunday"')]}),
        chunk(w, {"tool_calls": [tool_delta(None, None, "}")]}),
        chunk(w, {}, "tool_calls"),
        usage_chunk(w, 98, 21),
    )
    caller = _litellm_responses(
        w,
        alias,
        prompt,
        call=("functions.save_note:0", "save_note", '{"title": "Call mum", "body": "Sunday"}'),
        tools=[flat_tool(NOTES)],
        usage=(98, 21),
    )
    out.append(
        case(
            w.case,
            sources="https://docs.litellm.ai/docs/response_api",
            api="responses",
            exchanges=_pair(
                w,
                RESPONSES,
                ({"model": alias, "input": prompt, "stream": True, "tools": [flat_tool(NOTES)]}, caller),
                (_chat_req(w.model, prompt, tools=[NOTES]), engine),
            ),
            party=None,
            what="a faithful Responses bridge: a function call",
        )
    )
    return out


def _litellm_responses(
    w: Wire,
    alias: str,
    prompt: str,
    *,
    text: str | None = None,
    call: tuple[str, str, str] | None = None,
    tools: list[Any] | None = None,
    usage: tuple[int, int] = (12, 9),
) -> list[bytes]:
    """The caller side of LiteLLM's Responses bridge: typed events with sequence numbers, a message
    item (``msg_`` id) and/or a function_call item, ``response.completed`` repeating them with the
    engine's usage (``usage``: its prompt and completion tokens; LiteLLM 1.108 keeps them)."""
    rid = f"resp_{w.hex('litellm-resp')}"
    events: list[dict[str, Any]] = []

    def emit(e: dict[str, Any]) -> None:
        events.append({"type": e.pop("type"), "sequence_number": len(events), **e})

    base = {
        "id": rid,
        "object": "response",
        "created_at": w.created,
        "status": "in_progress",
        "model": alias,
        "output": [],
        "tools": tools or [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "usage": None,
    }
    emit({"type": "response.created", "response": base})
    emit({"type": "response.in_progress", "response": base})
    output: list[dict[str, Any]] = []
    if text is not None:
        mid = f"msg_{w.hex('litellm-msgitem')}"
        emit(
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {
                    "type": "message",
                    "id": mid,
                    "status": "in_progress",
                    "role": "assistant",
                    "content": [],
                },
            }
        )
        emit(
            {
                "type": "response.content_part.added",
                "item_id": mid,
                "output_index": 0,
                "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": []},
            }
        )
        emit(
            {
                "type": "response.output_text.delta",
                "item_id": mid,
                "output_index": 0,
                "content_index": 0,
                "delta": text,
                "logprobs": [],
            }
        )
        emit(
            {
                "type": "response.output_text.done",
                "item_id": mid,
                "output_index": 0,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            }
        )
        part = {"type": "output_text", "text": text, "annotations": []}
        emit(
            {
                "type": "response.content_part.done",
                "item_id": mid,
                "output_index": 0,
                "content_index": 0,
                "part": part,
            }
        )
        item = {"type": "message", "id": mid, "status": "completed", "role": "assistant", "content": [part]}
        emit({"type": "response.output_item.done", "output_index": 0, "item": item})
        output.append(item)
    if call is not None:
        call_id, name, args = call
        oi = len(output)
        fid = f"fc_{w.hex('litellm-fc')}"
        emit(
            {
                "type": "response.output_item.added",
                "output_index": oi,
                "item": {
                    "type": "function_call",
                    "id": fid,
                    "call_id": call_id,
                    "name": name,
                    "arguments": "",
                    "status": "in_progress",
                },
            }
        )
        emit(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": fid,
                "output_index": oi,
                "delta": args,
            }
        )
        emit(
            {
                "type": "response.function_call_arguments.done",
                "item_id": fid,
                "output_index": oi,
                "arguments": args,
            }
        )
        item = {
            "type": "function_call",
            "id": fid,
            "call_id": call_id,
            "name": name,
            "arguments": args,
            "status": "completed",
        }
        emit({"type": "response.output_item.done", "output_index": oi, "item": item})
        output.append(item)
    emit(
        {
            "type": "response.completed",
            "response": {
                **base,
                "status": "completed",
                "output": output,
                "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage)},
            },
        }
    )
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]
