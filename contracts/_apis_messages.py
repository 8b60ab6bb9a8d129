"""/v1/messages read as chat: the request, the non-streamed message and the event stream.

Wire facts from the vLLM 0.32 wheel, ``entrypoints/anthropic/serving.py`` and ``protocol.py``:

- the request becomes a chat request (``to_chat_completion_request``): ``system`` first, a
  ``tool_result`` block of a user turn becomes a ``tool`` message (in any other turn it is flattened
  into the text ``Tool result: ...``), ``tool_use`` blocks become ``tool_calls`` of their turn, thinking
  blocks its ``reasoning``; ``stop_sequences`` is ``stop``; ``output_config.format`` (whose schema key is
  ``schema``) is ``response_format`` json_schema and ``output_config.effort`` is ``reasoning_effort``;
  ``thinking.type`` disabled is ``reasoning_effort`` "none" (or "low" for a template that cannot turn
  thinking off), enabled sets ``thinking_token_budget`` and nothing else; ``tool_choice`` auto, any,
  none, tool are auto, required, none and a named function, and ``disable_parallel_tool_use`` is
  ``parallel_tool_calls`` false; ``tools: []`` is accepted (set after the chat request's validators);
- the stream (``message_stream_converter``): ``message_start`` with ``type`` and ``role`` set
  explicitly (strict SDKs need them: vllm #45367), content blocks one at a time with indexes from 0, a
  thinking block closed by a ``signature_delta`` (a random one: vLLM has no signature to give, and
  neither has a bridge in front of a chat engine, whose empty signature is as legal), ``message_delta`` with ``stop_reason`` and ``usage``
  (the chat stream under it always has include_usage), then ``message_stop``;
- ``stop_reason`` (``_to_anthropic_stop_reason``): ``max_tokens`` for a length stop, ``tool_use``
  whenever a complete call was made (a forced one included, whose chat finish is ``stop``),
  ``stop_sequence`` with the matched string when a stop string ended the output (a call it cut short
  stays incomplete), else ``end_turn``.

Finish reasons for the chat rules: ``tool_use`` is ``tool_calls``, ``end_turn`` and ``stop_sequence``
are ``stop``, ``max_tokens`` is ``length``; the native one is kept beside it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ._apis import TypedStream, add_call, append, body_parts, finish_body, text_of
from ._assembly import AssembledCall, AssembledChoice, AssembledStream, StreamAnomaly, _excerpt
from ._sse import SSEEvent

if TYPE_CHECKING:
    from ._view import ExchangeView

__all__ = ["assemble", "normalize_request", "take_body"]

STOP_REASONS = {
    "tool_use": "tool_calls",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
}


def _finish(choice: AssembledChoice, stop_reason: Any, stop_sequence: Any) -> None:
    choice.finish_reason = (
        STOP_REASONS.get(stop_reason, stop_reason) if isinstance(stop_reason, str) else None
    )
    choice.native_finish = stop_reason if isinstance(stop_reason, str) else None
    choice.stop_reason = stop_sequence


# --- the request ------------------------------------------------------------------------------------


def _call(block: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": block.get("id"),
        "type": "function",
        "function": {
            "name": block.get("name"),
            "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False),
        },
    }


def _history(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages as vLLM's ``_convert_messages`` builds them."""
    msgs: list[dict[str, Any]] = []
    if raw.get("system") is not None:
        msgs.append({"role": "system", "content": text_of(raw["system"])})
    src = raw.get("messages")
    for m in src if isinstance(src, list) else []:
        if not isinstance(m, dict):
            continue
        role, content = m.get("role"), m.get("content")
        if role == "system":
            msgs.append({"role": "system", "content": text_of(content)})
            continue
        out: dict[str, Any] = {"role": role}
        if isinstance(content, str):
            out["content"] = content
        texts: list[str] = []
        calls: list[dict[str, Any]] = []
        thinking: list[str] = []
        for b in content if isinstance(content, list) else []:
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "text" and b.get("text"):
                texts.append(str(b["text"]))
            elif kind == "thinking" and isinstance(b.get("thinking"), str):
                thinking.append(b["thinking"])
            elif kind == "tool_use":
                calls.append(_call(b))
            elif kind == "tool_result" and role == "user":
                result = b.get("content")
                msgs.append(
                    {"role": "tool", "tool_call_id": b.get("tool_use_id") or "", "content": text_of(result)}
                )
            elif kind == "tool_result":
                texts.append(f"Tool result: {b.get('content') or ''}")
        if thinking:
            out["reasoning"] = "".join(thinking)
        if calls:
            out["tool_calls"] = calls
        if texts:
            out["content"] = "".join(texts)
        if not (role == "user" and "content" not in out):
            out.setdefault("content", None)
            msgs.append(out)
    return msgs


def normalize_request(raw: dict[str, Any]) -> dict[str, Any]:
    """The chat-shaped request the rules read (messages, tools, tool_choice, ...)."""
    out: dict[str, Any] = {"messages": _history(raw)}
    tools = raw.get("tools")
    if isinstance(tools, list):
        out["tools"] = [
            {"type": "function", "function": {"name": t.get("name"), "parameters": t.get("input_schema")}}
            if isinstance(t, dict) and "input_schema" in t
            else t
            for t in tools
        ]
    tc = raw.get("tool_choice")
    if isinstance(tc, dict):
        # _convert_tool_choice
        kind = tc.get("type")
        if kind == "tool":
            out["tool_choice"] = {"type": "function", "function": {"name": tc.get("name")}}
        elif kind in ("auto", "any", "none"):
            out["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[str(kind)]
        if tc.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False
    oc = raw.get("output_config")
    if isinstance(oc, dict):
        # _handle_output_config: AnthropicJsonOutputFormat reads the schema under "schema"
        fmt = oc.get("format")
        if isinstance(fmt, dict) and fmt.get("schema") is not None:
            out["response_format"] = {"type": "json_schema", "json_schema": {"schema": fmt["schema"]}}
        if isinstance(oc.get("effort"), str):
            out["reasoning_effort"] = oc["effort"]
    thinking = raw.get("thinking")
    if isinstance(thinking, dict):
        # _handle_thinking, after the output config: disabled wins over an effort
        if thinking.get("type") == "disabled":
            out["reasoning_effort"] = "none"
        elif thinking.get("type") == "enabled" and isinstance(thinking.get("budget_tokens"), int):
            out["thinking_token_budget"] = thinking["budget_tokens"]
    if isinstance(raw.get("stop_sequences"), list):
        out["stop"] = raw["stop_sequences"]
    for key in ("model", "stream", "max_tokens", "temperature", "top_p", "chat_template_kwargs"):
        if raw.get(key) is not None:
            out[key] = raw[key]
    return out


# --- the non-streamed message ------------------------------------------------------------------------


def take_body(view: ExchangeView) -> None:
    """Fill ``view.choices`` (one choice) from a message (``messages_full_converter``)."""
    blocks = body_parts(view, "content", "a message needs an object with a content list")
    if blocks is None:
        return
    body = view.body
    for key, want in (("type", "message"), ("role", "assistant")):
        if body.get(key) != want:
            view.anomalies.append(
                StreamAnomaly(
                    "bad-shape", f"the message's {key} is {body.get(key)!r}, not {want!r}", -1, f"/{key}"
                )
            )
    choice = AssembledChoice(0, role="assistant")
    for i, block in enumerate(blocks):
        ptr = f"/content/{i}"
        if isinstance(block, dict):
            _take_block(view, choice, block, ptr)
        else:
            view.anomalies.append(StreamAnomaly("bad-shape", "content block is not an object", -1, ptr))
    _finish(choice, body.get("stop_reason"), body.get("stop_sequence"))
    finish_body(view, choice)


def _take_block(view: ExchangeView, choice: AssembledChoice, block: dict[str, Any], ptr: str) -> None:
    kind = block.get("type")
    if kind == "thinking":
        if isinstance(block.get("thinking"), str):
            choice.reasoning = append(choice.reasoning, block["thinking"])
    elif kind == "text":
        if isinstance(block.get("text"), str):
            choice.content = append(choice.content, block["text"])
    elif kind == "tool_use":
        inp = block.get("input")
        if not isinstance(inp, dict):
            view.anomalies.append(
                StreamAnomaly("bad-shape", f"tool_use input is {_excerpt(inp)}", -1, ptr + "/input")
            )
        args = json.dumps(inp, ensure_ascii=False)
        add_call(choice, block.get("id"), block.get("name"), args, ptr, has_arguments_key="input" in block)


# --- the event stream --------------------------------------------------------------------------------

_FITS = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "signature_delta": ("thinking", "signature"),
    "input_json_delta": ("tool_use", "partial_json"),
}


class _Block:
    """The open content block."""

    __slots__ = ("call", "index", "type")

    def __init__(self, index: int, kind: str, call: AssembledCall | None) -> None:
        self.index, self.type, self.call = index, kind, call


class _Stream(TypedStream):
    LAST = "message_stop"

    def __init__(self) -> None:
        super().__init__()
        self.block: _Block | None = None
        self.next_block = 0
        self.stop_reason_seen = False

    def event(self, kind: str, obj: dict[str, Any], ev: SSEEvent) -> None:
        n = ev.index
        if self.st.frames == 1 and kind != "message_start":
            self.flag("api-order", f"the stream opens with {kind}, not message_start", n, "/type")
        if kind == "message_start":
            self.start(obj.get("message"), n)
        elif kind == "content_block_start":
            self.block_start(obj, n)
        elif kind == "content_block_delta":
            self.block_delta(obj, ev)
        elif kind == "content_block_stop":
            self.block_stop(obj, n)
        elif kind == "message_delta":
            self.message_delta(obj, n)
        elif kind == "message_stop":
            self.end(n)
            if self.block is not None:
                self.flag("api-order", f"message_stop while block {self.block.index} is open", n)
            if not self.stop_reason_seen:
                self.flag("api-order", "message_stop without a message_delta carrying stop_reason", n)
        # ping, and any event type newer than this checker: legal, nothing to read

    def start(self, msg: Any, n: int) -> None:
        if self.st.frames != 1:
            self.flag("api-order", "message_start again inside the stream", n, "/type")
        if not isinstance(msg, dict):
            self.flag("api-order", "message_start without a message object", n, "/message")
            return
        for key, want in (("type", "message"), ("role", "assistant")):
            if msg.get(key) != want:
                got = "no" if key not in msg else repr(msg[key])
                self.flag(
                    "api-order",
                    f"message_start carries {got} {key} (clients need {want!r})",
                    n,
                    f"/message/{key}",
                )
        if isinstance(msg.get("id"), str):
            self.st.ids.append(msg["id"])
        if isinstance(msg.get("model"), str):
            self.st.model = msg["model"]
        if isinstance(msg.get("usage"), dict):
            self.st.usage = msg["usage"]

    def block_start(self, obj: dict[str, Any], n: int) -> None:
        idx, block = obj.get("index"), obj.get("content_block")
        if self.block is not None:
            self.flag("api-index", f"block {idx} starts while block {self.block.index} is open", n, "/index")
        if idx != self.next_block:
            self.flag("api-index", f"content block index {idx!r}, expected {self.next_block}", n, "/index")
        b = block if isinstance(block, dict) else {}
        btype = b.get("type")
        call = None
        if btype == "tool_use":
            inp = b.get("input")
            # the SDK starts from the block's input; vLLM sends {} and streams the JSON text
            args = "" if inp in (None, {}) else json.dumps(inp, ensure_ascii=False)
            call = add_call(self.choice, b.get("id"), b.get("name"), args, f"/content/{idx}", first_event=n)
        elif btype == "text" and b.get("text"):
            self.choice.content = append(self.choice.content, str(b["text"]))
        elif btype == "thinking" and b.get("thinking"):
            self.choice.reasoning = append(self.choice.reasoning, str(b["thinking"]))
        index = idx if isinstance(idx, int) else self.next_block
        self.block = _Block(index, str(btype), call)
        self.next_block = index + 1

    def block_delta(self, obj: dict[str, Any], ev: SSEEvent) -> None:
        n = ev.index
        idx, delta = obj.get("index"), obj.get("delta")
        block = self.block
        if block is None or idx != block.index:
            self.flag("api-index", f"delta for block {idx!r}, which is not open", n, "/index")
            return
        if not isinstance(delta, dict):
            self.flag("api-order", "content_block_delta without a delta object", n, "/delta")
            return
        dtype = delta.get("type")
        fits = _FITS.get(str(dtype))
        if fits is None or fits[0] != block.type:
            self.flag("api-order", f"{dtype} inside a {block.type} block", n, "/delta/type")
            return
        value = delta.get(fits[1])
        if not isinstance(value, str):
            self.flag("api-order", f"{dtype} without a string {fits[1]}", n, "/delta")
            return
        if dtype == "text_delta":
            self.choice.content = append(self.choice.content, value)
        elif dtype == "thinking_delta":
            self.choice.reasoning = append(self.choice.reasoning, value)
            self.choice.reasoning_fields.add("reasoning")
        elif dtype == "input_json_delta" and block.call is not None:
            if not block.call.deltas:
                block.call.arguments = ""  # the SDK parses the deltas' JSON in place of the start's input
            block.call.arguments += value
            block.call.deltas += 1
        else:
            return  # a signature is not output
        self.token(ev)

    def block_stop(self, obj: dict[str, Any], n: int) -> None:
        idx, block = obj.get("index"), self.block
        if block is None or idx != block.index:
            self.flag("api-index", f"content_block_stop for block {idx!r}, which is not open", n, "/index")
            self.block = None
            return
        if block.call is not None and not block.call.arguments:
            # no JSON text streamed: the client keeps the block's input, {} (a call without arguments)
            block.call.arguments = "{}"
        self.block = None

    def message_delta(self, obj: dict[str, Any], n: int) -> None:
        delta = obj.get("delta")
        sr = delta.get("stop_reason") if isinstance(delta, dict) else None
        if self.block is not None:
            self.flag("api-order", f"message_delta while block {self.block.index} is open", n)
        if isinstance(sr, str):
            self.stop_reason_seen = True
            _finish(self.choice, sr, delta.get("stop_sequence") if isinstance(delta, dict) else None)
            self.choice.finish_event = n
        if isinstance(obj.get("usage"), dict):
            self.st.usage = obj["usage"]
        else:
            self.flag("api-order", "message_delta without usage (the output token count)", n, "/usage")


def assemble(events: list[SSEEvent], *, plain: bool | None = None) -> AssembledStream:
    """A Messages event stream as one chat choice, every departure from vLLM's order recorded."""
    return _Stream().run(events, plain)
