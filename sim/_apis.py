"""The simulator's /v1/responses and /v1/messages: the Responses and Messages APIs as vLLM serves them.

vLLM builds both on its chat machinery, and so does the simulator: the request is turned into a chat
request, the same engine, parser and faults produce the chat completion, and the chat output is turned
into the endpoint's shapes. So ``model.invalid_json`` or ``parser.markup_in_content`` reach these
endpoints exactly as they reach /v1/chat/completions.

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
from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

from ._admission import Admitted, _Reject, endpoint
from ._chat import chat_stream, whole_body

__all__ = ["responses"]


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


async def _answer(admitted: Admitted) -> Response:
    raw, reply = admitted.raw, admitted.reply
    rid = "resp_" + _hex32(reply.id)
    if admitted.req.get("stream"):
        events = _responses_events(raw, rid, reply.created, chat_stream(admitted))
        return StreamingResponse(events, media_type="text/event-stream")
    body = await whole_body(admitted)
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


responses = endpoint(_answer, to_chat=responses_to_chat)


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
        # as vLLM writes the openai event models (model_dump_json): their declared fields in their
        # order (by name, which puts the type last), then a field of vLLM's own (the name of
        # function_call_arguments.done)
        extra = {"name": fields.pop("name")} if "name" in fields else {}
        fields["sequence_number"] = self.seq
        obj = {**dict(sorted(fields.items())), "type": event_type, **extra}
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
