"""The simulator's /v1/responses and /v1/messages: the Responses and Messages APIs as vLLM serves them.

vLLM builds both on its chat machinery, and so does the simulator: the request is turned into a chat
request, the same engine, parser and faults produce the chat completion, and the chat output is turned
into the endpoint's shapes. So ``model.invalid_json`` or ``parser.markup_in_content`` reach these
endpoints exactly as they reach /v1/chat/completions (issue 16).

Wire facts, from the vLLM 0.32 wheel (``vllm/entrypoints/...``):

- Responses (``openai/responses/serving.py``, ``streaming_events.py``, ``api_router.py``): every SSE
  event is ``event: <type>\\ndata: <json>\\n\\n`` with no ``[DONE]``; ``sequence_number`` counts from 0
  over every event; ``response.created`` and ``response.in_progress`` open the stream and
  ``response.completed`` (also for an ``incomplete`` response) closes it. Items are opened by
  ``response.output_item.added`` (plus ``response.content_part.added`` for reasoning and message),
  fed by ``response.reasoning_text.delta`` / ``response.output_text.delta`` /
  ``response.function_call_arguments.delta`` and closed by their ``.done`` events and
  ``response.output_item.done``; ``output_index`` counts items. A chat delta holding several kinds is
  split reasoning, content, then calls by index (``split_delta``). Ids: ``resp_``, ``rs_``, ``msg_``,
  ``fc_`` + 32 hex; ``call_id`` is the chat tool call's id.
- Messages (``anthropic/serving.py``, ``api_router.py``): the chat stream is converted chunk by chunk,
  ``event: <type>\\ndata: <json>\\n\\n``: ``message_start`` at the first chunk, one block open at a
  time (``content_block_start``/``_delta``/``_stop`` with a dense ``index``), ``thinking_delta``,
  ``text_delta``, ``input_json_delta``, a ``signature_delta`` before a thinking block stops,
  ``message_delta`` with ``stop_reason`` at the usage chunk (vLLM asks include_usage and
  continuous_usage_stats), ``message_stop`` at ``[DONE]``. The message id is the chat id; the
  non-streamed body ``json.loads`` each call's arguments, so invalid arguments make it a 400 there.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ._app import SimState, _Reject, _stream, _validate, admit, read_json, unauthorized, whole_body

__all__ = ["messages", "responses"]


def _hex32(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:32]


def _sse(event_type: str, obj: dict[str, Any]) -> bytes:
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return f"event: {event_type}\ndata: {data}\n\n".encode()


async def _chat_frames(chunks: AsyncIterator[bytes]) -> AsyncIterator[Any]:
    """The chat stream's frames as parsed JSON (``"[DONE]"`` as the string), as vLLM's own
    converters read them back (anthropic/serving.py parses each ``data:`` line)."""
    async for piece in chunks:
        for frame in piece.split(b"\n\n"):
            if frame.startswith(b"data: "):
                text = frame[6:].decode()
                yield "[DONE]" if text == "[DONE]" else json.loads(text)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""


# --- /v1/responses ---------------------------------------------------------------------------------


def responses_to_chat(raw: Any) -> dict[str, Any]:
    """A Responses request as the chat request the engine runs (400 on shapes vLLM rejects)."""
    if not isinstance(raw, dict):
        raise _Reject(400, "Input should be a valid dictionary", "Bad Request", "body")
    msgs: list[dict[str, Any]] = []
    if isinstance(raw.get("instructions"), str):
        msgs.append({"role": "system", "content": raw["instructions"]})
    inp = raw.get("input")
    if isinstance(inp, str):
        msgs.append({"role": "user", "content": inp})
    elif isinstance(inp, list):
        for i, item in enumerate(inp):
            if not isinstance(item, dict):
                raise _Reject(400, "Input should be a valid dictionary", "Bad Request", f"body.input.{i}")
            kind = item.get("type", "message")
            if kind == "message":
                role = item.get("role")
                if not isinstance(role, str):
                    raise _Reject(400, "Field required", "Bad Request", f"body.input.{i}.role")
                msgs.append({"role": role, "content": _text_of(item.get("content"))})
            elif kind == "function_call":
                call = {
                    "id": item.get("call_id"),
                    "type": "function",
                    "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
                }
                if msgs and msgs[-1].get("role") == "assistant" and "tool_calls" in msgs[-1]:
                    msgs[-1]["tool_calls"].append(call)
                else:
                    msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
            elif kind == "function_call_output":
                msgs.append(
                    {
                        "role": "tool",
                        "tool_call_id": item.get("call_id"),
                        "content": _text_of(item.get("output")),
                    }
                )
            elif kind == "reasoning":
                continue  # earlier reasoning is not replayed to the simulated model
            else:
                raise _Reject(400, f"input item type {kind!r} is not supported", "BadRequestError", "input")
    else:
        raise _Reject(400, "Field required", "Bad Request", "body.input")
    chat: dict[str, Any] = {"model": raw.get("model"), "messages": msgs}
    tools = raw.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _Reject(400, "Input should be a valid list", "Bad Request", "body.tools")
        fns = []
        for t in tools:
            if not isinstance(t, dict) or t.get("type") != "function" or not isinstance(t.get("name"), str):
                raise _Reject(400, "only function tools are served", "BadRequestError", "tools")
            fn = {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}
            fns.append({"type": "function", "function": fn})
        chat["tools"] = fns or None
        if not fns:
            del chat["tools"]
    tc = raw.get("tool_choice")
    if isinstance(tc, dict) and tc.get("type") == "function":
        chat["tool_choice"] = {"type": "function", "function": {"name": tc.get("name")}}
    elif tc is not None:
        chat["tool_choice"] = tc
    for src, dst in (
        ("max_output_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("parallel_tool_calls", "parallel_tool_calls"),
        ("chat_template_kwargs", "chat_template_kwargs"),
        ("stream", "stream"),
    ):
        if raw.get(src) is not None:
            chat[dst] = raw[src]
    text = raw.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        chat["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": fmt.get("name") or "answer", "schema": fmt.get("schema")},
        }
    elif isinstance(fmt, dict) and fmt.get("type") == "json_object":
        chat["response_format"] = {"type": "json_object"}
    if chat.get("stream"):
        chat["stream_options"] = {"include_usage": True}  # for response.completed's usage
    return chat


def _resp_usage(u: dict[str, Any] | None) -> dict[str, Any] | None:
    if u is None:
        return None
    details = u.get("prompt_tokens_details") or {}
    out_details = u.get("completion_tokens_details") or {}
    return {
        "input_tokens": u["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": details.get("cached_tokens") or 0},
        "output_tokens": u["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": out_details.get("reasoning_tokens") or 0},
        "total_tokens": u["total_tokens"],
    }


def _response_object(
    raw: dict[str, Any],
    rid: str,
    *,
    created: int,
    model: str,
    output: list[dict[str, Any]],
    status: str,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    """``ResponsesResponse.from_request`` (openai/responses/protocol.py)."""
    return {
        "id": rid,
        "created_at": created,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": raw.get("instructions"),
        "metadata": raw.get("metadata"),
        "model": model,
        "object": "response",
        "output": output,
        "parallel_tool_calls": raw.get("parallel_tool_calls", True),
        "temperature": raw.get("temperature", 1.0),
        "tool_choice": raw.get("tool_choice", "auto"),
        "tools": raw.get("tools") or [],
        "top_p": raw.get("top_p", 1.0),
        "background": False,
        "max_output_tokens": raw.get("max_output_tokens"),
        "max_tool_calls": None,
        "previous_response_id": None,
        "prompt": None,
        "reasoning": raw.get("reasoning"),
        "service_tier": "auto",
        "status": status,
        "text": None,
        "top_logprobs": None,
        "truncation": "disabled",
        "user": None,
        "usage": usage,
        "kv_transfer_params": None,
    }


def _reasoning_item(item_id: str, text: str, status: str | None) -> dict[str, Any]:
    return {
        "id": item_id,
        "summary": [],
        "type": "reasoning",
        "content": [{"text": text, "type": "reasoning_text"}],
        "encrypted_content": None,
        "status": status,
    }


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    part: dict[str, Any] = {"annotations": [], "text": text, "type": "output_text", "logprobs": None}
    return {
        "id": item_id,
        "content": [part] if text else [],
        "role": "assistant",
        "status": status,
        "type": "message",
    }


def _call_item(item_id: str, call_id: str, name: str, args: str, status: str) -> dict[str, Any]:
    return {
        "arguments": args,
        "call_id": call_id,
        "name": name,
        "type": "function_call",
        "id": item_id,
        "status": status,
    }


async def responses(request: Request) -> Response:
    state: SimState = request.app.state.sim
    denied = unauthorized(request)
    if denied is not None:
        return denied
    try:
        raw = await read_json(request)
        req = _validate(state.cfg, responses_to_chat(raw))
        reply, seqreq = admit(state, req, request)
    except _Reject as rej:
        return rej.response()
    rid = "resp_" + _hex32(reply.id)
    if req.get("stream"):
        events = _responses_events(raw, rid, reply.created, _stream(state, reply, seqreq, request))
        return StreamingResponse(events, media_type="text/event-stream")
    body = await whole_body(state, reply, seqreq)
    if isinstance(body, _Reject):
        return body.response()
    choice = body["choices"][0]
    msg = choice["message"]
    output: list[dict[str, Any]] = []
    n = 0

    def next_id(prefix: str) -> str:
        nonlocal n
        n += 1
        return f"{prefix}_{_hex32(f'{rid}:{n}')}"

    # build_response_output_items (responses/utils.py): reasoning, then the message, then the calls
    if msg.get("reasoning"):
        output.append(_reasoning_item(next_id("rs"), msg["reasoning"], None))
    if msg.get("content"):
        output.append(_message_item(next_id("msg"), msg["content"], "completed"))
    for tc in msg.get("tool_calls") or []:
        fn = tc["function"]
        output.append(_call_item(next_id("fc"), tc["id"], fn["name"], fn["arguments"], "completed"))
    status = "incomplete" if choice["finish_reason"] == "length" else "completed"
    return JSONResponse(
        _response_object(
            raw,
            rid,
            created=reply.created,
            model=body["model"],
            output=output,
            status=status,
            usage=_resp_usage(body["usage"]),
        )
    )


class _ResponsesStream:
    """vLLM's ``SimpleStreamingEventProcessor`` (streaming_events.py) over chat deltas."""

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.seq = 0
        self.output_index = 0
        self.state = "none"  # none | reasoning | content | tool
        self.item_id = ""
        self.text = ""
        self.call_id = ""
        self.call_name = ""
        self.call_index: int | None = None
        self.items: list[dict[str, Any]] = []
        self.n = 0

    def ev(self, event_type: str, **fields: Any) -> bytes:
        obj = {"type": event_type, "sequence_number": self.seq, **fields}
        self.seq += 1
        return _sse(event_type, obj)

    def _new_id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{_hex32(f'{self.rid}:{self.n}')}"

    def open(self, target: str, call: dict[str, Any] | None) -> list[bytes]:
        self.state, self.text = target, ""
        oi = self.output_index
        if target == "content":
            self.item_id = self._new_id("msg")
            return [
                self.ev(
                    "response.output_item.added",
                    output_index=oi,
                    item=_message_item(self.item_id, "", "in_progress"),
                ),
                self.ev(
                    "response.content_part.added",
                    output_index=oi,
                    item_id=self.item_id,
                    content_index=0,
                    part={"annotations": [], "text": "", "type": "output_text", "logprobs": []},
                ),
            ]
        if target == "reasoning":
            self.item_id = self._new_id("rs")
            item = {"id": self.item_id, "summary": [], "type": "reasoning", "status": "in_progress"}
            return [
                self.ev("response.output_item.added", output_index=oi, item=item),
                self.ev(
                    "response.content_part.added",
                    output_index=oi,
                    item_id=self.item_id,
                    content_index=0,
                    part={"text": "", "type": "reasoning_text"},
                ),
            ]
        assert call is not None
        fn = call.get("function") or {}
        self.item_id = self._new_id("fc")
        self.call_id = call.get("id") or "chatcmpl-tool-" + _hex32(self.item_id)
        self.call_name = fn.get("name") or ""
        self.call_index = call.get("index")
        item = _call_item(self.item_id, self.call_id, self.call_name, "", "in_progress")
        return [self.ev("response.output_item.added", output_index=oi, item=item)]

    def delta(self, target: str, text: str) -> list[bytes]:
        if not text:
            return []
        self.text += text
        oi, iid = self.output_index, self.item_id
        if target == "content":
            return [
                self.ev(
                    "response.output_text.delta",
                    content_index=0,
                    output_index=oi,
                    item_id=iid,
                    delta=text,
                    logprobs=[],
                )
            ]
        if target == "reasoning":
            return [
                self.ev(
                    "response.reasoning_text.delta", item_id=iid, output_index=oi, content_index=0, delta=text
                )
            ]
        return [self.ev("response.function_call_arguments.delta", output_index=oi, item_id=iid, delta=text)]

    def close(self) -> list[bytes]:
        oi, iid, text = self.output_index, self.item_id, self.text
        out: list[bytes]
        if self.state == "none":
            return []
        if self.state == "content":
            part: dict[str, Any] = {"annotations": [], "text": text, "type": "output_text", "logprobs": None}
            item = _message_item(iid, text, "completed")
            out = [
                self.ev(
                    "response.output_text.done",
                    output_index=oi,
                    content_index=0,
                    text=text,
                    logprobs=[],
                    item_id=iid,
                ),
                self.ev(
                    "response.content_part.done", item_id=iid, output_index=oi, content_index=0, part=part
                ),
            ]
        elif self.state == "reasoning":
            item = _reasoning_item(iid, text, "completed")
            out = [
                self.ev(
                    "response.reasoning_text.done", item_id=iid, output_index=oi, content_index=0, text=text
                ),
                self.ev(
                    "response.content_part.done",
                    item_id=iid,
                    output_index=oi,
                    content_index=0,
                    part={"text": text, "type": "reasoning_text"},
                ),
            ]
        else:
            item = _call_item(iid, self.call_id, self.call_name, text, "completed")
            out = [
                self.ev(
                    "response.function_call_arguments.done",
                    output_index=oi,
                    item_id=iid,
                    arguments=text,
                    name=self.call_name,
                )
            ]
        out.append(self.ev("response.output_item.done", output_index=oi, item=item))
        self.items.append(item)
        self.output_index += 1
        self.state = "none"
        return out

    def step(self, delta: dict[str, Any]) -> list[bytes]:
        out: list[bytes] = []
        parts: list[tuple[str, Any]] = []
        # split_delta: reasoning, content, then tool calls grouped by index
        if delta.get("reasoning") is not None:
            parts.append(("reasoning", delta["reasoning"]))
        if delta.get("content"):
            parts.append(("content", delta["content"]))
        groups: dict[Any, list[dict[str, Any]]] = {}
        for tc in delta.get("tool_calls") or []:
            groups.setdefault(tc.get("index"), []).append(tc)
        parts.extend(("tool", g) for g in groups.values())
        for target, value in parts:
            call = value[0] if target == "tool" else None
            if target == "tool" and call is not None and call.get("function") is None:
                continue
            switch = self.state != target or (
                target == "tool"
                and call is not None
                and self.call_index is not None
                and call.get("index") is not None
                and call.get("index") != self.call_index
            )
            if switch:
                out += self.close()
                out += self.open(target, call)
            if target == "tool":
                text = "".join((tc.get("function") or {}).get("arguments") or "" for tc in value)
            else:
                text = value
            out += self.delta(target, text)
        return out


async def _responses_events(
    raw: dict[str, Any], rid: str, created: int, chunks: AsyncIterator[bytes]
) -> AsyncIterator[bytes]:
    st = _ResponsesStream(rid)
    model = str(raw.get("model") or "")
    start = _response_object(
        raw, rid, created=created, model=model, output=[], status="in_progress", usage=None
    )
    yield st.ev("response.created", response=start)
    yield st.ev("response.in_progress", response=start)
    finish: str | None = None
    usage: dict[str, Any] | None = None
    async for frame in _chat_frames(chunks):
        if frame == "[DONE]":
            break
        if "error" in frame:
            # a GenerationError ends the stream with one error event (serving.py)
            err = frame["error"]
            yield st.ev("error", code=str(err.get("type")), message=err.get("message"), param=None)
            return
        model = frame.get("model") or model
        if frame.get("usage") is not None and not frame.get("choices"):
            usage = frame["usage"]
        for ch in frame.get("choices") or []:
            if ch.get("finish_reason") is not None:
                finish = ch["finish_reason"]
            if "role" in (ch.get("delta") or {}):
                continue
            for piece in st.step(ch.get("delta") or {}):
                yield piece
    for piece in st.close():
        yield piece
    status = "incomplete" if finish == "length" else "completed"
    done = _response_object(
        raw, rid, created=created, model=model, output=st.items, status=status, usage=_resp_usage(usage)
    )
    yield st.ev("response.completed", response=done)


# --- /v1/messages ----------------------------------------------------------------------------------


def _anthropic_error(status: int, type_: str, message: str) -> JSONResponse:
    # translate_error_response (anthropic/api_router.py)
    return JSONResponse({"type": "error", "error": {"type": type_, "message": message}}, status_code=status)


def messages_to_chat(raw: Any) -> dict[str, Any]:
    """``to_chat_completion_request`` (anthropic/serving.py), for the shapes the simulator serves."""
    if not isinstance(raw, dict):
        raise _Reject(400, "Input should be a valid dictionary", "Bad Request", "body")
    if not isinstance(raw.get("max_tokens"), int):
        raise _Reject(400, "Field required", "Bad Request", "body.max_tokens")
    src = raw.get("messages")
    if not isinstance(src, list):
        raise _Reject(400, "Field required", "Bad Request", "body.messages")
    msgs: list[dict[str, Any]] = []
    system = raw.get("system")
    if system is not None:
        msgs.append({"role": "system", "content": _text_of(system)})
    for i, m in enumerate(src):
        if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
            raise _Reject(
                400, "Input should be 'user' or 'assistant'", "Bad Request", f"body.messages.{i}.role"
            )
        content = m.get("content")
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
    if isinstance(fmt, dict) and fmt.get("json_schema"):
        # _handle_output_config: the format's type names the json_schema response format
        chat["response_format"] = {
            "type": fmt.get("type"),
            "json_schema": {"name": fmt.get("type"), "schema": fmt["json_schema"]},
        }
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


async def messages(request: Request) -> Response:
    state: SimState = request.app.state.sim
    denied = unauthorized(request)
    if denied is not None:
        return denied
    try:
        raw = await read_json(request)
        req = _validate(state.cfg, messages_to_chat(raw))
        reply, seqreq = admit(state, req, request)
    except _Reject as rej:
        return _anthropic_error(rej.status, rej.type, rej.message)
    if req.get("stream"):
        return StreamingResponse(
            _messages_events(_stream(state, reply, seqreq, request)), media_type="text/event-stream"
        )
    body = await whole_body(state, reply, seqreq)
    if isinstance(body, _Reject):
        return _anthropic_error(body.status, body.type, body.message)
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
