"""The simulator's /v1/messages: the Anthropic Messages API as vLLM serves it.

vLLM converts its own chat stream chunk by chunk (``entrypoints/anthropic/serving.py``,
``message_stream_converter``); so does the simulator: see ``_apis`` for the shared approach and the
wire facts.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

from ._admission import Admitted, _Reject, endpoint
from ._apis import _chat_frames, _hex32, _sse, _text_of
from ._chat import chat_stream, whole_body

__all__ = ["messages"]


def _anthropic_error(status: int, type_: str, message: str) -> JSONResponse:
    # translate_error_response (anthropic/api_router.py)
    return JSONResponse({"type": "error", "error": {"type": type_, "message": message}}, status_code=status)


class _Invalid(_Reject):
    """A body that ``AnthropicMessagesRequest`` does not validate. FastAPI refuses it before the
    Messages handler runs, so vLLM's global validation handler answers, OpenAI-shaped
    (``{"error": {"message", "type": "Bad Request", "param", "code": 400}}``), not in the Anthropic
    error shape the handler's own errors get (``serve/exception_handling/handlers/validation.py``)."""

    def __init__(self, kind: str, loc: tuple[str | int, ...], msg: str, value: Any, **ctx: Any) -> None:
        param = ".".join(str(p) for p in ("body", *loc))
        err: dict[str, Any] = {"type": kind, "loc": param, "msg": msg, "input": _summary(value)}
        if kind == "value_error":  # a validator's ValueError, as pydantic keeps it
            ctx = {"error": ValueError(msg.removeprefix("Value error, "))}
        if ctx:
            err["ctx"] = ctx
        # the handler's message: a count, then one repr'd pydantic error per line
        super().__init__(400, f"1 validation error:\n  {err!r}", "Bad Request", param)


def _summary(value: Any) -> Any:
    """``_summarize_error_input``: containers described, not echoed."""
    if isinstance(value, list | dict):
        return f"<{type(value).__name__} of {len(value)} items>"
    return value if isinstance(value, str) else str(value)


def _anthropic_reject(rej: _Reject) -> JSONResponse:
    if isinstance(rej, _Invalid):
        return rej.response()
    return _anthropic_error(rej.status, rej.type, rej.message)


def _int_field(raw: dict[str, Any], key: str) -> int:
    v = raw.get(key)
    if v is None:
        raise _Invalid("missing", (key,), "Field required", raw)
    if not isinstance(v, int) or isinstance(v, bool):
        raise _Invalid("int_type", (key,), "Input should be a valid integer", v)
    return v


def _check_request(raw: Any) -> dict[str, Any]:
    """The fields of ``AnthropicMessagesRequest`` (anthropic/protocol.py) whose validation the
    simulator's callers reach: the required ones, ``max_tokens > 0``, the thinking config (a budget
    of at least 1024 tokens, below ``max_tokens``) and a named ``tool_choice``'s name."""
    if not isinstance(raw, dict):
        raise _Invalid(
            "model_attributes_type",
            (),
            "Input should be a valid dictionary or object to extract fields from",
            raw,
        )
    if not raw.get("model"):
        raise _Invalid("missing", ("model",), "Field required", raw)
    if not isinstance(raw.get("messages"), list):
        raise _Invalid("missing", ("messages",), "Field required", raw)
    for i, m in enumerate(raw["messages"]):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant", "system"):
            role = m.get("role") if isinstance(m, dict) else m
            raise _Invalid(
                "literal_error",
                ("messages", i, "role"),
                "Input should be 'user', 'assistant' or 'system'",
                role,
                expected="'user', 'assistant' or 'system'",
            )
    max_tokens = _int_field(raw, "max_tokens")
    if max_tokens <= 0:
        raise _Invalid("value_error", ("max_tokens",), "Value error, max_tokens must be positive", max_tokens)
    thinking = raw.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int):
            raise _Invalid("missing", ("thinking", "enabled", "budget_tokens"), "Field required", thinking)
        if budget < 1024:
            raise _Invalid(
                "greater_than_equal",
                ("thinking", "enabled", "budget_tokens"),
                "Input should be greater than or equal to 1024",
                budget,
                ge=1024,
            )
        if budget >= max_tokens:
            raise _Invalid(
                "value_error", (), "Value error, thinking.budget_tokens must be less than max_tokens", raw
            )
    tc = raw.get("tool_choice")
    if isinstance(tc, dict) and tc.get("type") == "tool" and not tc.get("name"):
        raise _Invalid(
            "value_error",
            ("tool_choice",),
            "Value error, tool_choice.name is required when type is 'tool'",
            tc,
        )
    return raw


def messages_to_chat(body: Any) -> dict[str, Any]:
    """``to_chat_completion_request`` (anthropic/serving.py), for the shapes the simulator serves."""
    raw = _check_request(body)
    msgs: list[dict[str, Any]] = []
    system = raw.get("system")
    if system is not None:
        msgs.append({"role": "system", "content": _text_of(system)})
    for m in raw["messages"]:
        content = m.get("content")
        if m["role"] == "system":
            # an inline system turn stays a system message (_convert_messages)
            msgs.append({"role": "system", "content": _text_of(content)})
            continue
        if isinstance(content, str):
            msgs.append({"role": m["role"], "content": content})
            continue
        blocks = content if isinstance(content, list) else []
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        reasoning = ""
        for b in blocks:
            if not isinstance(b, dict):
                continue
            kind = b.get("type")
            if kind == "text":
                texts.append(str(b.get("text", "")))
            elif kind == "thinking":
                reasoning += str(b.get("thinking", ""))
            elif kind == "tool_use":
                calls.append(
                    {
                        "id": b.get("id"),
                        "type": "function",
                        "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input") or {})},
                    }
                )
            elif kind == "tool_result":
                msgs.append(
                    {
                        "role": "tool",
                        "tool_call_id": b.get("tool_use_id"),
                        "content": _text_of(b.get("content")),
                    }
                )
        if m["role"] == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                out["tool_calls"] = calls
            if reasoning:
                out["reasoning"] = reasoning
            msgs.append(out)
        elif texts:
            msgs.append({"role": "user", "content": "".join(texts)})
    chat: dict[str, Any] = {
        "model": raw.get("model"),
        "messages": msgs,
        "max_tokens": raw["max_tokens"],
    }
    tools = raw.get("tools")
    if isinstance(tools, list) and tools:
        chat["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.get("name"),
                    "description": t.get("description", ""),
                    "parameters": t.get("input_schema"),
                },
            }
            for t in tools
            if isinstance(t, dict)
        ]
    tc = raw.get("tool_choice")
    if isinstance(tc, dict):
        kind = tc.get("type")
        chat["parallel_tool_calls"] = not tc.get("disable_parallel_tool_use", False)
        if kind == "tool":
            chat["tool_choice"] = {"type": "function", "function": {"name": tc.get("name")}}
        else:
            chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}.get(str(kind), "auto")
    for key in ("temperature", "top_p", "chat_template_kwargs"):
        if raw.get(key) is not None:
            chat[key] = raw[key]
    oc = raw.get("output_config")
    fmt = oc.get("format") if isinstance(oc, dict) else None
    if isinstance(fmt, dict) and fmt.get("schema"):
        # _handle_output_config: the wire's "schema" (AnthropicJsonOutputFormat.json_schema's alias)
        # becomes a json_schema response format, named after the format's type
        kind = fmt.get("type") or "json_schema"
        chat["response_format"] = {"type": kind, "json_schema": {"name": kind, "schema": fmt["schema"]}}
    if raw.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    return chat


def _stop_reason(finish: str | None, tool_used: bool, tool_complete: bool) -> str | None:
    """``_to_anthropic_stop_reason`` (anthropic/serving.py); the simulator has no stop strings."""
    if finish == "length":
        return "max_tokens"
    if finish not in ("stop", "tool_calls"):
        return None
    if tool_complete or finish == "tool_calls" or tool_used:
        return "tool_use"
    return "end_turn"


def _msg_usage(u: dict[str, Any] | None) -> dict[str, Any]:
    """``_build_anthropic_usage``: input_tokens excludes the cached part, which is reported apart."""
    if u is None:
        return {"input_tokens": 0, "output_tokens": 0}
    out: dict[str, Any] = {"input_tokens": 0, "output_tokens": u.get("completion_tokens") or 0}
    inp = int(u.get("prompt_tokens") or 0)
    details = u.get("prompt_tokens_details")
    if isinstance(details, dict) and details.get("cached_tokens") is not None:
        inp -= details["cached_tokens"]
        out["cache_read_input_tokens"] = details["cached_tokens"]
    out["input_tokens"] = max(0, inp)
    return out


async def _answer(admitted: Admitted) -> Response:
    reply = admitted.reply
    if admitted.req.get("stream"):
        return StreamingResponse(_messages_events(chat_stream(admitted)), media_type="text/event-stream")
    body = await whole_body(admitted)
    choice = body["choices"][0]
    msg = choice["message"]
    content: list[dict[str, Any]] = []
    if msg.get("reasoning"):
        content.append({"type": "thinking", "thinking": msg["reasoning"], "signature": _hex32(reply.id)})
    if msg.get("content"):
        content.append({"type": "text", "text": msg["content"]})
    for tc in msg.get("tool_calls") or []:
        try:
            args = json.loads(tc["function"]["arguments"])
        except ValueError as exc:
            # messages_full_converter json.loads the arguments; the router turns the exception into 400
            return _anthropic_error(400, "BadRequestError", str(exc))
        if not isinstance(args, dict):
            return _anthropic_error(400, "BadRequestError", "tool_use input should be a valid dictionary")
        content.append({"type": "tool_use", "id": tc["id"], "name": tc["function"]["name"], "input": args})
    if not content:
        content.append({"type": "text", "text": ""})
    calls = bool(msg.get("tool_calls"))
    out: dict[str, Any] = {
        "id": body["id"],
        "type": "message",
        "role": "assistant",
        "content": content,
        "model": body["model"],
        "stop_reason": _stop_reason(choice["finish_reason"], calls, calls),
        "usage": _msg_usage(body["usage"]),
    }
    return JSONResponse(out)


messages = endpoint(_answer, to_chat=messages_to_chat, on_reject=_anthropic_reject)


class _MessagesStream:
    """``message_stream_converter`` (anthropic/serving.py): one block open at a time."""

    def __init__(self) -> None:
        self.index = 0
        self.block: str | None = None
        self.block_index: int | None = None
        self.signature: str | None = None
        self.tool_id: str | None = None
        self.pending: list[str] = []

    def start(self, block: dict[str, Any]) -> bytes:
        self.block, self.block_index = block["type"], self.index
        self.signature = _hex32(f"sig:{self.index}:{time.time_ns()}") if block["type"] == "thinking" else None
        self.tool_id = block.get("id") if block["type"] == "tool_use" else None
        return _sse(
            "content_block_start",
            {"type": "content_block_start", "content_block": block, "index": self.index},
        )

    def stop(self) -> list[bytes]:
        if self.block is None:
            return []
        out = []
        if self.block == "thinking" and self.signature is not None:
            d = {"type": "signature_delta", "signature": self.signature}
            out.append(
                _sse(
                    "content_block_delta",
                    {"type": "content_block_delta", "delta": d, "index": self.block_index},
                )
            )
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": self.block_index}))
        self.block = self.block_index = self.signature = self.tool_id = None
        self.index += 1
        return out

    def stop_and_flush(self) -> list[bytes]:
        buffered = "".join(self.pending)
        self.pending.clear()
        out = self.stop()
        if buffered:
            out.append(self.start({"type": "text", "text": ""}))
            out.append(self.delta({"type": "text_delta", "text": buffered}))
            out += self.stop()
        return out

    def delta(self, d: dict[str, Any]) -> bytes:
        idx = self.block_index if self.block_index is not None else self.index
        return _sse("content_block_delta", {"type": "content_block_delta", "delta": d, "index": idx})


async def _messages_events(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    st = _MessagesStream()
    first = True
    finish: str | None = None
    tool_used = False
    last_args: list[str] = []
    ids: dict[Any, str] = {}
    async for frame in _chat_frames(chunks):
        if frame == "[DONE]":
            for piece in st.stop_and_flush():
                yield piece
            yield _sse("message_stop", {"type": "message_stop"})
            return
        if "error" in frame:
            # a frame that is not a chat chunk makes the converter raise: one error event, no stop
            err = {"type": "internal_error", "message": str(frame["error"].get("message"))}
            yield _sse("error", {"type": "error", "error": err})
            return
        if first:
            first = False
            start = {
                "id": frame["id"],
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": frame["model"],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": _msg_usage(frame.get("usage")),
            }
            yield _sse("message_start", {"type": "message_start", "message": start})
            continue
        if not frame.get("choices"):
            for piece in st.stop_and_flush():
                yield piece
            complete = tool_used and _is_json("".join(last_args))
            d = {"stop_reason": _stop_reason(finish or "stop", tool_used, complete), "stop_sequence": None}
            yield _sse(
                "message_delta",
                {"type": "message_delta", "delta": d, "usage": _msg_usage(frame.get("usage"))},
            )
            continue
        ch = frame["choices"][0]
        if ch.get("finish_reason") is not None:
            finish = ch["finish_reason"]
        delta = ch.get("delta") or {}
        reasoning = delta.get("reasoning")
        if reasoning:
            if st.block != "thinking":
                for piece in st.stop_and_flush():
                    yield piece
                yield st.start({"type": "thinking", "thinking": ""})
            yield st.delta({"type": "thinking_delta", "thinking": reasoning})
        text = delta.get("content")
        if text:
            if st.block == "tool_use":
                st.pending.append(text)
            else:
                if st.block != "text":
                    for piece in st.stop_and_flush():
                        yield piece
                    yield st.start({"type": "text", "text": ""})
                yield st.delta({"type": "text_delta", "text": text})
        for tc in delta.get("tool_calls") or []:
            fn = tc.get("function") or {}
            args = fn.get("arguments")
            if tc.get("id") is not None:
                ids[tc.get("index")] = tc["id"]
                if st.tool_id != tc["id"] and fn.get("name") is not None:
                    for piece in st.stop_and_flush():
                        yield piece
                    tool_used = True
                    last_args = []
                    yield st.start({"type": "tool_use", "id": tc["id"], "name": fn["name"], "input": {}})
                target = tc["id"]
            else:
                target = ids.get(tc.get("index"), "")
            if args and st.tool_id == target:
                last_args.append(args)
                yield st.delta({"type": "input_json_delta", "partial_json": args})


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
